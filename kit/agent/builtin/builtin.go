// Package builtin resolves the agents built into the kit: the manifest's
// agent.type "exec" (kit/agent/exec) and "acp" (kit/agent/acp). glovebox-kit
// serves through Resolve, and gbx dev runs a box's agent through it, so
// both pick the same agent for the same manifest. A Go agent ("go") is not
// built in: it has its own main that calls kit.Main.
package builtin

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/agent/acp"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// ErrNotBuiltin is wrapped by Resolve's error for an agent type that is
// not built in.
var ErrNotBuiltin = errors.New("glovebox-kit serves exec and acp agents; a Go agent is built with its own main that calls kit.Main (see examples/echo-agent)")

// Resolve returns the built-in agent the manifest names: exec.New() for
// "exec" (also the default type), acp.New for "acp". Any other type is an
// error wrapping ErrNotBuiltin. It has the shape kit.Main takes.
func Resolve(m *protocol.Manifest, log *slog.Logger) (agent.Agent, error) {
	switch t := m.AgentType(); t {
	case protocol.AgentExec:
		return exec.New(), nil
	case protocol.AgentACP:
		return acp.New(m.Agent, log)
	default:
		return nil, fmt.Errorf("type %q: %w", t, ErrNotBuiltin)
	}
}
