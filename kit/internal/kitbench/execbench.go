package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Terminals and processes (--exec N): keystroke echo through a PTY (a
// byte written on the terminal's WebSocket to its echo read back, the
// line discipline's, of `cat` in canonical mode) and a process's start to
// its first output (the start request to the first byte of `echo hi`
// read from its followed output), each in a kit with every layer, and,
// with --sandbox-agent, the same through sandbox-agent's process API
// (a tty process's terminal WebSocket; POST /v1/processes and its
// followed logs). The client is this process.

// echoesPerTerminal keeps a canonical-mode line below the PTY's 4096-byte
// line limit: a new terminal after that many keystrokes.
const echoesPerTerminal = 1000

func execRows(kitPath string, n int, sandboxAgent string) ([]row, error) {
	var rows []row
	for _, v := range []struct{ name, manifest string }{
		{"every layer", `{"name":"bench","agent":{"type":"exec","warm":0}}`},
		{"sandbox off", `{"name":"bench","agent":{"type":"exec","warm":0},"sandbox":{"enabled":false}}`},
	} {
		rs, err := execKit(kitPath, v.manifest, v.name, n)
		rows = append(rows, rs...)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	if sandboxAgent == "" {
		return rows, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sa, err := sandboxAgentExec(ctx, sandboxAgent, n)
	return append(rows, sa...), err
}

// execKit measures a kit started with manifest.
func execKit(kitPath, manifest, variant string, n int) ([]row, error) {
	k, _, err := startWith(kitPath, manifest)
	if err != nil {
		return nil, err
	}
	defer k.stop()
	base := "http://127.0.0.1:" + strconv.Itoa(k.port)
	api := &httpAPI{key: k.key, client: &http.Client{Timeout: 30 * time.Second}}
	var health protocol.Health // with the key: its layers
	if err := api.json("GET", base+"/health", "", http.StatusOK, &health); err != nil {
		return nil, err
	}
	layers := strings.Join(health.Isolation, ", ")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The session: its own socket, kept open for the measures' life.
	c, _, err := wsconn.Dial(ctx, "ws://127.0.0.1:"+strconv.Itoa(k.port)+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + k.key}}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	hello, err := c.ReadMessage()
	if err != nil {
		return nil, err
	}
	var h struct {
		SessionID string `json:"session_id"`
	}
	json.Unmarshal(hello, &h)
	sess := base + "/sessions/" + h.SessionID

	var echoes []time.Duration
	for len(echoes) < n {
		var t protocol.Terminal
		if err := api.json("POST", sess+"/terminals", `{"command":["cat"]}`, http.StatusCreated, &t); err != nil {
			return nil, fmt.Errorf("start a terminal: %w", err)
		}
		tc, _, err := wsconn.Dial(ctx, "ws"+strings.TrimPrefix(sess, "http")+"/terminals/"+t.ID, wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + k.key}}})
		if err != nil {
			return nil, fmt.Errorf("attach: %w", err)
		}
		ds, err := echo(min(echoesPerTerminal, n-len(echoes)),
			func(b byte) error { return tc.WriteBinary([]byte{b}) },
			func() ([]byte, error) {
				for {
					binary, data, err := tc.ReadFrame()
					if err != nil || binary {
						return data, err
					}
				}
			})
		tc.Close()
		api.json("DELETE", sess+"/terminals/"+t.ID, "", http.StatusNoContent, nil)
		if err != nil {
			return nil, fmt.Errorf("keystroke echo: %w", err)
		}
		echoes = append(echoes, ds...)
	}
	rows := []row{durRow("terminal, "+variant+": keystroke echo through a PTY (`cat`), over its WebSocket", echoes, "layers: "+layers)}

	var starts []time.Duration
	for range max(n/10, 5) {
		t0 := time.Now()
		var p protocol.Process
		if err := api.json("POST", sess+"/processes", `{"command":["echo","hi"]}`, http.StatusCreated, &p); err != nil {
			return rows, fmt.Errorf("start a process: %w", err)
		}
		if err := api.firstLine(sess+"/processes/"+p.ID+"/output?follow=1", func(line []byte) bool {
			var o protocol.ProcessOutput
			return json.Unmarshal(line, &o) == nil && o.Data != ""
		}); err != nil {
			return rows, fmt.Errorf("follow the process's output: %w", err)
		}
		starts = append(starts, time.Since(t0))
		api.json("DELETE", sess+"/processes/"+p.ID, "", http.StatusNoContent, nil)
	}
	rows = append(rows, durRow("process, "+variant+": start `echo hi` to its first output, followed", starts, "layers: "+layers))
	return rows, nil
}

