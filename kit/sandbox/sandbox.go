// Package sandbox starts, limits and kills a box's agent processes.
//
// Every process the kit starts on an agent's behalf (the exec agent's
// shell, an ACP agent, an ACP agent's terminals) starts here, inside its
// session's sandbox. The threat model is the box's: whatever a prompt runs
// is an attacker. A sandbox is a stack of layers, each applied where the
// platform allows it and reported as in force or not:
//
//   - users: each session's processes run under a uid and gid of their
//     own, taken from a configured range, with supplementary groups
//     cleared; their directories are theirs alone (mode 0700; or mode
//     02770 with the group of an unprivileged front, Config.FrontGID,
//     which no session is in). Needs the
//     kit to run as root. Without root, a user namespace maps the kit's uid
//     to root inside the sandbox, with no capabilities.
//   - privileges: no_new_privs, an empty capability bounding set, and
//     rlimits on processes, open files and file size. Always on. Where
//     the kit may not empty the bounding set (no CAP_SETPCAP, as in
//     hardened pods), it stays only while that is harmless: sessions'
//     processes run under a uid other than root with no capability in
//     any set, and Report.Privileges says so; a command that would run as
//     root is refused.
//   - mount: a mount namespace in which the image is read-only, the kit's
//     state and every other session's directories do not exist, and /tmp
//     and /dev/shm are private.
//   - pid: a pid namespace whose init is the sandbox's own supervisor: the
//     kit cannot be seen or signalled, and when the session's last
//     running command exits, every process it left behind dies.
//   - network: a network namespace with loopback only; where the box has
//     an egress proxy, its listener is made inside the namespace and
//     handed to the kit, so the proxy is the only way out.
//   - cgroup: a cgroup per session (v2, or the v1 memory, pids and cpu
//     controllers) carrying limits.memory, limits.cpu and a pids cap, and
//     used to kill every process of the session when it ends.
//   - landlock: a Landlock domain per session, applied by its supervisor
//     after its setup, in every mode where the kernel has Landlock (with
//     namespaces too, as defense in depth; not with the sandbox off). The
//     session reads and executes the image but the hidden paths, writes
//     its own directories (and /tmp, /dev/shm where they are its private
//     tmpfs, else a TMPDIR of its own under Config.TmpRoot), reads /proc
//     and /sys, and uses /dev/null, zero, full, random, urandom, tty, ptmx
//     and /dev/pts. Landlock cannot refuse below a path it allows, so the
//     ancestors of hidden paths are not allowed themselves: their other
//     entries, as listed when the session's supervisor starts, are
//     (without a mount namespace an ancestor such as / cannot be listed;
//     with one, whose hidden paths are empty, every directory can). From
//     ABI 4, a session with
//     ConfineNet and no network namespace connects over TCP to its
//     EgressPort only (on any address: Landlock knows ports, not hosts)
//     and binds no TCP port: without a network namespace a listening
//     port would be the box's, reachable around the proxy. From ABI 6,
//     signals and abstract unix sockets stay within the domain.
//   - seccomp: a filter, installed by the supervisor last, in every mode
//     (with the sandbox off too; not in a Plain session), refusing what
//     LayerSeccomp lists.
//
// Processes start through a small supervisor: cmd/glovebox-sandbox
// ([SupervisorName]) where it is installed beside the running program and
// trusted, else the program's own binary re-executed, both under the name
// [InitName]. It sets up the namespaces it was cloned into, joins nothing
// the kit did not prepare and drops its privileges. [New] chooses once,
// and the kit and the supervisor check each other's [Version]. One
// supervisor serves a whole session, with namespaces or without: started with its first command (or ahead of it, by
// [Session.Warm]), it holds the session's namespaces, mounts, network,
// rlimits and privileges, and forks and executes each command on request,
// so that a command costs a fork/exec. The session's commands share its
// private /tmp; when the last running one ends, whatever they left in the
// pid namespace is ended. A program serves as that supervisor when its
// main calls [MaybeSupervise] first thing (the kit's binaries, gbx, and a
// Go agent's main through kit.Main do; so do test binaries, in TestMain).
//
// Privilege separation: where the kit runs as root, a [Monitor] keeps
// root and a front, which parses every client's and agent's bytes, runs
// unprivileged with a sandbox from [Dial]: the same API, whose privileged
// acts the monitor does on the front's request, by session id, through a
// narrow, strictly decoded interface (monitor_linux.go says what each op
// may do and why each refusal exists). A session's directories are made
// under Config.SessionRoots by [Sandbox.OpenSession], in both modes, through
// directories the sandbox holds open (dirs_linux.go).
package sandbox

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// InitName is argv[0] of a sandbox supervisor process.
const InitName = "glovebox-sandbox-init"

