package generator

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
)

// nixNamesFile is the list of nixpkgs attribute names packages.nix is
// checked against; its header says where it comes from and whether it is
// every name of a nixpkgs revision.
//
//go:embed nixnames.txt
var nixNamesFile string

// nixNames is a list of nixpkgs attribute names. Rev is the nixpkgs
// revision it lists every name of, "" when it is partial: then a name it
// lacks may still exist.
type nixNames struct {
	Rev   string
	Names []string
}

// parseNixNames reads the format of nixnames.txt: "#" comments, one of
// them "complete: <rev>" or "complete: no", then a name per line.
func parseNixNames(s string) nixNames {
	var l nixNames
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if c, ok := strings.CutPrefix(line, "# complete:"); ok {
			if c = strings.TrimSpace(c); c != "no" {
				l.Rev = c
			}
			continue
		}
		if line != "" && !strings.HasPrefix(line, "#") {
			l.Names = append(l.Names, line)
		}
	}
	slices.Sort(l.Names)
	return l
}

// knownNixNames is the list gbx carries.
var knownNixNames = parseNixNames(nixNamesFile)

// checkNixNames checks packages.nix against list for the nixpkgs revision
// rev. A list complete for rev decides: a name it lacks is an error with
// the nearest names. A partial list (or one of another revision) cannot:
// a name it lacks that is near one it has is a warning (a likely typo,
// "ffmpg"), and other names pass unremarked.
func (d *doc) checkNixNames(path string, pkgs []string, list nixNames, rev string, c *Config) {
	complete := list.Rev != "" && list.Rev == rev
	for i, p := range pkgs {
		if _, found := slices.BinarySearch(list.Names, p); found {
			continue
		}
		ep := fmt.Sprintf("%s[%d]", path, i)
		near := nearestNames(p, list.Names, 3)
		switch {
		case complete && len(near) > 0:
			d.errorf(ep, "%q is not a package of the pinned nixpkgs (%.12s): did you mean %s? (search.nixos.org lists the names)", p, rev, quoteJoin(near))
		case complete:
			d.errorf(ep, "%q is not a package of the pinned nixpkgs (%.12s): find its attribute name on search.nixos.org", p, rev)
		case len(near) > 0:
			c.Warnings = append(c.Warnings, Problem{File: d.file, Line: d.line(ep), Key: ep,
				Msg: fmt.Sprintf("%q is not among the %d nixpkgs names gbx knows, which are not all of nixpkgs: did you mean %s? (if not, `nix build` will say whether it exists)", p, len(list.Names), quoteJoin(near))}.Error())
		}
	}
}

// nearestNames are up to n names within edit distance 2 of s, nearest
// first, then in order.
func nearestNames(s string, names []string, n int) []string {
	type cand struct {
		name string
		dist int
	}
	var cs []cand
	for _, name := range names {
		if d := editDistance(strings.ToLower(s), strings.ToLower(name)); d <= 2 {
			cs = append(cs, cand{name, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int { return a.dist - b.dist })
	var out []string
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, c.name)
	}
	return out
}

// quoteJoin is "a", "b" or "c".
func quoteJoin(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	if len(q) <= 1 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// aptToNix suggests the nixpkgs attribute for apt names authors of v1
// boxes commonly listed.
var aptToNix = map[string]string{
	"poppler-utils":          "poppler-utils",
	"imagemagick":            "imagemagick",
	"ffmpeg":                 "ffmpeg-headless",
	"libreoffice":            "libreoffice",
	"pdftk":                  "pdftk",
	"pdftk-java":             "pdftk",
	"ghostscript":            "ghostscript",
	"chromium":               "chromium",
	"python3":                "python3",
	"python3-pip":            "python3Packages.pip",
	"nodejs":                 "nodejs_22",
	"jq":                     "jq",
	"curl":                   "curl",
	"git":                    "git",
	"sox":                    "sox",
	"pandoc":                 "pandoc",
	"qpdf":                   "qpdf",
	"tesseract-ocr":          "tesseract",
	"fonts-noto-color-emoji": "noto-fonts-color-emoji",
	"fonts-dejavu":           "dejavu_fonts",
	"build-essential":        "gcc",
}
