package kit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// sandboxConfig is the manifest's [sandbox] and limits as the sandbox
// takes them. hide lists what no session may see.
func sandboxConfig(m *protocol.Manifest, hide []string, shared bool) sandbox.Config {
	cfg := sandbox.Config{Hide: hide, SharedDirs: shared}
	off := func(b *bool) bool { return b != nil && !*b }
	if sb := m.Sandbox; sb != nil {
		cfg.Off = off(sb.Enabled)
		cfg.NoUsers, cfg.NoMount, cfg.NoPID, cfg.NoNetwork, cfg.NoCgroup = off(sb.Users), off(sb.Mount), off(sb.PID), off(sb.Network), off(sb.Cgroup)
		cfg.NoLandlock, cfg.NoSeccomp = off(sb.Landlock), off(sb.Seccomp)
		cfg.UIDBase, cfg.UIDCount = sb.UIDBase, sb.UIDCount
		cfg.Limits.Pids, cfg.Limits.Files = sb.Pids, sb.Files
	}
	// Checked by Manifest.Check: a bad value cannot reach here.
	if m.Limits.Memory != "" {
		cfg.Limits.Memory, _ = protocol.ParseQuantity(m.Limits.Memory)
	}
	if m.Limits.CPU != "" {
		cfg.Limits.CPU, _ = protocol.ParseCPU(m.Limits.CPU)
	}
	if m.Limits.Disk != "" {
		cfg.Limits.Disk, _ = protocol.ParseQuantity(m.Limits.Disk)
	}
	return cfg
}

// sessionMounts are the manifest's mounts each session gets a directory
// of its own under, in the order of sandbox.Config.SessionRoots.
var sessionMounts = []string{protocol.MountWork, protocol.MountInput, protocol.MountOutput}

// sandboxSetup is the sandbox a box asks for, from its manifest, its
// mounts (as paths, and resolved where they could be), its state
// directory and whether its sessions share their directories: what a kit
// doing its own privileged work and a privilege-separated kit's monitor
// both open.
func sandboxSetup(m *protocol.Manifest, mounts, realMounts map[string]string, stateDir string, shared bool) sandbox.Config {
	hide := []string{stateDir}
	if !shared {
		for _, k := range sessionMounts {
			if p, ok := mounts[k]; ok {
				hide = append(hide, p)
			}
		}
	}
	cfg := sandboxConfig(m, hide, shared)
	// The egress proxy's CA bundle lives in the state directory; agents
	// read it there, and nothing else of it.
	cfg.Expose = []string{filepath.Join(stateDir, "egress")}
	// Sessions without a mount namespace (so without a private /tmp) get
	// a TMPDIR of their own here.
	cfg.TmpRoot = filepath.Join(stateDir, "tmp")
	// Each session's directories are made under the mounts resolved at
	// boot, so that the paths agents see are real ones.
	for _, k := range sessionMounts {
		root := realMounts[k]
		if root == "" {
			root = mounts[k]
		}
		cfg.SessionRoots = append(cfg.SessionRoots, root)
	}
	return cfg
}

// openSandbox sets up the box's sandbox, or in a privilege-separated
// kit's front connects to its monitor's, and reports it: one boot line, a
// boot problem for every layer the manifest requires that is not in
// force, and one for every protection the box lacks (checkDegraded).
func (s *Server) openSandbox(b *boot) {
	cfg := sandboxSetup(s.man, s.mounts, s.realMounts, s.stateDir, s.sharedDirs)
	s.diskLimit = cfg.Limits.Disk
	var sb *sandbox.Sandbox
	var err error
	if s.opts.monitor != nil {
		sb, err = sandbox.Dial(s.opts.monitor, s.log)
	} else {
		// What an earlier kit process left in TmpRoot is its sessions',
		// all ended: this state directory is this kit's.
		if err := os.RemoveAll(cfg.TmpRoot); err != nil {
			b.add("state dir: remove %s: %v", cfg.TmpRoot, err)
			return
		}
		sb, err = sandbox.New(cfg, s.log)
	}
	if err != nil {
		b.add("%v", sandboxHint(err))
		return
	}
	s.sb = sb
	r := sb.Report()
	s.log.Info(r.String())
	if spec := s.man.Sandbox; spec != nil {
		for _, l := range spec.Require {
			if !r.Has(l) {
				why := r.Inactive[l]
				if why == "" {
					why = "not available"
				}
				b.add("sandbox.require: the %s layer is not in force here: %s", l, why)
			}
		}
	}
	s.checkDegraded(b, r, cfg.Off)
	if len(b.problems) == 0 && r.Has(sandbox.LayerUsers) && !sb.Remote() {
		uid := cfg.UIDBase
		if uid <= 0 {
			uid = sandbox.DefaultUIDBase
		}
		s.probeSandbox(b, uid)
	}
}

