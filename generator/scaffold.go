package generator

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Scaffold returns the files `gbx init` writes for a new box: a commented
// glovebox.toml whose exec agent works as is, a README and a .gitignore
// that keeps the key out of version control. name is sanitised into a
// valid box name.
func Scaffold(name string) ([]File, error) { return ScaffoldAgent(name, "") }

// ScaffoldAgent is Scaffold with the agent of a preset (Presets): `gbx
// init --agent claude-code`. An empty preset gives the exec agent.
func ScaffoldAgent(name, preset string) ([]File, error) {
	v := struct {
		Name    string
		Preset  *Preset
		Presets string
	}{Name: BoxName(name), Presets: strings.Join(PresetNames(), ", ")}
	if preset != "" {
		p, ok := Presets[preset]
		if !ok {
			return nil, fmt.Errorf("%q is not an agent preset: use one of %s%s", preset, strings.Join(PresetNames(), ", "), didYouMean(preset, PresetNames()))
		}
		v.Preset = &p
	}
	var files []File
	for _, t := range []struct{ file, tmpl string }{
		{ConfigFile, "init-glovebox.toml.tmpl"},
		{"README.md", "init-README.md.tmpl"},
		{".gitignore", "init-gitignore.tmpl"},
	} {
		var b bytes.Buffer
		if err := templates.ExecuteTemplate(&b, t.tmpl, v); err != nil {
			return nil, fmt.Errorf("scaffold %s: %w", t.file, err)
		}
		files = append(files, File{Name: t.file, Data: b.Bytes(), Mode: 0o644})
	}
	return files, nil
}

var nameJunkRE = regexp.MustCompile(`[^a-z0-9]+`)

// BoxName turns s (typically a directory name) into a valid box name:
// lower case, other characters as "-", at most 63 characters; "box" when
// nothing is left.
func BoxName(s string) string {
	n := strings.Trim(nameJunkRE.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	if !protocol.NameRE.MatchString(n) {
		return "box"
	}
	return n
}
