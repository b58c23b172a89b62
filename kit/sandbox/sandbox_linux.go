package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Sandbox makes sessions' sandboxes with the layers this platform allows.
type Sandbox struct {
	cfg    Config
	log    *slog.Logger
	report Report

	plain     bool    // Plain: no layer at all, not even no_new_privs
	root      bool    // the kit runs as root with what the users layer needs
	users     bool    // a uid per session
	userns    bool    // a user namespace maps the kit's uid to root inside
	cloneMask uintptr // the namespaces each process is cloned into
	cg        *cgroups
	landlock  int         // the Landlock ABI sessions' domains use; 0: none
	seccomp   bool        // sessions' supervisors install the seccomp filter
	sup       *supervisor // what supervisors run: glovebox-sandbox or the kit
	// supLater: no boot probe proved the sibling (the sandbox is off),
	// so the first supervisor a session needs checks it (program).
	supLater bool
	supCheck sync.Once

	roots   []int // Config.SessionRoots held open; -1 for ""
	tmpRoot int   // Config.TmpRoot held open where sessions use it, else -1
	// mon, in a front, is the monitor every privileged act goes through
	// (Dial); nil where this process does them itself.
	mon *monitorClient

	// The session helpers' program (helperProgram), made once.
	helperOnce sync.Once
	helperExe  *os.File
	helperErr  error

	mu   sync.Mutex
	free []int // free uid slots, as a stack
	next int   // the next never-used slot
}

// New checks which layers cfg asks for this platform allows, and says so
// in its Report. It fails only when a layer it needs to set up (the hidden
// directories' modes) cannot be.
//
// Supervisors run glovebox-sandbox when it is installed beside the
// running program (and trusted: see openSibling), else the program
// itself; New logs which, and why. A sibling that fails the boot probe
// (another version, a broken file) is dropped with a warning, and the
// program itself serves.
func New(cfg Config, log *slog.Logger) (*Sandbox, error) {
	dir, err := executableDir()
	if err != nil {
		dir = ""
	}
	return newSandbox(cfg, log, dir)
}

// newSandbox is New with the supervisor looked for in dir.
func newSandbox(cfg Config, log *slog.Logger, dir string) (*Sandbox, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = withDefaults(cfg)
	caps := effectiveCaps()
	// Root in a container that dropped what a uid per session needs is
	// treated as any other user.
	rootCaps := hasCaps(caps, capSetuid, capSetgid, capChown, capFowner)
	sb := &Sandbox{cfg: cfg, log: log, root: os.Geteuid() == 0 && rootCaps, tmpRoot: -1}
	notRoot := "the kit does not run as root"
	if os.Geteuid() == 0 {
		notRoot = "the kit runs as root without CAP_SETUID, CAP_SETGID, CAP_CHOWN and CAP_FOWNER"
	}
	inactive := map[string]string{}
	off := func(layer, why string) { inactive[layer] = why }
	sup, why, warn := chooseSupervisor(dir)
	sb.sup = sup

	switch {
	case cfg.Off:
		for _, l := range []string{LayerUsers, LayerMount, LayerPID, LayerNetwork, LayerCgroup} {
			off(l, "[sandbox] is turned off in the manifest")
		}
		// No probe runs: the sibling is checked when the first session
		// needs a supervisor, so that a box without a sandbox starts no
		// process before it serves.
		if sup != self {
			sb.supLater = true
			why += ", checked by the first session's supervisor"
		}
	default:
		ran := sb.probeNamespaces(off, notRoot)
		if sup != self && !ran {
			// No probe got as far as the supervisor's code: see that
			// the sibling runs at all, and if it does not, probe again
			// with the program itself.
			if err := sb.verify(); err != nil {
				why, warn = sb.dropSibling(err), true
				inactive = map[string]string{}
				sb.cloneMask, sb.userns = 0, false
				sb.probeNamespaces(off, notRoot)
			}
		}
		sb.chooseUsers(off, notRoot, rootCaps)
		sb.chooseCgroup(off)
	}
	sb.probeEnforce(off)
	if err := sb.protectHidden(); err != nil {
		return nil, err
	}
	if err := sb.openRoots(); err != nil {
		return nil, err
	}
	if err := sb.openTmpRoot(); err != nil {
		sb.closeRoots()
		return nil, err
	}
	sb.report = sb.makeReport(caps, off, inactive)
	if warn {
		log.Warn("sandbox: supervisor: " + why)
	} else {
		log.Info("sandbox: supervisor: " + why)
	}
	return sb, nil
}

