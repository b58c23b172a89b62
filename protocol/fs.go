package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// A session's files (CapWorkspaceFiles) are reached at
// /sessions/{id}/fs/{root}/{path}: root is one of the session's
// directories as the session knows them (FSRoots), path a slash path
// beneath it. ParseFSPath is the one decoder of such paths, in the box
// and in the clients.

// The roots of a session's files, in the order of the box's directories.
const (
	FSRootWork   = "work"
	FSRootInput  = "input"
	FSRootOutput = "output"
)

// FSRoots are the roots a file path may start with, by index: 0 work,
// 1 input, 2 output.
var FSRoots = []string{FSRootWork, FSRootInput, FSRootOutput}

// Limits of a file path: the whole path after its root, and each name in
// it, in bytes (Linux's PATH_MAX and NAME_MAX).
const (
	MaxFSPath = 4096
	MaxFSName = 255
)

// File types in an FSEntry.
const (
	FSFile    = "file"
	FSDir     = "dir"
	FSSymlink = "symlink"
	FSOther   = "other" // a device, fifo or socket: listed, never opened
)

// File event types in an FSEvent.
const (
	FSEventCreate = "create"
	FSEventWrite  = "write"  // a file written and closed
	FSEventRemove = "remove" // removed, or moved out of the watched tree
	FSEventRename = "rename" // moved within the watched tree: From is the old path
	// FSEventLost: events were dropped (the kernel's queue overflowed, or
	// the watch reached its limit of directories); list again to catch up.
	FSEventLost = "lost"
)

// FSEntry is one file in a listing (GET .../fs/{root}/{dir}) or the
// answer to ?stat=1.
type FSEntry struct {
	Name string `json:"name"`
	// Path is the entry's full path, "work/a/b.txt".
	Path string `json:"path"`
	Type string `json:"type"` // FSFile, FSDir, FSSymlink or FSOther
	Size int64  `json:"size"`
	// Mode is the permission bits (0o644), with setuid, setgid and sticky.
	Mode uint32 `json:"mode"`
	// MTime is the modification time, RFC 3339 with nanoseconds, UTC.
	MTime string `json:"mtime"`
	// Target is a symbolic link's target, as stored; it is never followed.
	Target string `json:"target,omitempty"`
}

// FSList is a page of a directory's entries, in the directory's own
// order (not sorted: a page never holds more than its limit, however large
// the directory). Next, when set, is the ?after= of the next page.
type FSList struct {
	Path    string    `json:"path"`
	Entries []FSEntry `json:"entries"`
	Next    string    `json:"next,omitempty"`
}

// FSEvent is one line of a watch's NDJSON stream (GET
// .../fs/{root}/{dir}?watch=1).
type FSEvent struct {
	Type string `json:"type"` // FSEventCreate, FSEventWrite, ...
	// Path is the file's full path, "work/a/b.txt"; for FSEventLost, the
	// directory watched.
	Path string `json:"path"`
	From string `json:"from,omitempty"` // FSEventRename: the old path
	Dir  bool   `json:"dir,omitempty"`  // the file is a directory
	// Message says what was lost and why (FSEventLost).
	Message string `json:"message,omitempty"`
}

// FS operations a POST names with ?op=.
const (
	FSOpMkdir = "mkdir"
	FSOpMove  = "move"
)

// FSOp is the JSON body of POST .../fs/{root}/{path}?op=mkdir|move.
type FSOp struct {
	// To is where move puts the file: a full path, "work/b.txt" (any of
	// the session's roots; across roots only a file, copied). An existing
	// file there is replaced, as rename(2) does; an existing non-empty
	// directory is not.
	To string `json:"to,omitempty"`
	// Parents: mkdir makes missing parents too, and an existing
	// directory is no error.
	Parents bool `json:"parents,omitempty"`
}

// MaxFSOpBody bounds an FSOp body.
const MaxFSOpBody = 16 << 10

