package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden from the values in the tests")

// goldenMessage is one wire message with its golden file. v1, when set, is
// the frame as the original system wrote it (spec §8); it must decode to
// msg and mean the same JSON as the golden file, which differs from it only
// where Go sorts map keys.
type goldenMessage struct {
	file string
	msg  any
	v1   string
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

var goldenClient = []goldenMessage{
	{
		file: "client_prompt",
		msg: &protocol.Prompt{
			ID:   "req_1",
			Text: "Extract the text from this PDF.",
			Inputs: map[string]protocol.FileRef{
				"sample.pdf": {Kind: "inline", Name: "sample.pdf", Mime: "application/pdf", Data: "JVBERi0xLjQK"},
				"ref.csv":    {Kind: "url", Name: "ref.csv", Mime: "text/csv", URL: "https://example.com/ref.csv", Headers: map[string]string{"X-Token": "abc"}},
			},
			OutputsPolicy: &protocol.OutputsOverride{InlineBelow: "256KB", ServerTTL: "24h"},
		},
		v1: `{"type":"prompt","id":"req_1","text":"Extract the text from this PDF.","inputs":{"sample.pdf":{"kind":"inline","name":"sample.pdf","mime":"application/pdf","data":"JVBERi0xLjQK"},"ref.csv":{"kind":"url","name":"ref.csv","mime":"text/csv","url":"https://example.com/ref.csv","headers":{"X-Token":"abc"}}},"outputs_policy":{"inline_below":"256KB","server_ttl":"24h"}}`,
	},
	{
		file: "client_prompt_s3",
		msg: &protocol.Prompt{
			ID:            "req_2",
			Text:          "Trim <clip.mp4> & keep the audio",
			OutputsPolicy: &protocol.OutputsOverride{S3: &protocol.S3Override{Bucket: "my-outputs", Region: "us-east-1", Prefix: "trimmer"}},
		},
	},
	{
		file: "client_prompt_minimal",
		msg:  &protocol.Prompt{ID: "req_3", Text: "ls -la"},
	},
	{
		file: "client_abort",
		msg:  &protocol.Abort{ID: "req_1"},
		v1:   `{"type":"abort","id":"req_1"}`,
	},
	{
		file: "client_display_resolve",
		msg:  &protocol.DisplayResolve{SlotID: "slot_1", Value: raw("true")},
		v1:   `{"type":"display_resolve","slot_id":"slot_1","value":true}`,
	},
	{
		file: "client_display_reject",
		msg:  &protocol.DisplayReject{SlotID: "slot_2", Error: raw(`"user cancelled"`)},
		v1:   `{"type":"display_reject","slot_id":"slot_2","error":"user cancelled"}`,
	},
	{
		file: "client_ping",
		msg:  &protocol.Ping{TS: raw("1732180535000")},
		v1:   `{"type":"ping","ts":1732180535000}`,
	},
	{
		file: "client_hello",
		msg:  &protocol.ClientHello{Capabilities: []string{protocol.CapResume}},
	},
}

func event(id, typ, data string) *protocol.Event {
	return &protocol.Event{ID: id, EventType: typ, Data: raw(data)}
}

var goldenServer = []goldenMessage{
	{
		file: "server_event_text_delta",
		msg:  event("req_1", "text_delta", `{"text":"Hel"}`),
		v1:   `{"type":"event","id":"req_1","event_type":"text_delta","data":{"text":"Hel"}}`,
	},
	{
		file: "server_event_tool_use",
		msg:  event("req_1", "tool_use", `{"id":"call_1","name":"extract_text","input":{"file":"sample.pdf"}}`),
		v1:   `{"type":"event","id":"req_1","event_type":"tool_use","data":{"id":"call_1","name":"extract_text","input":{"file":"sample.pdf"}}}`,
	},
	{
		file: "server_event_model_response_complete",
		msg:  event("req_1", "model_response_complete", `{"text":"","tool_calls":[{"tool_name":"extract_text","input_args":{"file":"sample.pdf"},"id":"call_1"}],"stop_reason":"tool_use"}`),
		v1:   `{"type":"event","id":"req_1","event_type":"model_response_complete","data":{"text":"","tool_calls":[{"tool_name":"extract_text","input_args":{"file":"sample.pdf"},"id":"call_1"}],"stop_reason":"tool_use"}}`,
	},
	{
		file: "server_event_model_response",
		msg:  event("req_1", "model_response", `{"text":"Done.","stop_reason":"end_turn"}`),
		v1:   `{"type":"event","id":"req_1","event_type":"model_response","data":{"text":"Done.","stop_reason":"end_turn"}}`,
	},
	{
		file: "server_event_token_consumption",
		msg:  event("req_1", "token_consumption", `{"consumption":{"tokens_in":3,"tokens_out":2}}`),
		v1:   `{"type":"event","id":"req_1","event_type":"token_consumption","data":{"consumption":{"tokens_in":3,"tokens_out":2}}}`,
	},
	{
		file: "server_event_tool_use_result",
		msg:  event("req_1", "tool_use_result", `{"tool_name":"extract_text","call_id":"call_1","result":{"status":"success","data":{"out":"/output/sample.txt"}},"duration_ms":504,"id":"call_1","name":"extract_text"}`),
		v1:   `{"type":"event","id":"req_1","event_type":"tool_use_result","data":{"tool_name":"extract_text","call_id":"call_1","result":{"status":"success","data":{"out":"/output/sample.txt"}},"duration_ms":504,"id":"call_1","name":"extract_text"}}`,
	},
	{
		file: "server_event_hook_invoked",
		msg:  event("req_1", "hook_invoked", `{"name":"output"}`),
		v1:   `{"type":"event","id":"req_1","event_type":"hook_invoked","data":{"name":"output"}}`,
	},
	{
		file: "server_event_skill_invoked",
		msg:  event("req_1", "skill_invoked", `{"name":"workspace","source":"agent"}`),
		v1:   `{"type":"event","id":"req_1","event_type":"skill_invoked","data":{"name":"workspace","source":"agent"}}`,
	},
	{
		file: "server_event_compaction_start",
		msg:  event("req_1", "compaction_start", `{"current_token_consumption":101234}`),
		v1:   `{"type":"event","id":"req_1","event_type":"compaction_start","data":{"current_token_consumption":101234}}`,
	},
	{
		file: "server_event_compaction_end",
		msg:  event("req_1", "compaction_end", `{"current_token_consumption":812,"summary_message":{"sender":"user","text":"[Conversation summary from compaction]\n\n...\n\n[End of summary - the conversation continues from here]","is_compaction":true}}`),
		v1:   `{"type":"event","id":"req_1","event_type":"compaction_end","data":{"current_token_consumption":812,"summary_message":{"sender":"user","text":"[Conversation summary from compaction]\n\n...\n\n[End of summary - the conversation continues from here]","is_compaction":true}}}`,
	},
	{
		file: "server_event_subagent_invoked",
		msg:  event("req_1", "subagent_invoked", `{"name":"researcher","prompt":"Find X"}`),
		v1:   `{"type":"event","id":"req_1","event_type":"subagent_invoked","data":{"name":"researcher","prompt":"Find X"}}`,
	},
	{
		file: "server_event_subagent_completed",
		msg:  event("req_1", "subagent_completed", `{"name":"researcher","status":"success"}`),
		v1:   `{"type":"event","id":"req_1","event_type":"subagent_completed","data":{"name":"researcher","status":"success"}}`,
	},
	{
		file: "server_event_session",
		msg:  event("_session", "text_delta", `{"text":"leaked from another connection"}`),
		v1:   `{"type":"event","id":"_session","event_type":"text_delta","data":{"text":"leaked from another connection"}}`,
	},
	{
		// Additive: the sequence number of a box that announced "seq", and
		// the exec agent's stream field.
		file: "server_event_seq",
		msg:  &protocol.Event{ID: "req_2", EventType: "text_delta", Data: raw(`{"text":"a < b && c > d\n","stream":"stderr"}`), Seq: 42},
	},
	{
		file: "server_display_push",
		msg:  &protocol.DisplayPush{Slot: protocol.Slot{Renderer: "confirm", Input: raw(`{"q":"ok?"}`), ID: "slot_1"}},
		v1:   `{"type":"display_push","slot":{"renderer":"confirm","input":{"q":"ok?"},"id":"slot_1"}}`,
	},
	{
		file: "server_display_push_permission",
		msg:  &protocol.DisplayPush{Slot: protocol.Slot{Renderer: "permission_request", Input: raw(`{"renderer":"permission_request","toolName":"rm","toolInput":{"path":"/work/a"}}`), ID: "slot_3"}},
		v1:   `{"type":"display_push","slot":{"renderer":"permission_request","input":{"renderer":"permission_request","toolName":"rm","toolInput":{"path":"/work/a"}},"id":"slot_3"}}`,
	},
	{
		file: "server_display_push_prompt",
		msg:  &protocol.DisplayPush{Slot: protocol.Slot{Renderer: "confirm", Input: raw(`null`), ID: "slot_4"}, PromptID: "req_2", Seq: 7},
	},
	{
		file: "server_display_clear",
		msg:  &protocol.DisplayClear{SlotID: "slot_1"},
		v1:   `{"type":"display_clear","slot_id":"slot_1"}`,
	},
	{
		file: "server_complete",
		msg: &protocol.Complete{
			ID:      "req_1",
			Message: "Extracted 12 pages.",
			Outputs: map[string]protocol.FileRef{
				"small.txt": {Kind: "inline", Name: "small.txt", Mime: "text/plain", Data: "aGkgdGhlcmU="},
				"big.bin":   {Kind: "server", Name: "big.bin", Mime: "application/octet-stream", Size: 2097152, ID: "3111c8c2-4d7b-405b-8af9-56d1797b4aa5", URL: "http://localhost:8080/files/3111c8c2-4d7b-405b-8af9-56d1797b4aa5"},
				"clip.mp4":  {Kind: "s3", Name: "clip.mp4", Mime: "video/mp4", Bucket: "my-outputs", Key: "trimmer/req_1/clip.mp4", Region: "us-east-1"},
			},
		},
		v1: `{"type":"complete","id":"req_1","message":"Extracted 12 pages.","outputs":{"small.txt":{"kind":"inline","name":"small.txt","mime":"text/plain","data":"aGkgdGhlcmU="},"big.bin":{"kind":"server","name":"big.bin","mime":"application/octet-stream","size":2097152,"id":"3111c8c2-4d7b-405b-8af9-56d1797b4aa5","url":"http://localhost:8080/files/3111c8c2-4d7b-405b-8af9-56d1797b4aa5"},"clip.mp4":{"kind":"s3","name":"clip.mp4","mime":"video/mp4","bucket":"my-outputs","key":"trimmer/req_1/clip.mp4","region":"us-east-1"}}}`,
	},
	{
		file: "server_complete_no_outputs",
		msg:  &protocol.Complete{ID: "req_2", Message: "", Outputs: map[string]protocol.FileRef{}, Seq: 9},
	},
	{
		file: "server_complete_gcs",
		msg: &protocol.Complete{ID: "req_3", Message: "ok", Outputs: map[string]protocol.FileRef{
			"a.txt": {Kind: "gcs", Name: "a.txt", Bucket: "b", Object: "req_3/a.txt"},
		}},
	},
	{
		file: "server_error_aborted",
		msg:  &protocol.Error{ID: "req_4", Error: protocol.ErrorBody{Code: "AbortError", Message: "This operation was aborted"}},
		v1:   `{"type":"error","id":"req_4","error":{"code":"AbortError","message":"This operation was aborted"}}`,
	},
	{
		file: "server_error_s3",
		msg:  &protocol.Error{ID: "req_6", Error: protocol.ErrorBody{Code: "Error", Message: "Received s3 FileRef but no s3 storage adapter is registered"}},
		v1:   `{"type":"error","id":"req_6","error":{"code":"Error","message":"Received s3 FileRef but no s3 storage adapter is registered"}}`,
	},
	{
		file: "server_error_connection",
		msg:  &protocol.Error{ID: "", Error: protocol.ErrorBody{Code: protocol.CodeBadMessage, Message: "protocol: bad message: not a JSON object"}},
	},
	{
		file: "server_pong",
		msg:  &protocol.Pong{TS: raw("1732180535000")},
		v1:   `{"type":"pong","ts":1732180535000}`,
	},
	{
		file: "server_hello",
		msg: &protocol.ServerHello{
			ProtocolVersion: 1,
			SessionID:       "s_9f2c",
			Capabilities:    []string{protocol.CapSeq, protocol.CapResume, protocol.CapOrdered, protocol.CapCancelQueued, protocol.CapSessions, protocol.CapSubprotocol},
			Name:            "pdf-extractor",
			Version:         "0.1.0",
		},
	},
	{
		file: "server_hello_resumed",
		msg:  &protocol.ServerHello{ProtocolVersion: 1, SessionID: "s_9f2c", Capabilities: []string{protocol.CapSeq, protocol.CapResume}, Resumed: true, LastSeq: 118},
	},
}

func goldenPath(name string) string { return filepath.Join("testdata", "golden", name+".json") }

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, side := range []struct {
		name   string
		cases  []goldenMessage
		decode func([]byte) (any, error)
	}{
		{"client", goldenClient, func(b []byte) (any, error) { return protocol.DecodeClient(b) }},
		{"server", goldenServer, func(b []byte) (any, error) { return protocol.DecodeServer(b) }},
	} {
		for _, tt := range side.cases {
			t.Run(tt.file, func(t *testing.T) {
				got, err := protocol.Encode(tt.msg)
				if err != nil {
					t.Fatalf("Encode(%#v) error = %v", tt.msg, err)
				}
				path := goldenPath(tt.file)
				if *update {
					if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				file, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("read golden file (run go test -update to create it): %v", err)
				}
				want := bytes.TrimSuffix(file, []byte("\n"))
				if !bytes.Equal(got, want) {
					t.Errorf("Encode(%s) = %s, want %s", tt.file, got, want)
				}

				// Decoding the golden frame gives the value back, and
				// encoding that gives the same bytes.
				dec, err := side.decode(want)
				if err != nil {
					t.Fatalf("Decode(%s) error = %v", want, err)
				}
				if diff := cmp.Diff(tt.msg, dec); diff != "" {
					t.Errorf("Decode(%s) mismatch (-want +got):\n%s", want, diff)
				}
				again, err := protocol.Encode(dec)
				if err != nil || !bytes.Equal(again, want) {
					t.Errorf("Encode(Decode(%s)) = %s, %v, want the same bytes", want, again, err)
				}

				if tt.v1 == "" {
					return
				}
				dec, err = side.decode([]byte(tt.v1))
				if err != nil {
					t.Fatalf("Decode(v1 %s) error = %v", tt.v1, err)
				}
				if diff := cmp.Diff(tt.msg, dec); diff != "" {
					t.Errorf("Decode(v1 %s) mismatch (-want +got):\n%s", tt.v1, diff)
				}
				if diff := cmp.Diff(jsonValue(t, tt.v1), jsonValue(t, string(want))); diff != "" {
					t.Errorf("golden %s means other JSON than v1 (-v1 +golden):\n%s", tt.file, diff)
				}
			})
		}
	}
}

