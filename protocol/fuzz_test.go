package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

// addGolden seeds a fuzz target with the golden frames whose names start
// with prefix.
func addGolden(f *testing.F, prefix string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "golden", prefix+"*.json"))
	if err != nil || len(paths) == 0 {
		f.Fatalf("no golden files %s*: %v", prefix, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// checkMessageRoundTrip checks that a decoded message encodes, and that
// decoding and encoding are stable from then on: the first round trip may
// normalise (compact raw JSON, drop empty maps), later ones change nothing.
func checkMessageRoundTrip(t *testing.T, in []byte, m any, decode func([]byte) (any, error)) {
	t.Helper()
	if got := protocol.TypeOf(m); got == "" {
		t.Fatalf("Decode(%q) returned %T, which has no wire type", in, m)
	}
	enc1, err := protocol.Encode(m)
	if err != nil {
		t.Fatalf("Encode(Decode(%q)) error = %v", in, err)
	}
	if !json.Valid(enc1) || !bytes.HasPrefix(enc1, []byte(`{"type":"`+protocol.TypeOf(m)+`"`)) {
		t.Fatalf("Encode(Decode(%q)) = %s, want a JSON object with its type first", in, enc1)
	}
	m2, err := decode(enc1)
	if err != nil {
		t.Fatalf("Decode(Encode(Decode(%q))) = Decode(%s) error = %v", in, enc1, err)
	}
	enc2, err := protocol.Encode(m2)
	if err != nil {
		t.Fatalf("Encode(%#v) error = %v", m2, err)
	}
	if !bytes.Equal(enc1, enc2) {
		t.Fatalf("encoding is not stable for %q:\n first %s\nsecond %s", in, enc1, enc2)
	}
	m3, err := decode(enc2)
	if err != nil {
		t.Fatalf("Decode(%s) error = %v", enc2, err)
	}
	if diff := cmp.Diff(m2, m3); diff != "" {
		t.Fatalf("decoding is not stable for %s (-first +second):\n%s", enc1, diff)
	}
}

func FuzzDecodeClient(f *testing.F) {
	addGolden(f, "client_")
	for _, s := range []string{
		`{"type":"prompt","id":"r","text":42}`,
		`{"type":"prompt","id":"r","text":"t","inputs":{"a":{"kind":"inline","name":"a","mime":"","data":"aGk"}}}`,
		`{"type":"prompt","id":"r","text":"t","inputs":{"a":{"kind":"server","name":"a","id":"i","url":"u","size":1e3}}}`,
		`{"type":"prompt","id":"r","text":"t","outputs_policy":{"s3":{"bucket":"b"}}}`,
		`{"type":"display_resolve","slot_id":"s"}`,
		`{"type":"ping"}`,
		`{"type":"hello","capabilities":null}`,
		`{"type":"abort","id":"r","ID":"s"}`,
		`{"type":"teleport"}`,
		`[]`, `{`, ``, `null`,
	} {
		f.Add([]byte(s))
	}
	decode := func(b []byte) (any, error) { return protocol.DecodeClient(b) }
	f.Fuzz(func(t *testing.T, in []byte) {
		protocol.PeekID(in)
		m, err := protocol.DecodeClient(in)
		if err != nil {
			if m != nil {
				t.Fatalf("DecodeClient(%q) = %#v, %v, want no message with an error", in, m, err)
			}
			if !errors.Is(err, protocol.ErrBadMessage) && !errors.Is(err, protocol.ErrUnknownType) {
				t.Fatalf("DecodeClient(%q) error = %v, want ErrBadMessage or ErrUnknownType", in, err)
			}
			return
		}
		if p, ok := m.(*protocol.Prompt); ok {
			if p.ID == "" {
				t.Fatalf("DecodeClient(%q) = prompt with an empty id", in)
			}
			p.OutputsPolicy.Check() // must not panic
			p.OutputsPolicy.Apply(protocol.DefaultOutputsPolicy())
		}
		checkMessageRoundTrip(t, in, m, decode)
	})
}

func FuzzDecodeServer(f *testing.F) {
	addGolden(f, "server_")
	for _, s := range []string{
		`{"type":"event","id":"r","event_type":"x"}`,
		`{"type":"complete","id":"r","message":"m"}`,
		`{"type":"complete","id":"r","message":"m","outputs":{"a":{"kind":"gcs","name":"a","bucket":"b","object":"o"}}}`,
		`{"type":"display_push","slot":{"id":"s"}}`,
		`{"type":"error","id":"r","error":null}`,
		`{"type":"hello","protocol_version":1,"capabilities":[]}`,
		`{"type":"pong","ts":{"a":[1,2,{}]}}`,
	} {
		f.Add([]byte(s))
	}
	decode := func(b []byte) (any, error) { return protocol.DecodeServer(b) }
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := protocol.DecodeServer(in)
		if err != nil {
			if m != nil {
				t.Fatalf("DecodeServer(%q) = %#v, %v, want no message with an error", in, m, err)
			}
			if !errors.Is(err, protocol.ErrBadMessage) && !errors.Is(err, protocol.ErrUnknownType) {
				t.Fatalf("DecodeServer(%q) error = %v, want ErrBadMessage or ErrUnknownType", in, err)
			}
			return
		}
		checkMessageRoundTrip(t, in, m, decode)
	})
}

