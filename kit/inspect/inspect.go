// Package inspect holds the inspector's page: static HTML, JavaScript and
// CSS with no build step, embedded in the kit binary. The kit serves it at
// /inspect and the API it reads (see kit's inspect.go).
package inspect

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// Static returns the page's files: index.html, app.css and its scripts
// (app.js last, after format.js, terminal.js, session.js and box.js).
func Static() fs.FS {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return sub
}
