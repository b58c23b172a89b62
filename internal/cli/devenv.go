package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/generator"
	"github.com/glovebox-dev/glovebox/protocol"
)

// The tools a gbx dev box runs with. With Nix, the box's packages (the
// base image's and [packages]) are built into one environment from the
// pinned nixpkgs (nix build of generator.DevEnv's expression) whose bin
// directory comes first on the agents' PATH, so prompts find the tools
// the image would have. Without Nix, or when that build fails, prompts run
// with this machine's tools, and gbx dev says in one line which of the
// box's packages are not on PATH.

// devTools is what gbx dev found.
type devTools struct {
	path    string   // the agents' PATH
	nixEnv  string   // the built environment's store path, when Nix built it
	missing []string // packages none of whose programs are on path, as "pkg (program)"
	warning string   // one line for stderr; empty when all is well
}

// programs names what a nixpkgs package puts on PATH, where that is not
// its attribute's last component; nil marks packages with no program
// (fonts, data).
var programs = map[string][]string{
	"bashInteractive": {"bash"},
	"coreutils":       {"ls"},
	"findutils":       {"find"},
	"diffutils":       {"diff"},
	"gnugrep":         {"grep"},
	"gnused":          {"sed"},
	"gnutar":          {"tar"},
	"procps":          {"ps"},
	"tzdata":          nil,
	"ffmpeg-headless": {"ffmpeg"},
	"ffmpeg":          {"ffmpeg"},
	"imagemagick":     {"magick", "convert"},
	"poppler-utils":   {"pdftotext"},
	"poppler_utils":   {"pdftotext"},
	"ghostscript":     {"gs"},
	"libreoffice":     {"soffice", "libreoffice"},
	"chromium":        {"chromium"},
	"nodejs":          {"node"},
	"nodejs_22":       {"node"},
	"nodejs_20":       {"node"},
	"ripgrep":         {"rg"},
	"python3":         {"python3"},
}

// packagePrograms returns the programs that show pkg is installed, or nil
// when it has none to look for.
func packagePrograms(pkg string) []string {
	if p, ok := programs[pkg]; ok {
		return p
	}
	last := pkg[strings.LastIndex(pkg, ".")+1:]
	if strings.Contains(last, "font") || strings.HasSuffix(last, "_ttf") || strings.HasPrefix(pkg, "python3Packages.") {
		return nil
	}
	return []string{last}
}

// devEnvOf returns the packages of the box a manifest describes.
func devEnvOf(m *protocol.Manifest) generator.DevEnv {
	c := &generator.Config{Base: strings.TrimPrefix(m.Base, "glovebox/"), Packages: m.Packages}
	if !strings.HasPrefix(m.Base, "glovebox/") && m.Base != "" {
		c.BaseFlake = m.Base // another flake's base: its list is not known here
	}
	return c.DevEnv()
}

// findDevTools builds the box's environment with nix when it can, and
// reports what is missing otherwise. hostPath is this machine's PATH.
func findDevTools(ctx context.Context, stdio IO, m *protocol.Manifest, hostPath string, useNix bool) devTools {
	env := devEnvOf(m)
	t := devTools{path: hostPath}
	var nixErr string
	nix := lookPathIn("nix", hostPath)
	// The pinned nixpkgs needs a Nix new enough to evaluate it; another
	// nixpkgs (GLOVEBOX_DEV_NIXPKGS) says what it needs itself.
	var versionErr error
	if useNix && nix != "" && stdio.Getenv("GLOVEBOX_DEV_NIXPKGS") == "" {
		versionErr = checkNixVersion(ctx, nix)
	}
	if versionErr != nil {
		nixErr = versionErr.Error()
	} else if useNix && nix != "" {
		out, err := buildDevEnv(ctx, stdio, nix, m.Name, env)
		if err == nil {
			t.nixEnv = out
			t.path = filepath.Join(out, "bin") + string(os.PathListSeparator) + hostPath
			return t
		}
		nixErr = err.Error()
	}
	for _, pkg := range env.Packages {
		progs := packagePrograms(pkg)
		if len(progs) == 0 {
			continue
		}
		found := false
		for _, p := range progs {
			if lookPathIn(p, hostPath) != "" {
				found = true
				break
			}
		}
		if !found {
			t.missing = append(t.missing, pkg+" ("+progs[0]+")")
		}
	}
	switch {
	case nixErr != "" && len(t.missing) > 0:
		t.warning = fmt.Sprintf("gbx dev: warning: nix could not build the box's packages (%s); prompts run with this machine's tools, and these of the box's packages are not on PATH: %s", nixErr, strings.Join(t.missing, ", "))
	case nixErr != "":
		t.warning = fmt.Sprintf("gbx dev: warning: nix could not build the box's packages (%s); prompts run with this machine's tools", nixErr)
	case len(t.missing) > 0 && nix == "":
		t.warning = "gbx dev: warning: no nix on PATH, so prompts run with this machine's tools, and these of the box's packages are not on PATH: " + strings.Join(t.missing, ", ") + " (install Nix, or the tools, to run the box's prompts as its image would)"
	case len(t.missing) > 0:
		t.warning = "gbx dev: warning: --no-nix: prompts run with this machine's tools, and these of the box's packages are not on PATH: " + strings.Join(t.missing, ", ")
	}
	return t
}