func FuzzFileRef(f *testing.F) {
	for _, s := range []string{
		`{"kind":"inline","name":"a","mime":"text/plain","data":"aGk="}`,
		`{"kind":"inline","name":"a","data":"aGk\n-_8"}`,
		`{"kind":"url","name":"a","url":"https://h/a?x=1&y=2","headers":{"X":"y"}}`,
		`{"kind":"url","name":"a","url":"https://h/a","headers":{}}`,
		`{"kind":"server","name":"a","mime":"m","size":2097152,"id":"i","url":"http://h/files/i"}`,
		`{"kind":"server","name":"a","mime":"m","size":9007199254740993,"id":"i","url":"u"}`,
		`{"kind":"s3","name":"a","bucket":"b","key":"k","region":"r"}`,
		`{"kind":"gcs","name":"a","bucket":"b","object":"o"}`,
		`{"kind":"ftp"}`, `{}`, `null`, `7`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var r protocol.FileRef
		if err := json.Unmarshal(in, &r); err != nil {
			return
		}
		if r.Kind == "" {
			// A JSON null leaves the ref untouched, as for any type.
			if !bytes.Equal(bytes.TrimSpace(in), []byte("null")) {
				t.Fatalf("json.Unmarshal(%q) gave a ref without a kind", in)
			}
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("json.Unmarshal(%q) accepted a ref that does not validate: %v", in, err)
		}
		if r.Kind == protocol.KindInline {
			if _, err := r.Bytes(); err != nil {
				t.Fatalf("Bytes() of accepted inline ref %q error = %v", in, err)
			}
		}
		enc1, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("json.Marshal(%+v) error = %v", r, err)
		}
		var r2 protocol.FileRef
		if err := json.Unmarshal(enc1, &r2); err != nil {
			t.Fatalf("json.Unmarshal(%s) error = %v", enc1, err)
		}
		enc2, err := json.Marshal(r2)
		if err != nil || !bytes.Equal(enc1, enc2) {
			t.Fatalf("FileRef encoding is not stable: %s then %s, %v", enc1, enc2, err)
		}
		var r3 protocol.FileRef
		json.Unmarshal(enc2, &r3)
		if diff := cmp.Diff(r2, r3); diff != "" {
			t.Fatalf("FileRef decoding is not stable (-first +second):\n%s", diff)
		}
	})
}

