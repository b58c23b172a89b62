// Command glovebox-kit serves a box: the manifest's exec or ACP agent
// behind the Glovebox protocol. A Go agent has its own main that calls
// kit.Main (see examples/echo-agent).
package main

import (
	"context"
	"errors"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := kit.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, resolve)
	stop()
	var status *kit.ExitStatusError
	switch {
	case errors.As(err, &status):
		os.Exit(status.Code) // the kit's status, passed on by its init
	case err != nil:
		os.Exit(1) // kit.Main has reported it
	}
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