// SupervisorName is the file name of the small supervisor binary
// (cmd/glovebox-sandbox) that a kit uses when it is installed beside the
// kit's own executable.
const SupervisorName = "glovebox-sandbox"

// Defaults.
const (
	DefaultUIDBase  = 200000
	DefaultUIDCount = 10000
	DefaultPids     = 512
	DefaultFiles    = 4096
	DefaultGrace    = 2 * time.Second
	// DefaultProxyAddr is where an egress proxy listens inside a session's
	// network namespace.
	DefaultProxyAddr = "127.0.0.1:3128"
)

// Config is what a box asks of its sandbox. The zero value asks for every
// layer with the default limits.
type Config struct {
	// Off turns every optional layer off: processes run as the kit's
	// user in the kit's namespaces, with only no_new_privs and rlimits.
	Off bool
	// NoUsers, NoMount, NoPID, NoNetwork, NoCgroup, NoLandlock and
	// NoSeccomp turn single layers off.
	NoUsers, NoMount, NoPID, NoNetwork, NoCgroup, NoLandlock, NoSeccomp bool
	// UIDBase and UIDCount are the uids (and gids) sessions get: one each,
	// from UIDBase to UIDBase+UIDCount-1.
	UIDBase, UIDCount int
	// Hide lists directories no sandboxed process may see: the kit's state
	// directory and the parents of the sessions' directories. With a mount
	// namespace they are covered by empty directories; without one they
	// are made root-only (mode 0700, or 0711 for a parent sessions must
	// traverse).
	Hide []string
	// Expose lists directories under hidden ones that sandboxed processes
	// may read: bound read-only into the mount namespace at the same path
	// (the egress proxy's CA bundle).
	Expose []string
	// SharedDirs is for boxes whose sessions share their directories: the
	// sessions then share one uid (UIDBase), each still in its own
	// namespaces and cgroup.
	SharedDirs bool
	// Limits are enforced per session.
	Limits Limits
	// Grace is how long a process that should stop has between SIGTERM and
	// SIGKILL. Default 2s.
	Grace time.Duration
	// TmpRoot, where sessions have no mount namespace (so no private
	// /tmp), holds a private temporary directory per session,
	// TmpRoot/<session id>: owned by the session's uid, mode 0700,
	// removed with the session, and its commands' TMPDIR. Empty: none.
	TmpRoot string
	// SessionRoots are where OpenSession makes each session's
	// directories, in this order (the box's work, input and output
	// mounts; "" for one the box has not): a directory named after the
	// session under each, or with SharedDirs the roots themselves. The
	// sandbox holds them open from New on (see dirs_linux.go).
	SessionRoots []string
	// FrontGID, when above 0, is the group of an unprivileged front that
	// reads and writes sessions' directories through its group: they are
	// then group FrontGID, mode 02770, instead of mode 0700 (see
	// Monitor). Never the gid of a session.
	FrontGID int
}

// Limits are a session's resource limits. Zero means the default where
// one is named, else no limit.
type Limits struct {
	Memory int64   // bytes of memory (cgroup)
	CPU    float64 // cores (cgroup)
	Pids   int     // processes and threads (cgroup; RLIMIT_NPROC with a uid of its own). Default 512.
	Files  int     // open files per process (RLIMIT_NOFILE). Default 4096.
	Disk   int64   // bytes in the session's directories and its /tmp (RLIMIT_FSIZE per file; checked by the kit per prompt)
}