func FuzzDecodeBase64(f *testing.F) {
	for _, s := range []string{"aGk=", "aGk", "-_8", "+/8=", " a G k = ", "a", "="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := protocol.DecodeBase64(s)
		if err != nil {
			return
		}
		ref := protocol.InlineRef("x", "", b)
		back, err := ref.Bytes()
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("InlineRef/Bytes round trip of %q = %q, %v, want %q", s, back, err, b)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{" 1.5 kb ", "512", "0", "1MiB", "1Gi", "1TB", "1e3", "-1", " ", "1.2.3", ".", "1GB", "8388608GB", "99999999999GB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := protocol.ParseSize(s)
		if err != nil {
			if !strings.Contains(err.Error(), "size ") {
				t.Fatalf("ParseSize(%q) error = %v, want it to name the size", s, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d, want >= 0", s, n)
		}
		f := protocol.FormatSize(n)
		if back, err := protocol.ParseSize(f); err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d)) = ParseSize(%q) = %d, %v, want %d", n, f, back, err, n)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"30s", "5m", "1h", "7d", "5 M", "1h30m", "1.5h", "250ms", "0s", "-5m", "1w", "200000d", "9223372036854775807ns", "2562047h0m", "106751d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := protocol.ParseDuration(s)
		if err != nil {
			if !strings.Contains(err.Error(), "duration ") {
				t.Fatalf("ParseDuration(%q) error = %v, want it to name the duration", s, err)
			}
			return
		}
		if d <= 0 {
			t.Fatalf("ParseDuration(%q) = %v, want > 0", s, d)
		}
		f := protocol.FormatDuration(d)
		if back, err := protocol.ParseDuration(f); err != nil || back != d {
			t.Fatalf("ParseDuration(FormatDuration(%v)) = ParseDuration(%q) = %v, %v, want %v", d, f, back, err, d)
		}
	})
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(v1Manifest))
	for _, s := range []string{
		`{}`, `null`, `[]`,
		`{"fs":{"scratch":{"path":"/scratch","writable":true}},"storage_policy":{"outputs":{"__rules":[{"use":{"adapter":"inline"},"when":{"always":true}}]}}}`,
		`{"agent":{"type":"acp","command":["npx","a"]},"sessions":{"max":3,"resume_grace":"1m"}}`,
		`{"storage_policy":{"inputs":{"rules":[]}},"limits":{"max_message":"1MiB"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := protocol.ParseManifest(in)
		if err != nil {
			return
		}
		m.Check() // must not panic, whatever the manifest holds
		m.AgentType()
		m.Environment(nil)
		enc1, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("json.Marshal(ParseManifest(%q)) error = %v", in, err)
		}
		m2, err := protocol.ParseManifest(enc1)
		if err != nil {
			t.Fatalf("ParseManifest(%s) error = %v", enc1, err)
		}
		enc2, err := json.Marshal(m2)
		if err != nil || !bytes.Equal(enc1, enc2) {
			t.Fatalf("manifest encoding is not stable: %s then %s, %v", enc1, enc2, err)
		}
	})
}

func FuzzPolicy(f *testing.F) {
	for _, s := range []string{
		`{"rules":[{"use":{"adapter":"inline"},"when":{"sizeBelow":"1MB"}},{"use":{"adapter":"localServer","options":{"ttl":"1h"}},"when":{"default":true}}]}`,
		`{"__rules":[{"use":{"adapter":"url"},"when":{"always":true}}]}`,
		`{"rules":[{"use":{"adapter":"inline"},"when":{"sizeAbove":"1.5B","sizeBelow":"0.1KB"}}]}`,
		`{"rules":[{"use":{"adapter":"inline"},"when":{"sizeBelow":"1MiB"}}]}`,
		`{"rules":[{"use":{"adapter":"s3","options":{"ttl":3600}},"when":{}}]}`,
		`{}`, `{"rules":[]}`,
	} {
		f.Add([]byte(s))
	}
	registered := func(a string) bool { return a != "s3" }
	f.Fuzz(func(t *testing.T, in []byte) {
		var p protocol.Policy
		if err := json.Unmarshal(in, &p); err != nil {
			return
		}
		p.Check() // must not panic, whatever the policy holds
		protocol.ValidateOutputs(p, func(a string) protocol.AdapterInfo {
			return protocol.AdapterInfo{Registered: registered(a), ReadOnly: a == "url"}
		})
		enc1, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("json.Marshal(%+v) error = %v", p, err)
		}
		var p2 protocol.Policy
		if err := json.Unmarshal(enc1, &p2); err != nil {
			t.Fatalf("json.Unmarshal(%s) error = %v", enc1, err)
		}
		enc2, err := json.Marshal(p2)
		if err != nil || !bytes.Equal(enc1, enc2) {
			t.Fatalf("policy encoding is not stable: %s then %s, %v", enc1, enc2, err)
		}
	})
}

// FuzzEncode builds messages from arbitrary strings and checks that each
// encodes and decodes back to itself: the encoder and decoders agree.
func FuzzEncode(f *testing.F) {
	f.Add("req_1", "Extract <this> & that\n", "text_delta", uint64(0))
	f.Add("_session", "", "exit", uint64(42))
	f.Add("\u2028", "\x00\x1f\"\\", "é", uint64(1<<63))
	f.Fuzz(func(t *testing.T, id, text, eventType string, seq uint64) {
		if !utf8.ValidString(id) || !utf8.ValidString(text) || !utf8.ValidString(eventType) {
			return // JSON carries Unicode text; invalid bytes become U+FFFD
		}
		data, err := json.Marshal(map[string]string{"text": text})
		if err != nil {
			t.Fatal(err)
		}
		msgs := []struct {
			m      any
			client bool
		}{
			{&protocol.Abort{ID: id}, true},
			{&protocol.DisplayReject{SlotID: id, Error: data}, true},
			{&protocol.Event{ID: id, EventType: eventType, Data: data, Seq: seq}, false},
			{&protocol.DisplayClear{SlotID: id, PromptID: eventType, Seq: seq}, false},
			{&protocol.Error{ID: id, Error: protocol.ErrorBody{Code: eventType, Message: text}, Seq: seq}, false},
			{&protocol.Complete{ID: id, Message: text, Outputs: map[string]protocol.FileRef{
				text: {Kind: protocol.KindS3, Name: text, Bucket: "b", Key: id + "/" + text},
			}, Seq: seq}, false},
		}
		if id != "" {
			msgs = append(msgs, struct {
				m      any
				client bool
			}{&protocol.Prompt{ID: id, Text: text, OutputsPolicy: &protocol.OutputsOverride{ServerTTL: eventType}}, true})
		}
		for _, tt := range msgs {
			b, err := protocol.Encode(tt.m)
			if err != nil {
				t.Fatalf("Encode(%#v) error = %v", tt.m, err)
			}
			var got any
			if tt.client {
				got, err = protocol.DecodeClient(b)
			} else {
				got, err = protocol.DecodeServer(b)
			}
			if err != nil {
				t.Fatalf("Decode(Encode(%#v)) = Decode(%s) error = %v", tt.m, b, err)
			}
			if diff := cmp.Diff(tt.m, got); diff != "" {
				t.Fatalf("Decode(Encode(m)) mismatch for %s (-want +got):\n%s", b, diff)
			}
		}
	})
}