// ParseFSPath splits a session file path, "work/a/b.txt", into its root
// ("work") and the slash path beneath it ("a/b.txt"; "" for the root
// itself). A trailing slash is allowed ("work/", "work/a/"); nothing else
// odd is: an unknown root, empty, "." or ".." names, backslashes, NUL
// and other control characters, invalid UTF-8, a name over MaxFSName or
// a path over MaxFSPath bytes. The error says which rule was broken.
func ParseFSPath(p string) (root, rel string, err error) {
	bad := func(rule string) error {
		return fmt.Errorf("file path %q: %s", clip(p), rule)
	}
	root, rel, _ = strings.Cut(p, "/")
	if !isFSRoot(root) {
		if root == "" {
			return "", "", fmt.Errorf("file path %q: want one of the session's directories first: %s, as in \"work/notes.txt\"", clip(p), strings.Join(FSRoots, ", "))
		}
		return "", "", bad(fmt.Sprintf("%q is not one of the session's directories (%s)", clip(root), strings.Join(FSRoots, ", ")))
	}
	rel = strings.TrimSuffix(rel, "/")
	switch {
	case len(rel) > MaxFSPath:
		return "", "", bad(fmt.Sprintf("longer than %d bytes", MaxFSPath))
	case !utf8.ValidString(rel):
		return "", "", bad("not valid UTF-8")
	}
	if rel == "" {
		return root, "", nil
	}
	for name := range strings.SplitSeq(rel, "/") {
		switch {
		case name == "":
			return "", "", bad("an empty name (two slashes, or a leading one)")
		case name == "." || name == "..":
			return "", "", bad(fmt.Sprintf("a %q name: give the path from the %s directory down, without . or ..", name, root))
		case len(name) > MaxFSName:
			return "", "", bad(fmt.Sprintf("a name longer than %d bytes", MaxFSName))
		}
	}
	for _, r := range rel {
		switch {
		case r == '\\':
			return "", "", bad("a backslash: separate names with /")
		case r < 0x20 || r == 0x7f:
			return "", "", bad(fmt.Sprintf("the control character %U", r))
		}
	}
	return root, rel, nil
}

// FSPath joins a root and a path beneath it, as ParseFSPath splits them.
func FSPath(root, rel string) string {
	if rel == "" {
		return root
	}
	return root + "/" + rel
}

// FSRootIndex is root's index in FSRoots, or -1.
func FSRootIndex(root string) int {
	for i, r := range FSRoots {
		if r == root {
			return i
		}
	}
	return -1
}

func isFSRoot(s string) bool { return FSRootIndex(s) >= 0 }

// clip shortens what an error quotes of a client's input.
func clip(s string) string {
	if len(s) <= 100 {
		return s
	}
	return s[:100] + "..."
}

// DecodeFSOp decodes and checks the body of POST ?op=op: a JSON object
// (empty allowed for mkdir), with no unknown fields; move needs a To that
// ParseFSPath accepts and that is not a root itself.
func DecodeFSOp(op string, body []byte) (FSOp, error) {
	var o FSOp
	if op != FSOpMkdir && op != FSOpMove {
		return o, fmt.Errorf("op %q: want ?op=%s or ?op=%s", clip(op), FSOpMkdir, FSOpMove)
	}
	if len(body) > MaxFSOpBody {
		return o, fmt.Errorf("%s: the body is over %d bytes", op, MaxFSOpBody)
	}
	if len(bytes.TrimSpace(body)) > 0 {
		d := json.NewDecoder(bytes.NewReader(body))
		d.DisallowUnknownFields()
		if err := d.Decode(&o); err != nil {
			return FSOp{}, fmt.Errorf("%s: the body is not the JSON object expected ({\"to\": \"work/b.txt\"} or {\"parents\": true}): %w", op, err)
		}
		if d.More() {
			return FSOp{}, fmt.Errorf("%s: the body holds more than one JSON value", op)
		}
	}
	switch op {
	case FSOpMove:
		if o.To == "" {
			return FSOp{}, errors.New(`move: the body names no destination: send {"to": "work/new-name.txt"}`)
		}
		_, rel, err := ParseFSPath(o.To)
		if err != nil {
			return FSOp{}, fmt.Errorf("move to: %w", err)
		}
		if rel == "" {
			return FSOp{}, fmt.Errorf("move to %q: a session's directory itself cannot be replaced: name a path beneath it", o.To)
		}
		if o.Parents {
			return FSOp{}, errors.New("move: parents is mkdir's option")
		}
	case FSOpMkdir:
		if o.To != "" {
			return FSOp{}, errors.New("mkdir: to is move's option")
		}
	}
	return o, nil
}
