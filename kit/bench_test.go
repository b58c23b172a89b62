package kit

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// benchBox serves ag on loopback for a benchmark.
func benchBox(b *testing.B, ag agent.Agent) (srv *Server, url, key string) {
	b.Helper()
	key = protocol.NewKey()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv, err = New(Options{Manifest: testManifest(key), Key: key, Root: b.TempDir(), Agent: ag,
		Logger: slog.New(slog.DiscardHandler), PublicURL: "http://" + ln.Addr().String()})
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(context.Background(), ln)
	b.Cleanup(func() { srv.Close(context.Background()) })
	return srv, "ws://" + ln.Addr().String() + "/", key
}

func benchDial(b *testing.B, url, key string) *wsconn.Conn {
	c, _, err := wsconn.Dial(context.Background(), url, wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + key}}})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.ReadMessage(); err != nil { // hello
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// reportLatency reports the median and 99th percentile of ds.
func reportLatency(b *testing.B, ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	if len(ds) == 0 {
		return
	}
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, "median-us")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds())/1e3, "p99-us")
}

// BenchmarkRoundTrip measures prompt to complete with a no-op Go agent,
// and a ping/pong on the same connection (the transport floor).
func BenchmarkRoundTrip(b *testing.B) {
	_, url, key := benchBox(b, agent.Func(func(context.Context, agent.Turn) (string, error) { return "", nil }))
	b.Run("prompt", func(b *testing.B) {
		c := benchDial(b, url, key)
		ds := make([]time.Duration, 0, b.N)
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			c.WriteText([]byte(`{"type":"prompt","id":"p` + strconv.Itoa(i) + `","text":"x"}`))
			for {
				m, err := c.ReadMessage()
				if err != nil {
					b.Fatal(err)
				}
				if strings.HasPrefix(string(m), `{"type":"complete"`) {
					break
				}
				if strings.HasPrefix(string(m), `{"type":"error"`) {
					b.Fatalf("%s", m)
				}
			}
			ds = append(ds, time.Since(start))
		}
		reportLatency(b, ds)
	})
	b.Run("ping", func(b *testing.B) {
		c := benchDial(b, url, key)
		ds := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			c.WriteText([]byte(`{"type":"ping","ts":1}`))
			if _, err := c.ReadMessage(); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		reportLatency(b, ds)
	})
}

// BenchmarkEvents measures events per second from a Go agent to one
// client: one op is one event, all of them in one prompt.
func BenchmarkEvents(b *testing.B) {
	data := json.RawMessage(`{"text":"hello"}`)
	_, url, key := benchBox(b, agent.Func(func(ctx context.Context, t agent.Turn) (string, error) {
		n, _ := strconv.Atoi(t.Text())
		for i := 0; i < n; i++ {
			if err := t.Emit("text_delta", data); err != nil {
				return "", err
			}
		}
		return "", nil
	}))
	c := benchDial(b, url, key)
	b.ResetTimer()
	start := time.Now()
	c.WriteText([]byte(`{"type":"prompt","id":"p","text":"` + strconv.Itoa(b.N) + `"}`))
	events := 0
	for {
		m, err := c.ReadMessage()
		if err != nil {
			b.Fatal(err)
		}
		if strings.HasPrefix(string(m), `{"type":"event"`) {
			events++
			continue
		}
		break
	}
	if events != b.N {
		b.Fatalf("got %d events, want %d", events, b.N)
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkStart measures New to /health answering, in process.
func BenchmarkStart(b *testing.B) {
	key := protocol.NewKey()
	m := testManifest(key)
	ag := agent.Func(func(context.Context, agent.Turn) (string, error) { return "", nil })
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for b.Loop() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv, err := New(Options{Manifest: m, Key: key, Root: b.TempDir(), Agent: ag, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		go srv.Serve(context.Background(), ln)
		resp, err := client.Get("http://" + ln.Addr().String() + "/health")
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("health: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		b.StopTimer()
		srv.Close(context.Background())
		b.StartTimer()
	}
}
