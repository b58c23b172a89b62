package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor's file descriptors, as the kit passes them.
const (
	fdSpec   = 3 // the kit writes the initSpec as JSON, then closes
	fdStatus = 4 // the supervisor writes status lines
	fdListen = 5 // a unix socket on which the proxy listener is sent
)

// initSpec is what the kit tells a supervisor.
type initSpec struct {
	// Version is the kit's Version: a supervisor of another version
	// refuses the spec, and the kit refuses a supervisor that reports
	// another version when it is ready.
	Version  string       `json:"version"`
	Path     string       `json:"path"`
	Args     []string     `json:"args"`
	Env      []string     `json:"env"`
	Dir      string       `json:"dir"`
	UID      int          `json:"uid"` // -1: keep the supervisor's
	GID      int          `json:"gid"`
	Rlimits  []initRlimit `json:"rlimits,omitempty"`
	Mount    *mountSpec   `json:"mount,omitempty"`
	Net      *netSpec     `json:"net,omitempty"`
	DropCaps bool         `json:"drop_caps,omitempty"`
	// KeepPrivs leaves out no_new_privs: only for Plain sessions, which
	// run as the kit runs.
	KeepPrivs bool          `json:"keep_privs,omitempty"`
	Grace     time.Duration `json:"grace,omitempty"`
	Probe     bool          `json:"probe,omitempty"` // set up, then exit without running anything
	// Session makes the supervisor the session's: it runs commands on
	// request over fdControl (see sessionsup_linux.go).
	Session bool `json:"session,omitempty"`
	// Landlock, when set, puts the supervisor, after its setup, in a
	// Landlock domain of these rules (landlock_linux.go).
	Landlock *landlockSpec `json:"landlock,omitempty"`
	// Seccomp, when set, installs the sandbox's seccomp filter last of
	// all (seccomp_linux.go).
	Seccomp *seccompOptions `json:"seccomp,omitempty"`
}

type initRlimit struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

type mountSpec struct {
	Hide     []string   `json:"hide,omitempty"`   // covered by an empty, read-only directory
	Bind     []string   `json:"bind,omitempty"`   // writable, at the same path
	Expose   []string   `json:"expose,omitempty"` // read-only, at the same path
	Tmp      []tmpMount `json:"tmp,omitempty"`    // private tmpfs
	ReadOnly bool       `json:"read_only,omitempty"`
	Proc     bool       `json:"proc,omitempty"` // a /proc of the new pid namespace
	// Dev replaces /dev with a private one that holds only what programs
	// need (devNodes, a devpts of the namespace's own, the standard
	// links), read-only but for the devices themselves.
	Dev bool `json:"dev,omitempty"`
	// User, when set, gets an entry in the namespace's /etc/passwd and
	// /etc/group, so that getpwuid (id -un, ssh, getpass) knows the
	// session's uid.
	User *userEntry `json:"user,omitempty"`
}

type userEntry struct {
	UID  int    `json:"uid"`
	Home string `json:"home"`
}

type tmpMount struct {
	Path string `json:"path"`
	Size int64  `json:"size,omitempty"`
}

type netSpec struct {
	ProxyAddr string `json:"proxy_addr,omitempty"`
}

// MaybeSupervise runs SupervisorMain and exits when the process was
// started as a supervisor (argv[0] is InitName: the kit re-executing
// itself, or glovebox-sandbox), and does nothing otherwise. Every program
// that may serve as a sandbox's supervisor calls it first thing in main,
// before it parses flags or starts anything: the kit's binaries, a Go
// agent's main through kit.Main, and test binaries in TestMain. A program
// that does not call it never serves as a supervisor.
//
// It runs a session helper (helper_linux.go) the same way when argv[0] is
// HelperName: the helper's program is the supervisor's.
func MaybeSupervise() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case InitName:
		os.Exit(SupervisorMain())
	case HelperName:
		os.Exit(helperMain())
	}
}

