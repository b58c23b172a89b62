package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The monitor's wire: one JSON object per SOCK_SEQPACKET packet each way,
// a request's descriptors (none today) and a reply's (supervise) passed
// with SCM_RIGHTS. Requests are decoded strictly (decodeRequest): a field
// the request's op does not take, an unknown field or op, a session id
// that cannot be one, or a path that is not plainly relative is refused
// before anything is looked up. The front can name only sessions, by id,
// and, for chown, a path below one of that session's own directories;
// every other path, uid and gid the monitor acts on is its own.

// maxMonitorMsg bounds a request: nothing the front sends is large.
const maxMonitorMsg = 16 << 10

// Monitor operations, and why each is refused what it is refused.
const (
	// hello: the sandbox's Report. Takes nothing.
	opHello = "hello"
	// open: make a session's directories (under the monitor's own roots,
	// named by the id, which therefore must be a plain name), uid (from
	// the monitor's range: the front names none) and temporary
	// directory. A session open already is refused: a second open would
	// give one id two uids.
	opOpen = "open"
	// supervise: start the session's supervisor (dropped to the
	// session's uid before the front sees it) and hand over its control
	// socket, keep-alive pipe and egress listener. The front chooses only
	// the session's egress confinement (ConfineNet, EgressPort, an IP
	// proxy address inside the session's own network namespace), which
	// binds that session alone.
	opSupervise = "supervise"
	// chown: give the session a regular file with one link that the
	// front wrote below one of the session's directories. No other path:
	// a link or ".." would aim the monitor's root at another session's
	// files or the system's; a hard link would give away its other name.
	opChown = "chown"
	// clear: empty the session's work directory, following no link.
	opClear = "clear"
	// usage: the bytes in the session's directories and temporary files,
	// measured as root (an agent cannot hide files by their modes).
	opUsage = "usage"
	// killall: kill every process of the session (cgroup or uid).
	opKillAll = "killall"
	// close: end the session: processes, cgroup, directories, uid.
	opClose = "close"
	// reclaim: at boot, what a dead kit's session of this id left. A
	// session open in this monitor is refused: it is not dead.
	opReclaim = "reclaim"
	// pause and wake: freeze and thaw the session's processes through
	// its cgroup's freezer.
	opPause = "pause"
	opWake  = "wake"
)

// monRequest is a request from the front.
type monRequest struct {
	ID      uint64 `json:"id"`
	Op      string `json:"op"`
	Session string `json:"session,omitempty"`
	// Dir and Path (chown): Path below the session's directory Dir, one
	// of dirNames.
	Dir  string `json:"dir,omitempty"`
	Path string `json:"path,omitempty"`
	// ConfineNet, EgressPort and ProxyAddr (supervise) are the Session
	// fields of the same names; Listener asks for the egress listener
	// made in the session's network namespace.
	ConfineNet bool   `json:"confine_net,omitempty"`
	EgressPort int    `json:"egress_port,omitempty"`
	ProxyAddr  string `json:"proxy_addr,omitempty"`
	Listener   bool   `json:"listener,omitempty"`
	// Keep (close, reclaim): leave the session's directories, for a
	// persistent session that a later open takes over.
	Keep bool `json:"keep,omitempty"`
}

// dirNames name a session's directories in a chown request, in the
// order of Config.SessionRoots.
var dirNames = []string{"work", "input", "output"}

// monReply is the monitor's answer to the request of the same ID.
type monReply struct {
	ID    uint64 `json:"id"`
	Error string `json:"error,omitempty"`
	// Hello.
	Report *Report `json:"report,omitempty"`
	// Open: the session's directories (as Session.Dirs), uid and TMPDIR.
	Dirs []string `json:"dirs,omitempty"`
	UID  int      `json:"uid,omitempty"`
	Tmp  string   `json:"tmp,omitempty"`
	// Supervise: the supervisor's pid, whether it is its pid namespace's
	// init, and whether the egress listener follows its control socket
	// and keep-alive pipe among the descriptors.
	Pid      int  `json:"pid,omitempty"`
	PidNS    bool `json:"pidns,omitempty"`
	Listener bool `json:"listener,omitempty"`
	// Cgroup and CgroupDirs (supervise) are the session's cgroup version
	// and directories, by controller, for the front to read its counters
	// (which limit a command hit, the inspector's usage): reading them
	// needs no privilege.
	Cgroup     string            `json:"cgroup,omitempty"`
	CgroupDirs map[string]string `json:"cgroup_dirs,omitempty"`
	// Usage: bytes; reclaim: whether there was something.
	Used      int64 `json:"used,omitempty"`
	Reclaimed bool  `json:"reclaimed,omitempty"`
}

