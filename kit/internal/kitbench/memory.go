package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

// idle opens n idle sessions to a fresh kit and reports its RSS growth,
// and with base its RSS before them.
func idle(kitPath string, n int, withBase bool) ([]row, error) {
	k, _, err := start(kitPath)
	if err != nil {
		return nil, err
	}
	defer k.stop()
	time.Sleep(500 * time.Millisecond)
	base, err := kitRSS(k.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	url := "ws://127.0.0.1:" + strconv.Itoa(k.port) + "/"
	h := http.Header{"Authorization": {"Bearer " + k.key}}
	var cs []*wsconn.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, _, err := wsconn.Dial(context.Background(), url, wsconn.DialOptions{Header: h})
		if err != nil {
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		if _, err := c.ReadMessage(); err != nil { // hello
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
		cs = append(cs, c)
	}
	time.Sleep(2 * time.Second)
	after, err := kitRSS(k.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	var rows []row
	if withBase {
		rows = append(rows, row{measure: "kit idle RSS after boot", median: fmt.Sprintf("%.1f MiB", float64(base)/(1<<20)), runs: 1,
			floor: "original TS kit: 53.7 MiB"})
	}
	return append(rows, row{measure: fmt.Sprintf("RSS growth per idle authenticated WebSocket, %d", n),
		median: fmt.Sprintf("%.1f KiB", float64(after-base)/float64(n)/1024), spread: fmt.Sprintf("RSS %.1f MiB with them", float64(after)/(1<<20)),
		runs: 1, floor: "original TS kit: 13.1 KiB at 1,000, 7.2 KiB at 10,000"}), nil
}

// sessions opens n sessions to a fresh kit, each running one prompt (so
// that its sandbox exists: directories, uid, cgroup), keeps them open, and
// reports the setup time per session and the kit's RSS per session.
func sessions(kitPath string, n int) ([]row, error) {
	k, _, err := start(kitPath)
	if err != nil {
		return nil, err
	}
	defer k.stop()
	time.Sleep(300 * time.Millisecond)
	base, err := kitRSS(k.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	h := http.Header{"Authorization": {"Bearer " + k.key}}
	var cs []*wsconn.Conn
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	var ds []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		c, _, err := wsconn.Dial(context.Background(), "ws://127.0.0.1:"+strconv.Itoa(k.port)+"/", wsconn.DialOptions{Header: h})
		if err != nil {
			return nil, fmt.Errorf("session %d: %w", i, err)
		}
		cs = append(cs, c)
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		c.ReadMessage()
		c.WriteText([]byte(`{"type":"prompt","id":"p","text":"true","inputs":{}}`))
		for {
			b, err := c.ReadMessage()
			if err != nil {
				return nil, fmt.Errorf("session %d: %w", i, err)
			}
			if strings.Contains(string(b), `"complete"`) || strings.Contains(string(b), `"error"`) {
				break
			}
		}
		ds = append(ds, time.Since(t0))
	}
	time.Sleep(time.Second)
	after, err := kitRSS(k.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	layers, _ := isolation(k)
	rows := []row{
		durRow(fmt.Sprintf("%d sandboxed sessions: setup and first prompt `true`", n), ds, "layers: "+layers),
		{measure: fmt.Sprintf("kit RSS per sandboxed session, %d", n), median: fmt.Sprintf("%.1f KiB", float64(after-base)/float64(n)/1024),
			spread: fmt.Sprintf("RSS %.1f MiB idle, %.1f MiB with them", float64(base)/(1<<20), float64(after)/(1<<20)), runs: 1},
	}
	if r, err := supervisorMemory(k.cmd.Process.Pid); err == nil {
		rows = append(rows, r)
	} else {
		fmt.Fprintln(os.Stderr, "kitbench: supervisors' memory:", err)
	}
	return rows, nil
}

// kitRSS is the RSS of the kit process pid and of its children that are
// not sandbox supervisors: a kit started as root serves from an
// unprivileged child (the front) while it stays the root monitor, and a
// connection's memory is the front's.
func kitRSS(pid int) (int64, error) {
	sum, err := rss(pid)
	if err != nil {
		return 0, err
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		for _, kid := range strings.Fields(string(b)) {
			cmdline, _ := os.ReadFile("/proc/" + kid + "/cmdline")
			if strings.HasPrefix(string(cmdline), sandbox.InitName+"\x00") {
				continue
			}
			n, err := strconv.Atoi(kid)
			if err != nil {
				continue
			}
			if r, err := rss(n); err == nil {
				sum += r
			}
		}
	}
	return sum, nil
}

// supervisorMemory reads smaps_rollup of every sandbox supervisor the kit
// pid runs (its children named glovebox-sandbox-init: one a session, and
// the warm ones) and reports the median private memory and PSS of one.
// Private is what each session costs on its own; PSS adds its share of
// the pages it shares (the binary's text, with the kit's when it is the
// kit's own binary).
func supervisorMemory(pid int) (row, error) {
	var kids []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		kids = append(kids, strings.Fields(string(b))...)
	}
	var private, pss []int64
	exe := ""
	for _, kid := range kids {
		cmdline, _ := os.ReadFile("/proc/" + kid + "/cmdline")
		if !strings.HasPrefix(string(cmdline), sandbox.InitName+"\x00") {
			continue
		}
		b, err := os.ReadFile("/proc/" + kid + "/smaps_rollup")
		if err != nil {
			continue
		}
		var priv, p int64
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "Private_Clean:", "Private_Dirty:":
				priv += kb
			case "Pss:":
				p = kb
			}
		}
		private, pss = append(private, priv), append(pss, p)
		if exe == "" {
			exe, _ = os.Readlink("/proc/" + kid + "/exe")
		}
	}
	if len(private) == 0 {
		return row{}, fmt.Errorf("the kit %d runs no supervisor", pid)
	}
	sort.Slice(private, func(i, j int) bool { return private[i] < private[j] })
	sort.Slice(pss, func(i, j int) bool { return pss[i] < pss[j] })
	return row{measure: "sandbox supervisor memory per session: private (PSS)",
		median: fmt.Sprintf("%d KiB (%d KiB)", private[len(private)/2], pss[len(pss)/2]),
		spread: fmt.Sprintf("%d supervisors running %s", len(private), filepath.Base(exe)), runs: len(private)}, nil
}
