package client

import (
	"testing"
)

// FuzzHandle feeds arbitrary frames to a box's frame router, with a prompt
// in flight: nothing may panic, and the prompt must stay consistent.
func FuzzHandle(f *testing.F) {
	for _, s := range []string{
		`{"type":"event","id":"req_1","event_type":"text_delta","data":{"text":"hi"},"seq":1}`,
		`{"type":"complete","id":"req_1","message":"m","outputs":{"a":{"kind":"inline","name":"a","mime":"text/plain","data":"aGk="}}}`,
		`{"type":"error","id":"req_1","error":{"code":"AbortError","message":"x"}}`,
		`{"type":"error","id":"","error":{"code":"ResumeFailed","message":"x"}}`,
		`{"type":"display_push","slot":{"renderer":"confirm","input":{},"id":"slot_1"},"id":"req_1","seq":3}`,
		`{"type":"display_clear","slot_id":"slot_1"}`,
		`{"type":"hello","protocol_version":1,"session_id":"s","capabilities":["resume","seq"]}`,
		`{"type":"pong","ts":1}`,
		`{"type":"complete","id":"req_1","outputs":{"a":{"kind":"server","size":-1}}}`,
		`[]`, `{"type":7}`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := newBox("fuzz", Endpoint{URL: "ws://127.0.0.1:1/", Key: "k"}, defaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		r := newResult(b, "req_1", false)
		b.inflight["req_1"] = r
		b.handle(nil, data)
		b.handle(nil, data)
		if r.isDone() {
			if _, ok := b.inflight["req_1"]; ok {
				t.Errorf("a finished prompt is still in flight")
			}
			r.mu.Lock()
			if (r.final == nil) == (r.err == nil) {
				t.Errorf("finished prompt has final %v and err %v: want exactly one", r.final, r.err)
			}
			r.mu.Unlock()
		}
	})
}
