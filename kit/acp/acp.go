// Package acp hosts Agent Client Protocol agents as subprocesses.
//
// An ACP agent is any program that speaks JSON-RPC 2.0 over its stdin and
// stdout as the Agent Client Protocol defines (agentclientprotocol.com).
// New returns an agent.Agent that starts one such process per Glovebox
// session, maps its session/update notifications to Glovebox events, turns
// its permission requests into display slots and serves its fs/* and
// terminal/* requests inside the session's directories.
package acp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// New returns an Agent that runs spec.Command as an ACP agent, one process
// per Glovebox session. spec.Type must be "acp" and spec.Command non-empty.
func New(spec *protocol.AgentSpec, log *slog.Logger) (agent.Agent, error) {
	if spec == nil {
		return nil, errors.New("acp: no agent spec")
	}
	if spec.Type != protocol.AgentACP {
		return nil, fmt.Errorf("acp: agent type is %q, want %q", spec.Type, protocol.AgentACP)
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return nil, errors.New(`acp: agent.command is empty: set it to the ACP agent's command line, e.g. ["node", "agent.js"]`)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &acpAgent{spec: spec, log: log}, nil
}

type acpAgent struct {
	spec *protocol.AgentSpec
	log  *slog.Logger
}

var _ agent.Agent = (*acpAgent)(nil)

// Open implements agent.Agent.
func (a *acpAgent) Open(ctx context.Context, s *agent.Session) (agent.Conversation, error) {
	return nil, errors.New("acp: not implemented yet")
}
