package egress

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

func record(j *Journal, session string, n int) {
	for i := 0; i < n; i++ {
		j.Record(&Event{Time: time.Unix(1e9+int64(i), 0).UTC(), Session: session, Proto: "connect", Host: "h.test", Port: 443, Decision: Allow, Rule: "h.test", Line: `allow = ["h.test"]`})
	}
}

func seqs(t *testing.T, lines [][]byte) []uint64 {
	t.Helper()
	var out []uint64
	for _, l := range lines {
		var ev Event
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, ev.Seq)
	}
	return out
}

// TestJournalBoundedAndReread: the ring keeps the latest lines, the files
// rotate at their size and only Keep old ones stay, and a journal opened
// again on the directory (the kit restarted) has the same ring and goes
// on numbering; a line cut short when the box stopped is skipped.
func TestJournalBoundedAndReread(t *testing.T) {
	dir := t.TempDir()
	o := JournalOptions{Dir: dir, RingLines: 5, FileBytes: 2000, Keep: 2}
	j, err := OpenJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	record(j, "s1", 100)
	lines, _, _ := j.Since(Query{})
	if got := fmt.Sprint(seqs(t, lines)); got != "[96 97 98 99 100]" {
		t.Errorf("ring = %s, want the latest 5", got)
	}
	j.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(names) != 3 {
		t.Errorf("files = %v, want audit.jsonl and 2 rotated", names)
	}
	var total int64
	for _, n := range names {
		st, _ := os.Stat(n)
		total += st.Size()
		if st.Size() > 2000 {
			t.Errorf("%s: %d bytes, over the 2000 it rotates at", n, st.Size())
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", n, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", st.Mode().Perm())
	}
	// A line cut short.
	f, _ := os.OpenFile(filepath.Join(dir, JournalFile), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":101,"time":"2001-09-09T01:46`)
	f.Close()

	j2, err := OpenJournal(o)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	lines, _, _ = j2.Since(Query{})
	if got := fmt.Sprint(seqs(t, lines)); got != "[96 97 98 99 100]" {
		t.Errorf("ring after reopening = %s", got)
	}
	record(j2, "s2", 1)
	lines, _, _ = j2.Since(Query{Session: "s2"})
	if got := fmt.Sprint(seqs(t, lines)); got != "[101]" {
		t.Errorf("the new line = %s, want seq 101", got)
	}
	j2.Close()
	data, _ := os.ReadFile(filepath.Join(dir, JournalFile))
	last := strings.Split(strings.TrimSpace(string(data)), "\n")
	var ev Event
	if err := json.Unmarshal([]byte(last[len(last)-1]), &ev); err != nil || ev.Seq != 101 {
		t.Errorf("the file's last line %q: %v", last[len(last)-1], err)
	}
}

// TestJournalRingBytes: the ring is bounded in bytes too.
func TestJournalRingBytes(t *testing.T) {
	j, _ := OpenJournal(JournalOptions{RingBytes: 1000})
	record(j, "s1", 50)
	lines, _, _ := j.Since(Query{})
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	if n > 1000 || len(lines) == 0 {
		t.Errorf("ring holds %d lines, %d bytes; want at most 1000 bytes", len(lines), n)
	}
}

// TestJournalFollow: a follower gets the new lines its query selects, a
// slow one is told how many it lost, and followers are bounded.
func TestJournalFollow(t *testing.T) {
	j, _ := OpenJournal(JournalOptions{MaxFollowers: 2})
	record(j, "a", 3)
	old, f, err := j.Since(Query{Session: "a", AfterSeq: 1, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(seqs(t, old)); got != "[2 3]" {
		t.Errorf("kept lines = %s", got)
	}
	record(j, "b", 1)
	record(j, "a", 1)
	if got := seqs(t, [][]byte{testkit.Recv(t, f.Lines(), "a followed line")}); got[0] != 5 {
		t.Errorf("followed seq %d, want 5 (session b's line is not this follower's)", got[0])
	}
	_, f2, _ := j.Since(Query{Follow: true})
	if _, _, err := j.Since(Query{Follow: true}); err != ErrTooManyFollowers {
		t.Errorf("a third follower: %v, want ErrTooManyFollowers", err)
	}
	record(j, "a", followerQueue+10)
	if n := f2.TakeDropped(); n != 10 {
		t.Errorf("dropped = %d, want 10", n)
	}
	f.Stop()
	f2.Stop()
	if _, f3, err := j.Since(Query{Follow: true}); err != nil {
		t.Errorf("a follower after the others stopped: %v", err)
	} else {
		f3.Stop()
	}
}

func TestParseQuery(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		q    string
		want Query
		err  string
	}{
		{"", Query{}, ""},
		{"since=42&session=abc&follow=1", Query{AfterSeq: 42, Session: "abc", Follow: true}, ""},
		{"since=2026-01-02T15:00:00Z", Query{Since: time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)}, ""},
		{"since=10m&follow=0", Query{Since: now.Add(-10 * time.Minute)}, ""},
		{"since=yesterday", Query{}, "neither a seq"},
		{"since=-5", Query{}, "neither a seq"},
		{"follow=yes", Query{}, "follow must be 1 or 0"},
		{"session=a%20b", Query{}, "not a session id"},
		{"since=1&since=2", Query{}, "given 2 times"},
		{"sinse=1", Query{}, "unknown parameter"},
	} {
		v, _ := url.ParseQuery(tc.q)
		got, err := ParseQuery(v, now)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want an error saying %q", tc.q, err, tc.err)
			}
			continue
		}
		if err != nil || !got.Since.Equal(tc.want.Since) || got.AfterSeq != tc.want.AfterSeq || got.Session != tc.want.Session || got.Follow != tc.want.Follow {
			t.Errorf("%q: %+v, %v; want %+v", tc.q, got, err, tc.want)
		}
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "since=42", "since=2026-01-02T15:04:05Z&session=s1&follow=1", "since=10m", "follow=true", "session=%00", "since=1e9", "since=18446744073709551616"} {
		f.Add(s)
	}
	now := time.Unix(1e9, 0)
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseQuery(v, now)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if len(q.Session) > 128 || strings.ContainsAny(q.Session, " \n\x00") {
			t.Fatalf("session %q accepted", q.Session)
		}
		// A parsed query selects lines without trouble.
		q.matches(1, now, "s")
	})
}

func TestTOMLLine(t *testing.T) {
	for _, tc := range []struct{ verdict, rule, want string }{
		{Allow, "api.github.com", `allow = ["api.github.com"]`},
		{Fail, "api.github.com:443", `allow = ["api.github.com:443"]`},
		{Deny, "*.evil.test", `deny = ["*.evil.test"]`},
		{Deny, `default = "deny"`, `default = "deny"`},
		{Allow, `default = "allow"`, `default = "allow"`},
		{Deny, "built-in: link-local", ""},
		{Deny, "ask: timeout", ""},
		{Fail, "", ""},
	} {
		if got := TOMLLine(tc.verdict, tc.rule); got != tc.want {
			t.Errorf("TOMLLine(%s, %q) = %q, want %q", tc.verdict, tc.rule, got, tc.want)
		}
	}
}

// BenchmarkRecord is the cost of recording one decision: numbering and
// encoding it, the ring, and (file) the append to the trail's file.
func BenchmarkRecord(b *testing.B) {
	for _, tc := range []struct {
		name string
		dir  bool
	}{{"ring", false}, {"file", true}} {
		b.Run(tc.name, func(b *testing.B) {
			o := JournalOptions{}
			if tc.dir {
				o.Dir = b.TempDir()
			}
			j, err := OpenJournal(o)
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			ev := Event{Time: time.Now(), Session: "0123456789abcdef0123456789abcdef", Proto: "connect", Host: "api.github.com", Port: 443,
				Decision: Allow, Rule: "api.github.com", Line: `allow = ["api.github.com"]`, Reason: `api.github.com:443 matches the allow rule "api.github.com"`,
				Addrs: []string{"140.82.112.6"}, BytesOut: 1234, BytesIn: 56789}
			b.ReportAllocs()
			for b.Loop() {
				e := ev
				j.Record(&e)
			}
		})
	}
}
