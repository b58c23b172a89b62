package kit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Privilege separation (see kit/sandbox's Monitor for the boundary). A
// kit started as root, whose sandbox gives each session a uid of its own,
// splits in two as it boots:
//
//   - the monitor, this process, stays root: it reads the manifest, opens
//     the sandbox (its probes need root), gives the state directory to the
//     kit user and the sessions' roots to the kit user's group, binds the
//     listening port (so that ports below 1024 work), and starts the
//     front; then it only serves the front's requests (sandbox.Monitor),
//     forwards SIGTERM and SIGINT to it, and exits with its status;
//   - the front, the same executable started again with the same
//     arguments and environment, drops to the kit user (kitUser: the
//     state directory's owner in the images, else the uid and gid just
//     below the sessions' range; no supplementary groups, no capability
//     in any set, no_new_privs) before it reads anything, and serves: every
//     HTTP, WebSocket, JSON and upload parser, the egress proxy with its CA
//     key and brokered secrets, and the agents that run in the kit's own
//     process run there.
//
// Under a container's init (PID 1, init_linux.go) the chain is init,
// monitor, front: the init stays the reaper of whatever agents orphan.
// GLOVEBOX_PRIVSEP=off keeps a root kit in one process.

// Variables the monitor sets for the front.
const (
	privsepEnv       = "GLOVEBOX_PRIVSEP"           // "off" keeps a root kit in one process
	privsepFDEnv     = "GLOVEBOX_PRIVSEP_FD"        // the front's socket to the monitor
	privsepListenEnv = "GLOVEBOX_PRIVSEP_LISTEN_FD" // the listener the monitor bound
	privsepUserEnv   = "GLOVEBOX_PRIVSEP_USER"      // uid:gid the front runs as
	privsepDropEnv   = "GLOVEBOX_PRIVSEP_DROPPED"   // set once the front has dropped
	// The manifest as the monitor read it: the front need not be able to
	// read the file.
	privsepManifestEnv = "GLOVEBOX_PRIVSEP_MANIFEST_FD"
)

// front is what a front inherits from its monitor.
type front struct {
	monitor  *os.File
	ln       net.Listener
	manifest []byte
}

// frontOf returns, in a front, what its monitor handed it, after making
// sure the process runs as the kit user with no privilege. The monitor
// starts it so (startDropped); a front started still root drops and
// executes itself again (dropPrivileges), and frontOf then returns only
// on failure. Elsewhere it returns nil.
func frontOf(env Env) (*front, error) {
	fdStr := env.getenv(privsepFDEnv)
	if fdStr == "" {
		return nil, nil
	}
	uid, gid, err := parseUser(env.getenv(privsepUserEnv))
	if err != nil {
		return nil, err
	}
	if env.getenv(privsepDropEnv) == "" {
		return nil, dropPrivileges(uid, gid)
	}
	if os.Geteuid() != uid || os.Getegid() != gid || os.Geteuid() == 0 {
		return nil, fmt.Errorf("privilege separation: the front runs as %d:%d, want %d:%d", os.Geteuid(), os.Getegid(), uid, gid)
	}
	monFd, err1 := strconv.Atoi(fdStr)
	lnFd, err2 := strconv.Atoi(env.getenv(privsepListenEnv))
	manFd, err3 := strconv.Atoi(env.getenv(privsepManifestEnv))
	if err1 != nil || err2 != nil || err3 != nil || monFd < 3 || lnFd < 3 || manFd < 3 {
		return nil, fmt.Errorf("privilege separation: %s, %s and %s are not descriptors", privsepFDEnv, privsepListenEnv, privsepManifestEnv)
	}
	for _, fd := range []int{monFd, lnFd, manFd} {
		unix.CloseOnExec(fd)
	}
	mf := os.NewFile(uintptr(manFd), "manifest")
	manifest, err := readAllAt(mf)
	mf.Close()
	if err != nil {
		return nil, fmt.Errorf("privilege separation: the manifest: %w", err)
	}
	lf := os.NewFile(uintptr(lnFd), "listener")
	ln, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		return nil, fmt.Errorf("privilege separation: the listener: %w", err)
	}
	return &front{monitor: os.NewFile(uintptr(monFd), "monitor"), ln: ln, manifest: manifest}, nil
}

