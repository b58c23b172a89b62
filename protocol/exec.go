package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Terminals and processes in a session (CapTerminals, CapProcesses):
// commands a client runs in the session's sandbox outside the prompt flow,
// under /sessions/{id}/terminals and /sessions/{id}/processes (ScopeExec,
// or the session's own credential). Additive.

// Limits on what a client may ask of a terminal or a process.
const (
	MaxExecArgs    = 1024      // arguments in a command
	MaxExecEnv     = 256       // variables a request adds to the session's environment
	MaxExecRequest = 256 << 10 // bytes of a terminal's or process's request body
	MaxTermSize    = 10000     // columns or rows of a terminal
)

// TerminalRequest is the body of POST /sessions/{id}/terminals: a command
// to run on a new PTY in the session.
type TerminalRequest struct {
	// Command is argv; none is the session's shell ($SHELL, else
	// /bin/bash where the image has it, else /bin/sh) as a login shell.
	Command []string `json:"command,omitempty"`
	// Cols and Rows are the terminal's first size; 0 is 80x24.
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
	// Env adds to (or replaces in) the session's environment. TERM is
	// xterm-256color unless set here.
	Env map[string]string `json:"env,omitempty"`
	// Dir is the working directory: relative to the session's work
	// directory, or absolute inside the session's directories. Default
	// the work directory.
	Dir string `json:"dir,omitempty"`
}

// Terminal is a terminal of a session, as POST and GET
// /sessions/{id}/terminals answer.
type Terminal struct {
	ID      string   `json:"id"`
	Command []string `json:"command"`
	// Pid is the command's process id in the box's pid namespace.
	Pid   int    `json:"pid,omitempty"`
	Cols  int    `json:"cols"`
	Rows  int    `json:"rows"`
	State string `json:"state"` // ExecRunning or ExecExited
	// Attached is true while a client's WebSocket is attached.
	Attached bool `json:"attached,omitempty"`
	// Exit is how the command ended, once it has.
	Exit *ExitInfo `json:"exit,omitempty"`
}

// States of a terminal or a process.
const (
	ExecRunning = "running"
	ExecExited  = "exited"
)

// ExitInfo is how a terminal's or process's command ended.
type ExitInfo struct {
	// Code is the exit code, or 128 plus the signal that ended it.
	Code int `json:"code"`
	// Signal names the signal that ended it ("SIGKILL"), if one did.
	Signal string `json:"signal,omitempty"`
	// Limit names the sandbox limit the session hit ("memory", "pids",
	// "disk"), if it did while the command ran.
	Limit string `json:"limit,omitempty"`
}

// Terminal control messages: text frames on a terminal's WebSocket (its
// binary frames are the terminal's bytes, both ways).
const (
	TermResize = "resize" // client: Cols and Rows
	TermSignal = "signal" // client: Signal, to the command's process group
	TermExit   = "exit"   // server, last: Exit
	TermError  = "error"  // server: Message (a control message it refused)
)

// TermControl is one text frame on a terminal's WebSocket.
type TermControl struct {
	Type    string    `json:"type"`
	Cols    int       `json:"cols,omitempty"`
	Rows    int       `json:"rows,omitempty"`
	Signal  string    `json:"signal,omitempty"`
	Exit    *ExitInfo `json:"exit,omitempty"`
	Message string    `json:"message,omitempty"`
}

// ErrBadExec wraps every error the decoders of this file return.
var ErrBadExec = errors.New("protocol: bad terminal or process request")

func badExec(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadExec, fmt.Sprintf(format, args...))
}

// DecodeTermControl decodes and checks a client's control frame: a
// resize to a size within MaxTermSize, or a signal this package names
// (Signals). Unknown fields are ignored (a newer client may send more);
// an unknown type is an error.
func DecodeTermControl(b []byte) (TermControl, error) {
	var c TermControl
	if len(b) > 4096 {
		return TermControl{}, badExec("a control frame of %d bytes (at most 4096)", len(b))
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return TermControl{}, badExec("a control frame is not a JSON object: %v", err)
	}
	switch c.Type {
	case TermResize:
		if err := checkSize(c.Cols, c.Rows); err != nil || c.Cols == 0 || c.Rows == 0 {
			return TermControl{}, badExec("resize needs cols and rows from 1 to %d, got %dx%d", MaxTermSize, c.Cols, c.Rows)
		}
	case TermSignal:
		if _, ok := SignalNumber(c.Signal); !ok {
			return TermControl{}, badExec("signal %q is not one of %s", c.Signal, strings.Join(Signals, ", "))
		}
	default:
		return TermControl{}, badExec("control frame type %q is not resize or signal", c.Type)
	}
	return c, nil
}

func checkSize(cols, rows int) error {
	if cols < 0 || rows < 0 || cols > MaxTermSize || rows > MaxTermSize {
		return badExec("a terminal's cols and rows go from 1 to %d, got %dx%d", MaxTermSize, cols, rows)
	}
	return nil
}

