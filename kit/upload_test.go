package kit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/kit/upload"
	"github.com/glovebox-dev/glovebox/protocol"
)

func (b *box) put(path string, header http.Header, body io.Reader, size int64) (*http.Response, []byte) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPut, b.url+path, body)
	req.ContentLength = size
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("PUT %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// storeFiles lists the store's directory: parked files and temporaries.
func (b *box) storeFiles() []string {
	b.t.Helper()
	entries, _ := os.ReadDir(filepath.Join(b.root, "var", "glovebox", "files"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestUploadStreamsIntoTheStoreAndFeedsAPrompt(t *testing.T) {
	b := newBox(t, exec.New(exec.WithGrace(100*time.Millisecond)), func(m *protocol.Manifest, _ *Options) { m.Limits.MaxInput = "64KB" })
	data := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB: exactly the cap
	h := b.auth()
	h.Set("Content-Type", "text/plain")
	resp, body := b.put("/uploads/big.txt", h, bytes.NewReader(data), int64(len(data)))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT /uploads/big.txt = %d %s, want 201", resp.StatusCode, body)
	}
	var ref protocol.FileRef
	if err := json.Unmarshal(body, &ref); err != nil || ref.Kind != protocol.KindServer || ref.Size != int64(len(data)) || ref.Name != "big.txt" || ref.Mime != "text/plain" {
		t.Fatalf("upload answered %s (%v), want a server ref of %d bytes", body, err, len(data))
	}
	resp, got := b.get("/files/"+ref.ID, b.auth())
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
		t.Fatalf("GET /files/%s = %d, %d bytes; want the uploaded bytes", ref.ID, resp.StatusCode, len(got))
	}

	// The ref is a prompt's input.
	c := b.dial("/", nil)
	defer c.close()
	raw, _ := json.Marshal(ref)
	var refMap map[string]any
	json.Unmarshal(raw, &refMap)
	promptWith(c, "1", `wc -c < "$GLOVEBOX_INPUT/in.txt"`, map[string]any{"in.txt": refMap})
	m := last(c.finish("1"))
	if m["type"] != "complete" || strings.TrimSpace(m["message"].(string)) != fmt.Sprint(len(data)) {
		t.Fatalf("prompt with the uploaded input: %v", m)
	}
}

func TestUploadRefusals(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) { m.Limits.MaxInput = "1KB" })
	small := []byte("hello")
	for _, c := range []struct {
		name   string
		method string
		path   string
		header http.Header
		size   int64
		want   int
	}{
		{"no bearer", http.MethodPut, "/uploads/a.txt", nil, 5, http.StatusUnauthorized},
		{"connect token", http.MethodPut, "/uploads/a.txt", bearer(b.token(protocol.ScopeConnect, protocol.ScopeFiles)), 5, http.StatusUnauthorized},
		{"GET", http.MethodGet, "/uploads/a.txt", b.auth(), 0, http.StatusMethodNotAllowed},
		{"no name", http.MethodPut, "/uploads/", b.auth(), 5, http.StatusBadRequest},
		{"slash in the name", http.MethodPut, "/uploads/a%2Fb", b.auth(), 5, http.StatusBadRequest},
		{"dot dot", http.MethodPut, "/uploads/..", b.auth(), 5, http.StatusBadRequest},
		{"no length", http.MethodPut, "/uploads/a.txt", b.auth(), -1, http.StatusLengthRequired},
		{"over the cap", http.MethodPut, "/uploads/a.txt", b.auth(), 1025, http.StatusRequestEntityTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(small)
			if c.size > int64(len(small)) {
				body = bytes.NewReader(make([]byte, c.size))
			}
			if c.size < 0 {
				body = io.MultiReader(bytes.NewReader(small)) // unknown length: chunked
			}
			req, _ := http.NewRequest(c.method, b.url+c.path, body)
			if c.size >= 0 {
				req.ContentLength = c.size
			}
			for k, v := range c.header {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("%s %s = %d %s, want %d", c.method, c.path, resp.StatusCode, msg, c.want)
			}
		})
	}
	tok := b.token(protocol.ScopeUpload)
	if resp, body := b.put("/uploads/a.txt", bearer(tok), bytes.NewReader(small), 5); resp.StatusCode != http.StatusCreated {
		t.Errorf("PUT with an upload token = %d %s, want 201", resp.StatusCode, body)
	}
	if resp, body := b.put("/uploads/big", b.auth(), bytes.NewReader(make([]byte, 2048)), 2048); resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "limits.max_input") {
		t.Errorf("PUT over the cap = %d %s, want 413 naming limits.max_input", resp.StatusCode, body)
	}
}

