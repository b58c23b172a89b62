package generator

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// baseSpec is what a base image adds on top of the kit, as nixpacks builds
// need it: nixpacks cannot start from the Nix base images, so it installs
// the same packages itself. The table mirrors baseimages/<base>.nix;
// TestBasesMatchNix evaluates those files and fails when they drift apart.
type baseSpec struct {
	// Nix are nixpkgs attribute names.
	Nix []string
	// Pip are Python packages (python3Packages names in the Nix image,
	// installed with pip in nixpacks builds).
	Pip []string
	// Env are the base's environment variables that do not name store
	// paths (those exist only in the Nix image).
	Env map[string]string
}

var baseSpecs = map[string]baseSpec{
	"base": {Nix: []string{
		"bashInteractive", "coreutils", "findutils", "diffutils", "gnugrep", "gnused", "gawk",
		"gnutar", "gzip", "xz", "which", "less", "procps", "curl", "tzdata",
	}},
	"media": {Nix: []string{"ffmpeg-headless", "imagemagick", "sox", "yt-dlp"}},
	"docs": {Nix: []string{
		"pandoc", "qpdf", "pdftk", "poppler-utils", "ghostscript", "libreoffice",
		"dejavu_fonts", "liberation_ttf", "noto-fonts",
	}},
	"python": {
		Nix: []string{"uv"},
		Pip: []string{"numpy", "pandas", "pillow", "scipy", "matplotlib"},
		Env: map[string]string{"MPLBACKEND": "Agg", "UV_PYTHON_DOWNLOADS": "never"},
	},
	"browser": {Nix: []string{
		"chromium", "dejavu_fonts", "liberation_ttf", "noto-fonts", "noto-fonts-cjk-sans", "noto-fonts-color-emoji",
	}},
}

var (
	flakeURLCharsRE = regexp.MustCompile(`^[A-Za-z0-9._~:/?&=%+@,-]*$`)
	baseAttrRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)
	githubRefRE     = regexp.MustCompile(`^github:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[A-Za-z0-9_./-]+)?(\?[A-Za-z0-9._~/&=%+@,-]*)?$`)
	gitHTTPSRefRE   = regexp.MustCompile(`^git\+https://[A-Za-z0-9.-]+(:[0-9]+)?/[A-Za-z0-9._~/%+@,-]+(\?[A-Za-z0-9._~/&=%+@,-]*)?$`)
	tarballRefRE    = regexp.MustCompile(`^https://[A-Za-z0-9.-]+(:[0-9]+)?/[A-Za-z0-9._~/%+@,-]+\.(tar|tar\.gz|tgz|tar\.xz|tar\.bz2|tar\.zst|zip)(\?[A-Za-z0-9._~/&=%+@,-]*)?$`)
	pathRefRE       = regexp.MustCompile(`^path:/[A-Za-z0-9._~/%+@,-]*$`)
)

// flakeBaseHelp is what a base from another flake may look like.
const flakeBaseHelp = `write a base from another flake as "<flakeref>#<name>", e.g. "github:acme/glovebox-bases#ml", with a github:owner/repo[/ref], git+https://host/path, https://host/file.tar.gz (a tarball) or path:/absolute/dir reference; the flake exposes the base as lib.gloveboxBases.<name>`

// ParseFlakeBase splits a base from another flake, "<flakeref>#<name>",
// into the flake reference and the base's name under the flake's
// lib.gloveboxBases. Only github:, git+https:, https: tarball and absolute
// path: references made of characters safe in a flake URL are accepted.
func ParseFlakeBase(s string) (ref, attr string, err error) {
	notBase := fmt.Sprintf("%q is not a base image: use one of %s, or %s", s, strings.Join(Bases, ", "), flakeBaseHelp)
	ref, attr, ok := strings.Cut(s, "#")
	if !ok {
		return "", "", errors.New(notBase)
	}
	if i := strings.IndexFunc(ref, func(r rune) bool { return !flakeURLCharsRE.MatchString(string(r)) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(ref[i:])
		return "", "", fmt.Errorf("%q: the flake reference contains %q, which is not allowed: use letters, digits and - . _ ~ : / ? & = %% + @ , only", s, r)
	}
	if !baseAttrRE.MatchString(attr) {
		return "", "", fmt.Errorf("%q: %q is not a base name: after # write the name under lib.gloveboxBases, 1 to 64 letters, digits, _ and -, starting with a letter or _", s, attr)
	}
	switch {
	case strings.HasPrefix(ref, "github:"):
		ok = githubRefRE.MatchString(ref)
	case strings.HasPrefix(ref, "git+https://"):
		ok = gitHTTPSRefRE.MatchString(ref)
	case strings.HasPrefix(ref, "https://"):
		ok = tarballRefRE.MatchString(ref)
	case strings.HasPrefix(ref, "path:"):
		ok = pathRefRE.MatchString(ref)
	default:
		return "", "", errors.New(notBase)
	}
	if !ok || strings.Contains(ref, "/../") || strings.HasSuffix(ref, "/..") || strings.Contains(ref, "//") && !strings.Contains(ref, "://") {
		return "", "", fmt.Errorf("%q: %q is not a flake reference this generator accepts: %s", s, ref, flakeBaseHelp)
	}
	return ref, attr, nil
}
