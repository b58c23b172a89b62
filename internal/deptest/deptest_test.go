package deptest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const module = "github.com/glovebox-dev/glovebox"

// platforms are the GOOS/GOARCH pairs the dependency budget is checked on:
// the box images' and the machines gbx dev runs the kit on.
var platforms = []string{"linux/amd64", "linux/arm64", "darwin/arm64", "darwin/amd64"}

// sqliteModules are modernc.org/sqlite and what it needs on some platform.
var sqliteModules = []string{
	"modernc.org/sqlite",
	"modernc.org/libc",
	"modernc.org/mathutil",
	"modernc.org/memory",
	"golang.org/x/sys",
	"github.com/google/uuid",
	"github.com/dustin/go-humanize",
	"github.com/mattn/go-isatty",
	"github.com/ncruces/go-strftime",
	"github.com/remyoudompheng/bigfft",
}

// kitModules are the modules the kit binary may depend on besides the
// standard library and this module: gorilla/websocket, x/sync and SQLite.
var kitModules = append([]string{"github.com/gorilla/websocket", "golang.org/x/sync"}, sqliteModules...)

// pkg is what go list says about one package.
type pkg struct {
	ImportPath string
	Name       string
	Standard   bool
	Module     string // module path; "" for the standard library
	Doc        string
	Imports    []string
	Error      string
}

// listFormat prints one pkg per line, its fields separated by tabs.
const listFormat = `{{.ImportPath}}	{{.Name}}	{{.Standard}}	{{with .Module}}{{.Path}}{{end}}	{{.Doc}}	{{join .Imports " "}}	{{with .Error}}{{.Err}}{{end}}`

// goList runs go list -e with args in the module root for the given
// platform ("" for the host) and parses its output.
func goList(t *testing.T, platform string, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command(goTool(t), append([]string{"list", "-e", "-f", listFormat}, args...)...)
	cmd.Dir = moduleRoot(t)
	cmd.Env = os.Environ()
	if platform != "" {
		goos, goarch, _ := strings.Cut(platform, "/")
		cmd.Env = append(cmd.Env, "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s (%s): %v\n%s", strings.Join(args, " "), platform, err, stderr.Bytes())
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 7 {
			t.Fatalf("go list printed %q, want 7 tab-separated fields", sc.Text())
		}
		p := pkg{ImportPath: f[0], Name: f[1], Standard: f[2] == "true", Module: f[3], Doc: f[4], Error: f[6]}
		if f[5] != "" {
			p.Imports = strings.Fields(f[5])
		}
		pkgs = append(pkgs, p)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return pkgs
}

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// moduleRoot returns the directory of go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	rootOnce.Do(func() {
		var out []byte
		out, rootErr = exec.Command(goTool(t), "env", "GOMOD").Output()
		root = filepath.Dir(strings.TrimSpace(string(out)))
	})
	if rootErr != nil || root == "" || root == "." {
		t.Fatalf("find the module root: %v", rootErr)
	}
	return root
}

// goTool returns the go command that runs this test: go test puts its
// GOROOT/bin first on the test's PATH.
func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to run go list with")
	}
	return p
}

// modulePackages lists the module's packages, by import path. Packages
// that do not exist yet are simply absent.
func modulePackages(t *testing.T) map[string]pkg {
	t.Helper()
	m := map[string]pkg{}
	for _, p := range goList(t, "", "./...") {
		m[p.ImportPath] = p
	}
	if len(m) == 0 {
		t.Fatal("go list ./... found no packages")
	}
	return m
}

// deps lists root and everything it imports, for one platform. It fails
// the test if go list cannot load the graph, since a budget checked on a
// partial graph proves nothing.
func deps(t *testing.T, platform, root string) []pkg {
	t.Helper()
	pkgs := goList(t, platform, "-deps", root)
	for _, p := range pkgs {
		if p.Error != "" {
			t.Fatalf("go list -deps %s (%s): %s: %s", root, platform, p.ImportPath, p.Error)
		}
	}
	return pkgs
}

