package kit

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/glovebox-dev/glovebox/kit/agent"
)

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl\x00\x01\x1f\n\r\t", "\u2028\u2029", "héllo 世界", "bad \xff utf8", "<html>&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("appendString(%q) = %s: not JSON: %v", s, b, err)
		}
		// encoding/json is the reference, also for invalid UTF-8.
		var want string
		if err := json.Unmarshal(mustMarshal(s), &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("appendString(%q) decodes to %q, want %q", s, got, want)
		}
	})
}

func mustMarshal(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

func TestReplay(t *testing.T) {
	var total atomic.Int64
	r := replay{total: &total}
	for seq := uint64(1); seq <= replayFrames+10; seq++ {
		r.push(seq, []byte{byte(seq)})
	}
	cur := uint64(replayFrames + 10)
	if _, ok := r.since(5, cur); ok {
		t.Error("since(5) succeeded although frame 6 was dropped")
	}
	if fs, ok := r.since(cur-3, cur); !ok || len(fs) != 3 || fs[0][0] != byte(cur-2) {
		t.Errorf("since(cur-3) = %d frames, %v", len(fs), ok)
	}
	if fs, ok := r.since(cur, cur); !ok || len(fs) != 0 {
		t.Errorf("since(cur) = %v, %v", fs, ok)
	}
	if _, ok := r.since(cur+1, cur); ok {
		t.Error("since a future seq succeeded")
	}
	if total.Load() != int64(r.bytes) || r.bytes != replayFrames {
		t.Errorf("total %d, buffer %d bytes, want %d", total.Load(), r.bytes, replayFrames)
	}
	r.reset()
	if total.Load() != 0 {
		t.Errorf("total after reset = %d", total.Load())
	}
}

// FuzzClientFrames sends arbitrary frames to a live session: whatever they
// hold, the kit must answer or ignore them and keep the connection.
func FuzzClientFrames(f *testing.F) {
	for _, s := range []string{
		`{"type":"prompt","id":"a","text":"echo hi"}`,
		`{"type":"prompt","id":"b","text":"/output ../../x","inputs":{"../a":{"kind":"inline","name":"a","data":"eA=="}}}`,
		`{"type":"prompt","id":"c","text":"x","inputs":{"a":{"kind":"server","name":"a","id":"nope","url":"http://x/files/nope","size":1}}}`,
		`{"type":"prompt","id":"d","text":"x","outputs_policy":{"inline_below":"1KB","server_ttl":"1s"}}`,
		`{"type":"abort","id":"zz"}`,
		`{"type":"display_resolve","slot_id":"slot_9","value":1}`,
		`{"type":"display_reject","slot_id":"slot_1"}`,
		`{"type":"hello","capabilities":["resume",1]}`,
		`{"type":"ping","ts":{"deep":[1,2,3]}}`,
		`[]`, `null`, `{"type":7}`, "\xff\xfe",
	} {
		f.Add(s)
	}
	// An agent that touches nothing: fuzzed text must not make it write
	// files or stream without end.
	b := newBox(f, agent.Func(func(ctx context.Context, t agent.Turn) (string, error) {
		return strconv.Itoa(len(t.Text())), t.Emit("text_delta", map[string]string{"text": t.Text()})
	}))
	c := b.dial("/", nil)
	f.Fuzz(func(t *testing.T, frame string) {
		c.t = t
		c.sendRaw(frame)
		c.sendRaw(`{"type":"ping","ts":"fuzz-check"}`)
		// Every frame before the pong is about the fuzzed input; the pong
		// proves the connection is still served.
		c.until(func(m map[string]any) bool { return m["type"] == "pong" && m["ts"] == "fuzz-check" })
	})
}

// TestReplayCapCoversLastFrame checks that a frame larger than what the
// buffers may hold is not kept, not even as the latest one.
func TestReplayCapCoversLastFrame(t *testing.T) {
	var total atomic.Int64
	r := replay{total: &total, limit: 100}
	r.push(1, make([]byte, 60))
	if fs, ok := r.since(0, 1); !ok || len(fs) != 1 {
		t.Fatalf("since(0) = %d frames, %v; want the one frame", len(fs), ok)
	}
	r.push(2, make([]byte, 150))
	if total.Load() != 0 || r.bytes != 0 {
		t.Errorf("after a 150-byte frame over a 100-byte cap: total %d, buffer %d bytes; want 0", total.Load(), r.bytes)
	}
	if _, ok := r.since(1, 2); ok {
		t.Error("since(1) succeeded although frame 2 could not be kept")
	}
	if fs, ok := r.since(2, 2); !ok || len(fs) != 0 {
		t.Errorf("since(2) = %d frames, %v; want none, true", len(fs), ok)
	}
	r.push(3, make([]byte, 40))
	if fs, ok := r.since(2, 3); !ok || len(fs) != 1 || total.Load() != 40 {
		t.Errorf("since(2) = %d frames, %v, total %d; want frame 3, 40 bytes", len(fs), ok, total.Load())
	}
}
