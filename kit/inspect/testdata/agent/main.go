// Command agent is the inspector test's agent: the echo agent's prompt
// (stream the words, ask to save them, write echo.txt), plus
//
//	flood N        N text_delta events, stdout and stderr, with ANSI colours
//	fetch URL...   GET each URL through the session's egress proxy
//	exit N         some stderr, then an exit event with status N
//	hog SECONDS MB a shell in the session's sandbox holding MB of memory, a
//	               few processes and some CPU for that long
//	sleep SECONDS  sleep(1) in the session's sandbox for that long, stopped
//	               when the prompt is aborted
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(kit.Main(ctx, kit.Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv},
		func(*protocol.Manifest, *slog.Logger) (agent.Agent, error) { return agent.Func(run), nil }))
}

type delta struct {
	Text   string `json:"text"`
	Stream string `json:"stream"`
}

func run(ctx context.Context, t agent.Turn) (string, error) {
	cmd, arg, _ := strings.Cut(t.Text(), " ")
	switch cmd {
	case "flood":
		n, _ := strconv.Atoi(arg)
		for i := range n {
			d := delta{Text: fmt.Sprintf("\x1b[32mok\x1b[0m line %d \x1b[38;5;208mamber\x1b[0m \x1b[1mbold\x1b[22m\n", i), Stream: "stdout"}
			if i%10 == 9 {
				d = delta{Text: fmt.Sprintf("\x1b[1;31mwarn\x1b[0m line %d on stderr\n", i), Stream: "stderr"}
			}
			if err := t.Emit("text_delta", d); err != nil {
				return "", err
			}
		}
		t.Emit("exit", map[string]int{"code": 0})
		return "flooded " + arg, nil
	case "fetch":
		var proxy string
		for _, kv := range t.Session().Env {
			if k, v, _ := strings.Cut(kv, "="); k == "HTTP_PROXY" {
				proxy = v
			}
		}
		pu, err := url.Parse(proxy)
		if err != nil || proxy == "" {
			return "", fmt.Errorf("no HTTP_PROXY in the session's environment")
		}
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
		for _, u := range strings.Fields(arg) {
			resp, err := c.Get(u)
			line := delta{Stream: "stdout"}
			if err != nil {
				line = delta{Text: u + ": " + err.Error() + "\n", Stream: "stderr"}
			} else {
				resp.Body.Close()
				line.Text = u + ": " + resp.Status + "\n"
			}
			t.Emit("text_delta", line)
		}
		return "fetched", nil
	case "hog":
		a, b, _ := strings.Cut(arg, " ")
		secs, _ := strconv.Atoi(a)
		mb, _ := strconv.Atoi(b)
		script := `x=$(head -c ` + strconv.Itoa(mb<<20) + ` /dev/zero | tr '\0' a); for i in 1 2 3; do sleep ` + strconv.Itoa(secs) + ` & done; ` +
			`end=$(( $(date +%s) + ` + strconv.Itoa(secs) + ` )); while [ $(date +%s) -lt $end ]; do :; done; wait`
		dir := t.Session().Dirs.Work
		p, err := t.Session().Sandbox.Start(sandbox.Spec{Path: "/bin/sh", Args: []string{"sh", "-c", script}, Dir: dir,
			Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}})
		if err != nil {
			return "", err
		}
		defer p.Kill()
		select {
		case <-p.Done():
		case <-ctx.Done():
			return "", ctx.Err()
		}
		st, _ := p.Wait()
		t.Emit("exit", map[string]any{"code": st.Code, "limit": st.Limit})
		return "hogged", nil
	case "sleep":
		dir := t.Session().Dirs.Work
		p, err := t.Session().Sandbox.Start(sandbox.Spec{Path: "/bin/sleep", Args: []string{"sleep", arg}, Dir: dir,
			Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}})
		if err != nil {
			return "", err
		}
		defer p.Kill()
		t.Emit("text_delta", delta{Text: "sleeping " + arg + "s\n", Stream: "stdout"})
		select {
		case <-p.Done():
		case <-ctx.Done():
			return "", ctx.Err()
		}
		st, _ := p.Wait()
		t.Emit("exit", map[string]any{"code": st.Code})
		return "slept", nil
	case "exit":
		n, _ := strconv.Atoi(arg)
		t.Emit("text_delta", delta{Text: "\x1b[31mfatal:\x1b[0m something went wrong\n", Stream: "stderr"})
		t.Emit("exit", map[string]int{"code": n})
		return "", nil
	}
	words := strings.Fields(t.Text())
	for _, w := range words {
		if err := t.Emit("text_delta", map[string]string{"text": w + " "}); err != nil {
			return "", err
		}
	}
	answer, err := t.Ask(ctx, "confirm", map[string]string{"question": "Save the echo to echo.txt?"})
	if err != nil {
		return "", err
	}
	var save bool
	json.Unmarshal(answer, &save)
	if save {
		out := filepath.Join(t.Session().Dirs.Output, "echo.txt")
		if err := os.WriteFile(out, []byte(strings.Join(words, " ")+"\n"), 0o644); err != nil {
			return "", err
		}
	}
	return "echoed " + strconv.Itoa(len(words)) + " words", nil
}
