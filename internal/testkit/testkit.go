// Package testkit holds what the module's tests share: bounded waits
// (wait.go), finding processes by command line or environment (proc.go),
// the leak checks every package's TestMain runs, a per-test check that a
// package's goroutines ended, a logger writing to the test's output, and
// a log buffer a test can wait on.
//
// Every package's TestMain is
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
// so that a goroutine or a child process outliving the tests fails the
// run, naming what was left.
//
// It is imported by tests only.
package testkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Option adjusts what Main checks.
type Option func(*options)

type options struct {
	ignore []string
	after  []func()
}

// IgnoreGoroutines lets goroutines whose stack contains any of marks
// outlive the tests: process-wide goroutines a package starts on purpose
// and never stops (say, a signal relay).
func IgnoreGoroutines(marks ...string) Option {
	return func(o *options) { o.ignore = append(o.ignore, marks...) }
}

// After runs f once the tests have run, before the leak checks: cleanup
// of what the package's tests share (a copy of the repository, a built
// binary).
func After(f func()) Option {
	return func(o *options) { o.after = append(o.after, f) }
}

// Main runs the package's tests and exits. When they pass, it then fails
// the run if goroutines started by the tests, or child processes of the
// test binary, are still there after Timeout.
func Main(m *testing.M, opts ...Option) {
	os.Exit(Run(m, opts...))
}

// SupervisorArg0 is argv[0] of a sandbox supervisor (kit/sandbox's
// InitName, which this package cannot import: kit/sandbox's own tests
// import it).
const SupervisorArg0 = "glovebox-sandbox-init"

// Run is Main without the exit: it returns the exit code.
//
// A test binary that starts sandboxed sessions with itself as their
// supervisor calls sandbox.MaybeSupervise in TestMain before Main; one that
// reaches Run as a supervisor did not, and is refused here rather than
// running its tests again inside a session's sandbox.
func Run(m *testing.M, opts ...Option) int {
	if len(os.Args) > 0 && os.Args[0] == SupervisorArg0 {
		fmt.Fprintln(os.Stderr, "testkit: this test binary was started as a sandbox supervisor, but its TestMain does not call sandbox.MaybeSupervise before testkit.Main")
		return 2
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	code := m.Run()
	for _, f := range o.after {
		f()
	}
	if code != 0 {
		return code // the failures say more than what they left behind
	}
	// The tests' own HTTP clients keep idle connections in the default
	// transport; they belong to no code under test.
	http.DefaultClient.CloseIdleConnections()
	if left := waitGoroutines(func(g string) bool { return !benign(g, o.ignore) }); left != "" {
		fmt.Fprintf(os.Stderr, "testkit: goroutines left running after the tests:\n%s\n", left)
		code = 1
	}
	if kids := waitChildren(); len(kids) > 0 {
		fmt.Fprintf(os.Stderr, "testkit: processes left running after the tests:\n%s\n", strings.Join(kids, "\n"))
		code = 1
	}
	return code
}

// benignMarks are goroutines of the runtime and the testing package that
// live as long as the process.
var benignMarks = []string{
	"testing.(*M).",
	"testing.runTests",
	"testkit.waitGoroutines",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime/trace.",
	"runtime.goexit0",
	"created by runtime.gc",
	"runtime.ReadTrace",
	"runtime.forcegchelper",
	"runtime.bgsweep",
	"runtime.bgscavenge",
	"runtime.runfinq",
	"runtime.runCleanups",
}

func benign(g string, ignore []string) bool {
	// The goroutine running Main.
	if strings.Contains(g, "testkit.Run(") {
		return true
	}
	for _, m := range benignMarks {
		if strings.Contains(g, m) {
			return true
		}
	}
	for _, m := range ignore {
		if strings.Contains(g, m) {
			return true
		}
	}
	return false
}

// stacks returns the stack of every goroutine, one block each.
func stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// leakWait bounds how long Main waits for goroutines and processes to end.
var leakWait = Timeout

// waitGoroutines waits, at most leakWait, until no goroutine
// matches leaked, and returns the stacks of those that still do.
func waitGoroutines(leaked func(stack string) bool) string {
	deadline := time.Now().Add(leakWait)
	for {
		var left []string
		for _, g := range stacks() {
			if leaked(g) {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return strings.Join(left, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// NoGoroutines fails t unless, within Timeout, no goroutine has a
// frame containing any of marks ("glovebox/client.(*Box)",
// "kit/egress.(*"), leaving out the goroutine that calls it and the
// tests' runners. It is the per-test leak check, for tests that run
// alone: code under test may take a moment to return after its Close.
func NoGoroutines(t testing.TB, marks ...string) {
	t.Helper()
	left := waitGoroutines(func(g string) bool {
		for _, runner := range []string{"testkit.NoGoroutines", "testing.tRunner", "testing.fRunner", "testing.(*M).Run"} {
			if strings.Contains(g, runner) {
				return false
			}
		}
		for _, m := range marks {
			if strings.Contains(g, m) {
				return true
			}
		}
		return false
	})
	if left != "" {
		t.Errorf("goroutines of %s still running after %v:\n%s", strings.Join(marks, ", "), Timeout, left)
	}
}

// Children lists the test binary's child processes that are alive (not
// zombies), as "pid command".
func Children() []string {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var kids []string
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(b)) {
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue
			}
			i := bytes.LastIndexByte(stat, ')')
			if i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
				continue
			}
			cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			kids = append(kids, pid+" "+strings.TrimSpace(string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))))
		}
	}
	return kids
}

// waitChildren waits, at most leakWait, for the test binary's
// children to exit, and returns those that did not.
func waitChildren() []string {
	deadline := time.Now().Add(leakWait)
	for {
		kids := Children()
		if len(kids) == 0 || time.Now().After(deadline) {
			return kids
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Logger returns a logger writing text records at level and above to the
// test's output.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// LogBuffer collects what is written to it, from any goroutine, for a
// test to read or wait on. The zero value is ready to use.
type LogBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{} // closed by the next Write; nil when no one waits
}

var _ io.Writer = (*LogBuffer)(nil)

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.written != nil {
		close(l.written)
		l.written = nil
	}
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count returns how many times s was written so far.
func (l *LogBuffer) Count(s string) int { return strings.Count(l.String(), s) }

// Wait blocks until s has been written n times, or ctx ends; then it
// returns ctx's cause. It may be called from any goroutine.
func (l *LogBuffer) Wait(ctx context.Context, n int, s string) error {
	for {
		l.mu.Lock()
		if strings.Count(l.b.String(), s) >= n {
			l.mu.Unlock()
			return nil
		}
		if l.written == nil {
			l.written = make(chan struct{})
		}
		written := l.written
		l.mu.Unlock()
		select {
		case <-written:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Until fails t unless s has been written n times within
// Timeout.
func (l *LogBuffer) Until(t testing.TB, n int, s string) {
	t.Helper()
	if err := l.Wait(Context(t, fmt.Sprintf("%d× %q in the log", n, s)), n, s); err != nil {
		t.Fatalf("%v; the log has:\n%s", err, l.String())
	}
}
