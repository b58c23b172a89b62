package cli

import (
	"fmt"
	"testing"

	"github.com/glovebox-dev/glovebox/kit/agent/builtin"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestLocalAgent checks that gbx dev runs the agent glovebox-kit would
// (builtin.Resolve) and says how to run one it cannot.
func TestLocalAgent(t *testing.T) {
	for _, spec := range []*protocol.AgentSpec{
		nil,
		{Type: protocol.AgentExec},
		{Type: protocol.AgentACP, Command: []string{"node", "agent.mjs"}},
	} {
		m := &protocol.Manifest{Agent: spec}
		want, err := builtin.Resolve(m, nil)
		if err != nil {
			t.Fatalf("builtin.Resolve(agent %+v): %v", spec, err)
		}
		got, err := localAgent(m, nil)
		if err != nil || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
			t.Errorf("localAgent(agent %+v) = %T, %v, want %T", spec, got, err, want)
		}
	}
	for _, tt := range []struct {
		typ, want string
	}{
		{protocol.AgentGo, "this box's agent is a Go agent (agent.type \"go\"): it runs from its own main package, so start it with `go run .` instead of gbx dev"},
		{"llm", `agent type "llm" is not one of exec, acp, go`},
	} {
		ag, err := localAgent(&protocol.Manifest{Agent: &protocol.AgentSpec{Type: tt.typ}}, nil)
		if err == nil || err.Error() != tt.want {
			t.Errorf("localAgent(type %q) = %T, %v, want error %q", tt.typ, ag, err, tt.want)
		}
	}
}