// parseUser reads "uid:gid".
func parseUser(s string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(s, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if !ok || err1 != nil || err2 != nil || uid <= 0 || gid <= 0 {
		return 0, 0, fmt.Errorf("privilege separation: %s=%q is not uid:gid", privsepUserEnv, s)
	}
	return uid, gid, nil
}

// dropPrivileges makes the process the kit user with no privilege and
// executes it again: the capability bounding set and no_new_privs are
// per thread, so they are set on this thread, which then executes the
// program, whose every thread inherits them. It returns only on failure.
// (The monitor starts its front dropped already, startDropped; this is
// for a front started some other way.)
func dropPrivileges(uid, gid int) error {
	runtime.LockOSThread() // never unlocked: the thread executes or fails
	if err := dropBounding(); err != nil {
		return err
	}
	// Every thread: Go applies these to all of them.
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("privilege separation: setgroups: %w", err)
	}
	if err := syscall.Setgid(gid); err != nil {
		return fmt.Errorf("privilege separation: setgid %d: %w", gid, err)
	}
	if err := syscall.Setuid(uid); err != nil {
		return fmt.Errorf("privilege separation: setuid %d: %w", uid, err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("privilege separation: no_new_privs: %w", err)
	}
	f, err := envFile(append(os.Environ(), privsepDropEnv+"=1"))
	if err != nil {
		return fmt.Errorf("privilege separation: %w", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
		return fmt.Errorf("privilege separation: %w", err)
	}
	err = syscall.Exec("/proc/self/exe", os.Args, []string{envFDVar + "=" + strconv.Itoa(int(f.Fd()))})
	f.Close()
	return fmt.Errorf("privilege separation: execute the front again: %w", err)
}

// dropBounding empties the calling thread's capability bounding set.
func dropBounding() error {
	for c := 0; c <= lastCap(); c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, syscall.EPERM) {
			// No CAP_SETPCAP (a container dropped it): the set stays,
			// harmless to a uid other than root with no_new_privs and
			// no capability in any other set.
			break
		}
		if err != nil && !errors.Is(err, syscall.EINVAL) {
			return fmt.Errorf("privilege separation: drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}

// startDropped starts the front as uid:gid with no privilege, as
// dropPrivileges would leave it, without the second start of the kit's
// binary that costs: an OS thread of its own empties its capability
// bounding set and sets no_new_privs (both per thread, and copied to the
// child it forks), and the child takes the kit user's uid, gid and no
// groups before it executes. That thread never runs anything else: its
// goroutine ends locked to it, and the runtime ends the thread.
func startDropped(cmd *exec.Cmd, uid, gid int) error {
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked
		if err := dropBounding(); err != nil {
			errc <- err
			return
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			errc <- fmt.Errorf("privilege separation: no_new_privs: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}

// lastCap is the highest capability the kernel knows.
func lastCap() int {
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return 63
}

// monitorPlan is what a monitor derives from the manifest and options,
// as the front's boot does: the sandbox's config and the state directory.
type monitorPlan struct {
	cfg      sandbox.Config
	manifest []byte // as read, for the front
	stateDir string
	uid, gid int // the kit user's
}

// giveTree gives the directory dir and everything below it but skip to
// uid:gid. It runs as root over a tree an earlier front wrote, so it
// works by descriptor: each entry is opened relative to its directory's
// descriptor without following a symbolic link (a link is given itself,
// never what it names), checked and changed through that descriptor, so
// a link or rename swapped in meanwhile redirects nothing. A file with
// more than one link is left to its owner: the front may have linked a
// file from elsewhere.
func giveTree(dir, skip string, uid, gid int, log *slog.Logger) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	return giveDir(fd, dir, skip, uid, gid, log)
}

// giveDir is giveTree for the directory open as fd, named path; it closes
// fd.
func giveDir(fd int, path, skip string, uid, gid int, log *slog.Logger) error {
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := unix.Fchownat(fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	names, err := f.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, name := range names {
		child := filepath.Join(path, name)
		if child == skip {
			continue
		}
		cfd, err := unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", child, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(cfd, &st); err != nil {
			unix.Close(cfd)
			return fmt.Errorf("%s: %w", child, err)
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			unix.Close(cfd)
			dfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("%s: %w", child, err)
			}
			if err := giveDir(dfd, child, skip, uid, gid, log); err != nil {
				return err
			}
			continue
		case st.Nlink > 1:
			log.Warn("privilege separation: a file in the state directory with several links is left to its owner", "file", child)
		case int(st.Uid) != uid || int(st.Gid) != gid:
			err = unix.Fchownat(cfd, "", uid, gid, unix.AT_EMPTY_PATH)
		}
		unix.Close(cfd)
		if err != nil {
			return fmt.Errorf("%s: %w", child, err)
		}
	}
	return nil
}

// planMonitor reads the manifest as boot does and plans the monitor; nil
// when this kit does its own privileged work: it does not run as root,
// privilege separation is off, the sandbox is off, or the manifest has a
// problem (the kit's boot reports it).
func planMonitor(env Env, fl *flags, log *slog.Logger) *monitorPlan {
	if os.Geteuid() != 0 || env.getenv(privsepEnv) == "off" {
		return nil
	}
	data, err := os.ReadFile(fl.manifest)
	if err != nil {
		return nil
	}
	man, err := protocol.ParseManifest(data)
	if err != nil || man.Check() != nil {
		return nil
	}
	if sb := man.Sandbox; sb != nil && (sb.Enabled != nil && !*sb.Enabled || sb.Users != nil && !*sb.Users) {
		return nil
	}
	for _, k := range sortedKeys(man.FS) {
		if man.FS[k].Writable && !slices.Contains(sessionMounts, k) {
			// The front's boot needs it writable, and it is no session's
			// to give: the kit keeps doing its own privileged work.
			log.Warn("privilege separation is off: the manifest declares the writable mount fs." + k + ", which only work, input and output may be under separation")
			return nil
		}
	}
	mounts, real := map[string]string{}, map[string]string{}
	for _, k := range sessionMounts {
		mt, ok := man.FS[k]
		if !ok || !filepath.IsAbs(filepath.FromSlash(mt.Path)) {
			continue
		}
		p := hostPath(fl.root, mt.Path)
		if os.MkdirAll(p, 0o755) != nil {
			return nil
		}
		mounts[k] = p
		if r, err := filepath.EvalSymlinks(p); err == nil {
			real[k] = r
		}
	}
	state := fl.stateDir
	if state == "" {
		state = DefaultStateDir
	}
	stateDir := hostPath(fl.root, state)
	if os.MkdirAll(stateDir, 0o755) != nil {
		return nil
	}
	shared := man.Sessions != nil && man.Sessions.SharedDirs
	cfg := sandboxSetup(man, mounts, real, stateDir, shared)
	uid, gid := kitUser(stateDir, cfg)
	cfg.FrontGID = gid
	plan := &monitorPlan{cfg: cfg, manifest: data, stateDir: stateDir, uid: uid, gid: gid}
	for _, dir := range append([]string{stateDir}, cfg.SessionRoots...) {
		if dir == "" {
			continue
		}
		if blocked := unreachable(dir, plan.uid, plan.gid); blocked != "" {
			log.Warn("privilege separation is off: the kit user cannot reach "+dir+": "+blocked+
				" is closed to it; make it traversable (chmod o+x), or set "+privsepEnv+"=off to silence this", "uid", plan.uid)
			return nil
		}
	}
	return plan
}

// kitUser is the user the front runs as: the owner of the state
// directory where that is neither root nor a session's uid (the images'
// glovebox user, 10001, which owns it and the sessions' roots), else the
// uid and gid just below the sessions' range. Never a session's.
func kitUser(stateDir string, cfg sandbox.Config) (uid, gid int) {
	base, count := cfg.UIDBase, cfg.UIDCount
	if base <= 0 {
		base = sandbox.DefaultUIDBase
	}
	if count <= 0 {
		count = sandbox.DefaultUIDCount
	}
	var st unix.Stat_t
	if unix.Stat(stateDir, &st) == nil && st.Uid != 0 && st.Gid != 0 {
		session := func(id uint32) bool { return int(id) >= base && int(id) < base+count }
		if !session(st.Uid) && !session(st.Gid) {
			return int(st.Uid), int(st.Gid)
		}
	}
	return base - 1, base - 1
}

// unreachable returns the first directory on the way to dir (its
// ancestors, not dir itself) that uid and gid may not traverse, or "".
func unreachable(dir string, uid, gid int) string {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return p
		}
		var bit uint32 = 0o001
		switch {
		case int(st.Uid) == uid:
			bit = 0o100
		case int(st.Gid) == gid:
			bit = 0o010
		}
		if st.Mode&bit == 0 {
			return p
		}
		if p == "/" || p == "." {
			return ""
		}
	}
}

// prepare opens the sandbox and gives the front what it writes: nil
// (and nothing changed but the probes) when the sandbox gives sessions no
// uid of their own, where the front could not be kept from them.
func (p *monitorPlan) prepare(log *slog.Logger) (*sandbox.Sandbox, error) {
	if err := os.RemoveAll(p.cfg.TmpRoot); err != nil {
		return nil, fmt.Errorf("state dir: remove %s: %w", p.cfg.TmpRoot, err)
	}
	sb, err := sandbox.New(p.cfg, log)
	if err != nil {
		return nil, err
	}
	if !sb.Report().Has(sandbox.LayerUsers) {
		sb.Close()
		return nil, nil
	}
	// The state directory is the front's; the sessions' TmpRoot in it,
	// which the sandbox made and holds, stays root's.
	if err := giveTree(p.stateDir, p.cfg.TmpRoot, p.uid, p.gid, log); err != nil {
		sb.Close()
		return nil, fmt.Errorf("state dir: give it to the kit user: %w", err)
	}
	// The sessions' roots: the front makes no directory there, but its
	// boot checks it may write them, and sessions traverse them (0731);
	// shared, they are the sessions' directories (02770). Those the kit
	// user owns (an image's) stay as they are.
	for _, r := range p.cfg.SessionRoots {
		var st unix.Stat_t
		if r == "" || unix.Stat(r, &st) == nil && int(st.Uid) == p.uid && !p.cfg.SharedDirs {
			continue
		}
		mode := os.FileMode(0o731)
		if p.cfg.SharedDirs {
			mode = 0o770 | os.ModeSetgid
		}
		err := os.Chown(r, -1, p.gid)
		if err == nil {
			err = os.Chmod(r, mode)
		}
		if err != nil {
			sb.Close()
			return nil, fmt.Errorf("sandbox: give %s to the kit user's group: %w", r, err)
		}
	}
	return sb, nil
}

// runMonitor runs the monitor of a privilege-separated kit: it starts
// the front and serves it until it exits, and returns its status (nil
// for 0, an *ExitStatusError else). handled is false where the kit does
// its own privileged work (planMonitor, prepare), and run goes on.
func runMonitor(ctx context.Context, env Env, fl *flags) (handled bool, err error) {
	handler, err := NewLogHandler(env.Stderr, env.getenv("GLOVEBOX_LOG"), env.getenv("GLOVEBOX_LOG_FORMAT"))
	if err != nil {
		return false, nil // the kit's boot reports it
	}
	log := slog.New(handler)
	plan := planMonitor(env, fl, log)
	if plan == nil {
		return false, nil
	}
	sb, err := plan.prepare(log)
	if err != nil {
		fmt.Fprintf(env.Stderr, "glovebox-kit: %v\n", err)
		return true, &BootError{Problems: []string{err.Error()}}
	}
	if sb == nil {
		return false, nil
	}
	defer sb.Close()
	port, err := listenPort(env.getenv)
	if err != nil {
		return false, nil // the kit's boot reports it
	}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		fmt.Fprintf(env.Stderr, "glovebox-kit: listen on port %d: %v\n", port, err)
		return true, &BootError{Problems: []string{err.Error()}}
	}
	lnFile, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		return true, fmt.Errorf("listener: %w", err)
	}
	return true, serveFront(ctx, env, plan, sb, lnFile, log)
}

// serveFront starts the front with the listener and one end of a socket
// pair, serves the monitor on the other end, forwards SIGTERM and SIGINT
// (and ctx's end, as SIGTERM) to the front, and returns its status once
// it and every session it had open are gone.
func serveFront(ctx context.Context, env Env, plan *monitorPlan, sb *sandbox.Sandbox, lnFile *os.File, log *slog.Logger) error {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	cmd, monEnd, err := startFront(env, plan, lnFile)
	if err != nil {
		return err
	}
	log.Info("privilege separation: the front serves as the kit user", "uid", plan.uid, "gid", plan.gid, "pid", cmd.Process.Pid)
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := sandbox.NewMonitor(sb).Serve(monEnd); err != nil {
			log.Error("privilege separation: the monitor cannot serve the front", "err", err)
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// One signal may end ctx too (a main's signal.NotifyContext): it is
	// passed on once, from sigs, since the front cuts its drain at a
	// second. os/signal sends it to each channel in turn, so ctx may end
	// before sigs holds it: ctx's cause tells it from an end of ctx that
	// no signal of ours caused, which is passed on as SIGTERM.
	done := ctx.Done()
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-done:
			done = nil
			if !causedBy(ctx, syscall.SIGTERM, syscall.SIGINT) {
				_ = cmd.Process.Signal(syscall.SIGTERM)
			}
		case werr := <-exited:
			// The front's end closed with it: the monitor ends every
			// session it left open.
			<-served
			var ee *exec.ExitError
			if errors.As(werr, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok {
					return exitStatus(ws)
				}
			}
			return werr
		}
	}
}