// DefaultTmpSize bounds a session's private /tmp and /dev/shm where no
// limit is smaller.
const DefaultTmpSize = 1 << 30

// tmpSize is the size of each of a session's private /tmp and /dev/shm
// (tmpfs, in memory): the disk limit, the memory limit, or
// DefaultTmpSize, whichever is smallest. Their pages count against the
// session's memory cgroup, and their use against limits.disk (the kit
// adds it to the session's directories), so a full /tmp answers ENOSPC
// before the memory limit's OOM killer would.
func (l Limits) tmpSize() int64 {
	size := int64(DefaultTmpSize)
	for _, lim := range []int64{l.Disk, l.Memory} {
		if lim > 0 && lim < size {
			size = lim
		}
	}
	return size
}

// Layer names, as reported.
const (
	LayerUsers      = "users"
	LayerUserNS     = "userns"
	LayerPrivileges = "privileges"
	LayerMount      = "mount"
	LayerPID        = "pid"
	LayerNetwork    = "network"
	LayerCgroup     = "cgroup"
	// LayerLandlock: the session's processes are in a Landlock domain of
	// their own: they reach only their own directories, a read-only image
	// and the devices programs need; they cannot ptrace or read the
	// memory and environment of any process outside the domain (the kit,
	// other sessions); from ABI 4 TCP connects go only to the session's
	// egress port, from ABI 6 signals and abstract unix sockets stay in
	// the domain. Needs no privilege.
	LayerLandlock = "landlock"
	// LayerSeccomp: a seccomp filter refuses what no agent needs and
	// attackers use: new namespaces, mount, ptrace, keyctl, bpf,
	// perf_event_open, io_uring, TIOCSTI, raw and packet sockets, stream
	// protocols but TCP, and UDP and TCP Fast Open where egress goes
	// through the proxy. Needs no privilege.
	LayerSeccomp = "seccomp"
)

// Report says which layers are in force, and why the others are not, in
// the shape of the protocol's Isolation, as /environment shows it. (The
// package imports nothing that net/http does: a supervisor's init runs
// before the kit's heavier packages initialise.)
type Report struct {
	Active   []string          `json:"active"`
	Inactive map[string]string `json:"inactive,omitempty"`
	UIDs     string            `json:"uids,omitempty"`
	Cgroup   string            `json:"cgroup,omitempty"`
	// Landlock is the Landlock ABI version in force with the landlock
	// layer, 0 without it.
	Landlock int `json:"landlock,omitempty"`
	// Privileges says what the privileges layer holds where it is not
	// all of it (the capability bounding set cannot be emptied), "" when
	// it is.
	Privileges string       `json:"privileges,omitempty"`
	Limits     ReportLimits `json:"limits"`
}

// Separation says why the layers in force do not keep sessions apart
// (one session reading, writing or planting another's files, reading its
// processes' memory or environment), or "" when they do: each session
// has a uid of its own; or a user namespace with a mount and a pid
// namespace of its own; or a Landlock domain of its own.
func (r Report) Separation() string {
	switch {
	case r.Has(LayerUsers), r.Has(LayerLandlock):
		return ""
	case r.Has(LayerUserNS) && r.Has(LayerMount) && r.Has(LayerPID):
		return ""
	}
	return "every session runs as the kit's own uid with no namespace or Landlock domain of its own: a prompt can read and write other sessions' files and the kit's state"
}

// ConfinesEgress reports whether the layers in force make the egress
// proxy a session's only way out: a network namespace of its own, or
// Landlock's TCP rules (ABI 4 and later) with the seccomp filter that
// refuses UDP, raw and packet sockets.
func (r Report) ConfinesEgress() bool {
	return r.Has(LayerNetwork) || (r.Landlock >= 4 && r.Has(LayerSeccomp))
}

