package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// fsBench times a session's files on a kit process (/sessions/{id}/fs:
// a PUT and a GET of 1 MB and of 100 MB, and a listing of 10,000 files),
// and, when its base URL is given, the same on sandbox-agent's filesystem
// API (PUT and GET /v1/fs/file, GET /v1/fs/entries) in the same run. The
// client is this process, over one kept-alive connection; each side's
// files are on the same disk (the kit's under /var/tmp, sandbox-agent's in
// a directory made here under /var/tmp).
func fsBench(kitPath string, runs int, sandboxAgent string) ([]row, error) {
	k, _, err := start(kitPath)
	if err != nil {
		return nil, err
	}
	defer k.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, _, err := wsconn.Dial(ctx, "ws://127.0.0.1:"+strconv.Itoa(k.port)+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + k.key}}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	b, err := c.ReadMessage()
	if err != nil {
		return nil, err
	}
	var hello protocol.ServerHello
	if err := json.Unmarshal(b, &hello); err != nil || hello.SessionID == "" {
		return nil, fmt.Errorf("no session id in the hello %s", b)
	}
	// The 10,000 files, made by the session's agent.
	if err := c.WriteText([]byte(`{"type":"prompt","id":"many","text":"mkdir many && cd many && seq 10000 | xargs touch","inputs":{}}`)); err != nil {
		return nil, err
	}
	for {
		b, err := c.ReadMessage()
		if err != nil {
			return nil, err
		}
		var m struct{ Type string }
		json.Unmarshal(b, &m)
		if m.Type == "error" {
			return nil, fmt.Errorf("making 10,000 files: %s", b)
		}
		if m.Type == "complete" {
			break
		}
	}
	hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second}}
	auth := http.Header{"Authorization": {"Bearer " + k.key}}
	kitURL := func(p string) string {
		return "http://127.0.0.1:" + strconv.Itoa(k.port) + "/sessions/" + hello.SessionID + "/fs/" + p
	}
	var rows []row
	kitFloor := "its own kit process"
	if os.Geteuid() == 0 {
		kitFloor += ", as root: privilege separation, every sandbox layer"
	}
	for _, size := range []int64{1 << 20, 100 << 20} {
		name := protocol.FormatSize(size)
		ds, err := timePuts(hc, kitURL("work/bench.bin"), auth, size, runs)
		if err != nil {
			return rows, fmt.Errorf("kit PUT %s: %w", name, err)
		}
		rows = append(rows, rateRow("kit: PUT "+name+" into a session's file (streamed, as the session)", ds, size, kitFloor))
		ds, err = timeGets(hc, kitURL("work/bench.bin"), auth, size, runs)
		if err != nil {
			return rows, fmt.Errorf("kit GET %s: %w", name, err)
		}
		rows = append(rows, rateRow("kit: GET "+name+" of a session's file (sendfile)", ds, size, kitFloor))
	}
	ds, err := timeLists(hc, kitURL("work/many?limit=10000"), auth, runs, func(b []byte) (int, error) {
		var l protocol.FSList
		err := json.Unmarshal(b, &l)
		return len(l.Entries), err
	})
	if err != nil {
		return rows, fmt.Errorf("kit list: %w", err)
	}
	rows = append(rows, durRow("kit: list 10,000 files (one page: name, type, size, mode, mtime)", ds, kitFloor))
	if sandboxAgent == "" {
		return rows, nil
	}

	dir, err := os.MkdirTemp("/var/tmp", "kitbench-sa-")
	if err != nil {
		return rows, err
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	many := filepath.Join(dir, "many")
	os.Mkdir(many, 0o777)
	for i := range 10000 {
		if err := os.WriteFile(filepath.Join(many, strconv.Itoa(i+1)), nil, 0o666); err != nil {
			return rows, err
		}
	}
	saURL := func(route, p string) string { return sandboxAgent + route + "?path=" + url.QueryEscape(p) }
	saFloor := "its own, at " + sandboxAgent
	for _, size := range []int64{1 << 20, 100 << 20} {
		name := protocol.FormatSize(size)
		// Expect: 100-continue lets it refuse a body before it is sent
		// (it closes the connection under a body it will not take).
		ds, err := timePuts(hc, saURL("/v1/fs/file", filepath.Join(dir, "bench.bin")), http.Header{"Expect": {"100-continue"}}, size, runs)
		var refused *refusedError
		switch {
		case errors.As(err, &refused):
			// It buffers a PUT's body in memory, up to a limit: the row
			// says so, and the GET reads a file made here instead.
			rows = append(rows, row{measure: "sandbox-agent: PUT /v1/fs/file " + name, median: "refused", spread: refused.msg, runs: 1, floor: saFloor})
			if err := os.WriteFile(filepath.Join(dir, "bench.bin"), bytes.Repeat(benchBlock, int(size/int64(len(benchBlock)))), 0o666); err != nil {
				return rows, err
			}
		case err != nil:
			return rows, fmt.Errorf("sandbox-agent PUT %s: %w", name, err)
		default:
			rows = append(rows, rateRow("sandbox-agent: PUT /v1/fs/file "+name, ds, size, saFloor))
		}
		ds, err = timeGets(hc, saURL("/v1/fs/file", filepath.Join(dir, "bench.bin")), nil, size, runs)
		if err != nil {
			return rows, fmt.Errorf("sandbox-agent GET %s: %w", name, err)
		}
		rows = append(rows, rateRow("sandbox-agent: GET /v1/fs/file "+name, ds, size, saFloor))
	}
	ds, err = timeLists(hc, saURL("/v1/fs/entries", many), nil, runs, func(b []byte) (int, error) {
		var l []json.RawMessage
		err := json.Unmarshal(b, &l)
		return len(l), err
	})
	if err != nil {
		return rows, fmt.Errorf("sandbox-agent list: %w", err)
	}
	rows = append(rows, durRow("sandbox-agent: GET /v1/fs/entries, 10,000 files", ds, saFloor))
	return rows, nil
}

