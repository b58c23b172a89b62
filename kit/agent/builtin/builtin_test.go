package builtin_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/glovebox-dev/glovebox/kit/agent/acp"
	"github.com/glovebox-dev/glovebox/kit/agent/builtin"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

func TestResolve(t *testing.T) {
	acpSpec := &protocol.AgentSpec{Type: protocol.AgentACP, Command: []string{"node", "agent.mjs"}}
	acpAgent, err := acp.New(acpSpec, nil)
	if err != nil {
		t.Fatalf("acp.New: %v", err)
	}
	tests := []struct {
		name  string
		agent *protocol.AgentSpec
		want  string // the agent's type
	}{
		{"no agent table", nil, fmt.Sprintf("%T", exec.New())},
		{"exec", &protocol.AgentSpec{Type: protocol.AgentExec}, fmt.Sprintf("%T", exec.New())},
		{"acp", acpSpec, fmt.Sprintf("%T", acpAgent)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ag, err := builtin.Resolve(&protocol.Manifest{Agent: tt.agent}, nil)
			if err != nil {
				t.Fatalf("Resolve(agent %+v) error = %v", tt.agent, err)
			}
			if got := fmt.Sprintf("%T", ag); got != tt.want {
				t.Errorf("Resolve(agent %+v) = %s, want %s", tt.agent, got, tt.want)
			}
		})
	}
}

func TestResolveError(t *testing.T) {
	tests := []struct {
		name       string
		agent      *protocol.AgentSpec
		want       string
		notBuiltin bool
	}{
		{"go", &protocol.AgentSpec{Type: protocol.AgentGo}, `type "go": glovebox-kit serves exec and acp agents; a Go agent is built with its own main that calls kit.Main (see examples/echo-agent)`, true},
		{"unknown", &protocol.AgentSpec{Type: "llm"}, `type "llm": glovebox-kit serves exec and acp agents; a Go agent is built with its own main that calls kit.Main (see examples/echo-agent)`, true},
		{"acp without command", &protocol.AgentSpec{Type: protocol.AgentACP}, `acp: agent.command is empty: set it to the ACP agent's command line, e.g. ["node", "agent.js"]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ag, err := builtin.Resolve(&protocol.Manifest{Agent: tt.agent}, nil)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Resolve(agent %+v) = %T, %v, want error %q", tt.agent, ag, err, tt.want)
			}
			if got := errors.Is(err, builtin.ErrNotBuiltin); got != tt.notBuiltin {
				t.Errorf("errors.Is(Resolve(agent %+v), ErrNotBuiltin) = %v, want %v", tt.agent, got, tt.notBuiltin)
			}
		})
	}
}