// underAny reports whether import path p is one of prefixes or inside one.
func underAny(p string, prefixes ...string) bool {
	for _, pre := range prefixes {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// budget is the dependency rule of one root package.
type budget struct {
	root string
	// allowed reports whether the root may depend on p; why says what the
	// rule is when it may not.
	allowed func(p pkg) bool
	why     string
}

var budgets = []budget{
	{
		root: module + "/protocol",
		allowed: func(p pkg) bool {
			return p.Standard || p.ImportPath == module+"/protocol"
		},
		why: "protocol imports only the standard library, so every side can use it",
	},
	{
		root: module + "/client",
		allowed: func(p pkg) bool {
			return !underAny(p.ImportPath, "modernc.org/sqlite", "github.com/spf13/pflag", module+"/kit", module+"/generator", module+"/internal/cli")
		},
		why: "client never imports sqlite, pflag, the kit, the generator or the CLI",
	},
	{
		root: module + "/kit/storage",
		allowed: func(p pkg) bool {
			return p.Standard || p.ImportPath == module+"/kit/storage" || p.ImportPath == module+"/protocol" ||
				p.ImportPath == module+"/kit/netguard" || slices.Contains(sqliteModules, p.Module)
		},
		why: "kit/storage's share of the kit's budget is the standard library, protocol, kit/netguard (the addresses it may dial) and modernc.org/sqlite (with what SQLite needs)",
	},
	{
		root: module + "/cmd/glovebox-kit",
		allowed: func(p pkg) bool {
			switch {
			case p.Standard:
				return true
			case p.Module == module:
				return !underAny(p.ImportPath, module+"/generator", module+"/internal/cli", module+"/client", module+"/cmd/gbx", module+"/internal/deptest", module+"/internal/nixtest")
			}
			return slices.Contains(kitModules, p.Module)
		},
		why: "the kit binary imports only the standard library, gorilla/websocket, x/sync, modernc.org/sqlite (and what sqlite needs) and the module's own runtime packages",
	},
	{
		root: module + "/cmd/glovebox-sandbox",
		allowed: func(p pkg) bool {
			return p.Standard || p.Module == "golang.org/x/sys" ||
				p.ImportPath == module+"/cmd/glovebox-sandbox" || p.ImportPath == module+"/kit/sandbox"
		},
		why: "the sandbox supervisor, started for every session and at boot, imports only the standard library, x/sys and kit/sandbox",
	},
}

// TestDependencyBudget checks each side's dependency budget on every
// platform, with go list -deps.
func TestDependencyBudget(t *testing.T) {
	present := modulePackages(t)
	for _, b := range budgets {
		t.Run(strings.TrimPrefix(b.root, module+"/"), func(t *testing.T) {
			if _, ok := present[b.root]; !ok {
				t.Skipf("%s does not exist yet", b.root)
			}
			for _, platform := range platforms {
				var bad []string
				pkgs := deps(t, platform, b.root)
				for _, p := range pkgs {
					if !b.allowed(p) {
						bad = append(bad, p.ImportPath+via(pkgs, p.ImportPath))
					}
				}
				if len(bad) > 0 {
					t.Errorf("%s on %s depends on:\n\t%s\nbut %s", b.root, platform, strings.Join(bad, "\n\t"), b.why)
				}
			}
		})
	}
}

// via names the module packages among pkgs (a root's dependencies) that
// import dep, to say where a forbidden dependency comes in.
func via(pkgs []pkg, dep string) string {
	var importers []string
	for _, p := range pkgs {
		if p.Module == module && slices.Contains(p.Imports, dep) {
			importers = append(importers, p.ImportPath)
		}
	}
	if len(importers) == 0 {
		return ""
	}
	return " (imported by " + strings.Join(importers, ", ") + ")"
}

// TestBudgetCatchesForbiddenImports makes sure the budget rules reject what
// they are meant to reject, so that a rule that allows everything fails.
func TestBudgetCatchesForbiddenImports(t *testing.T) {
	rule := func(root string) budget {
		for _, b := range budgets {
			if b.root == root {
				return b
			}
		}
		t.Fatalf("no budget for %s", root)
		return budget{}
	}
	tests := []struct {
		root string
		dep  pkg
		want bool
	}{
		{module + "/protocol", pkg{ImportPath: "encoding/json", Standard: true}, true},
		{module + "/protocol", pkg{ImportPath: "github.com/google/go-cmp/cmp", Module: "github.com/google/go-cmp"}, false},
		{module + "/protocol", pkg{ImportPath: module + "/kit/agent", Module: module}, false},
		{module + "/protocol", pkg{ImportPath: "golang.org/x/sync/errgroup", Module: "golang.org/x/sync"}, false},
		{module + "/client", pkg{ImportPath: "github.com/gorilla/websocket", Module: "github.com/gorilla/websocket"}, true},
		{module + "/client", pkg{ImportPath: module + "/protocol", Module: module}, true},
		{module + "/client", pkg{ImportPath: "modernc.org/sqlite", Module: "modernc.org/sqlite"}, false},
		{module + "/client", pkg{ImportPath: "github.com/spf13/pflag", Module: "github.com/spf13/pflag"}, false},
		{module + "/client", pkg{ImportPath: module + "/kit", Module: module}, false},
		{module + "/client", pkg{ImportPath: module + "/kit/storage", Module: module}, false},
		{module + "/client", pkg{ImportPath: module + "/kitten", Module: module}, true},
		{module + "/kit/storage", pkg{ImportPath: "database/sql", Standard: true}, true},
		{module + "/kit/storage", pkg{ImportPath: module + "/protocol", Module: module}, true},
		{module + "/kit/storage", pkg{ImportPath: "modernc.org/libc", Module: "modernc.org/libc"}, true},
		{module + "/kit/storage", pkg{ImportPath: "github.com/gorilla/websocket", Module: "github.com/gorilla/websocket"}, false},
		{module + "/kit/storage", pkg{ImportPath: "golang.org/x/sync/errgroup", Module: "golang.org/x/sync"}, false},
		{module + "/kit/storage", pkg{ImportPath: module + "/kit/agent", Module: module}, false},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: "net/http", Standard: true}, true},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: module + "/kit/agent/exec", Module: module}, true},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: "modernc.org/libc/pthread", Module: "modernc.org/libc"}, true},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: "golang.org/x/sync/errgroup", Module: "golang.org/x/sync"}, true},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: "github.com/spf13/pflag", Module: "github.com/spf13/pflag"}, false},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: "github.com/BurntSushi/toml", Module: "github.com/BurntSushi/toml"}, false},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: "github.com/pelletier/go-toml/v2", Module: "github.com/pelletier/go-toml/v2"}, false},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: "github.com/google/go-cmp/cmp", Module: "github.com/google/go-cmp"}, false},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: module + "/generator", Module: module}, false},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: module + "/internal/cli", Module: module}, false},
		{module + "/cmd/glovebox-kit", pkg{ImportPath: module + "/client", Module: module}, false},
		{module + "/cmd/glovebox-sandbox", pkg{ImportPath: "encoding/json", Standard: true}, true},
		{module + "/cmd/glovebox-sandbox", pkg{ImportPath: "golang.org/x/sys/unix", Module: "golang.org/x/sys"}, true},
		{module + "/cmd/glovebox-sandbox", pkg{ImportPath: module + "/kit/sandbox", Module: module}, true},
		{module + "/cmd/glovebox-sandbox", pkg{ImportPath: module + "/protocol", Module: module}, false},
		{module + "/cmd/glovebox-sandbox", pkg{ImportPath: module + "/kit", Module: module}, false},
		{module + "/cmd/glovebox-sandbox", pkg{ImportPath: "golang.org/x/sync/errgroup", Module: "golang.org/x/sync"}, false},
		{module + "/cmd/glovebox-sandbox", pkg{ImportPath: "modernc.org/sqlite", Module: "modernc.org/sqlite"}, false},
	}
	for _, tt := range tests {
		if got := rule(tt.root).allowed(tt.dep); got != tt.want {
			t.Errorf("budget(%s).allowed(%s) = %v, want %v", tt.root, tt.dep.ImportPath, got, tt.want)
		}
	}
}

