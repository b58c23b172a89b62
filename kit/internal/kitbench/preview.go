package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// previewServerJS is the server the preview rows time: node's http module
// answering every GET with 2 bytes, listening on argv[1] and saying so.
const previewServerJS = `const port = +process.argv[1]; require("http").createServer((q, r) => r.end("ok")).listen(port, "127.0.0.1", () => console.log("listening on " + port))`

var listeningRE = regexp.MustCompile(`listening on (\d+)`)

// previewRoundTrips times n keep-alive HTTP GETs to the same node server
// directly (a process kitbench starts: the floor) and through a preview
// link of a kit whose session runs it, in the session's network namespace
// and on the session's own port of the host's loopback.
func previewRoundTrips(kitPath string, n int) ([]row, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	node := exec.CommandContext(ctx, "node", "-e", previewServerJS, strconv.Itoa(port))
	out, _ := node.StdoutPipe()
	if err := node.Start(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	defer func() {
		node.Process.Kill()
		node.Wait()
	}()
	if _, err := fmt.Fscanln(out, new(string), new(string), new(string)); err != nil {
		return nil, fmt.Errorf("node did not listen: %w", err)
	}
	floor, err := getLoop(fmt.Sprintf("http://127.0.0.1:%d/", port), "", "", n)
	if err != nil {
		return nil, err
	}
	rows := []row{durRow("HTTP GET round trip, keep-alive, straight to a node server", floor, "the floor of the next two")}
	for _, v := range []struct{ name, manifest, port string }{
		{"in the session's network namespace", `{"name":"bench","preview":{"domain":"preview.bench","http":true}}`, "8000"},
		{"on the session's own port of the host's loopback", `{"name":"bench","preview":{"domain":"preview.bench","http":true},"sandbox":{"network":false}}`, `"$PORT"`},
	} {
		ds, layers, err := previewLoop(kitPath, v.manifest, v.port, n)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", v.name, err)
		}
		rows = append(rows, durRow("the same through a preview link, "+v.name, ds, "straight to node; layers: "+layers))
	}
	return rows, nil
}

// previewLoop starts a kit with manifest, runs the server in a session
// on port (as the shell reads it), mints a link and times n GETs.
func previewLoop(kitPath, manifest, port string, n int) ([]time.Duration, string, error) {
	k, _, err := startWith(kitPath, manifest)
	if err != nil {
		return nil, "", err
	}
	defer k.stop()
	layers, _ := isolation(k)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := "127.0.0.1:" + strconv.Itoa(k.port)
	c, _, err := wsconn.Dial(ctx, "ws://"+base+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + k.key}}})
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	var hello struct {
		SessionID string `json:"session_id"`
	}
	if b, err := c.ReadMessage(); err != nil || json.Unmarshal(b, &hello) != nil {
		return nil, "", fmt.Errorf("hello: %v", err)
	}
	prompt, _ := json.Marshal(map[string]any{"type": "prompt", "id": "srv", "inputs": map[string]any{},
		"text": "exec node -e '" + previewServerJS + "' " + port})
	if err := c.WriteText(prompt); err != nil {
		return nil, "", err
	}
	listen := 0
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for listen == 0 {
		b, err := c.ReadMessage()
		if err != nil {
			return nil, "", fmt.Errorf("waiting for the server in the session: %w", err)
		}
		if strings.Contains(string(b), `"complete"`) || strings.Contains(string(b), `"error"`) {
			return nil, "", fmt.Errorf("the server in the session ended: %s", b)
		}
		if m := listeningRE.FindSubmatch(b); m != nil {
			listen, _ = strconv.Atoi(string(m[1]))
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+base+"/sessions/"+hello.SessionID+"/previews", strings.NewReader(`{"port":`+strconv.Itoa(listen)+`}`))
	req.Header.Set("Authorization", "Bearer "+k.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var p protocol.Preview
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &p) != nil {
		return nil, "", fmt.Errorf("POST previews: %d %s", resp.StatusCode, body)
	}
	ds, err := getLoop("http://"+base+"/", p.ID+".preview.bench", p.Link, n)
	return ds, layers, err
}

// getLoop times n GETs of url on one keep-alive connection, with host
// and the link as a bearer when given, after a few untimed ones.
func getLoop(url, host, link string, n int) ([]time.Duration, error) {
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
	defer cl.CloseIdleConnections()
	get := func() error {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if host != "" {
			req.Host = host
		}
		if link != "" {
			req.Header.Set("Authorization", "Bearer "+link)
		}
		resp, err := cl.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "ok" {
			return fmt.Errorf("GET %s (host %q) = %d %q", url, host, resp.StatusCode, b)
		}
		return nil
	}
	for range 20 {
		if err := get(); err != nil {
			return nil, err
		}
	}
	ds := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := get(); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}
