package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Manifest is glovebox.json: the v1 shape, in v1 key order, plus the
// additive agent and sessions fields.
type Manifest struct {
	Name            string             `json:"name"`
	Version         string             `json:"version"`
	Base            string             `json:"base"`
	FS              map[string]Mount   `json:"fs"`
	Env             map[string]EnvSpec `json:"env"`
	Limits          Limits             `json:"limits"`
	KeyFingerprint  string             `json:"key_fingerprint"`
	StoragePolicy   StoragePolicy      `json:"storage_policy"`
	Packages        Packages           `json:"packages"`
	ProtocolVersion int                `json:"protocol_version"`

	// Agent names the agent the kit serves. Additive; absent means exec.
	Agent *AgentSpec `json:"agent,omitempty"`
	// Sessions tunes session isolation and resume. Additive.
	Sessions *SessionsSpec `json:"sessions,omitempty"`
	// Network is the egress policy. Additive; absent means no proxy.
	Network *NetworkSpec `json:"network,omitempty"`
	// Sandbox chooses the isolation layers of the box's agent processes.
	// Additive; absent means every layer the platform allows.
	Sandbox *SandboxSpec `json:"sandbox,omitempty"`
	// Files tunes how GET /files/{id} serves parked files. Additive.
	Files *FilesSpec `json:"files,omitempty"`
	// Inspect turns on the inspector at /inspect. Additive; absent means off.
	Inspect *InspectSpec `json:"inspect,omitempty"`
	// Inputs holds the operator's switches for url inputs. Additive.
	Inputs *InputsSpec `json:"inputs,omitempty"`
	// HTTP tunes the box's HTTP routes for browsers. Additive.
	HTTP *HTTPSpec `json:"http,omitempty"`
	// Provenance is what the box was made from: gbx generate writes what
	// it knows, the image build adds the closure. Additive.
	Provenance *Provenance `json:"provenance,omitempty"`
	// Runs holds the run records' public key and settings
	// (runrecord.go). Additive.
	Runs *RunsSpec `json:"runs,omitempty"`
	// Preview serves sessions' preview ports under a wildcard domain
	// (preview.go). Additive; absent means no previews.
	Preview *PreviewSpec `json:"preview,omitempty"`
	// Snapshots tunes the snapshot store (snapshot.go). Additive; absent
	// means the local store with the default limits.
	Snapshots *SnapshotsSpec `json:"snapshots,omitempty"`
}

// FilesSpec tunes GET /files/{id}.
type FilesSpec struct {
	// Inline serves parked files inline (v1's Content-Disposition) with no
	// Content-Security-Policy, so that a browser renders an agent's HTML
	// or SVG from the box's origin. Off by default: files are downloads
	// under "default-src 'none'; sandbox". Turn it on only for agents
	// whose output you trust as much as your own pages.
	Inline bool `json:"inline,omitempty"`
}

// InputsSpec are the operator's switches for url inputs. By default the
// kit refuses to fetch a url input from a private (RFC 1918, fc00::/7,
// 100.64/10) or loopback address; link-local and metadata addresses are
// refused always.
type InputsSpec struct {
	// AllowPrivateURLs lets url inputs reach private addresses, such as a
	// MinIO on the box's private network.
	AllowPrivateURLs bool `json:"allow_private_urls,omitempty"`
	// AllowLoopbackURLs lets url inputs reach loopback addresses.
	AllowLoopbackURLs bool `json:"allow_loopback_urls,omitempty"`
}