// withDefaults fills what cfg leaves at zero with the package's defaults,
// so that a manifest names only what it changes.
func withDefaults(cfg Config) Config {
	if cfg.UIDBase <= 0 {
		cfg.UIDBase = DefaultUIDBase
	}
	if cfg.UIDCount <= 0 {
		cfg.UIDCount = DefaultUIDCount
	}
	if cfg.Limits.Pids <= 0 {
		cfg.Limits.Pids = DefaultPids
	}
	if cfg.Limits.Files <= 0 {
		cfg.Limits.Files = DefaultFiles
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	return cfg
}

// chooseUsers turns on the users layer (a uid per session) where the kit
// is root with the capabilities it takes, and otherwise says which uid
// sessions run as instead.
func (sb *Sandbox) chooseUsers(off func(layer, why string), notRoot string, rootCaps bool) {
	switch {
	case sb.cfg.NoUsers:
		off(LayerUsers, "turned off in the manifest")
	case os.Geteuid() == 0 && !rootCaps:
		off(LayerUsers, "the kit runs as root without CAP_SETUID, CAP_SETGID, CAP_CHOWN and CAP_FOWNER (the container dropped them): every session runs as the kit's uid")
	case sb.root:
		sb.users = true
	case sb.userns:
		off(LayerUsers, "the kit does not run as root: every session runs as the kit's uid, mapped to root without capabilities in a user namespace")
	default:
		off(LayerUsers, notRoot+" and user namespaces are not allowed: agents run as the kit's uid")
	}
}

// chooseCgroup finds the cgroup tree the sessions' limits go in; only
// root can make one.
func (sb *Sandbox) chooseCgroup(off func(layer, why string)) {
	switch {
	case sb.cfg.NoCgroup:
		off(LayerCgroup, "turned off in the manifest")
	case !sb.root:
		off(LayerCgroup, "the kit does not run as root")
	default:
		cg, err := findCgroups()
		if err != nil {
			off(LayerCgroup, err.Error())
		} else {
			sb.cg = cg
		}
	}
}

// protectHidden gives the hidden directories mode 0711 as root. Without a
// mount namespace they are hidden by their modes (root owns them); agents
// under the kit's own uid would still reach them, which the report says.
func (sb *Sandbox) protectHidden() error {
	if !sb.root {
		return nil
	}
	for _, p := range sb.cfg.Hide {
		if err := os.Chmod(p, 0o711); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sandbox: protect %s: %w", p, err)
		}
	}
	return nil
}

