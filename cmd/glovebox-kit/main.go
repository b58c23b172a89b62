// Command glovebox-kit serves a box: the manifest's exec or ACP agent
// behind the Glovebox protocol. A Go agent has its own main that calls
// kit.Main (see examples/echo-agent).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/acp"
	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return kit.Main(ctx, kit.Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv}, resolve)
}

func resolve(m *protocol.Manifest, log *slog.Logger) (agent.Agent, error) {
	switch m.AgentType() {
	case protocol.AgentExec:
		return exec.New(), nil
	case protocol.AgentACP:
		return acp.New(m.Agent, log)
	}
	return nil, fmt.Errorf(`type %q: glovebox-kit serves exec and acp agents; a Go agent is built with its own main that calls kit.Main (see examples/echo-agent)`, m.AgentType())
}
