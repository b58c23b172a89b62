//go:build linux

package sandbox

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestPrivateDev: a session's /dev holds the devices programs need and
// nothing else of the host's (no disks, no /dev/kmsg, no host ttys), is
// read-only but for the devices, and has pseudo-terminals of its own.
func TestPrivateDev(t *testing.T) {
	b := newBox(t, Config{})
	if !b.sb.Report().Has(LayerMount) {
		t.Skip("no mount namespace here: ", b.sb.Report())
	}
	ss, dir := b.session(t, "dev")
	out, st := run(t, ss, dir, `
ls -A /dev | tr '\n' ' '; echo
echo x > /dev/null && echo null-writable
head -c 4 /dev/urandom | wc -c
head -c 3 /dev/zero | wc -c
touch /dev/planted 2>/dev/null || echo dev-read-only
mknod /dev/sda2 b 8 2 2>/dev/null || echo no-mknod
python3 -c 1 2>/dev/null
# A pseudo-terminal pair from the namespace's own devpts.
exec 3<>/dev/ptmx && echo ptmx-opens
ls /dev/pts | tr '\n' ' '; echo
readlink /dev/fd /dev/stdin`)
	if st.Code != 0 {
		t.Fatalf("exit %v:\n%s", st, out)
	}
	lines := strings.Split(out, "\n")
	got := strings.Fields(lines[0])
	want := map[string]bool{"null": true, "zero": true, "full": true, "random": true, "urandom": true, "tty": true,
		"pts": true, "ptmx": true, "shm": true, "fd": true, "stdin": true, "stdout": true, "stderr": true}
	for _, name := range got {
		if !want[name] {
			t.Errorf("/dev holds %q: only %v belong there", name, got)
		}
	}
	for _, name := range []string{"null", "zero", "urandom", "ptmx", "pts", "shm"} {
		if !strings.Contains(" "+lines[0]+" ", " "+name+" ") {
			t.Errorf("/dev lacks %s: %v", name, got)
		}
	}
	for _, w := range []string{"null-writable", "\n4\n", "\n3\n", "dev-read-only", "no-mknod", "ptmx-opens", "/proc/self/fd\n/proc/self/fd/0"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	// The host's /dev has more than the sandbox's: the test would prove
	// nothing on a host whose /dev were as bare.
	host, err := os.ReadDir("/dev")
	if err != nil {
		t.Fatal(err)
	}
	if len(host) <= len(want) {
		t.Skipf("the host's /dev has only %d entries: nothing to hide", len(host))
	}
}

// TestTmpSizedFromTheLimits: a session's private /tmp and /dev/shm are as
// large as its smallest limit, not a fixed gigabyte each.
func TestTmpSizedFromTheLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits Limits
		want   int64
	}{
		{"disk", Limits{Disk: 8 << 20}, 8 << 20},
		{"memory below disk", Limits{Disk: 64 << 20, Memory: 16 << 20}, 16 << 20},
		{"none", Limits{}, DefaultTmpSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.limits.tmpSize(); got != tc.want {
				t.Fatalf("tmpSize() = %d, want %d", got, tc.want)
			}
			b := newBox(t, Config{NoCgroup: true, Limits: tc.limits})
			if !b.sb.Report().Has(LayerMount) {
				t.Skip("no mount namespace here: ", b.sb.Report())
			}
			ss, dir := b.session(t, "tmp")
			out, st := run(t, ss, dir, `stat -f -c '%b %S' /tmp /dev/shm`)
			if st.Code != 0 {
				t.Fatalf("exit %v: %s", st, out)
			}
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Fields(l)
				blocks, _ := strconv.ParseInt(f[0], 10, 64)
				bsize, _ := strconv.ParseInt(f[1], 10, 64)
				if blocks*bsize != tc.want {
					t.Errorf("a private tmpfs holds %d bytes, want %d (%q)", blocks*bsize, tc.want, l)
				}
			}
		})
	}
}

// TestFileSizeLimitNamed: a command killed by RLIMIT_FSIZE (set from
// limits.disk) names the disk limit, never the memory limit.
func TestFileSizeLimitNamed(t *testing.T) {
	b := newBox(t, Config{Limits: Limits{Disk: 1 << 20, Memory: 256 << 20}})
	ss, dir := b.session(t, "fsize")
	out, st := run(t, ss, dir, `exec dd if=/dev/zero of=big bs=64k count=64 2>/dev/null`)
	if st.Signal.String() != "file size limit exceeded" || st.Limit != "disk" {
		t.Fatalf("status %+v (%v), want SIGXFSZ and the disk limit named; output:\n%s", st, st, out)
	}
	if !strings.Contains(st.String(), "limits.disk") {
		t.Errorf("String() = %q, want limits.disk named", st)
	}
}

// TestPidsReportedOnlyWhereEnforced: without a uid of the session's own
// or a cgroup nothing caps a session's processes, and the report says no
// cap.
func TestPidsReportedOnlyWhereEnforced(t *testing.T) {
	b := newBox(t, Config{NoUsers: true, NoCgroup: true, Limits: Limits{Pids: 64}})
	if got := b.sb.Report().Limits.Pids; got != 0 {
		t.Errorf("without uids or a cgroup the report shows a pids cap of %d", got)
	}
	b = newBox(t, Config{NoCgroup: true, Limits: Limits{Pids: 64}})
	if got := b.sb.Report().Limits.Pids; got != 64 {
		t.Errorf("with a uid per session the report shows a pids cap of %d, want 64", got)
	}
}