// TestWebSocketSeam checks that one package imports the WebSocket library,
// so that swapping it is one change.
func TestWebSocketSeam(t *testing.T) {
	const seam = module + "/internal/wsconn"
	for _, p := range modulePackages(t) {
		if p.ImportPath == seam {
			continue
		}
		for _, imp := range p.Imports {
			if underAny(imp, "github.com/gorilla/websocket") {
				t.Errorf("%s imports %s; only %s may", p.ImportPath, imp, seam)
			}
		}
	}
}

// TestPackageDocs checks that every package has a doc comment in the
// conventional form: "Package name ..." for a library, and any sentence
// (usually "Command name ...") for a command.
func TestPackageDocs(t *testing.T) {
	for _, p := range modulePackages(t) {
		t.Run(strings.TrimPrefix(p.ImportPath, module+"/"), func(t *testing.T) {
			if p.Error != "" && p.Name == "" {
				t.Skipf("go list cannot load %s: %s", p.ImportPath, p.Error)
			}
			switch {
			case strings.TrimSpace(p.Doc) == "":
				t.Errorf("%s has no package doc comment; add one above the package clause, e.g. in doc.go", p.ImportPath)
			case p.Name != "main" && !strings.HasPrefix(p.Doc, "Package "+p.Name+" "):
				t.Errorf("doc of %s = %q, want it to start \"Package %s \"", p.ImportPath, p.Doc, p.Name)
			}
		})
	}
}
