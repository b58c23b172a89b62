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
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent/exec"
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