// SandboxSpec chooses the isolation layers of a box's sessions. Every
// layer is on unless turned off here, and applies where the platform
// allows it; the kit reports which are in force.
type SandboxSpec struct {
	// Enabled false turns every layer off but rlimits and no_new_privs.
	Enabled *bool `json:"enabled,omitempty"`
	// Users, Mount, PID, Network, Cgroup, Landlock and Seccomp false
	// turn one layer off.
	Users    *bool `json:"users,omitempty"`
	Mount    *bool `json:"mount,omitempty"`
	PID      *bool `json:"pid,omitempty"`
	Network  *bool `json:"network,omitempty"`
	Cgroup   *bool `json:"cgroup,omitempty"`
	Landlock *bool `json:"landlock,omitempty"`
	Seccomp  *bool `json:"seccomp,omitempty"`
	// Require names layers the box must have: the kit refuses to start
	// where one of them is not in force.
	Require []string `json:"require,omitempty"`
	// AllowDegraded lets the kit serve where its layers cannot keep
	// sessions apart or cannot enforce the box's [network] policy. Off by
	// default: such a kit refuses to start and says which setting lets it.
	AllowDegraded bool `json:"allow_degraded,omitempty"`
	// UIDBase and UIDCount are the uids sessions run under (default
	// 200000 and 10000).
	UIDBase  int `json:"uid_base,omitempty"`
	UIDCount int `json:"uid_count,omitempty"`
	// Pids caps a session's processes and threads (default 512); Files a
	// process's open files (default 4096).
	Pids  int `json:"pids,omitempty"`
	Files int `json:"files,omitempty"`
}

// Sandbox layers, as SandboxSpec.Require and Isolation name them.
var SandboxLayers = []string{"users", "userns", "privileges", "mount", "pid", "network", "cgroup", "landlock", "seccomp"}

// Isolation reports the isolation in force for a box's sessions, in
// /environment (and, in part, an authenticated /health).
type Isolation struct {
	// Active lists the layers in force.
	Active []string `json:"active"`
	// Inactive maps each layer that is not in force to the reason.
	Inactive map[string]string `json:"inactive,omitempty"`
	// UIDs is the range of session uids, "first-last", with the users layer.
	UIDs string `json:"uids,omitempty"`
	// Cgroup is "v2" or "v1" with the cgroup layer.
	Cgroup string `json:"cgroup,omitempty"`
	// Landlock is the Landlock ABI version in force with the landlock
	// layer.
	Landlock int `json:"landlock,omitempty"`
	// Privileges says what the privileges layer holds where it is less
	// than the whole layer (the capability bounding set kept, for a kit
	// without CAP_SETPCAP). Additive.
	Privileges string `json:"privileges,omitempty"`
	// Limits are the per-session limits in force.
	Limits IsolationLimits `json:"limits"`
	// Degraded is true when the box serves although its layers cannot
	// keep sessions apart or cannot enforce its egress policy: its
	// operator opted in (sandbox.allow_degraded) or turned the sandbox
	// off. Absent from boxes that predate it. Additive.
	Degraded *bool `json:"degraded,omitempty"`
	// Gaps maps each layer not in force to what that means for the box's
	// users, one sentence each. Additive.
	Gaps map[string]string `json:"gaps,omitempty"`
	// Front, in a privilege-separated kit, says who serves: the
	// unprivileged uid and gid that parse clients' and agents' bytes,
	// while a root monitor does what needs root. Absent where the kit
	// does its own privileged work. Additive.
	Front string `json:"front,omitempty"`
}

// IsolationLimits are a session's limits in force; zero is none.
type IsolationLimits struct {
	Memory int64   `json:"memory,omitempty"` // bytes
	CPU    float64 `json:"cpu,omitempty"`    // cores
	Pids   int     `json:"pids,omitempty"`
	Files  int     `json:"files,omitempty"`
	Disk   int64   `json:"disk,omitempty"` // bytes
}

// Mount is one fs entry. The kit gives meaning to the keys work, input and
// output.
type Mount struct {
	Path     string `json:"path"`
	Writable bool   `json:"writable"`
}

// Mount keys the kit knows.
const (
	MountWork   = "work"
	MountInput  = "input"
	MountOutput = "output"
)

// DefaultFS is v1's default layout. /input is listed read-only for the
// agent, as in v1; the kit itself writes the inputs into it.
func DefaultFS() map[string]Mount {
	return map[string]Mount{
		MountWork:   {Path: "/work", Writable: true},
		MountInput:  {Path: "/input", Writable: false},
		MountOutput: {Path: "/output", Writable: true},
	}
}

