// Command echo-agent is a Go agent served by the Glovebox kit: it streams
// the prompt back word by word, asks the client whether to save it, and if
// so writes echo.txt to the session's output directory, which the kit
// returns with the prompt's outputs.
//
// Build it into a box whose manifest says "agent": {"type": "go"} and run
// it as you would glovebox-kit:
//
//	GLOVEBOX_KEY=... echo-agent --manifest glovebox.json --root /tmp/box
package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return kit.Main(ctx, kit.Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv},
		func(*protocol.Manifest, *slog.Logger) (agent.Agent, error) {
			return agent.Func(echo), nil
		})
}

// echo is the whole agent: one function per prompt.
func echo(ctx context.Context, t agent.Turn) (string, error) {
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