// allowDegradedEnv lets an operator who cannot regenerate a box's
// manifest serve it degraded, as sandbox.allow_degraded does.
const allowDegradedEnv = "GLOVEBOX_SANDBOX_ALLOW_DEGRADED"

// allowDegradedHow is how a degraded box is let to serve, for messages.
const allowDegradedHow = "set [sandbox] allow_degraded = true in glovebox.toml (the manifest's sandbox.allow_degraded), " +
	"or " + allowDegradedEnv + "=1 in the kit's environment"

// shortfall is a protection a box lacks that its sessions' users rely on:
// being kept apart from each other, or an egress policy that binds.
type shortfall struct {
	means string // what it means for the box's users
	fix   string // what would give the protection: settings, platform changes
	why   string // the layers not in force that matter, and why
}

// shortfalls lists what the sandbox in force lacks: the separation of
// sessions always, the confinement of egress when the box declares an
// egress policy (a [network] table or a brokered secret, for which it
// runs an egress proxy).
func (s *Server) shortfalls(r sandbox.Report) []shortfall {
	var out []shortfall
	if sep := r.Separation(); sep != "" {
		out = append(out, shortfall{
			means: "sessions are not kept apart: " + sep,
			why:   inactiveOf(r, sandbox.LayerUsers, sandbox.LayerUserNS, sandbox.LayerMount, sandbox.LayerPID, sandbox.LayerLandlock),
			fix:   fixes(r, []string{sandbox.LayerUsers, sandbox.LayerMount, sandbox.LayerPID}, hintRoot, hintUserNS, hintLandlock),
		})
	}
	if declaresEgress(s.man) && !r.ConfinesEgress() {
		out = append(out, shortfall{
			means: "the box's egress policy ([network], brokered secrets) is advisory only: agents are told to use the egress proxy, and a process that ignores HTTP_PROXY reaches any address the box can",
			why:   inactiveOf(r, sandbox.LayerNetwork, sandbox.LayerLandlock, sandbox.LayerSeccomp),
			fix:   fixes(r, []string{sandbox.LayerNetwork}, hintRoot, hintUserNS, hintLandlockNet),
		})
	}
	return out
}

// declaresEgress reports whether the manifest declares an egress policy
// the kit enforces through its proxy: a [network] table or a brokered
// secret.
func declaresEgress(m *protocol.Manifest) bool {
	if m.Network != nil {
		return true
	}
	for _, e := range m.Env {
		if e.Inject != nil {
			return true
		}
	}
	return false
}

