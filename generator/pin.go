package generator

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
)

// Pin is a locked GitHub flake input: what `nix flake metadata --json`
// reports as .locked for a branch.
type Pin struct {
	Owner, Repo string
	// Ref is the branch the flake input names (the lock's original.ref);
	// empty when the input names no branch.
	Ref          string
	Rev          string
	NarHash      string
	LastModified int64
}

// DefaultBranch is the nixpkgs branch generated flakes follow.
const DefaultBranch = "nixos-26.05"

//go:embed pins.json
var pinsJSON []byte

// pins is the table of verified nixpkgs pins by branch, read once from the
// embedded pins.json (filled on a networked machine with
// `nix flake metadata --json github:NixOS/nixpkgs/<branch>`).
var pins = func() map[string]Pin {
	var raw map[string]struct {
		Rev          string `json:"rev"`
		NarHash      string `json:"narHash"`
		LastModified int64  `json:"lastModified"`
	}
	if err := json.Unmarshal(pinsJSON, &raw); err != nil {
		panic(fmt.Sprintf("generator: embedded pins.json: %v", err))
	}
	out := map[string]Pin{}
	for branch, r := range raw {
		out[branch] = Pin{Owner: "NixOS", Repo: "nixpkgs", Ref: branch, Rev: r.Rev, NarHash: r.NarHash, LastModified: r.LastModified}
	}
	return out
}()

// NixpkgsPin returns the verified pin of a nixpkgs branch.
func NixpkgsPin(branch string) (Pin, bool) {
	p, ok := pins[branch]
	return p, ok
}

var (
	revRE     = regexp.MustCompile(`^[0-9a-f]{40}$`)
	narHashRE = regexp.MustCompile(`^sha256-[A-Za-z0-9+/]{43}=$`)
	ghNameRE  = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// check reports a pin that cannot be written into a lock.
func (p Pin) check(what string) error {
	switch {
	case !ghNameRE.MatchString(p.Owner) || !ghNameRE.MatchString(p.Repo):
		return fmt.Errorf("%s pin: owner %q and repo %q must be GitHub names", what, p.Owner, p.Repo)
	case p.Ref != "" && !ghNameRE.MatchString(p.Ref):
		return fmt.Errorf("%s pin: ref %q is not a branch name", what, p.Ref)
	case !revRE.MatchString(p.Rev):
		return fmt.Errorf("%s pin: rev %q is not a 40-hex commit", what, p.Rev)
	case !narHashRE.MatchString(p.NarHash):
		return fmt.Errorf("%s pin: narHash %q is not an SRI sha256 hash", what, p.NarHash)
	case p.LastModified <= 0:
		return fmt.Errorf("%s pin: lastModified must be a positive Unix time", what)
	}
	return nil
}

// url is the flake input URL naming the pin's branch.
func (p Pin) url() string {
	u := "github:" + p.Owner + "/" + p.Repo
	if p.Ref != "" {
		u += "/" + p.Ref
	}
	return u
}

// lockNode is the pin as a flake.lock node.
func (p Pin) lockNode() map[string]any {
	orig := map[string]any{"owner": p.Owner, "repo": p.Repo, "type": "github"}
	if p.Ref != "" {
		orig["ref"] = p.Ref
	}
	return map[string]any{
		"locked": map[string]any{
			"lastModified": p.LastModified,
			"narHash":      p.NarHash,
			"owner":        p.Owner,
			"repo":         p.Repo,
			"rev":          p.Rev,
			"type":         "github",
		},
		"original": orig,
	}
}

// Release values of the glovebox flake, stamped into release builds of gbx
// with -ldflags "-X github.com/glovebox-dev/glovebox/generator.releaseRev=..."
// (and releaseNarHash, releaseLastModified). When they are empty, generated
// locks leave the glovebox input out and the first networked `nix flake
// lock` (or `nix build`) adds it.
var (
	releaseRev          string
	releaseNarHash      string
	releaseLastModified string
)

// ReleasePin returns the glovebox flake pin stamped into this build, if any.
func ReleasePin() (Pin, bool) {
	if releaseRev == "" {
		return Pin{}, false
	}
	var lm int64
	if _, err := fmt.Sscan(releaseLastModified, &lm); err != nil {
		return Pin{}, false
	}
	p := Pin{Owner: "glovebox-dev", Repo: "glovebox", Rev: releaseRev, NarHash: releaseNarHash, LastModified: lm}
	if p.check("glovebox") != nil {
		return Pin{}, false
	}
	return p, true
}