// TestGoldenFilesUsed fails on a golden file no test case names, so that a
// renamed case does not leave a stale file behind.
func TestGoldenFilesUsed(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, tt := range append(append([]goldenMessage(nil), goldenClient...), goldenServer...) {
		names[tt.file+".json"] = true
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !names[e.Name()] {
			t.Errorf("testdata/golden/%s belongs to no test case", e.Name())
		}
	}
	// Every message type has a golden file.
	types := map[string]bool{}
	for _, tt := range goldenClient {
		types["client "+protocol.TypeOf(tt.msg)] = true
	}
	for _, tt := range goldenServer {
		types["server "+protocol.TypeOf(tt.msg)] = true
	}
	for _, want := range []string{
		"client prompt", "client abort", "client display_resolve", "client display_reject", "client ping", "client hello",
		"server event", "server display_push", "server display_clear", "server complete", "server error", "server pong", "server hello",
	} {
		if !types[want] {
			t.Errorf("no golden file for %s", want)
		}
	}
}

func jsonValue(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("json.Unmarshal(%s) error = %v", s, err)
	}
	return v
}

func TestEncode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"type comes first", &protocol.Abort{ID: "x"}, `{"type":"abort","id":"x"}`},
		{"empty hello", &protocol.ClientHello{}, `{"type":"hello"}`},
		{"nil outputs become {}", &protocol.Complete{ID: "r", Message: "m"}, `{"type":"complete","id":"r","message":"m","outputs":{}}`},
		{"empty event data becomes {}", &protocol.Event{ID: "r", EventType: "exit"}, `{"type":"event","id":"r","event_type":"exit","data":{}}`},
		{"raw data is compacted", &protocol.Event{ID: "r", EventType: "e", Data: raw("{ \"a\" : [1, 2] }")}, `{"type":"event","id":"r","event_type":"e","data":{"a":[1,2]}}`},
		{"no HTML escaping, as v1", &protocol.Error{ID: "r", Error: protocol.ErrorBody{Code: "Error", Message: "<a> & <b>"}}, `{"type":"error","id":"r","error":{"code":"Error","message":"<a> & <b>"}}`},
		{"no HTML escaping in file refs", &protocol.Complete{ID: "r", Outputs: map[string]protocol.FileRef{
			"a&b": {Kind: "server", Name: "a&b", Mime: "text/plain", Size: 1, ID: "i", URL: "http://h/files/i?x=1&y=2"},
		}}, `{"type":"complete","id":"r","message":"","outputs":{"a&b":{"kind":"server","name":"a&b","mime":"text/plain","size":1,"id":"i","url":"http://h/files/i?x=1&y=2"}}}`},
		{"ping with a non-number ts", &protocol.Ping{TS: raw(`"t1"`)}, `{"type":"ping","ts":"t1"}`},
		{"null ping ts", &protocol.Ping{}, `{"type":"ping","ts":null}`},
		{"nil capabilities become []", &protocol.ServerHello{ProtocolVersion: 1, SessionID: "s"}, `{"type":"hello","protocol_version":1,"session_id":"s","capabilities":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := protocol.Encode(tt.in)
			if err != nil || string(got) != tt.want {
				t.Errorf("Encode(%#v) = %s, %v, want %s, nil", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestEncodeError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"not a message", struct{}{}, "protocol: cannot encode struct {}"},
		{"nil", nil, "protocol: cannot encode <nil>"},
		{"value, not pointer", protocol.Abort{ID: "x"}, "protocol: cannot encode protocol.Abort"},
		{"nil pointer", (*protocol.Prompt)(nil), "protocol: cannot encode a nil prompt"},
		{"nil complete", (*protocol.Complete)(nil), "protocol: cannot encode a nil complete"},
		{"nil event", (*protocol.Event)(nil), "protocol: cannot encode a nil event"},
		{"nil server hello", (*protocol.ServerHello)(nil), "protocol: cannot encode a nil hello"},
		{"bad file ref", &protocol.Complete{ID: "r", Outputs: map[string]protocol.FileRef{"x": {Name: "x"}}}, `protocol: encode complete: json: error calling MarshalJSON for type protocol.FileRef: protocol: cannot encode file "x" of kind ""`},
		{"bad raw data", &protocol.Event{ID: "r", EventType: "e", Data: raw("{")}, "protocol: encode event: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := protocol.Encode(tt.in)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Encode(%#v) = %s, %v, want error %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestDecodeClient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want protocol.ClientMessage
	}{
		{"unknown fields are ignored", `{"type":"abort","id":"r","reason":"bored","extra":{"a":[1]}}`, &protocol.Abort{ID: "r"}},
		{"v1 SDK sends empty inputs", `{"type":"prompt","id":"req_1","text":"hi","inputs":{}}`, &protocol.Prompt{ID: "req_1", Text: "hi", Inputs: map[string]protocol.FileRef{}}},
		{"type after the fields", `{"id":"r","type":"abort"}`, &protocol.Abort{ID: "r"}},
		{"white space around", " \n{\"type\":\"ping\",\"ts\":1}\n ", &protocol.Ping{TS: raw("1")}},
		{"ping without ts", `{"type":"ping"}`, &protocol.Ping{TS: raw("null")}},
		{"resolve without value", `{"type":"display_resolve","slot_id":"s"}`, &protocol.DisplayResolve{SlotID: "s", Value: raw("null")}},
		{"reject with an object", `{"type":"display_reject","slot_id":"s","error":{"message":"no"}}`, &protocol.DisplayReject{SlotID: "s", Error: raw(`{"message":"no"}`)}},
		{"reject without error", `{"type":"display_reject","slot_id":"s"}`, &protocol.DisplayReject{SlotID: "s", Error: raw("null")}},
		{"empty text is a prompt", `{"type":"prompt","id":"r","text":""}`, &protocol.Prompt{ID: "r", Text: ""}},
		{"lenient base64 input", `{"type":"prompt","id":"r","text":"t","inputs":{"a":{"kind":"inline","name":"a","mime":"","data":"aGk"}}}`, &protocol.Prompt{ID: "r", Text: "t", Inputs: map[string]protocol.FileRef{"a": {Kind: "inline", Name: "a", Data: "aGk"}}}},
		{"hello with unknown capabilities", `{"type":"hello","capabilities":["resume","teleport"]}`, &protocol.ClientHello{Capabilities: []string{"resume", "teleport"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := protocol.DecodeClient([]byte(tt.in))
			if err != nil {
				t.Fatalf("DecodeClient(%s) error = %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DecodeClient(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		server  bool
		in      string
		wantErr error
		wantMsg string // a substring of the error
	}{
		{"text: 42", false, `{"type":"prompt","id":"r","text":42}`, protocol.ErrBadMessage, "prompt"},
		{"text: null", false, `{"type":"prompt","id":"r","text":null}`, protocol.ErrBadMessage, `"text" must be a string`},
		{"missing text", false, `{"type":"prompt","id":"r"}`, protocol.ErrBadMessage, `missing "text"`},
		{"missing id", false, `{"type":"prompt","text":"t"}`, protocol.ErrBadMessage, `missing "id"`},
		{"numeric id", false, `{"type":"prompt","id":7,"text":"t"}`, protocol.ErrBadMessage, "prompt"},
		{"empty id", false, `{"type":"prompt","id":"","text":"t"}`, protocol.ErrBadMessage, `empty "id"`},
		{"inputs not an object", false, `{"type":"prompt","id":"r","text":"t","inputs":[]}`, protocol.ErrBadMessage, "prompt"},
		{"input of unknown kind", false, `{"type":"prompt","id":"r","text":"t","inputs":{"a":{"kind":"ftp","name":"a"}}}`, protocol.ErrBadMessage, `unknown kind "ftp"`},
		{"input not base64", false, `{"type":"prompt","id":"r","text":"t","inputs":{"a":{"kind":"inline","name":"a","mime":"","data":"!!"}}}`, protocol.ErrBadMessage, "not base64"},
		{"outputs_policy mistyped", false, `{"type":"prompt","id":"r","text":"t","outputs_policy":{"inline_below":5}}`, protocol.ErrBadMessage, "prompt"},
		{"abort without id", false, `{"type":"abort"}`, protocol.ErrBadMessage, `missing "id"`},
		{"resolve with numeric slot", false, `{"type":"display_resolve","slot_id":1,"value":true}`, protocol.ErrBadMessage, "display_resolve"},
		{"reject without slot", false, `{"type":"display_reject","error":"x"}`, protocol.ErrBadMessage, `missing "slot_id"`},
		{"hello capabilities mistyped", false, `{"type":"hello","capabilities":"resume"}`, protocol.ErrBadMessage, "hello"},
		{"unknown type", false, `{"type":"teleport","id":"r"}`, protocol.ErrUnknownType, `"teleport"`},
		{"server type sent by a client", false, `{"type":"complete","id":"r","message":"","outputs":{}}`, protocol.ErrUnknownType, `"complete"`},
		{"type not a string", false, `{"type":1}`, protocol.ErrBadMessage, "bad message"},
		{"type null", false, `{"type":null,"id":"r"}`, protocol.ErrBadMessage, `missing "type"`},
		{"no type", false, `{"id":"r"}`, protocol.ErrBadMessage, `missing "type"`},
		{"not an object", false, `["prompt"]`, protocol.ErrBadMessage, "not a JSON object"},
		{"empty frame", false, ``, protocol.ErrBadMessage, "not a JSON object"},
		{"not JSON", false, `{"type":"ping"`, protocol.ErrBadMessage, "bad message"},
		{"trailing garbage", false, `{"type":"ping","ts":1} x`, protocol.ErrBadMessage, "bad message"},

		{"event without event_type", true, `{"type":"event","id":"r","data":{}}`, protocol.ErrBadMessage, `missing "event_type"`},
		{"event with numeric id", true, `{"type":"event","id":1,"event_type":"x","data":{}}`, protocol.ErrBadMessage, "event"},
		{"negative seq", true, `{"type":"event","id":"r","event_type":"x","data":{},"seq":-1}`, protocol.ErrBadMessage, "event"},
		{"push without slot", true, `{"type":"display_push"}`, protocol.ErrBadMessage, `slot without "id"`},
		{"clear without slot_id", true, `{"type":"display_clear"}`, protocol.ErrBadMessage, `missing "slot_id"`},
		{"complete without id", true, `{"type":"complete","message":"m","outputs":{}}`, protocol.ErrBadMessage, `missing "id"`},
		{"complete with a bad output", true, `{"type":"complete","id":"r","message":"m","outputs":{"a":{"kind":"server","name":"a"}}}`, protocol.ErrBadMessage, "needs id and url"},
		{"complete with a fractional size", true, `{"type":"complete","id":"r","message":"m","outputs":{"a":{"kind":"server","name":"a","mime":"x","size":1.5,"id":"i","url":"u"}}}`, protocol.ErrBadMessage, "whole number"},
		{"message not a string", true, `{"type":"complete","id":"r","message":1,"outputs":{}}`, protocol.ErrBadMessage, "complete"},
		{"error without id", true, `{"type":"error","error":{"code":"Error","message":"m"}}`, protocol.ErrBadMessage, `missing "id"`},
		{"error body mistyped", true, `{"type":"error","id":"r","error":"boom"}`, protocol.ErrBadMessage, "error"},
		{"client type sent by a box", true, `{"type":"prompt","id":"r","text":"t"}`, protocol.ErrUnknownType, `"prompt"`},
		{"hello with a string version", true, `{"type":"hello","protocol_version":"1"}`, protocol.ErrBadMessage, "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				got any
				err error
			)
			if tt.server {
				got, err = protocol.DecodeServer([]byte(tt.in))
			} else {
				got, err = protocol.DecodeClient([]byte(tt.in))
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Decode(%s) = %#v, %v, want an error wrapping %v and containing %q", tt.in, got, err, tt.wantErr, tt.wantMsg)
			}
		})
	}
}

func TestPeekID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{`{"type":"prompt","id":"req_9","text":42}`, "req_9"},
		{`{"type":"prompt","id":9}`, ""},
		{`{"type":"prompt"}`, ""},
		{`not json`, ""},
		{`[1,2]`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		if got := protocol.PeekID([]byte(tt.in)); got != tt.want {
			t.Errorf("PeekID(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTypeOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   any
		want string
	}{
		{&protocol.Prompt{}, "prompt"},
		{&protocol.Abort{}, "abort"},
		{&protocol.DisplayResolve{}, "display_resolve"},
		{&protocol.DisplayReject{}, "display_reject"},
		{&protocol.Ping{}, "ping"},
		{&protocol.ClientHello{}, "hello"},
		{&protocol.Event{}, "event"},
		{&protocol.DisplayPush{}, "display_push"},
		{&protocol.DisplayClear{}, "display_clear"},
		{&protocol.Complete{}, "complete"},
		{&protocol.Error{}, "error"},
		{&protocol.Pong{}, "pong"},
		{&protocol.ServerHello{}, "hello"},
		{protocol.Prompt{}, ""},
		{"prompt", ""},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := protocol.TypeOf(tt.in); got != tt.want {
			t.Errorf("TypeOf(%T) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
