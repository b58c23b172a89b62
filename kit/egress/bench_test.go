package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// The benchmarks measure the proxy across processes: the upstream
// servers and the proxy run in the benchmark's process, the client in a
// child process (this test binary, re-run in client mode), as an agent's
// tool would.
//
//	go test -run '^$' -bench Egress -benchtime 2000x ./kit/egress

const benchClientEnv = "GLOVEBOX_EGRESS_BENCH_CLIENT"

func TestMain(m *testing.M) {
	if spec := os.Getenv(benchClientEnv); spec != "" {
		if err := benchClient(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testkit.Main(m)
}

// benchSpec is what the client process does.
type benchSpec struct {
	URL    string `json:"url"`
	Proxy  string `json:"proxy,omitempty"`
	CAFile string `json:"ca_file,omitempty"`
	Header string `json:"header,omitempty"` // x-api-key value
	N      int    `json:"n"`
	Fresh  bool   `json:"fresh"` // a new connection per request
}

type benchResult struct {
	NsPerReq float64 `json:"ns_per_req"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
}

func benchClient(js string) error {
	var s benchSpec
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		return err
	}
	tr := &http.Transport{DisableKeepAlives: s.Fresh, MaxIdleConnsPerHost: 1, ForceAttemptHTTP2: false, DisableCompression: true}
	if s.Proxy != "" {
		u, _ := url.Parse(s.Proxy)
		tr.Proxy = http.ProxyURL(u)
	}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	cl := &http.Client{Transport: tr, Timeout: time.Minute}
	var total int64
	get := func() error {
		req, _ := http.NewRequest(http.MethodGet, s.URL, nil)
		if s.Header != "" {
			req.Header.Set("X-Api-Key", s.Header)
		}
		resp, err := cl.Do(req)
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		total += n
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return err
	}
	if err := get(); err != nil { // warm up: connection, TLS, certificates
		return err
	}
	total = 0
	start := time.Now()
	for range s.N {
		if err := get(); err != nil {
			return err
		}
	}
	el := time.Since(start)
	return json.NewEncoder(os.Stdout).Encode(benchResult{NsPerReq: float64(el.Nanoseconds()) / float64(s.N), Bytes: total, Seconds: el.Seconds()})
}

func runBenchClient(b *testing.B, s benchSpec) benchResult {
	b.Helper()
	js, _ := json.Marshal(s)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), benchClientEnv+"="+string(js))
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		b.Fatalf("bench client: %v %s", err, stderr)
	}
	var r benchResult
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("bench client printed %q: %v", out, err)
	}
	return r
}

func BenchmarkEgress(b *testing.B) {
	o := startOutside(b)
	caPEM := writeTemp(b, "outside-ca.pem", o.rootsPEM)
	big := strconv.Itoa(64 << 20)
	pb := startBox(b, o, protocol.NetworkSpec{Default: "deny", Allow: []string{"outside.test", "api.outside.test"}},
		Secret{Name: "K", Value: testKey, Hosts: []string{"api.outside.test"}, Header: "x-api-key", Port: o.httpsPort})
	go func() {
		for range pb.events {
		}
	}()
	ph := pb.p.Placeholders()["K"]
	proxy := "http://" + pb.addr
	httpURL := func(host, path string) string { return fmt.Sprintf("http://%s:%d%s", host, o.httpPort, path) }
	httpsURL := func(host, path string) string { return fmt.Sprintf("https://%s:%d%s", host, o.httpsPort, path) }
	// Direct clients reach the loopback servers by address (HTTP) or as
	// localhost, a name the test CA signed too (HTTPS).
	direct := func(u string) string { return strings.Replace(u, "outside.test", "127.0.0.1", 1) }
	cases := []struct {
		name string
		spec benchSpec
	}{
		{"http/direct", benchSpec{URL: direct(httpURL("outside.test", "/small"))}},
		{"http/proxy", benchSpec{URL: httpURL("outside.test", "/small"), Proxy: proxy}},
		{"http/direct-fresh", benchSpec{URL: direct(httpURL("outside.test", "/small")), Fresh: true}},
		{"http/proxy-fresh", benchSpec{URL: httpURL("outside.test", "/small"), Proxy: proxy, Fresh: true}},
		{"https/direct", benchSpec{URL: httpsURL("localhost", "/small"), CAFile: caPEM}},
		{"https/proxy-tunnel", benchSpec{URL: httpsURL("outside.test", "/small"), Proxy: proxy, CAFile: caPEM}},
		{"https/proxy-brokered", benchSpec{URL: httpsURL("api.outside.test", "/small"), Proxy: proxy, CAFile: pb.bundle, Header: ph}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			c.spec.N = b.N
			r := runBenchClient(b, c.spec)
			b.ReportMetric(r.NsPerReq/1000, "us/req")
			b.ReportMetric(0, "ns/op")
		})
	}
	tput := []struct {
		name string
		spec benchSpec
	}{
		{"http/direct-64MB", benchSpec{URL: direct(httpURL("outside.test", "/bytes/"+big))}},
		{"http/proxy-64MB", benchSpec{URL: httpURL("outside.test", "/bytes/"+big), Proxy: proxy}},
		{"https/direct-64MB", benchSpec{URL: httpsURL("localhost", "/bytes/"+big), CAFile: caPEM}},
		{"https/proxy-tunnel-64MB", benchSpec{URL: httpsURL("outside.test", "/bytes/"+big), Proxy: proxy, CAFile: caPEM}},
		{"https/proxy-brokered-64MB", benchSpec{URL: httpsURL("api.outside.test", "/bytes/"+big), Proxy: proxy, CAFile: pb.bundle, Header: ph}},
	}
	for _, c := range tput {
		b.Run(c.name, func(b *testing.B) {
			c.spec.N = min(b.N, 16) // 1GB at most: the figure is MB/s
			r := runBenchClient(b, c.spec)
			b.ReportMetric(float64(r.Bytes)/r.Seconds/1e6, "MB/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func writeTemp(b *testing.B, name string, data []byte) string {
	p := b.TempDir() + "/" + name
	if err := os.WriteFile(p, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}