// errRefused prefixes every refusal of a request the interface does not
// allow.
var errRefused = errors.New("sandbox: monitor: refused")

// decodeRequest decodes and checks one request.
func decodeRequest(b []byte) (monRequest, error) {
	var r monRequest
	if len(b) > maxMonitorMsg {
		return r, fmt.Errorf("%w: a request of %d bytes (at most %d)", errRefused, len(b), maxMonitorMsg)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return monRequest{}, fmt.Errorf("%w: %v", errRefused, err)
	}
	if dec.More() {
		return monRequest{}, fmt.Errorf("%w: more than one value in a request", errRefused)
	}
	if err := r.check(); err != nil {
		return monRequest{ID: r.ID}, fmt.Errorf("%w: %s request: %v", errRefused, strconv.Quote(r.Op), err)
	}
	return r, nil
}

// check refuses a request that carries what its op does not take, or
// names something that cannot be what it says.
func (r *monRequest) check() error {
	chown := r.Dir != "" || r.Path != ""
	super := r.ConfineNet || r.EgressPort != 0 || r.ProxyAddr != "" || r.Listener
	switch r.Op {
	case opHello:
		if r.Session != "" || chown || super || r.Keep {
			return errors.New("hello takes no argument")
		}
		return nil
	case opOpen, opClear, opUsage, opKillAll, opClose, opReclaim, opPause, opWake:
		if chown || super {
			return errors.New("it takes a session id only")
		}
		if r.Keep && r.Op != opClose && r.Op != opReclaim {
			return errors.New("only close and reclaim keep directories")
		}
	case opChown:
		if super || r.Keep {
			return errors.New("it takes a session, a dir and a path only")
		}
		if err := checkRel(r.Dir, r.Path); err != nil {
			return err
		}
	case opSupervise:
		if chown || r.Keep {
			return errors.New("it takes no path")
		}
		if r.EgressPort < 0 || r.EgressPort > 65535 {
			return fmt.Errorf("egress port %d", r.EgressPort)
		}
		if r.ProxyAddr != "" {
			host, port, err := net.SplitHostPort(r.ProxyAddr)
			if err != nil || net.ParseIP(host) == nil || port == "" {
				return fmt.Errorf("proxy address %q is not an IP address and port", r.ProxyAddr)
			}
		}
	default:
		return errors.New("unknown op")
	}
	if !validID(r.Session) {
		return fmt.Errorf("session id %q is not one", r.Session)
	}
	return nil
}

// checkRel refuses a chown target that is not a plain relative path below
// one of a session's directories. openat2 refuses the rest (a symbolic
// link on the way, another mount) when it is resolved.
func checkRel(dir, path string) error {
	if !slices.Contains(dirNames, dir) {
		return fmt.Errorf("dir %q is not one of %s", dir, strings.Join(dirNames, ", "))
	}
	switch {
	case path == "" || len(path) > 4096:
		return fmt.Errorf("path of %d bytes", len(path))
	case strings.ContainsRune(path, 0):
		return errors.New("path holds a NUL byte")
	case filepath.IsAbs(path):
		return fmt.Errorf("path %q is absolute", path)
	case filepath.Clean(path) != path || path == ".":
		return fmt.Errorf("path %q is not clean", path)
	case path == ".." || strings.HasPrefix(path, "../"):
		return fmt.Errorf("path %q leaves the directory", path)
	}
	return nil
}