// buildDevEnv runs nix build of the box's environment and returns its
// store path.
func buildDevEnv(ctx context.Context, stdio IO, nix, name string, env generator.DevEnv) (string, error) {
	expr, err := env.NixExpr(name, stdio.Getenv("GLOVEBOX_DEV_NIXPKGS"))
	if err != nil {
		return "", err
	}
	fmt.Fprintf(stdio.Stderr, "gbx dev: building the box's packages with nix (the first run downloads them)...\n")
	cmd := exec.CommandContext(ctx, nix, "build", "--no-link", "--json", "--impure", "--expr", expr)
	conf := stdio.Getenv("NIX_CONFIG")
	if !strings.Contains(conf, "experimental-features") {
		conf = strings.TrimSpace(conf + "\nexperimental-features = nix-command flakes")
	}
	cmd.Env = append(os.Environ(), "NIX_CONFIG="+conf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("nix build: %v: %s", err, clip(nixError(stderr.String()), 200))
	}
	var built []struct {
		Outputs map[string]string `json:"outputs"`
	}
	if err := json.Unmarshal(out, &built); err != nil || len(built) != 1 || !filepath.IsAbs(built[0].Outputs["out"]) {
		return "", fmt.Errorf("nix build --json printed %q, not one store path", clip(string(out), 200))
	}
	return built[0].Outputs["out"], nil
}

// nixError picks the line of nix's stderr that says what went wrong: the
// last one starting with "error:", else the last line.
func nixError(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "error:") {
			return l
		}
	}
	return lines[len(lines)-1]
}

// lookPathIn finds an executable named name in the directories of path.
func lookPathIn(name, path string) string {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// devEnviron is the environment the kit takes agents' variables from:
// this process's, with PATH replaced by the tools' PATH.
func devEnviron(path string) []string {
	env := os.Environ()
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "PATH=") {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+path)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// devBanner is what gbx dev prints once the box serves.
func devBanner(m *protocol.Manifest, source, url, key, state string, t devTools, cleanEnv bool, sb *devSandbox, home string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "box %s %s (%s agent, from %s) is running on this machine\n", m.Name, m.Version, m.AgentType(), source)
	fmt.Fprintf(&b, "  url    %s\n  key    %s\n  state  %s\n", url, key, state)
	switch {
	case t.nixEnv != "":
		fmt.Fprintf(&b, "  tools  the box's packages, built by nix: %s\n", t.nixEnv)
	case len(t.missing) > 0:
		fmt.Fprintf(&b, "  tools  this machine's PATH, without %d of the box's packages (see the warning)\n", len(t.missing))
	default:
		fmt.Fprintf(&b, "  tools  this machine's PATH\n")
	}
	if n := len(sb.unreachable); n > 0 {
		fmt.Fprintf(&b, "         but %d of its entries the sessions cannot reach (see the warnings)\n", n)
	}
	if cleanEnv {
		fmt.Fprintf(&b, "  env    clean: PATH, locale, CA variables and the box's [env] (--host-env passes yours)\n")
	} else {
		fmt.Fprintf(&b, "  env    this shell's (--host-env)\n")
	}
	b.WriteString(sb.bannerLines(home))
	if tok, err := protocol.MintToken(key, protocol.TokenClaims{Scopes: []string{protocol.ScopeInspect}, Expires: time.Now().Add(12 * time.Hour)}); err == nil {
		fmt.Fprintf(&b, "  inspect %s\n", strings.Replace(strings.Replace(url, "ws://", "http://", 1), "wss://", "https://", 1)+"inspect/#token="+tok)
	}
	fmt.Fprintf(&b, "\nFor the other gbx commands in this shell:\n  export GLOVEBOX_URL=%s GLOVEBOX_KEY=%s\n", shellQuote(url), shellQuote(key))
	fmt.Fprintf(&b, "\nTry it:\n  gbx prompt 'echo hello from the box'\n\nCtrl-C stops it.\n")
	return b.String()
}
