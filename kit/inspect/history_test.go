package inspect

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
)

func testRecord(i int) SessionRecord {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(i) * time.Minute)
	code := i % 3
	return SessionRecord{
		ID: fmt.Sprintf("s%03d", i), Owner: "key", Started: t0, Ended: t0.Add(time.Second), Cause: "connection closed",
		Prompts: []PromptInfo{{ID: "p1", Text: strings.Repeat("x", 2000), State: "complete", Queued: t0, Exit: &code, Limit: "memory"}},
	}
}

func TestHistoryRingKeepsTheLatestWithinItsBounds(t *testing.T) {
	h, err := openHistory("", testkit.Logger(t, slog.LevelDebug))
	if err != nil {
		t.Fatal(err)
	}
	for i := range historySessions + 20 {
		h.add(testRecord(i))
	}
	got := h.list()
	if len(got) != historySessions {
		t.Fatalf("kept %d sessions, want %d", len(got), historySessions)
	}
	if got[0].ID != fmt.Sprintf("s%03d", historySessions+19) || got[len(got)-1].ID != "s020" {
		t.Errorf("kept %s..%s, want the latest first: s%03d..s020", got[0].ID, got[len(got)-1].ID, historySessions+19)
	}
	if n := len(got[0].Prompts[0].Text); n != historyPromptText {
		t.Errorf("a prompt's text kept %d bytes, want %d", n, historyPromptText)
	}

	// The byte bound drops the oldest too, but never the newest.
	h.maxBytes = 1500
	h.add(testRecord(999))
	if got := h.list(); len(got) != 1 || got[0].ID != "s999" || h.bytes > 1500 {
		t.Errorf("over the byte bound kept %d sessions (%d bytes), want the newest only", len(got), h.bytes)
	}
}

func TestHistoryPersistsAndIsRereadAtStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "inspect")
	h, err := openHistory(dir, testkit.Logger(t, slog.LevelDebug))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		h.add(testRecord(i))
	}
	// A line cut short when the box stopped.
	path := filepath.Join(dir, "history.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"cut","prom`)
	f.Close()

	h2, err := openHistory(dir, testkit.Logger(t, slog.LevelDebug))
	if err != nil {
		t.Fatal(err)
	}
	got := h2.list()
	if len(got) != 5 || got[0].ID != "s004" || got[4].ID != "s000" {
		t.Fatalf("reread %d sessions %v, want s004..s000", len(got), ids(got))
	}
	if p := got[0].Prompts[0]; p.Exit == nil || *p.Exit != 4%3 || p.Limit != "memory" || p.State != "complete" {
		t.Errorf("reread prompt = %+v, want exit 1, limit memory, complete", p)
	}
	h2.add(testRecord(5))
	h3, _ := openHistory(dir, testkit.Logger(t, slog.LevelDebug))
	if got := h3.list(); len(got) != 6 || got[0].ID != "s005" {
		t.Errorf("after a restart and one more, reread %v, want s005 first of 6", ids(got))
	}

	// The file is rewritten from the ring once it outgrows twice the
	// bound: it never grows without end.
	h3.maxBytes = 6000
	for i := range 50 {
		h3.add(testRecord(100 + i))
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 2*6000 {
		t.Errorf("the history file is %d bytes, want at most %d", st.Size(), 2*6000)
	}
	h4, _ := openHistory(dir, testkit.Logger(t, slog.LevelDebug))
	if got := h4.list(); len(got) == 0 || got[0].ID != "s149" {
		t.Errorf("after compaction reread %v, want s149 first", ids(got))
	}
}

func TestHistoryInAnUnwritableDirKeepsTheRing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	os.WriteFile(file, nil, 0o600)
	h, err := openHistory(filepath.Join(file, "inspect"), testkit.Logger(t, slog.LevelDebug))
	if err == nil {
		t.Fatal("openHistory under a file: no error")
	}
	h.add(testRecord(1))
	if got := h.list(); len(got) != 1 {
		t.Errorf("kept %d sessions in memory, want 1", len(got))
	}
}

func ids(rs []SessionRecord) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}
