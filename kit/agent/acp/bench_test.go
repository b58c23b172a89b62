package acp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/glovebox-dev/glovebox/kit/agent"
)

// benchTurn counts events and nothing else.
type benchTurn struct {
	testTurn
	events atomic.Int64
}

func (t *benchTurn) Emit(string, any) error { t.events.Add(1); return nil }

// BenchmarkPrompt measures one prompt answered with N one-character text
// chunks, through the ACP hop (the SDK test agent in node, over stdio)
// through the hand-written agent in testdata/raw (which writes its chunks
// at once, so the kit's side of the hop dominates), and through a Go agent
// in process doing the same. The difference is the hop's cost: per prompt
// at chunks=0, per event from the slope.
func BenchmarkPrompt(b *testing.B) {
	for _, n := range []int{0, 100, 1000} {
		b.Run(fmt.Sprintf("acp/chunks=%d", n), func(b *testing.B) {
			s, _ := testSession(b)
			s.Log = slog.New(slog.DiscardHandler)
			a, err := New(sdkAgentSpec(b), s.Log)
			if err != nil {
				b.Fatal(err)
			}
			conv, err := a.Open(context.Background(), s)
			if err != nil {
				b.Fatal(err)
			}
			defer conv.Close()
			if _, err := conv.(*conversation).ensure(context.Background()); err != nil {
				b.Fatal(err)
			}
			benchPrompts(b, conv, s, n)
		})
		b.Run(fmt.Sprintf("acp-raw/chunks=%d", n), func(b *testing.B) {
			s, _ := testSession(b)
			s.Log = slog.New(slog.DiscardHandler)
			a, err := New(rawAgentSpec(b, nil), s.Log)
			if err != nil {
				b.Fatal(err)
			}
			conv, err := a.Open(context.Background(), s)
			if err != nil {
				b.Fatal(err)
			}
			defer conv.Close()
			if _, err := conv.(*conversation).ensure(context.Background()); err != nil {
				b.Fatal(err)
			}
			benchPrompts(b, conv, s, n)
		})
		b.Run(fmt.Sprintf("inprocess/chunks=%d", n), func(b *testing.B) {
			s, _ := testSession(b)
			ag := agent.Func(func(ctx context.Context, t agent.Turn) (string, error) {
				var sb strings.Builder
				for range n {
					if err := t.Emit("text_delta", json.RawMessage(`{"text":"x"}`)); err != nil {
						return "", err
					}
					sb.WriteString("x")
				}
				if err := t.Emit("stop", json.RawMessage(`{"reason":"end_turn"}`)); err != nil {
					return "", err
				}
				return sb.String(), nil
			})
			conv, err := ag.Open(context.Background(), s)
			if err != nil {
				b.Fatal(err)
			}
			defer conv.Close()
			benchPrompts(b, conv, s, n)
		})
	}
}

func benchPrompts(b *testing.B, conv agent.Conversation, s *agent.Session, n int) {
	b.Helper()
	text := fmt.Sprintf("bench %d", n)
	var events int64
	for b.Loop() {
		t := &benchTurn{testTurn: testTurn{text: text, sess: s}}
		msg, err := conv.Prompt(context.Background(), t)
		if err != nil {
			b.Fatal(err)
		}
		if len(msg) != n {
			b.Fatalf("message of %d bytes, want %d", len(msg), n)
		}
		events += t.events.Load()
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkMapUpdate is the in-kit cost of turning one update into an
// event, without the pipe.
func BenchmarkMapUpdate(b *testing.B) {
	updates := map[string]json.RawMessage{
		"text":      json.RawMessage(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello"}}`),
		"tool_call": json.RawMessage(`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"list files","kind":"read","status":"pending","rawInput":{"dir":"/work"}}`),
		"unknown":   json.RawMessage(`{"sessionUpdate":"_vendor","a":1,"b":[1,2,3],"c":{"d":"e"}}`),
	}
	for name, u := range updates {
		b.Run(name, func(b *testing.B) {
			ts := newTurnState(context.Background(), &benchTurn{}, slog.New(slog.DiscardHandler))
			for b.Loop() {
				if evs := ts.mapUpdate(u); len(evs) == 0 {
					b.Fatal("no event")
				}
				ts.text.Reset()
			}
		})
	}
}
