package client_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// BenchmarkEgressAsk is the time an ask takes end to end: real curl's
// HTTP request, in a session's sandbox, through the session's egress proxy to a host no rule
// covers, the kit's egress-ask slot to a real client over its WebSocket,
// the client's automatic answer (once, so that every connection asks),
// the decision, and the upstream's answer. "no-ask" is the same request
// to a host a rule allows: the difference is the ask's cost.
func BenchmarkEgressAsk(b *testing.B) {
	for _, tc := range []struct{ name, host string }{{"ask", "asked.test"}, {"no-ask", "allowed.test"}} {
		b.Run(tc.name, func(b *testing.B) {
			n := b.N
			ek := startEgressKit(b, protocol.NetworkSpec{Default: "deny", Allow: []string{"allowed.test"}, Ask: true}, b.TempDir())
			c, err := client.New(map[string]client.Endpoint{"kit": {URL: ek.url, Key: testKey}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			bx, _ := c.Box("kit")
			ctx := testkit.Context(b, "the benchmark's prompt")
			b.ResetTimer()
			// One curl, n requests, each on a connection of its own.
			r, err := bx.Prompt(ctx, fmt.Sprintf("curl -s -o /dev/null -w '%%{http_code}\\n' -H 'Connection: close' 'http://%s:%d/[1-%d]'", tc.host, ek.port, n), client.PromptOptions{DiscardEvents: true})
			if err != nil {
				b.Fatal(err)
			}
			asks := 0
			for d := range r.Display(ctx) {
				if _, ok := client.EgressAsk(d); ok {
					asks++
					if err := r.AnswerEgress(ctx, d.SlotID, protocol.EgressAskOnce); err != nil {
						b.Fatal(err)
					}
				}
			}
			done, err := r.Wait(ctx)
			b.StopTimer()
			if err != nil || strings.Count(done.Message, "200\n") != n {
				b.Fatalf("prompt: %v %+v", err, done)
			}
			if want := map[bool]int{true: n, false: 0}[tc.name == "ask"]; asks != want {
				b.Fatalf("%d asks, want %d", asks, want)
			}
		})
	}
}
