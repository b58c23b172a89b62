package sandbox

import "errors"

// HelperName is argv[0] of a session helper process (helper_linux.go).
const HelperName = "glovebox-session-helper"

// Root names one of a session's directories, by its index in
// Session.Dirs: RootWork, RootInput, RootOutput.
type Root int

// The session's directories, as Session.Dirs lists them.
const (
	RootWork Root = iota
	RootInput
	RootOutput
)

// String is the root's name as the session's users know it: "work",
// "input", "output".
func (r Root) String() string {
	switch r {
	case RootWork:
		return "work"
	case RootInput:
		return "input"
	case RootOutput:
		return "output"
	}
	return "root" + string(rune('0'+int(r)))
}

// Errors a session helper's operations wrap (in an *os.PathError).
var (
	// ErrOutside: the path leaves its root (through "..", an absolute
	// symbolic link, or a symbolic link out of it).
	ErrOutside = errors.New("the path leads outside the session's directory")
	// ErrSpecial: the file is a device, a fifo or a socket.
	ErrSpecial = errors.New("not a regular file or directory")
	// ErrNoNetNS: the session has no network namespace of its own, so
	// there is no loopback of its own for Dial to reach.
	ErrNoNetNS = errors.New("the session has no network namespace of its own")
	// ErrHelperGone: the session helper ended before it answered (the
	// session ended, or its processes were ended after its last
	// command); the next call starts another.
	ErrHelperGone = errors.New("the session helper ended")
)
