package kit

import (
	"encoding/json"
	"testing"
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
	var r replay
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
}