// refusedError is a PUT answered 413.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// rateRow is a transfer's row: its median rate, the p99 time.
func rateRow(measure string, ds []time.Duration, size int64, floor string) row {
	med, p99 := pct(ds)
	return row{measure: measure, median: fmt.Sprintf("%s (%.0f MB/s)", dur(med), float64(size)/med.Seconds()/1e6), spread: "p99 " + dur(p99), runs: len(ds), floor: floor}
}

// repeat is n bytes of buf over and over.
type repeat struct {
	buf []byte
	n   int64
}

func (r *repeat) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n)]
	n := 0
	for n < len(p) {
		n += copy(p[n:], r.buf)
	}
	r.n -= int64(n)
	return n, nil
}

var benchBlock = func() []byte {
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	return b
}()

func timePuts(hc *http.Client, u string, h http.Header, size int64, runs int) ([]time.Duration, error) {
	var ds []time.Duration
	for range runs {
		req, _ := http.NewRequest(http.MethodPut, u, &repeat{buf: benchBlock, n: size})
		req.ContentLength = size
		for k, v := range h {
			req.Header[k] = v
		}
		t0 := time.Now()
		resp, err := hc.Do(req)
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
			return nil, &refusedError{"the connection was closed under the body (it takes no body this large)"}
		}
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusRequestEntityTooLarge {
			return nil, &refusedError{fmt.Sprintf("%s: %.100s", resp.Status, bytes.TrimSpace(body))}
		}
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}

func timeGets(hc *http.Client, u string, h http.Header, size int64, runs int) ([]time.Duration, error) {
	var ds []time.Duration
	for range runs {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || n != size {
			return nil, fmt.Errorf("%s: %d bytes of %d (%v)", resp.Status, n, size, err)
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}

func timeLists(hc *http.Client, u string, h http.Header, runs int, count func([]byte) (int, error)) ([]time.Duration, error) {
	var ds []time.Duration
	for range runs {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %.200s", resp.Status, b)
		}
		d := time.Since(t0)
		if n, err := count(b); err != nil || n != 10000 {
			return nil, fmt.Errorf("listed %d entries, want 10,000 (%v)", n, err)
		}
		ds = append(ds, d)
	}
	return ds, nil
}