// echo times n keystrokes: each byte written, then frames read until its
// echo has come back.
func echo(n int, write func(byte) error, read func() ([]byte, error)) ([]time.Duration, error) {
	var ds []time.Duration
	for i := range n {
		b := byte('a' + i%26)
		t0 := time.Now()
		if err := write(b); err != nil {
			return nil, err
		}
		for {
			data, err := read()
			if err != nil {
				return nil, err
			}
			if bytes.IndexByte(data, b) >= 0 {
				break
			}
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}

// sandboxAgentExec measures the same through sandbox-agent's process API.
func sandboxAgentExec(ctx context.Context, base string, n int) ([]row, error) {
	api := &httpAPI{client: &http.Client{Timeout: 30 * time.Second}}
	var echoes []time.Duration
	for len(echoes) < n {
		var p struct{ ID string }
		if err := api.json("POST", base+"/v1/processes", `{"command":"cat","tty":true,"interactive":true}`, http.StatusOK, &p); err != nil {
			return nil, fmt.Errorf("sandbox-agent: start a tty process: %w", err)
		}
		tc, _, err := wsconn.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/v1/processes/"+p.ID+"/terminal/ws", wsconn.DialOptions{})
		if err != nil {
			return nil, fmt.Errorf("sandbox-agent: attach: %w", err)
		}
		ds, err := echo(min(echoesPerTerminal, n-len(echoes)),
			func(b byte) error {
				return tc.WriteText([]byte(`{"type":"input","data":"` + string(b) + `","encoding":"utf8"}`))
			},
			func() ([]byte, error) {
				binary, data, err := tc.ReadFrame()
				if err != nil || binary {
					return data, err
				}
				var m struct{ Type, Data, Encoding string }
				if json.Unmarshal(data, &m) == nil && m.Type == "data" {
					if m.Encoding == "base64" {
						return base64.StdEncoding.DecodeString(m.Data)
					}
					return []byte(m.Data), nil
				}
				return nil, nil
			})
		tc.Close()
		api.json("POST", base+"/v1/processes/"+p.ID+"/kill", `{}`, 0, nil)
		api.json("DELETE", base+"/v1/processes/"+p.ID, "", 0, nil)
		if err != nil {
			return nil, fmt.Errorf("sandbox-agent: keystroke echo: %w", err)
		}
		echoes = append(echoes, ds...)
	}
	rows := []row{durRow("sandbox-agent: keystroke echo through a PTY (`cat`), over its terminal WebSocket", echoes, "its own, at "+base)}
	var starts []time.Duration
	for range max(n/10, 5) {
		t0 := time.Now()
		var p struct{ ID string }
		if err := api.json("POST", base+"/v1/processes", `{"command":"echo","args":["hi"]}`, http.StatusOK, &p); err != nil {
			return rows, fmt.Errorf("sandbox-agent: start a process: %w", err)
		}
		if err := api.firstLine(base+"/v1/processes/"+p.ID+"/logs?follow=true", func(line []byte) bool {
			return bytes.HasPrefix(line, []byte("data:"))
		}); err != nil {
			return rows, fmt.Errorf("sandbox-agent: follow the process's logs: %w", err)
		}
		starts = append(starts, time.Since(t0))
		api.json("DELETE", base+"/v1/processes/"+p.ID, "", 0, nil)
	}
	rows = append(rows, durRow("sandbox-agent: POST /v1/processes `echo hi` to its first output, followed logs (SSE)", starts, "its own, at "+base))
	// Its followed logs may wait for a poll of their own: GET /logs asked
	// again and again is its best case.
	starts = starts[:0]
	for range max(n/10, 5) {
		t0 := time.Now()
		var p struct{ ID string }
		if err := api.json("POST", base+"/v1/processes", `{"command":"echo","args":["hi"]}`, http.StatusOK, &p); err != nil {
			return rows, fmt.Errorf("sandbox-agent: start a process: %w", err)
		}
		for {
			var l struct{ Entries []struct{ Data string } }
			if err := api.json("GET", base+"/v1/processes/"+p.ID+"/logs", "", http.StatusOK, &l); err != nil {
				return rows, fmt.Errorf("sandbox-agent: logs: %w", err)
			}
			if len(l.Entries) > 0 && l.Entries[0].Data != "" {
				break
			}
			if time.Since(t0) > 10*time.Second {
				return rows, errors.New("sandbox-agent: no output within 10s")
			}
		}
		starts = append(starts, time.Since(t0))
		api.json("DELETE", base+"/v1/processes/"+p.ID, "", 0, nil)
	}
	rows = append(rows, durRow("sandbox-agent: POST /v1/processes `echo hi` to its first output, GET /logs polled without pause", starts, "its own, at "+base))
	return rows, nil
}

// httpAPI sends requests with a bearer (none when key is empty).
type httpAPI struct {
	key    string
	client *http.Client
}

// json sends a request and decodes the answer into v; want 0 takes any
// status.
func (a *httpAPI) json(method, url, body string, want int, v any) error {
	resp, err := a.do(method, url, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if want != 0 && resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, b)
	}
	if v != nil {
		return json.Unmarshal(b, v)
	}
	return nil
}

func (a *httpAPI) do(method, url, body string) (*http.Response, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.key != "" {
		req.Header.Set("Authorization", "Bearer "+a.key)
	}
	return a.client.Do(req)
}

// firstLine GETs a streamed answer and reads lines until done says one is
// what it waited for.
func (a *httpAPI) firstLine(url string, done func([]byte) bool) error {
	resp, err := a.do("GET", url, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if done(sc.Bytes()) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the stream ended before its first output")
}