// EnvSpec declares an environment variable the box needs.
type EnvSpec struct {
	Required    bool   `json:"required"`
	Secret      bool   `json:"secret,omitempty"`
	Default     string `json:"default,omitempty"`
	Description string `json:"description,omitempty"`
	// Inject brokers a secret through the egress proxy. Additive.
	Inject *InjectSpec `json:"inject,omitempty"`
}

// Limits are the box's resource limits. Timeout is enforced per prompt by
// the kit; CPU and Memory are for the platform. The rest are additive.
type Limits struct {
	CPU     string `json:"cpu,omitempty"`
	Memory  string `json:"memory,omitempty"`
	Timeout string `json:"timeout,omitempty"`
	// Disk caps what a session may keep in its directories and /tmp
	// (default none). Additive.
	Disk string `json:"disk,omitempty"`

	// MaxMessage caps one WebSocket frame (default 100MB, as v1).
	MaxMessage string `json:"max_message,omitempty"`
	// MaxInput caps one input file, whatever its kind (default 1GB).
	MaxInput string `json:"max_input,omitempty"`
	// InputTimeout bounds fetching one url input (default 60s).
	InputTimeout string `json:"input_timeout,omitempty"`
	// MaxConnections caps the box's open connections (default: max
	// sessions + 256, at most half the kit's file descriptors). Additive.
	MaxConnections int `json:"max_connections,omitempty"`
	// FrameBudget bounds the incoming frames over 64 KiB read at once,
	// all connections together: each takes max_message of it while read
	// and handled (default 2 x max_message, so two; at least one). Additive.
	FrameBudget string `json:"frame_budget,omitempty"`
}

// StoragePolicy holds the inputs and outputs policies.
type StoragePolicy struct {
	Inputs  Policy `json:"inputs"`
	Outputs Policy `json:"outputs"`
}

// Packages lists what the image adds on top of its base. Apt, Pip and Npm
// are v1's; Nix (nixpkgs attribute names) is additive.
type Packages struct {
	Apt []string `json:"apt,omitempty"`
	Pip []string `json:"pip,omitempty"`
	Npm []string `json:"npm,omitempty"`
	Nix []string `json:"nix,omitempty"`
}

// Agent types.
const (
	AgentExec = "exec" // the prompt runs as /bin/sh -c in the work directory
	AgentACP  = "acp"  // an Agent Client Protocol agent as a subprocess
	AgentGo   = "go"   // a Go agent compiled into the kit binary by its author
)