// causedBy reports whether ctx was cancelled by signal.NotifyContext on
// one of sigs: its cause is then "<signal> signal received".
func causedBy(ctx context.Context, sigs ...os.Signal) bool {
	cause := context.Cause(ctx)
	for _, sig := range sigs {
		if cause != nil && cause.Error() == sig.String()+" signal received" {
			return true
		}
	}
	return false
}

// startFront starts the front: this executable with the same arguments,
// its environment and the manifest in sealed memfds, the listener, and
// one end of a SOCK_SEQPACKET pair, whose other end it returns. The
// monitor keeps none of the front's descriptors: it accepts no
// connection.
func startFront(env Env, plan *monitorPlan, lnFile *os.File) (*exec.Cmd, *os.File, error) {
	defer lnFile.Close()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("privilege separation: %w", err)
	}
	monEnd := os.NewFile(uintptr(pair[0]), "monitor")
	frontEnd := os.NewFile(uintptr(pair[1]), "front")
	defer frontEnd.Close()
	envF, err := envFile(append(os.Environ(),
		initChildEnv+"=1",
		privsepFDEnv+"=4", privsepListenEnv+"=5", privsepManifestEnv+"=6",
		privsepUserEnv+"="+strconv.Itoa(plan.uid)+":"+strconv.Itoa(plan.gid),
		privsepDropEnv+"=1")) // startDropped
	if err != nil {
		monEnd.Close()
		return nil, nil, fmt.Errorf("privilege separation: %w", err)
	}
	defer envF.Close()
	manF, err := sealedFile("glovebox-manifest", plan.manifest)
	if err != nil {
		monEnd.Close()
		return nil, nil, fmt.Errorf("privilege separation: %w", err)
	}
	defer manF.Close()
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       os.Args,
		Env:        []string{envFDVar + "=3"},
		Stdin:      os.Stdin,
		Stdout:     env.Stdout,
		Stderr:     env.Stderr,
		ExtraFiles: []*os.File{envF, frontEnd, lnFile, manF},
		// Out of the terminal's process group: a ^C reaches the monitor
		// alone, which passes it on once.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := startDropped(cmd, plan.uid, plan.gid); err != nil {
		monEnd.Close()
		return nil, nil, fmt.Errorf("privilege separation: start the front: %w", err)
	}
	return cmd, monEnd, nil
}
