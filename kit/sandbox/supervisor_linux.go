package sandbox

import (
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// supervisorFd is the lowest descriptor a sibling supervisor is held
// open on. Starting a supervisor, os/exec moves descriptors in the child
// onto 3 to 6 (ExtraFiles) and, while it shuffles them, onto the next few
// above: a descriptor below 16 could be overwritten before the exec that
// names it.
const supervisorFd = 64

// supervisor is the program a sandbox starts its supervisors with: a
// sibling glovebox-sandbox, held open from boot so that the file checked
// is the file run, or the kit's own binary.
type supervisor struct {
	exe  *os.File // the sibling, or nil for the kit's own binary
	path string   // the sibling's path, for logs
}

// self is the kit's own binary, re-executed.
var self = &supervisor{}

// cmdPath is what the kit executes to start a supervisor.
func (s *supervisor) cmdPath() string {
	if s == nil || s.exe == nil {
		return "/proc/self/exe"
	}
	return "/proc/self/fd/" + strconv.Itoa(int(s.exe.Fd()))
}

// String names the supervisor, for the boot line.
func (s *supervisor) String() string {
	if s == nil || s.exe == nil {
		return "the kit's own binary"
	}
	return s.path
}

func (s *supervisor) close() {
	if s != nil && s.exe != nil {
		s.exe.Close()
	}
}

// executableDir is the directory of the running program, symbolic links
// resolved: where a sibling supervisor is installed.
func executableDir() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		return "", err
	}
	return filepath.Dir(exe), nil
}

// openSibling opens dir's glovebox-sandbox if it is safe to hand sessions'
// specs to: a regular, executable file that only root or the kit's own
// user can have written, in a directory no one else can write to (no one
// else could have put it there). The kit may run as root and the
// supervisor starts as root; a file anyone else could change would run
// their code as root. It returns nil and no error when there is no
// sibling, and an error saying why a sibling is refused.
func openSibling(dir string) (*supervisor, error) {
	path := filepath.Join(dir, SupervisorName)
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	switch {
	case err == unix.ENOENT:
		return nil, nil
	case err == unix.ELOOP:
		return nil, fmt.Errorf("%s is a symbolic link; install the file itself beside the kit", path)
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Out of the way of os/exec's descriptor shuffle (see supervisorFd).
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, supervisorFd)
	unix.Close(fd)
	if err != nil {
		return nil, fmt.Errorf("hold %s open: %w", path, err)
	}
	f := os.NewFile(uintptr(high), path)
	if err := trusted(f, path, "file"); err != nil {
		f.Close()
		return nil, err
	}
	d, err := os.Open(dir)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	err = trusted(d, dir, "directory")
	d.Close()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &supervisor{exe: f, path: path}, nil
}

// trusted checks that f (a file or a directory, as kind says) is owned by
// root or the kit's user and not writable by its group or others.
func trusted(f *os.File, path, kind string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	mode := st.Mode & unix.S_IFMT
	switch {
	case kind == "file" && mode != unix.S_IFREG:
		return fmt.Errorf("%s is not a regular file", path)
	case kind == "file" && st.Mode&0o111 == 0:
		return fmt.Errorf("%s is not executable (chmod 0755 it)", path)
	case kind == "directory" && mode != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory", path)
	}
	if uid := int(st.Uid); uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("the %s %s is owned by uid %d, neither root nor the kit's user (uid %d); chown it", kind, path, uid, os.Geteuid())
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("the %s %s is writable by its group or others (mode %04o); chmod go-w it", kind, path, st.Mode&0o7777)
	}
	return nil
}

// chooseSupervisor picks the supervisor a sandbox starts: the sibling in
// dir when there is a trusted one, else the kit's own binary. The second
// result says why (for the boot line), the third whether that is worth a
// warning.
func chooseSupervisor(dir string) (*supervisor, string, bool) {
	if dir == "" {
		return self, "the kit's own binary (its directory is unknown)", false
	}
	s, err := openSibling(dir)
	switch {
	case err != nil:
		return self, "the kit's own binary: refused " + SupervisorName + ": " + err.Error(), true
	case s == nil:
		return self, "the kit's own binary (no " + SupervisorName + " in " + dir + ")", false
	}
	return s, s.path + " (installed beside the kit)", false
}

// verify runs a supervisor in no namespace of its own to see that it
// starts and speaks this kit's version.
func (sb *Sandbox) verify() error {
	return sb.runProbe(&initSpec{UID: -1, GID: -1, Probe: true}, 0)
}

// startedByKit reports whether the spec and status descriptors are the
// pipes a kit hands its supervisors (not, say, the runtime's own
// descriptors in a process run by hand).
func startedByKit() bool {
	for _, fd := range []int{fdSpec, fdStatus} {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
			return false
		}
	}
	return true
}

// specVersion is the version of what the kit and a supervisor say to each
// other: the spec, the status lines and the control messages. Raise it
// when their meaning changes; a change to their shape changes Version by
// itself.
const specVersion = 2 // 2: the pty request, and start's tty

// buildTag, set at link time (-X), is added to Version: it tells two
// builds of one source apart (the tests make a stale supervisor with it).
var buildTag string

// Version is the supervisor protocol's version, which the kit and a
// supervisor check with each other: specVersion, a digest of the messages'
// Go types (field names, types and tags) and buildTag. A kit never hands
// a spec to a supervisor of another version.
func Version() string { return version() }

var version = sync.OnceValue(func() string {
	h := fnv.New32a()
	for _, v := range []any{initSpec{}, ctlMsg{}} {
		describeType(h, reflect.TypeOf(v), 0)
	}
	v := fmt.Sprintf("%d.%08x", specVersion, h.Sum32())
	if buildTag != "" {
		v += "+" + buildTag
	}
	return v
})

// describeType writes t's shape to w: its kind, and a struct's fields with
// their types and tags, down to the basic types.
func describeType(w io.Writer, t reflect.Type, depth int) {
	fmt.Fprintf(w, "%s(", t.Kind())
	defer fmt.Fprint(w, ")")
	if depth > 8 {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(w, "%s %q ", f.Name, f.Tag)
			describeType(w, f.Type, depth+1)
		}
	case reflect.Pointer, reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Array {
			fmt.Fprintf(w, "%d ", t.Len())
		}
		describeType(w, t.Elem(), depth+1)
	case reflect.Map:
		describeType(w, t.Key(), depth+1)
		describeType(w, t.Elem(), depth+1)
	default:
		fmt.Fprint(w, t.String())
	}
}
