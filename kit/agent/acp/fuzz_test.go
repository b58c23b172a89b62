package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

func FuzzReadLine(f *testing.F) {
	f.Add([]byte("{}\n{\"a\":1}\r\n\nlast"), 8)
	f.Add(bytes.Repeat([]byte("x"), 100), 10)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		max = max%200 + 1
		if max < 1 {
			max = -max + 1
		}
		br := bufio.NewReaderSize(bytes.NewReader(in), 16)
		var total int
		for {
			line, err := readLine(br, max, nil)
			if len(line) > max+1 {
				t.Fatalf("readLine returned %d bytes, limit %d", len(line), max)
			}
			total += len(line)
			if err != nil {
				break
			}
		}
		if total > len(in) {
			t.Fatalf("read %d bytes from %d", total, len(in))
		}
	})
}

func FuzzMapUpdate(f *testing.F) {
	for _, s := range []string{
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA==","mimeType":"image/png"}}`,
		`{"sessionUpdate":"tool_call","toolCallId":"c","title":"t","status":"completed","rawInput":null,"name":"n"}`,
		`{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"failed","content":[{"type":"content","content":{"type":"text","text":"x"}}]}`,
		`{"sessionUpdate":"plan","entries":[]}`,
		`{"sessionUpdate":1}`,
		`[1,2]`,
		`"str"`,
		`{"a":1}{"b":2}`,
		`not json`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, u []byte) {
		ts := newTurnState(context.Background(), &benchTurn{}, slog.New(slog.DiscardHandler))
		for range 2 { // the second pass sees the tool map the first one left
			evs := ts.mapUpdate(json.RawMessage(u))
			if len(evs) == 0 {
				t.Fatalf("mapUpdate(%q) dropped the update", u)
			}
			for _, ev := range evs {
				if ev.typ == "" || !json.Valid(ev.data) {
					t.Fatalf("mapUpdate(%q) = event %q with data %q", u, ev.typ, ev.data)
				}
			}
		}
	})
}

func FuzzPickOption(f *testing.F) {
	for _, s := range []string{`"allow"`, `{"optionId":"deny"}`, `true`, `false`, `null`, `{"optionId":3}`, `[]`, `"`} {
		f.Add([]byte(s))
	}
	options := []permissionOption{{"allow", "Allow", "allow_once"}, {"deny", "Deny", "reject_once"}}
	f.Fuzz(func(t *testing.T, v []byte) {
		id, err := pickOption(json.RawMessage(v), options)
		if err == nil && id != "allow" && id != "deny" {
			t.Fatalf("pickOption(%q) = %q, not an option", v, id)
		}
	})
}

// discardHandler answers every request with an empty result.
type discardHandler struct{}

func (discardHandler) request(context.Context, string, json.RawMessage) (any, error) { return nil, nil }
func (discardHandler) notify(string, json.RawMessage)                                {}
func (discardHandler) quick([]byte) bool                                             { return false }

// FuzzConn feeds arbitrary bytes to a connection as if an agent wrote
// them: nothing may panic, and the connection must end at EOF.
func FuzzConn(f *testing.F) {
	for _, s := range []string{
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n",
		"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"fs/read_text_file\",\"params\":{}}\n",
		"{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{\"requestId\":\"x\"}}\n",
		"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"parse\"}}\n",
		"[]\n{}\nnull\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		drained := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, r); close(drained) }()
		c := newConn(w, strings.NewReader(string(in)), discardHandler{}, slog.New(slog.DiscardHandler), 256, 4)
		_, ch := c.call(context.Background(), "probe", nil)
		c.wait()
		if c.err() == nil {
			t.Fatal("connection still open after EOF")
		}
		<-ch // answered by the input or failed by the close
		_ = w.Close()
		<-drained
		_ = r.Close()
	})
}

// FuzzQuick feeds lines to the text-chunk fast path: it may decline any
// line, but what it takes must be a session/update text chunk, mapped as
// the general path maps it.
func FuzzQuick(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":""}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"session/update","params":{}}`,
		`{"method":"session/update","params":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		log := slog.New(slog.DiscardHandler)
		turn := &testTurn{}
		c := &conversation{log: log, cur: newTurnState(context.Background(), turn, log)}
		if !c.quick(line) {
			return
		}
		evs := turn.recorded()
		if len(evs) != 1 || (evs[0].Type != "text_delta" && evs[0].Type != "thinking_delta") {
			t.Fatalf("quick(%q) took the line and emitted %v", line, evs)
		}
		var m struct {
			Params struct {
				Update json.RawMessage `json:"update"`
			} `json:"params"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("quick took %q, which is not JSON-RPC: %v", line, err)
		}
		slow := newTurnState(context.Background(), &testTurn{}, log).mapUpdate(m.Params.Update)
		if len(slow) != 1 || slow[0].typ != evs[0].Type || !bytes.Equal(slow[0].data, evs[0].Data) {
			t.Fatalf("quick(%q) = %s %s, general path = %v", line, evs[0].Type, evs[0].Data, slow)
		}
	})
}