// makeReport says which layers are in force, which are not and why
// (inactive, to which it adds the privileges layer when it is off), and
// the limits something enforces.
func (sb *Sandbox) makeReport(caps uint64, off func(layer, why string), inactive map[string]string) Report {
	var active []string
	if sb.users {
		active = append(active, LayerUsers)
	}
	if sb.userns {
		active = append(active, LayerUserNS)
	}
	privileges := sb.privileges(caps)
	if privileges.why == "" {
		active = append(active, LayerPrivileges)
	} else {
		off(LayerPrivileges, privileges.why)
	}
	for _, l := range []struct {
		name string
		flag uintptr
	}{{LayerMount, syscall.CLONE_NEWNS}, {LayerPID, syscall.CLONE_NEWPID}, {LayerNetwork, syscall.CLONE_NEWNET}} {
		if sb.cloneMask&l.flag != 0 {
			active = append(active, l.name)
		}
	}
	if sb.cg != nil {
		active = append(active, LayerCgroup)
	}
	if sb.landlock > 0 {
		active = append(active, LayerLandlock)
	}
	if sb.seccomp {
		active = append(active, LayerSeccomp)
	}
	cfg := sb.cfg
	// A limit is reported only where something enforces it: the pids cap
	// by the cgroup or by RLIMIT_NPROC on a uid of the session's own (the
	// kit's own uid would count the kit's processes with the sessions').
	r := Report{Active: active, Landlock: sb.landlock, Privileges: privileges.holds, Limits: ReportLimits{Files: cfg.Limits.Files, Disk: cfg.Limits.Disk}}
	if sb.cg != nil || sb.users {
		r.Limits.Pids = cfg.Limits.Pids
	}
	if len(inactive) > 0 {
		r.Inactive = inactive
	}
	if sb.users {
		r.UIDs = fmt.Sprintf("%d-%d", cfg.UIDBase, cfg.UIDBase+cfg.UIDCount-1)
	}
	if sb.cg != nil {
		r.Cgroup = sb.cg.version
		r.Limits.Memory = cfg.Limits.Memory
		r.Limits.CPU = cfg.Limits.CPU
	}
	return r
}

// privilegesHold is what the privileges layer holds: holds says what,
// where it is not the whole layer; why says why the layer is not in
// force.
type privilegesHold struct{ holds, why string }

// privileges says what the privileges layer holds given the kit's
// effective capabilities: an empty bounding set needs CAP_SETPCAP (or a
// user namespace, where the supervisor is root); without it the
// supervisor keeps the set where that is harmless and refuses to run a
// command as root (dropCapabilities).
func (sb *Sandbox) privileges(caps uint64) privilegesHold {
	switch {
	case sb.userns || hasCaps(caps, capSetpcap) || boundingSetEmpty():
		return privilegesHold{}
	case os.Geteuid() == 0 && !sb.users:
		return privilegesHold{why: "the kit runs as root without CAP_SETPCAP, so the capability bounding set cannot be emptied, and sessions would run as root: no command can start; give the kit CAP_SETPCAP, or CAP_SETUID, CAP_SETGID, CAP_CHOWN and CAP_FOWNER for a uid per session"}
	}
	return privilegesHold{holds: "no_new_privs, rlimits, and no capability in any set of a session's processes, which run under a uid other than root; the capability bounding set is not emptied (the kit lacks CAP_SETPCAP)"}
}

// errTurnedOff is why a layer the manifest turned off is not in force.
var errTurnedOff = errors.New("turned off in the manifest")

// probeEnforce finds whether sessions' supervisors can put themselves in
// a Landlock domain and install the seccomp filter: a supervisor does
// both and exits. Landlock is in force only when that worked. With the
// sandbox off, no process starts: the seccomp filter (as the privileges
// layer, always on) is used where the kernel takes filters, and Landlock
// is off.
func (sb *Sandbox) probeEnforce(off func(layer, why string)) {
	abi, llErr := landlockABI()
	scErr := seccompAvailable()
	if sb.cfg.NoLandlock {
		llErr = errTurnedOff
	}
	if sb.cfg.NoSeccomp {
		scErr = errTurnedOff
	}
	if sb.cfg.Off {
		off(LayerLandlock, "[sandbox] is turned off in the manifest")
		if scErr != nil {
			off(LayerSeccomp, scErr.Error())
		}
		sb.seccomp = scErr == nil
		return
	}
	spec := func(landlock, seccomp bool) *initSpec {
		is := &initSpec{UID: -1, GID: -1, Probe: true}
		if landlock {
			is.Landlock = &landlockSpec{ABI: abi, Hide: sb.cfg.Hide, Net: true}
		}
		if seccomp {
			is.Seccomp = &seccompOptions{Confined: true}
		}
		return is
	}
	if llErr == nil && scErr == nil && sb.runProbe(spec(true, true), 0) == nil {
		sb.landlock, sb.seccomp = abi, true
		return
	}
	// Something failed: find what, each alone.
	if llErr == nil {
		llErr = sb.runProbe(spec(true, false), 0)
	}
	if scErr == nil {
		scErr = sb.runProbe(spec(false, true), 0)
	}
	if llErr != nil {
		off(LayerLandlock, llErr.Error())
	} else {
		sb.landlock = abi
	}
	if scErr != nil {
		off(LayerSeccomp, scErr.Error())
	} else {
		sb.seccomp = true
	}
}

