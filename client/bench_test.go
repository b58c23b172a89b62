package client_test

import (
	"context"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/kit/agent"
)

// BenchmarkPromptRoundTrip measures one prompt through the client to a
// real kit over loopback and back (a Go agent that answers at once).
func BenchmarkPromptRoundTrip(b *testing.B) {
	url, _ := startKit(b, agent.Func(func(ctx context.Context, t agent.Turn) (string, error) { return t.Text(), nil }), "")
	box := benchBox(b, url)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := box.Prompt(ctx, "hi", client.PromptOptions{DiscardEvents: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventStream measures events from a kit read through
// Result.Events: 1000 small events per prompt.
func BenchmarkEventStream(b *testing.B) {
	const n = 1000
	url, _ := startKit(b, agent.Func(func(ctx context.Context, t agent.Turn) (string, error) {
		for range n {
			if err := t.Emit("text_delta", map[string]string{"text": "0123456789abcdef0123456789abcdef"}); err != nil {
				return "", err
			}
		}
		return "", nil
	}), "")
	box := benchBox(b, url)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := box.Prompt(ctx, "go", client.PromptOptions{})
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for range r.Events(ctx) {
			got++
		}
		if _, err := r.Wait(ctx); err != nil || got != n {
			b.Fatalf("%d events, %v", got, err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
}

func benchBox(b *testing.B, url string) *client.Box {
	c, err := client.New(map[string]client.Endpoint{"kit": {URL: url, Key: testKey}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	box, err := c.Box("kit")
	if err != nil {
		b.Fatal(err)
	}
	return box
}
