package generator

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestNixNamesPartial: with the partial list gbx carries, a misspelt
// package near a known name is a warning with file:line and the nearest
// names; a known name and a name the list cannot judge pass.
func TestNixNamesPartial(t *testing.T) {
	t.Parallel()
	if knownNixNames.Rev != "" {
		t.Fatalf("nixnames.txt claims to be complete for %s; this test is for the partial list", knownNixNames.Rev)
	}
	c, err := Parse("glovebox.toml", []byte("name = \"x\"\n[packages]\nnix = [\n  \"jq\",\n  \"ffmpg\",\n  \"htop\",\n]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := `glovebox.toml:5: packages.nix[1]: "ffmpg" is not among the `
	if len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], want) || !strings.Contains(c.Warnings[0], `did you mean "ffmpeg"`) {
		t.Fatalf("Warnings = %q, want one for ffmpg starting %q", c.Warnings, want)
	}
	res, err := Generate(c, Options{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if res.Warnings[0] != c.Warnings[0] {
		t.Errorf("Generate's first warning = %q, want the config's", res.Warnings[0])
	}
}

// TestNixNamesComplete: a list complete for the pinned revision decides:
// a name it lacks is an error with file:line (and the nearest names when
// there are any). The same list for another revision cannot decide.
func TestNixNamesComplete(t *testing.T) {
	t.Parallel()
	rev := pins[DefaultBranch].Rev
	src := []byte("[packages]\nnix = [\"jq\", \"ffmpg\", \"htop\", \"python3Packages.numpy\"]\n")
	for _, tc := range []struct {
		list       string
		errs, warn []string
	}{
		{"# complete: " + rev + "\njq\nffmpeg\nffmpeg-headless\npython3Packages.numpy\n",
			[]string{`glovebox.toml:2: packages.nix[1]: "ffmpg" is not a package of the pinned nixpkgs (` + rev[:12] + `): did you mean "ffmpeg"?`,
				`glovebox.toml:2: packages.nix[2]: "htop" is not a package of the pinned nixpkgs (` + rev[:12] + `): find its attribute name on search.nixos.org`}, nil},
		{"# complete: 0000000000000000000000000000000000000000\njq\nffmpeg\n", nil,
			[]string{`glovebox.toml:2: packages.nix[1]: "ffmpg" is not among the 2 nixpkgs names gbx knows`}},
	} {
		d, err := parseDoc("glovebox.toml", src)
		if err != nil {
			t.Fatal(err)
		}
		var c Config
		d.checkNixNames("packages.nix", []string{"jq", "ffmpg", "htop", "python3Packages.numpy"}, parseNixNames(tc.list), rev, &c)
		var errs []string
		for _, p := range d.probs {
			errs = append(errs, p.Error())
		}
		if len(errs) != len(tc.errs) {
			t.Fatalf("errors %q, want %q", errs, tc.errs)
		}
		for i := range errs {
			if !strings.HasPrefix(errs[i], tc.errs[i]) {
				t.Errorf("error %q, want it to start %q", errs[i], tc.errs[i])
			}
		}
		if len(c.Warnings) != len(tc.warn) || len(tc.warn) > 0 && !strings.HasPrefix(c.Warnings[0], tc.warn[0]) {
			t.Errorf("warnings %q, want %q", c.Warnings, tc.warn)
		}
	}
}

// TestNixNamesMatchStandIn holds nixnames.txt to its stated origin, the
// names of nix/testdata/nixpkgs/names.nix.
func TestNixNamesMatchStandIn(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "nix", "testdata", "nixpkgs", "names.nix"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	py := strings.Index(s, "pythonPackages")
	quoted := regexp.MustCompile(`"([^"]+)"`)
	var want []string
	for _, m := range quoted.FindAllStringSubmatch(s[:py], -1) {
		want = append(want, m[1])
	}
	for _, m := range quoted.FindAllStringSubmatch(s[py:], -1) {
		want = append(want, "python3Packages."+m[1])
	}
	slices.Sort(want)
	if !slices.Equal(want, knownNixNames.Names) {
		t.Errorf("nixnames.txt lists %q,\nnames.nix %q", knownNixNames.Names, want)
	}
}