// SupervisorMain is a sandbox supervisor's main: it reads the spec the kit
// hands it, sets the sandbox up, and then probes or serves the session's
// commands. It returns the process's exit code and must be the process's
// last act (a session's supervisor ends with the session). Run by hand
// (without the kit's descriptors), it says what it is and returns 2.
func SupervisorMain() int {
	if !startedByKit() {
		fmt.Fprintf(os.Stderr, "%s: the sandbox supervisor of glovebox-kit (version %s): the kit starts it, with its spec on descriptor %d; it is not run by hand\n", SupervisorName, Version(), fdSpec)
		return 2
	}
	// Privileges, no_new_privs and the bounding set are per thread: set
	// them on the thread that forks or executes the command.
	runtime.LockOSThread()
	status := os.NewFile(fdStatus, "status")
	if len(os.Args) > 1 && os.Args[1] == argUserNS {
		return execMapped(status)
	}
	fail := func(format string, args ...any) int { return failStatus(status, format, args...) }
	specFile := os.NewFile(fdSpec, "spec")
	var spec initSpec
	err := json.NewDecoder(specFile).Decode(&spec)
	if err != nil {
		return fail("read the sandbox spec: %v", err)
	}
	if v := Version(); spec.Version != v {
		return fail("the kit speaks supervisor version %q, this supervisor %q: install the %s built with this kit", spec.Version, v, SupervisorName)
	}
	// Nothing but its standard files reaches the command: not the
	// supervisor's pipes to the kit, not whatever the kit inherited.
	closeOnExecAll()
	// The kit keeps the spec pipe open while it wants the command to run:
	// its end means the kit is gone.
	kitGone := make(chan struct{})
	if spec.Session {
		go func() {
			_, _ = io.Copy(io.Discard, specFile)
			close(kitGone)
		}()
	} else {
		specFile.Close()
	}
	if err := confine(&spec); err != nil {
		return fail("%v", err)
	}
	if spec.Probe {
		fmt.Fprintln(status, "ready", Version())
		return 0
	}
	if spec.Session {
		return sessionLoop(&spec, kitGone, func() {
			fmt.Fprintln(status, "ready", Version())
			status.Close()
		})
	}
	return fail("the sandbox spec asks for neither a probe nor a session")
}

// execMapped is the first run of a supervisor cloned into a user
// namespace the kit maps once this process runs (see mapUserNS): it waits
// for the kit's byte that says the mapping is written, then executes the
// supervisor again, which is then root in the namespace, with the
// capabilities its setup needs. It returns only on failure.
func execMapped(status *os.File) int {
	specFile := os.NewFile(fdSpec, "spec")
	if _, err := specFile.Read(make([]byte, 1)); err != nil {
		fmt.Fprintf(status, "error 0 wait for the user namespace's mapping: %s\n", err)
		return 125
	}
	err := syscall.Exec("/proc/self/exe", []string{InitName}, os.Environ())
	// Reached only on failure: until then, the files' finalizers must
	// not close the descriptors the next program gets.
	runtime.KeepAlive(specFile)
	fmt.Fprintf(status, "error 0 execute the supervisor again in its user namespace: %s\n", err)
	return 125
}

// failStatus writes the error line the kit reads on status and returns
// the supervisor's exit code. The line carries the errno of the last
// argument that is one, so that the kit can tell "not found" from
// "permission denied".
func failStatus(status *os.File, format string, args ...any) int {
	errno := 0
	for _, a := range args {
		var e syscall.Errno
		if err, ok := a.(error); ok && errors.As(err, &e) {
			errno = int(e)
		}
	}
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(status, "error %d %s\n", errno, strings.ReplaceAll(msg, "\n", " "))
	return 125
}