// ProcessRequest is the body of POST /sessions/{id}/processes: a command
// to run in the session, its stdin a pipe (POST .../stdin), its stdout
// and stderr kept in bounded rings (GET .../output).
type ProcessRequest struct {
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	Dir     string            `json:"dir,omitempty"` // as TerminalRequest.Dir
}

// Process is a process of a session, as POST and GET
// /sessions/{id}/processes answer.
type Process struct {
	ID      string   `json:"id"`
	Command []string `json:"command"`
	Pid     int      `json:"pid,omitempty"`
	State   string   `json:"state"` // ExecRunning or ExecExited
	// Stdout and Stderr are the bytes each stream has written so far
	// (also the offset its next byte will have).
	Stdout int64     `json:"stdout"`
	Stderr int64     `json:"stderr"`
	Exit   *ExitInfo `json:"exit,omitempty"`
}

// ProcessOutput is a page of a process's output (GET
// /sessions/{id}/processes/{pid}/output?stream=stdout&offset=N), or with
// follow=1 one line of the NDJSON stream.
type ProcessOutput struct {
	Stream string `json:"stream"` // stdout or stderr
	// Offset is the absolute offset of Data's first byte in the stream.
	Offset int64 `json:"offset"`
	// Data is the bytes from Offset, base64 (standard, padded).
	Data string `json:"data"`
	// Next is the offset to ask for next: Offset plus Data's length.
	Next int64 `json:"next"`
	// Dropped is how many bytes between the offset asked for and Offset
	// the box no longer holds: the ring keeps the latest bytes of each
	// stream only.
	Dropped int64 `json:"dropped,omitempty"`
	// EOF: the stream has ended and Next is its end.
	EOF  bool      `json:"eof,omitempty"`
	Exit *ExitInfo `json:"exit,omitempty"` // with EOF, once the process has ended
}

// ProcessSignal is the body of POST /sessions/{id}/processes/{pid}/signal.
type ProcessSignal struct {
	Signal string `json:"signal"`
}

// Signals are the signals a client may send a terminal or a process.
var Signals = []string{"SIGHUP", "SIGINT", "SIGQUIT", "SIGKILL", "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGCONT", "SIGSTOP", "SIGTSTP", "SIGWINCH"}

var signalNumbers = map[string]int{
	"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGKILL": 9, "SIGUSR1": 10, "SIGUSR2": 12,
	"SIGTERM": 15, "SIGCONT": 18, "SIGSTOP": 19, "SIGTSTP": 20, "SIGWINCH": 28,
}

// SignalNumber is the Linux number of a signal in Signals ("SIGTERM" or
// "TERM", any case).
func SignalNumber(name string) (int, bool) {
	n := strings.ToUpper(name)
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	sig, ok := signalNumbers[n]
	return sig, ok
}

// envName is a variable name a request may set.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckCommand checks a command, its environment and its directory as a
// terminal or process request carries them.
func CheckCommand(command []string, env map[string]string, dir string) error {
	if len(command) > MaxExecArgs {
		return badExec("a command of %d arguments (at most %d)", len(command), MaxExecArgs)
	}
	if len(command) > 0 && command[0] == "" {
		return badExec("the command's program is empty")
	}
	for _, a := range command {
		if strings.IndexByte(a, 0) >= 0 || !utf8.ValidString(a) {
			return badExec("an argument holds a NUL byte or is not UTF-8")
		}
	}
	if len(env) > MaxExecEnv {
		return badExec("%d environment variables (at most %d)", len(env), MaxExecEnv)
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if !envName.MatchString(k) {
			return badExec("environment variable name %q: use letters, digits and _", k)
		}
		if strings.IndexByte(env[k], 0) >= 0 {
			return badExec("environment variable %s holds a NUL byte", k)
		}
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return badExec("dir holds a NUL byte")
	}
	return nil
}

// DecodeTerminalRequest decodes and checks a terminal request.
func DecodeTerminalRequest(b []byte) (TerminalRequest, error) {
	var r TerminalRequest
	if len(b) > MaxExecRequest {
		return r, badExec("a request of %d bytes (at most %d)", len(b), MaxExecRequest)
	}
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, &r); err != nil {
			return TerminalRequest{}, badExec("the body is not a terminal request: %v", err)
		}
	}
	if err := checkSize(r.Cols, r.Rows); err != nil {
		return TerminalRequest{}, err
	}
	if err := CheckCommand(r.Command, r.Env, r.Dir); err != nil {
		return TerminalRequest{}, err
	}
	return r, nil
}

// DecodeProcessRequest decodes and checks a process request: it needs a
// command.
func DecodeProcessRequest(b []byte) (ProcessRequest, error) {
	var r ProcessRequest
	if len(b) > MaxExecRequest {
		return r, badExec("a request of %d bytes (at most %d)", len(b), MaxExecRequest)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return ProcessRequest{}, badExec("the body is not a process request: %v", err)
	}
	if len(r.Command) == 0 {
		return ProcessRequest{}, badExec(`a process needs a command: {"command":["npm","run","dev"]}`)
	}
	if err := CheckCommand(r.Command, r.Env, r.Dir); err != nil {
		return ProcessRequest{}, err
	}
	return r, nil
}