// dropSibling goes back to the program itself as supervisor, since the
// sibling failed with err, and says why.
func (sb *Sandbox) dropSibling(err error) string {
	when := "the boot probe"
	if sb.supLater {
		when = "its check"
	}
	why := "the kit's own binary: " + sb.sup.path + " failed " + when + " (" + err.Error() + ")"
	sb.sup.close()
	sb.sup = self
	return why
}

// program is what supervisors run, once the sibling is proved good (New's
// probe, or here the first time with the sandbox off, where a sibling
// that fails is dropped with a warning).
func (sb *Sandbox) program() *supervisor {
	if sb.supLater {
		sb.supCheck.Do(func() {
			if err := sb.verify(); err != nil {
				sb.log.Warn("sandbox: supervisor: " + sb.dropSibling(err))
			}
		})
	}
	return sb.sup
}

// Supervisor is what the sandbox's supervisors run: the path of
// glovebox-sandbox, or "" for the program itself.
func (sb *Sandbox) Supervisor() string {
	sup := sb.program()
	if sup == nil || sup == self {
		return ""
	}
	return sup.path
}

// probeNamespaces starts a supervisor in each namespace the config asks
// for and keeps those that work. It reports whether any probe ran to the
// end, which proves the supervisor's binary good.
func (sb *Sandbox) probeNamespaces(off func(layer, why string), notRoot string) (ran bool) {
	want := []nsLayer{
		{LayerMount, syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC, sb.cfg.NoMount},
		{LayerPID, syscall.CLONE_NEWPID, sb.cfg.NoPID},
		{LayerNetwork, syscall.CLONE_NEWNET, sb.cfg.NoNetwork},
	}
	if !sb.root {
		if err := sb.probe(syscall.CLONE_NEWUSER, true); err != nil {
			for _, w := range want {
				off(w.name, notRoot+" and user namespaces are not allowed ("+err.Error()+")")
			}
			return false
		}
		sb.userns, ran = true, true
	}
	var mask uintptr
	for _, w := range want {
		if w.no {
			off(w.name, "turned off in the manifest")
			continue
		}
		mask |= w.flag
	}
	if mask == 0 {
		return ran
	}
	// The usual answer first: every namespace at once, one supervisor
	// started at boot instead of one a namespace.
	together := sb.probe(mask, sb.userns)
	if together == nil {
		sb.cloneMask = mask
		return true
	}
	// Something failed: find what.
	ok := sb.probeAlone(want, mask, off)
	if ok == 0 {
		return ran
	}
	// Some work alone: keep them if they work together.
	if err := sb.probe(ok, sb.userns); err != nil {
		for _, w := range want {
			if ok&w.flag != 0 {
				off(w.name, "works alone but not with the other namespaces: "+err.Error())
			}
		}
		return true
	}
	sb.cloneMask = ok
	return true
}

// nsLayer is a layer made of namespaces: the clone flags it takes, and
// whether the manifest turned it off.
type nsLayer struct {
	name string
	flag uintptr
	no   bool
}