// ReportLimits are the limits in force; zero is none.
type ReportLimits struct {
	Memory int64   `json:"memory,omitempty"`
	CPU    float64 `json:"cpu,omitempty"`
	Pids   int     `json:"pids,omitempty"`
	Files  int     `json:"files,omitempty"`
	Disk   int64   `json:"disk,omitempty"`
}

// Has reports whether layer is in force.
func (r Report) Has(layer string) bool { return slices.Contains(r.Active, layer) }

// String is the report as one line, for the boot log.
func (r Report) String() string {
	var b strings.Builder
	b.WriteString("sandbox: ")
	if len(r.Active) == 0 {
		b.WriteString("no layer in force")
	} else {
		b.WriteString(strings.Join(r.Active, ", "))
	}
	if len(r.Inactive) > 0 {
		keys := slices.Sorted(maps.Keys(r.Inactive))
		b.WriteString("; not in force: ")
		for i, k := range keys {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s (%s)", k, r.Inactive[k])
		}
	}
	if r.Privileges != "" {
		b.WriteString("; privileges: " + r.Privileges)
	}
	return b.String()
}

// Spec is a command to run in a session's sandbox.
type Spec struct {
	Path string   // the program; looked up in PATH from Env when it has no slash
	Args []string // argv, Args[0] included
	Dir  string
	Env  []string
	// Stdin, Stdout and Stderr are given to the command; nil is /dev/null.
	Stdin, Stdout, Stderr *os.File

	// The session helper's (helper_linux.go): the program, run from a
	// descriptor instead of Path; and aside (ctlMsg.Aside).
	exe   *os.File
	aside bool
}

// ExitStatus is how a sandboxed command ended.
type ExitStatus struct {
	Code   int            // the exit code, or 128+signal
	Signal syscall.Signal // the signal that ended it, or 0
	// Limit names the sandbox limit the session hit while the command
	// ran ("memory", "pids", "disk"), if any.
	Limit string
}

// String describes the status as a shell would.
func (s ExitStatus) String() string {
	out := "exit status " + strconv.Itoa(s.Code)
	if s.Signal != 0 {
		out = "killed by " + SignalName(s.Signal)
	}
	if s.Limit != "" {
		out += " (" + LimitMessage(s.Limit) + ")"
	}
	return out
}

// LimitMessage explains a limit a session hit.
func LimitMessage(limit string) string {
	switch limit {
	case "memory":
		return "the session reached its memory limit (limits.memory)"
	case "pids":
		return "the session reached its process limit (sandbox.pids)"
	case "disk":
		return "a file reached the session's disk limit (limits.disk)"
	}
	return "the session reached its " + limit + " limit"
}

// StatusOf is the status of a process that ended with ws: its exit code,
// or 128 plus the signal that killed it, as a shell reports it.
func StatusOf(ws syscall.WaitStatus) ExitStatus {
	if ws.Signaled() {
		return ExitStatus{Code: 128 + int(ws.Signal()), Signal: ws.Signal()}
	}
	return ExitStatus{Code: ws.ExitStatus()}
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGABRT: "SIGABRT", syscall.SIGALRM: "SIGALRM", syscall.SIGBUS: "SIGBUS",
	syscall.SIGFPE: "SIGFPE", syscall.SIGHUP: "SIGHUP", syscall.SIGILL: "SIGILL",
	syscall.SIGINT: "SIGINT", syscall.SIGKILL: "SIGKILL", syscall.SIGPIPE: "SIGPIPE",
	syscall.SIGQUIT: "SIGQUIT", syscall.SIGSEGV: "SIGSEGV", syscall.SIGTERM: "SIGTERM",
	syscall.SIGTRAP: "SIGTRAP", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
}

// SignalName returns the conventional name of sig, such as "SIGKILL".
func SignalName(sig syscall.Signal) string {
	if name, ok := signalNames[sig]; ok {
		return name
	}
	return "SIG" + strconv.Itoa(int(sig))
}
