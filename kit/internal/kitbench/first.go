package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
)

// firstCommand times, n times each, a bare fork/exec of /bin/sh -c 'echo
// hi' to its first byte of output (the floor), then a new session dialled
// to a kit and prompted with echo hi, to the prompt's first event, with
// every sandbox layer the machine allows and with the sandbox off.
func firstCommand(kitPath string, n, warm int) ([]row, error) {
	agentJSON := ""
	if warm >= 0 {
		agentJSON = `,"agent":{"type":"exec","warm":` + strconv.Itoa(warm) + `}`
	}
	var floor []time.Duration
	for i := 0; i < n; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command("/bin/sh", "-c", "echo hi")
		cmd.Stdout = w
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		w.Close()
		buf := make([]byte, 8)
		_, err = r.Read(buf)
		floor = append(floor, time.Since(t0))
		cmd.Wait()
		r.Close()
		if err != nil {
			return nil, err
		}
	}
	rows := []row{durRow("fork/exec of /bin/sh -c 'echo hi' to its output", floor, "the floor of the next two")}
	for _, v := range []struct{ name, manifest string }{
		{"every layer", `{"name":"bench"` + agentJSON + `}`},
		{"sandbox off", `{"name":"bench","sandbox":{"enabled":false}` + agentJSON + `}`},
	} {
		k, _, err := startWith(kitPath, v.manifest)
		if err != nil {
			return nil, err
		}
		layers, _ := isolation(k)
		var ds []time.Duration
		for i := 0; i < n; i++ {
			d, err := firstEvent(k)
			if err != nil {
				k.stop()
				return nil, err
			}
			ds = append(ds, d)
		}
		k.stop()
		rows = append(rows, durRow("new session to the first event of echo hi, "+v.name, ds, "fork/exec floor; layers: "+layers))
	}
	return rows, nil
}

// firstEvent dials a new session, prompts echo hi and returns the time to
// the prompt's first event; it then waits for the prompt to end.
func firstEvent(k *kitProc) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	c, _, err := wsconn.Dial(ctx, "ws://127.0.0.1:"+strconv.Itoa(k.port)+"/", wsconn.DialOptions{Header: http.Header{"Authorization": {"Bearer " + k.key}}})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.ReadMessage(); err != nil { // hello
		return 0, err
	}
	if err := c.WriteText([]byte(`{"type":"prompt","id":"p","text":"echo hi","inputs":{}}`)); err != nil {
		return 0, err
	}
	var d time.Duration
	for {
		b, err := c.ReadMessage()
		if err != nil {
			return 0, err
		}
		var m struct{ Type string }
		json.Unmarshal(b, &m)
		if m.Type == "event" && d == 0 {
			d = time.Since(t0)
		}
		if m.Type == "complete" || m.Type == "error" {
			if m.Type == "error" {
				return 0, fmt.Errorf("prompt failed: %s", b)
			}
			return d, nil
		}
	}
}