// probeAlone probes each layer of want that mask holds alone, all at the
// same time, turns off those that fail, and returns the flags of those
// that work.
func (sb *Sandbox) probeAlone(want []nsLayer, mask uintptr, off func(layer, why string)) (ok uintptr) {
	errs := make([]error, len(want))
	var wg sync.WaitGroup
	for i, w := range want {
		if mask&w.flag == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = sb.probe(w.flag, sb.userns)
		}()
	}
	wg.Wait()
	for i, w := range want {
		if mask&w.flag == 0 {
			continue
		}
		if errs[i] != nil {
			off(w.name, errs[i].Error())
			continue
		}
		ok |= w.flag
	}
	return ok
}

// probe runs a supervisor that sets up what flags need, then exits.
func (sb *Sandbox) probe(flags uintptr, userns bool) error {
	spec := initSpec{UID: -1, GID: -1, Probe: true, DropCaps: true}
	if flags&syscall.CLONE_NEWNS != 0 {
		spec.Mount = &mountSpec{ReadOnly: true, Dev: true, Tmp: []tmpMount{{Path: "/tmp", Size: 1 << 20}, {Path: "/dev/shm", Size: 1 << 20}}}
		if flags&syscall.CLONE_NEWPID != 0 {
			spec.Mount.Proc = true
		}
	}
	if flags&syscall.CLONE_NEWNET != 0 {
		spec.Net = &netSpec{}
	}
	if userns {
		flags |= syscall.CLONE_NEWUSER
	}
	return sb.runProbe(&spec, flags)
}

// runProbe starts a supervisor for spec, cloned with flags, and waits for
// it to set up and exit.
func (sb *Sandbox) runProbe(spec *initSpec, flags uintptr) error {
	p, err := startSupervisor(sb.sup, spec, flags, nil, nil)
	if err != nil {
		return err
	}
	st, err := p.Wait()
	if err != nil {
		return err
	}
	if st.Code != 0 {
		return fmt.Errorf("probe: %s", st)
	}
	return nil
}

// Report says which layers are in force.
func (sb *Sandbox) Report() Report { return sb.report }

// uidOnly reports whether a session's uid is the only handle on all its
// processes: no pid namespace ends them and no cgroup finds them.
func (sb *Sandbox) uidOnly() bool {
	return sb.users && sb.cg == nil && sb.cloneMask&syscall.CLONE_NEWPID == 0
}

// Reclaim removes what a session of an earlier kit process left in the
// sandbox (the kit was killed before it closed the session): its cgroup,
// after killing whatever still runs in it. It reports whether there was
// one. Call it at boot, for the ids of sessions the kit knows were open,
// never for a live session. Other kits' cgroups share the parent, so
// reclaiming goes by id only. In a front, the monitor also removes the
// session's directories and temporary directory.
func (sb *Sandbox) Reclaim(id string) bool { return sb.reclaim(id, false) }

// ReclaimProcesses is Reclaim for a persistent session whose directories
// stay for a later OpenSession of the same id: in a front too, the
// monitor leaves them.
func (sb *Sandbox) ReclaimProcesses(id string) bool { return sb.reclaim(id, true) }

func (sb *Sandbox) reclaim(id string, keep bool) bool {
	if sb.mon != nil {
		r, _, err := sb.mon.call(monRequest{Op: opReclaim, Session: id, Keep: keep})
		if err != nil {
			sb.log.Warn("sandbox: reclaim", "session", id, "err", err)
		}
		return r.Reclaimed
	}
	if sb.cg == nil || id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return false
	}
	c := &cgroup{cg: sb.cg, dirs: map[string]string{}}
	for ctl, parent := range sb.cg.parents {
		dir := filepath.Join(parent, id)
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			c.dirs[ctl] = dir
		}
	}
	if len(c.dirs) == 0 {
		return false
	}
	if c.dirs[""] != "" || c.dirs["pids"] != "" {
		c.kill(2 * time.Second)
	}
	c.remove()
	return true
}