// TestUploadCutShortLeavesNothing sends half a body and hangs up: nothing
// stays in the store, and the same upload then succeeds.
func TestUploadCutShortLeavesNothing(t *testing.T) {
	b := newBox(t, scripted(nil))
	before := b.storeFiles()
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /uploads/cut.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100000\r\n\r\n", b.key)
	conn.Write(make([]byte, 50000))
	conn.(*net.TCPConn).CloseWrite()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			t.Fatalf("a cut-short upload was accepted")
		}
	}
	conn.Close()
	waitFor(t, "the store to hold nothing of the cut upload", func() bool { return len(b.storeFiles()) == len(before) })
	data := make([]byte, 100000)
	if resp, body := b.put("/uploads/cut.bin", b.auth(), bytes.NewReader(data), int64(len(data))); resp.StatusCode != http.StatusCreated {
		t.Fatalf("the retried upload = %d %s, want 201", resp.StatusCode, body)
	}
}

func (b *box) do(method, path string, header http.Header, body []byte) (*http.Response, []byte) {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.url+path, bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// TestResumableUpload starts an upload, loses a PATCH half way (the
// connection hangs up), asks where it stands and sends the rest.
func TestResumableUpload(t *testing.T) {
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, _ *Options) { m.Limits.MaxInput = "1MB" })
	data := bytes.Repeat([]byte("resumable "), 60000) // 600,000 bytes
	h := b.auth()
	h.Set("Upload-Length", fmt.Sprint(len(data)))
	h.Set("Content-Type", "text/plain")
	resp, body := b.do(http.MethodPost, "/uploads/r.txt", h, nil)
	var started struct {
		ID     string `json:"id"`
		Offset int64  `json:"offset"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &started) != nil || !strings.HasPrefix(started.ID, "up_") {
		t.Fatalf("POST /uploads/r.txt = %d %s, want 201 with an id", resp.StatusCode, body)
	}
	at := func(off int) http.Header {
		h := b.auth()
		h.Set("Upload-Offset", fmt.Sprint(off))
		return h
	}
	resp, body = b.do(http.MethodPatch, "/uploads/"+started.ID, at(0), data[:100000])
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Upload-Offset") != "100000" {
		t.Fatalf("first PATCH = %d %s offset %q, want 204 at 100000", resp.StatusCode, body, resp.Header.Get("Upload-Offset"))
	}
	if resp, _ := b.do(http.MethodPatch, "/uploads/"+started.ID, at(5), data[5:10]); resp.StatusCode != http.StatusConflict || resp.Header.Get("Upload-Offset") != "100000" {
		t.Errorf("PATCH at a wrong offset = %d offset %q, want 409 naming 100000", resp.StatusCode, resp.Header.Get("Upload-Offset"))
	}

	// A PATCH cut off after 50,000 of its 200,000 bytes.
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PATCH /uploads/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nUpload-Offset: 100000\r\nContent-Length: 200000\r\n\r\n", started.ID, b.key)
	conn.Write(data[100000:150000])
	conn.(*net.TCPConn).CloseWrite()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(conn), nil); err == nil {
		resp.Body.Close()
	}
	conn.Close()

	var off int
	waitFor(t, "HEAD to report the bytes of the cut PATCH", func() bool {
		resp, _ := b.do(http.MethodHead, "/uploads/"+started.ID, b.auth(), nil)
		fmt.Sscan(resp.Header.Get("Upload-Offset"), &off)
		return resp.StatusCode == http.StatusNoContent && off == 150000 && resp.Header.Get("Upload-Length") == fmt.Sprint(len(data))
	})
	resp, body = b.do(http.MethodPatch, "/uploads/"+started.ID, at(off), data[off:])
	var ref protocol.FileRef
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &ref) != nil || ref.Size != int64(len(data)) || ref.Mime != "text/plain" {
		t.Fatalf("last PATCH = %d %s, want 201 with the FileRef", resp.StatusCode, body)
	}
	if resp, got := b.get("/files/"+ref.ID, b.auth()); resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
		t.Fatalf("GET /files/%s = %d, %d bytes; want the whole upload", ref.ID, resp.StatusCode, len(got))
	}
	if resp, _ := b.do(http.MethodHead, "/uploads/"+started.ID, b.auth(), nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD of a finished upload = %d, want 404", resp.StatusCode)
	}
	if entries, _ := os.ReadDir(filepath.Join(b.root, "var", "glovebox", "uploads")); len(entries) != 0 {
		t.Errorf("partial files left: %v", entries)
	}

	// Refusals: no length, over the cap, another scope, DELETE.
	if resp, _ := b.do(http.MethodPost, "/uploads/x", b.auth(), nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST without Upload-Length = %d, want 400", resp.StatusCode)
	}
	h.Set("Upload-Length", fmt.Sprint(2<<20))
	if resp, _ := b.do(http.MethodPost, "/uploads/x", h, nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("POST over the cap = %d, want 413", resp.StatusCode)
	}
	h.Set("Upload-Length", "10")
	_, body = b.do(http.MethodPost, "/uploads/x", h, nil)
	json.Unmarshal(body, &started)
	if resp, _ := b.do(http.MethodHead, "/uploads/"+started.ID, bearer(b.token(protocol.ScopeConnect)), nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("HEAD with a connect token = %d, want 401", resp.StatusCode)
	}
	if resp, _ := b.do(http.MethodDelete, "/uploads/"+started.ID, b.auth(), nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE = %d, want 204", resp.StatusCode)
	}
	if resp, _ := b.do(http.MethodPatch, "/uploads/"+started.ID, at(0), []byte("0123456789")); resp.StatusCode != http.StatusNotFound {
		t.Errorf("PATCH after DELETE = %d, want 404", resp.StatusCode)
	}
}

// TestIdlePartialUploadSwept: a resumable upload left idle past
// upload.ResumeIdle is dropped, its partial file with it, though no other
// upload comes; until then /metrics counts it and the bytes it holds.
func TestIdlePartialUploadSwept(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	b := newBox(t, scripted(nil), func(m *protocol.Manifest, o *Options) {
		m.Limits.MaxInput = "1MB"
		o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		o.uploadSweep = 20 * time.Millisecond
	})
	h := b.auth()
	h.Set("Upload-Length", "1000")
	resp, body := b.do(http.MethodPost, "/uploads/idle.txt", h, nil)
	var started struct{ ID string }
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &started) != nil {
		t.Fatalf("POST /uploads/idle.txt = %d %s", resp.StatusCode, body)
	}
	h = b.auth()
	h.Set("Upload-Offset", "0")
	if resp, body := b.do(http.MethodPatch, "/uploads/"+started.ID, h, bytes.Repeat([]byte("x"), 300)); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PATCH = %d %s", resp.StatusCode, body)
	}
	metric := func(name string) string {
		_, body := b.get("/metrics", b.auth())
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return v
			}
		}
		return "absent"
	}
	if n, held := metric("glovebox_partial_uploads"), metric("glovebox_partial_upload_bytes"); n != "1" || held != "300" {
		t.Errorf("/metrics: %s partial uploads holding %s bytes, want 1 and 300", n, held)
	}
	dir := filepath.Join(b.root, "var", "glovebox", "uploads")
	// Sweeps come and go while the upload is fresh: it stays.
	time.Sleep(100 * time.Millisecond) // five sweeps' time is the subject
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("a fresh partial upload's file: %d entries in %s, want 1", len(entries), dir)
	}
	clock.Add(int64(upload.ResumeIdle + time.Minute))
	testkit.Until(t, "the idle partial upload's file removed", func() bool {
		entries, _ := os.ReadDir(dir)
		return len(entries) == 0
	})
	if resp, _ := b.do(http.MethodHead, "/uploads/"+started.ID, b.auth(), nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD of a swept upload = %d, want 404", resp.StatusCode)
	}
	if n, held := metric("glovebox_partial_uploads"), metric("glovebox_partial_upload_bytes"); n != "0" || held != "0" {
		t.Errorf("/metrics after the sweep: %s partial uploads holding %s bytes, want 0 and 0", n, held)
	}
}