// AgentSpec names the agent a box serves.
type AgentSpec struct {
	Type    string            `json:"type"`
	Command []string          `json:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Warm is how many sessions the kit keeps started ahead of time, each
	// with its sandbox and agent ready for one session. Nil is
	// DefaultWarm; 0 turns warm sessions off.
	Warm *int `json:"warm,omitempty"`
}

// DefaultWarm is the warm pool's size when the manifest names none;
// MaxWarm bounds it.
const (
	DefaultWarm = 1
	MaxWarm     = 64
)

// WarmSize is the warm pool's size a (possibly nil) agent spec asks for.
func (a *AgentSpec) WarmSize() int {
	if a == nil || a.Warm == nil {
		return DefaultWarm
	}
	return min(max(*a.Warm, 0), MaxWarm)
}

// SessionsSpec tunes sessions. Zero values mean the defaults.
type SessionsSpec struct {
	// SharedDirs makes every session use the fs paths themselves instead of
	// a directory of its own under each.
	SharedDirs bool `json:"shared_dirs,omitempty"`
	// ResumeGrace is how long a dropped session waits for a resume
	// (default 60s). Only sessions whose client announced "resume" wait.
	ResumeGrace string `json:"resume_grace,omitempty"`
	// Max caps concurrent sessions (default 10000).
	Max int `json:"max,omitempty"`
	// MaxQueue caps prompts queued on one session (default 16).
	MaxQueue int `json:"max_queue,omitempty"`
	// Persist keeps sessions across restarts of the kit and redeploys of
	// the same image: a session whose client announced "resume" keeps
	// its directories, its parked outputs and (where the agent can load
	// it) its agent's conversation when the kit stops or dies, and is
	// resumed by id as before, for sessions.resume_grace from its last
	// activity. The box's state directory and mounts must be on a volume
	// (the generated deploy files mount one). Additive.
	Persist bool `json:"persist,omitempty"`
	// Pause is how long a session waiting for a resume (its client gone,
	// no prompt running or queued) keeps running before its processes are
	// frozen (through its cgroup's freezer) until a resume or a prompt
	// wakes it: default DefaultPause; "off" never pauses. Additive.
	Pause string `json:"pause,omitempty"`
	// Lifetime is the longest a session lives, from its start, connected
	// or not; default none. Additive.
	Lifetime string `json:"lifetime,omitempty"`
	// Drain is how long, after SIGTERM, running prompts may go on before
	// the kit cuts them and exits (default DefaultDrain). Deploy files
	// give the platform's kill timeout a few seconds more. Additive.
	Drain string `json:"drain,omitempty"`
}

// DefaultPause is how long a session waiting for a resume runs before
// it is paused, when sessions.pause is not set.
const DefaultPause = "30s"

// PauseAfter returns sessions.pause as a duration, 0 for "off".
func (s *SessionsSpec) PauseAfter() time.Duration {
	v := DefaultPause
	if s != nil && s.Pause != "" {
		v = s.Pause
	}
	if v == "off" {
		return 0
	}
	d, err := ParseDuration(v)
	if err != nil {
		d, _ = ParseDuration(DefaultPause)
	}
	return d
}

// DefaultDrain is a box's drain time when sessions.drain is not set.
const DefaultDrain = "30s"

// DrainTime returns sessions.drain, else DefaultDrain, as a duration.
func (m *Manifest) DrainTime() time.Duration {
	v := DefaultDrain
	if m.Sessions != nil && m.Sessions.Drain != "" {
		v = m.Sessions.Drain
	}
	d, err := ParseDuration(v)
	if err != nil {
		d, _ = ParseDuration(DefaultDrain)
	}
	return d
}

// ParseManifest decodes glovebox.json and fills v1's defaults for absent
// fields. It does not check the manifest; call Check for that.
func ParseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest is not valid JSON: %w", err)
	}
	m.fillDefaults()
	return &m, nil
}

func (m *Manifest) fillDefaults() {
	if m.Name == "" {
		m.Name = "glovebox-app"
	}
	if m.Version == "" {
		m.Version = "0.1.0"
	}
	if m.Base == "" {
		m.Base = "glovebox/base"
	}
	if m.FS == nil {
		m.FS = DefaultFS()
	}
	if m.Env == nil {
		m.Env = map[string]EnvSpec{}
	}
	if m.StoragePolicy.Inputs.Rules == nil {
		m.StoragePolicy.Inputs = DefaultInputsPolicy()
	}
	if m.StoragePolicy.Outputs.Rules == nil {
		m.StoragePolicy.Outputs = DefaultOutputsPolicy()
	}
	if m.ProtocolVersion == 0 {
		m.ProtocolVersion = Version
	}
}

var (
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// NameRE is what a box name may be: it becomes an image name, a
	// flake attribute and a host name.
	NameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
)

// Check reports every problem of the manifest, one line each, joined with
// errors.Join; nil when there is none. It checks the things that do not
// depend on the running process: names, paths, sizes, durations, policies
// and the agent.
func (m *Manifest) Check() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.ProtocolVersion != Version {
		add("manifest: protocol_version %d is not supported (this kit speaks %d)", m.ProtocolVersion, Version)
	}
	for _, k := range sortedKeys(m.FS) {
		p := m.FS[k].Path
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" {
			add("manifest: fs.%s.path %q must be a clean absolute path other than /", k, p)
		}
	}
	for _, k := range []string{MountWork, MountOutput} {
		if mt, ok := m.FS[k]; ok && !mt.Writable {
			add("manifest: fs.%s must be writable", k)
		}
	}
	checkEnv(m.Env, add)
	if n := m.Network; n != nil {
		if err := n.Check(); err != nil {
			for _, e := range strings.Split(err.Error(), "\n") {
				add("manifest: network.%s", e)
			}
		}
	}
	m.Limits.check(add)
	if sn := m.Snapshots; sn != nil {
		sn.check(add)
	}
	if err := m.StoragePolicy.Inputs.Check(); err != nil {
		add("manifest: storage_policy.inputs: %v", err)
	}
	if err := m.StoragePolicy.Outputs.Check(); err != nil {
		add("manifest: storage_policy.outputs: %v", err)
	}
	if a := m.Agent; a != nil {
		a.check(add)
	}
	if m.Limits.CPU != "" {
		if _, err := ParseCPU(m.Limits.CPU); err != nil {
			add("manifest: limits.cpu: %v", err)
		}
	}
	if sb := m.Sandbox; sb != nil {
		for _, l := range sb.Require {
			if !slices.Contains(SandboxLayers, l) {
				add("manifest: sandbox.require: %q is not a layer (one of %s)", l, strings.Join(SandboxLayers, ", "))
			}
		}
		if sb.UIDBase < 0 || sb.UIDCount < 0 || sb.Pids < 0 || sb.Files < 0 {
			add("manifest: sandbox.uid_base, uid_count, pids and files must not be negative")
		}
		if sb.UIDBase > 0 && sb.UIDBase < 1000 {
			add("manifest: sandbox.uid_base %d would share uids with the image's own users; use 1000 or more (default 200000)", sb.UIDBase)
		}
	}
	if p := m.Preview; p != nil {
		if err := p.Check(); err != nil {
			errs = append(errs, err)
		}
	}
	if h := m.HTTP; h != nil {
		for i, o := range h.CORSOrigins {
			if o == "*" {
				if len(h.CORSOrigins) > 1 {
					add("manifest: http.cors_origins: \"*\" allows every origin; list it alone")
				}
				continue
			}
			if err := CheckOrigin(o); err != nil {
				add("manifest: http.cors_origins[%d]: %v", i, err)
			}
		}
	}
	if s := m.Sessions; s != nil {
		s.check(add)
	}
	return errors.Join(errs...)
}

// ParseQuantity parses limits.memory and limits.disk: a size as
// ParseSize takes it ("512MB"), or as v1 boxes wrote them, a Kubernetes
// quantity with a binary suffix ("2Gi", "512Mi") or a plain byte count.
func ParseQuantity(s string) (int64, error) {
	t := strings.TrimSpace(s)
	for i, suf := range []string{"Ki", "Mi", "Gi", "Ti"} {
		if num, ok := strings.CutSuffix(t, suf); ok {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil || f <= 0 {
				return 0, fmt.Errorf("%q is not a size such as 512MB or 2Gi", s)
			}
			return int64(f * float64(int64(1)<<(10*(i+1)))), nil
		}
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil && n > 0 {
		return n, nil
	}
	n, err := ParseSize(t)
	if err != nil {
		return 0, fmt.Errorf("%w (or a quantity such as 2Gi)", err)
	}
	return n, nil
}

// ParseCPU parses limits.cpu: a positive number of cores, such as "1" or
// "0.5", or Kubernetes millicores as v1 boxes may write them ("500m").
func ParseCPU(s string) (float64, error) {
	t := strings.TrimSpace(s)
	scale := 1.0
	if num, ok := strings.CutSuffix(t, "m"); ok {
		t, scale = num, 1000
	}
	f, err := strconv.ParseFloat(t, 64)
	f /= scale
	if err != nil || f <= 0 || f > 1024 {
		return 0, fmt.Errorf("%q is not a number of cores (such as \"1\" or \"0.5\")", s)
	}
	return f, nil
}

// AgentType returns the manifest's agent type, exec when none is named.
func (m *Manifest) AgentType() string {
	if m.Agent == nil || m.Agent.Type == "" {
		return AgentExec
	}
	return m.Agent.Type
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