// inactiveOf lists layers not in force with their reasons, for messages.
func inactiveOf(r sandbox.Report, layers ...string) string {
	var parts []string
	for _, l := range layers {
		if why, ok := r.Inactive[l]; ok {
			parts = append(parts, l+" ("+why+")")
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "not in force: " + strings.Join(parts, "; ")
}

// Platform changes that give layers: each applies where the layer it
// names is not in force for a reason other than the manifest.
var (
	hintRoot   = hint{sandbox.LayerUsers, "run the kit as root (the images do; not under a non-root USER or runAsUser) for a uid per session"}
	hintUserNS = hint{sandbox.LayerUserNS, "allow user namespaces (Docker: a seccomp profile that permits them, e.g. --security-opt seccomp=unconfined; " +
		"the host's user.max_user_namespaces above 0) for namespaces per session"}
	hintLandlock    = hint{sandbox.LayerLandlock, "run on a kernel with Landlock (Linux 5.13 or later, landlock in its lsm= list) for a Landlock domain per session"}
	hintLandlockNet = hint{sandbox.LayerLandlock, "run on a kernel with Landlock ABI 4 or later (Linux 6.7) and seccomp, which confine a session's connections to the proxy"}
)

type hint struct{ layer, text string }

// fixes lists what would give a missing protection: turning back on the
// layers among manifest that the manifest turned off, and the platform
// changes whose layer is not in force here for another reason. When
// neither applies, every platform change is named.
func fixes(r sandbox.Report, manifest []string, platform ...hint) string {
	var out []string
	for _, l := range manifest {
		if strings.Contains(r.Inactive[l], "manifest") {
			out = append(out, fmt.Sprintf("remove [sandbox] %s = false", l))
		}
	}
	var all []string
	for _, h := range platform {
		all = append(all, h.text)
		if why, ok := r.Inactive[h.layer]; ok && !strings.Contains(why, "manifest") {
			if h.layer == sandbox.LayerUserNS && r.Has(sandbox.LayerUsers) {
				continue
			}
			out = append(out, h.text)
		}
	}
	if len(out) == 0 {
		out = all
	}
	return strings.Join(out, ", or ")
}

// checkDegraded refuses to serve a box whose sandbox lacks a protection
// its users rely on (shortfalls), one boot problem each, unless its
// operator opted in (sandbox.allow_degraded or GLOVEBOX_SANDBOX_ALLOW_DEGRADED)
// or turned the sandbox off ([sandbox] enabled = false, itself an explicit
// choice). Such a box serves with a warning per shortfall and reports
// itself degraded. A box whose sessions share their directories by design
// (sessions.shared_dirs) shares them with no complaint: each session still
// has its own namespaces, and the report says which are in force.
func (s *Server) checkDegraded(b *boot, r sandbox.Report, off bool) {
	short := s.shortfalls(r)
	s.degraded = len(short) > 0
	if !s.degraded {
		return
	}
	allowed := s.man.Sandbox != nil && s.man.Sandbox.AllowDegraded
	switch v := strings.TrimSpace(s.getenv(allowDegradedEnv)); strings.ToLower(v) {
	case "1", "true", "yes":
		allowed = true
	case "", "0", "false", "no":
	default:
		b.add("%s=%q: set it to 1 to serve a degraded box, or unset it", allowDegradedEnv, v)
	}
	for _, sf := range short {
		switch {
		case off:
			s.log.Warn("sandbox: turned off in the manifest ([sandbox] enabled = false): " + sf.means)
		case allowed:
			s.log.Warn("sandbox: serving degraded (allowed): " + sf.means + "; to fix: " + sf.fix)
		default:
			why := ""
			if sf.why != "" {
				why = " (" + sf.why + ")"
			}
			b.add("sandbox: %s%s. To fix: %s. To serve anyway: %s", sf.means, why, sf.fix, allowDegradedHow)
		}
	}
}

// sandboxHint adds what to do to a sandbox error the platform caused.
func sandboxHint(err error) error {
	if errors.Is(err, fs.ErrPermission) && os.Geteuid() == 0 {
		return fmt.Errorf("%w (the kit runs as root without the capabilities to give sessions their directories: "+
			"keep CAP_CHOWN, CAP_FOWNER, CAP_DAC_OVERRIDE and CAP_SETUID/CAP_SETGID when dropping capabilities, "+
			"or run the kit as a non-root user)", err)
	}
	return err
}

// probeSandbox does, once at boot, what a session's setup does to its
// directories where sessions have uids of their own (give one to a
// session uid, mode 0700; then write, read and remove a file in it as the
// kit), so that a box that cannot work at all (root without CAP_CHOWN or
// CAP_DAC_OVERRIDE, as under a pod's capabilities.drop: [ALL]) says so
// before it serves, not at every session. It takes no session uid from
// the sandbox, so it kills nothing and starts nothing.
func (s *Server) probeSandbox(b *boot, uid int) {
	dir, err := os.MkdirTemp(s.stateDir, ".probe-")
	if err != nil {
		b.add("state dir: %v", err)
		return
	}
	defer os.RemoveAll(dir)
	if err := os.Chown(dir, uid, uid); err != nil {
		b.add("sandbox: give a session its directory: %v", sandboxHint(err))
		return
	}
	p := filepath.Join(dir, "probe")
	err = os.Chmod(dir, 0o700)
	if err == nil {
		err = os.WriteFile(p, nil, 0o600)
	}
	if err == nil {
		_, err = os.ReadFile(p)
	}
	if err == nil {
		err = os.Remove(p)
	}
	if err != nil {
		b.add("sandbox: the kit cannot use a session's directory: %v", sandboxHint(err))
	}
}

// isolation is the sandbox report as /environment shows it.
func (s *Server) isolation() *protocol.Isolation {
	if s.sb == nil {
		return nil
	}
	r := s.sb.Report()
	return &protocol.Isolation{
		Active: r.Active, Inactive: r.Inactive, UIDs: r.UIDs, Cgroup: r.Cgroup, Landlock: r.Landlock, Privileges: r.Privileges,
		Limits:   protocol.IsolationLimits(r.Limits),
		Degraded: new(s.degraded),
		Gaps:     gaps(r),
		Front:    frontNote(s.sb),
	}
}

// frontNote says, for a privilege-separated kit, who serves: "" for a
// kit that does its own privileged work.
func frontNote(sb *sandbox.Sandbox) string {
	if !sb.Remote() {
		return ""
	}
	return fmt.Sprintf("uid %d, gid %d, no capabilities: the process that parses clients' and agents' bytes; a root monitor makes sessions' directories, uids, cgroups and supervisors", os.Getuid(), os.Getgid())
}

// gaps says, for each layer not in force, what that means for the box's
// users, in the light of the layers that are.
func gaps(r sandbox.Report) map[string]string {
	out := map[string]string{}
	for l := range r.Inactive {
		var m string
		switch l {
		case sandbox.LayerUsers:
			m = "sessions' processes do not each run under a uid of their own"
			if r.Separation() != "" {
				m += ", and nothing else keeps one session out of another's files and processes"
			}
		case sandbox.LayerUserNS:
			if r.Has(sandbox.LayerUsers) {
				continue // a uid per session: no user namespace needed
			}
			m = "sessions have no user namespace: without root, no mount, pid or network namespace of their own either"
		case sandbox.LayerMount:
			m = "sessions have no private view of the filesystem: they share the box's /tmp and /dev/shm, and see the rest of it as "
			if r.Has(sandbox.LayerLandlock) {
				m += "their Landlock rules let them"
			} else {
				m += "their uid may (the kit's own directories are closed to other uids by their modes)"
			}
		case sandbox.LayerPID:
			m = "sessions see every process of the box with its command line, and can signal those of their own uid; processes a command leaves behind are ended by the kit, not by the kernel"
		case sandbox.LayerNetwork:
			if r.ConfinesEgress() {
				m = "sessions share the box's network stack; Landlock and seccomp send every TCP connection to the egress proxy's port and refuse UDP, raw and packet sockets, " +
					"but Landlock's rules name ports, not hosts: a server listening on that port number elsewhere is reachable around the proxy (a network namespace per session closes this)"
			} else {
				m = "sessions reach any address the box can reach, directly: an egress policy binds only agents that use the proxy"
			}
		case sandbox.LayerCgroup:
			m = "limits.memory and limits.cpu are not enforced"
			if !r.Has(sandbox.LayerPID) {
				m += ", and a process that leaves its process group and uid can outlive its session"
			}
		case sandbox.LayerLandlock:
			m = "no Landlock domain restricts sessions' files and connections beyond what the other layers enforce"
		case sandbox.LayerSeccomp:
			m = "no seccomp filter restricts sessions' system calls"
		default:
			m = "not in force: " + r.Inactive[l]
		}
		out[l] = m
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// sessionEnv is the environment a session's agents start with: the box's
// base environment, HOME and the session's GLOVEBOX_* variables.
func (s *Server) sessionEnv(id string, dirs dirSet) []string {
	env := make([]string, 0, len(s.baseEnv)+5)
	env = append(env, s.baseEnv...)
	home := dirs.Work
	if home == "" {
		home = "/"
	}
	return append(env,
		"HOME="+home,
		"GLOVEBOX_WORK="+dirs.Work,
		"GLOVEBOX_INPUT="+dirs.Input,
		"GLOVEBOX_OUTPUT="+dirs.Output,
		"GLOVEBOX_SESSION="+id,
	)
}

// mergeEnv returns base with over's variables in place of base's of the
// same name (a C program's getenv finds the first): the proxy's CA bundle
// replaces the image's SSL_CERT_FILE, for example.
func mergeEnv(base, over []string) []string {
	if len(over) == 0 {
		return base
	}
	names := map[string]bool{}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		names[k] = true
	}
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !names[k] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

// dirSet is a session's directories.
type dirSet struct{ Work, Input, Output string }

func (d dirSet) list() []string {
	var out []string
	for _, p := range []string{d.Work, d.Input, d.Output} {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// passedEnv are the kit's own variables agents also get: what finds
// programs, speaks the user's language and trusts the image's CAs. Nothing
// secret.
var passedEnv = []string{
	"PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NIX_SSL_CERT_FILE", "FONTCONFIG_FILE", "LOCALE_ARCHIVE",
}