// confine sets up what spec asks for around this thread and what it will
// fork: mounts, network, resource limits, privileges, Landlock, seccomp.
func confine(spec *initSpec) error {
	if spec.Mount != nil {
		if err := setupMounts(spec.Mount); err != nil {
			return err
		}
	}
	if spec.Net != nil {
		if err := setupNet(spec.Net); err != nil {
			return err
		}
	}
	if err := setRlimits(spec.Rlimits); err != nil {
		return err
	}
	if !spec.KeepPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	if spec.DropCaps {
		if err := dropCapabilities(spec.UID, !spec.KeepPrivs); err != nil {
			return err
		}
	}
	// Out of the commands' reach through /proc (mem, environ) even where
	// they run under its uid: only this thread is in the session's
	// Landlock domain, the runtime's others are not. Its commands are
	// dumpable again once they execute.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the supervisor non-dumpable: %w", err)
	}
	// Landlock and seccomp come last: the setup above needs what they
	// refuse. Both apply to what this thread forks from now on.
	if spec.Landlock != nil {
		if err := landlockRestrict(spec.Landlock); err != nil {
			return err
		}
	}
	if spec.Seccomp != nil {
		if err := seccompInstall(*spec.Seccomp); err != nil {
			return err
		}
	}
	return nil
}

// setRlimits lowers the process's resource limits to rls.
func setRlimits(rls []initRlimit) error {
	for _, rl := range rls {
		lim := syscall.Rlimit{Cur: rl.Cur, Max: rl.Max}
		// Lowering needs no privilege; raising past the hard limit needs
		// CAP_SYS_RESOURCE, which containers often lack: never raise.
		var cur syscall.Rlimit
		if syscall.Getrlimit(rl.Resource, &cur) == nil {
			lim.Max = min(lim.Max, cur.Max)
			lim.Cur = min(lim.Cur, lim.Max)
		}
		if err := syscall.Setrlimit(rl.Resource, &lim); err != nil {
			return fmt.Errorf("setrlimit %d: %w", rl.Resource, err)
		}
	}
	return nil
}

// closeOnExecAll marks every open file descriptor above 2 close-on-exec.
func closeOnExecAll() {
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// dropCapabilities empties the capability bounding set, so that nothing
// the command executes can gain a capability. Emptying it needs
// CAP_SETPCAP, which hardened containers drop: without it the set stays
// as it is where that cannot matter, the commands running under a uid
// other than root (uid >= 0 is the uid they are given, -1 the
// supervisor's own) with no_new_privs (nnp) and no capability in any of
// their sets, which this makes sure of. A command running as root would
// still own every file root owns: that fails.
func dropCapabilities(uid int, nnp bool) error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		// A capability already out of the set needs no dropping (and
		// the kernel refuses the drop without CAP_SETPCAP all the same).
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && in == 0 {
			continue
		}
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if err == nil || errors.Is(err, syscall.EINVAL) {
			continue
		}
		if !errors.Is(err, syscall.EPERM) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
		runsAs := uid
		if runsAs < 0 {
			runsAs = os.Geteuid()
		}
		if runsAs == 0 || !nnp {
			return fmt.Errorf("drop capability %d from the bounding set: %w: the kit lacks CAP_SETPCAP and the session's commands would run as root; give the kit CAP_SETPCAP, or CAP_SETUID, CAP_SETGID, CAP_CHOWN and CAP_FOWNER for a uid per session", c, err)
		}
		return clearCapabilities(uid < 0)
	}
	return nil
}

// setupNet brings loopback up in the new network namespace and, for an
// egress proxy, listens inside it and hands the listener to the kit.
func setupNet(n *netSpec) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring loopback up: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("bring loopback up: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring loopback up: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring loopback up: %w", err)
	}
	if n.ProxyAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.ProxyAddr)
	if err != nil {
		return fmt.Errorf("listen for the egress proxy on %s: %w", n.ProxyAddr, err)
	}
	lf, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		return fmt.Errorf("egress listener: %w", err)
	}
	defer lf.Close()
	if err := unix.Sendmsg(fdListen, []byte{0}, unix.UnixRights(int(lf.Fd())), nil, 0); err != nil {
		return fmt.Errorf("hand the egress listener to the kit: %w", err)
	}
	unix.Close(fdListen)
	return nil
}

// lookPath finds file in the PATH of env, as the command would.
func lookPath(file string, env []string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH", file)
}
