package protocol

// Environment is the body of GET /environment: v1's fields plus the
// additive capabilities and agent type.
type Environment struct {
	Name            string           `json:"name"`
	Version         string           `json:"version"`
	Base            string           `json:"base"`
	FS              map[string]Mount `json:"fs"`
	Packages        Packages         `json:"packages"`
	Limits          *Limits          `json:"limits,omitempty"`
	ProtocolVersion int              `json:"protocol_version"`
	Capabilities    []string         `json:"capabilities,omitempty"`
	Agent           string           `json:"agent,omitempty"`
	// Isolation is the sandbox in force for sessions. Additive.
	Isolation *Isolation `json:"isolation,omitempty"`
	// Network is the egress policy in force. Additive.
	Network *EgressEnvironment `json:"network,omitempty"`
	// Warm is the warm pool. Additive.
	Warm *WarmEnvironment `json:"warm,omitempty"`
	// Provenance is what the box was made from. Additive.
	Provenance *Provenance `json:"provenance,omitempty"`
	// Runs is the run records' public key and settings. Additive.
	Runs *RunsSpec `json:"runs,omitempty"`
}

// EgressEnvironment is the /environment view of the egress proxy.
type EgressEnvironment struct {
	// Mode is "enforced" (a session's only route out is the proxy) or
	// "advisory" (agents are told to use it through HTTP_PROXY and
	// friends, and nothing stops one that does not).
	Mode    string   `json:"mode"`
	Default string   `json:"default"`
	Allow   []string `json:"allow"`
	Deny    []string `json:"deny"`
	// Brokered names the env vars agents see only as placeholders.
	Brokered []string `json:"brokered,omitempty"`
	// AllowRequests are the allow rules with methods and paths.
	// Additive.
	AllowRequests []RequestRule `json:"allow_requests,omitempty"`
	// SessionMayAllow is what a session's rules may open beyond the
	// box's policy. Additive.
	SessionMayAllow []string `json:"session_may_allow,omitempty"`
	// Session is a session's own rule set, in a session's view (its
	// hello, its egress frame, GET /sessions/{id}/egress): a connection
	// goes ahead when the box's policy and these rules both allow it (or
	// these allow it by a rule SessionMayAllow covers). Additive.
	Session *NetworkSpec `json:"session,omitempty"`
}

// Health is the body of GET /health.
type Health struct {
	OK      bool   `json:"ok"`
	Name    string `json:"name"`
	Version string `json:"version"`
	// Isolation lists the sandbox layers in force. Only a request with
	// the box key or a token gets it (and Degraded and Gaps): /health
	// tells anyone else nothing about the sandbox. Additive.
	Isolation []string `json:"isolation,omitempty"`
	// Degraded is Isolation.Degraded. Additive.
	Degraded *bool `json:"degraded,omitempty"`
	// Gaps is Isolation.Gaps. Additive.
	Gaps map[string]string `json:"gaps,omitempty"`
	// Draining is true while the box shuts down (GET /health then answers
	// 503, so that load balancers send new sessions elsewhere). Additive.
	Draining bool `json:"draining,omitempty"`
}

// Environment returns the /environment view of the manifest.
func (m *Manifest) Environment(capabilities []string) Environment {
	lim := m.Limits
	env := Environment{
		Name: m.Name, Version: m.Version, Base: m.Base, FS: m.FS, Packages: m.Packages,
		Limits: &lim, ProtocolVersion: m.ProtocolVersion, Capabilities: capabilities,
	}
	if m.Agent != nil {
		env.Agent = m.Agent.Type
	}
	env.Warm = &WarmEnvironment{Size: m.Agent.WarmSize()}
	env.Provenance = m.Provenance
	env.Runs = m.Runs
	return env
}

// WarmEnvironment is the /environment view of warm sessions.
type WarmEnvironment struct {
	// Size is the pool's size per box.
	Size int `json:"size"`
	// Ready is how many warm sessions wait, ready, right now.
	Ready int `json:"ready,omitempty"`
}

// Provenance is what a box was made from, as its image carries it in the
// manifest and /environment shows it. gbx generate writes the config's
// digest, its own version and the flake's pins; the Nix build of the
// image adds its closure's hash and the SBOM's. Every field is optional:
// a box run by gbx dev has no closure, one built from a hand-written
// manifest has no config digest.
type Provenance struct {
	// ConfigSHA256 is the sha256 (hex) of the glovebox.toml the box was
	// generated from.
	ConfigSHA256 string `json:"config_sha256,omitempty"`
	// Gbx is the version of the gbx that generated the box's flake and
	// manifest ("latest" for a development build).
	Gbx string `json:"gbx,omitempty"`
	// Inputs are flake.lock's locked inputs by name (nixpkgs, and
	// glovebox when it is locked).
	Inputs map[string]LockedInput `json:"inputs,omitempty"`
	// ClosureSHA256 is the sha256 (hex) over the image's Nix closure: each
	// store path with its NAR hash, one line per path in byte order
	// ("<path> <hex narHash>\n"). Two images with the same closure have
	// the same hash, wherever they were built.
	ClosureSHA256 string `json:"closure_sha256,omitempty"`
	// ClosurePaths is the number of store paths in the closure.
	ClosurePaths int `json:"closure_paths,omitempty"`
	// SBOM is where the image keeps its CycloneDX SBOM, which GET /sbom
	// serves, and SBOMSHA256 that file's sha256 (hex).
	SBOM       string `json:"sbom,omitempty"`
	SBOMSHA256 string `json:"sbom_sha256,omitempty"`
}

// LockedInput is one flake input as flake.lock pins it.
type LockedInput struct {
	// URL is the input's flake reference as flake.nix names it
	// ("github:NixOS/nixpkgs/nixos-26.05").
	URL     string `json:"url,omitempty"`
	Rev     string `json:"rev"`
	NarHash string `json:"nar_hash"`
}
