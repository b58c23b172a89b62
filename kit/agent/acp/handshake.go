package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

type initializeResult struct {
	ProtocolVersion int               `json:"protocolVersion"`
	AuthMethods     []json.RawMessage `json:"authMethods"`
	AgentInfo       *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"agentInfo"`
	AgentCapabilities struct {
		LoadSession bool `json:"loadSession"`
	} `json:"agentCapabilities"`
}

// handshake sends initialize and session/new.
func (c *conversation) handshake(ctx context.Context, p *proc) error {
	init := map[string]any{
		"protocolVersion": protocolVersion,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": true, "writeTextFile": true},
			"terminal": true,
		},
		"clientInfo": map[string]string{"name": "glovebox-kit", "title": "Glovebox", "version": "1"},
	}
	var ir initializeResult
	if err := p.conn.roundTrip(ctx, "initialize", init, &ir); err != nil {
		return c.startError(ctx, p, err)
	}
	if ir.ProtocolVersion != protocolVersion {
		return fmt.Errorf("acp: the agent speaks ACP protocol version %d; glovebox speaks %d", ir.ProtocolVersion, protocolVersion)
	}
	p.authMethods = authMethodIDs(ir.AuthMethods)
	if ir.AgentInfo != nil {
		p.log.Info("acp: agent initialized", "name", ir.AgentInfo.Name, "version", ir.AgentInfo.Version)
	}
	if c.load(ctx, p, ir.AgentCapabilities.LoadSession) {
		return nil
	}
	newSession := map[string]any{"cwd": workDir(c.s), "mcpServers": []any{}}
	var ns struct {
		SessionID string `json:"sessionId"`
	}
	err := p.conn.roundTrip(ctx, "session/new", newSession, &ns)
	var re *rpcError
	if errors.As(err, &re) && re.Code == codeAuthRequired {
		if method := envAuthMethod(ir.AuthMethods, c.env); method != "" {
			p.log.Info("acp: authenticating with credentials from the environment", "method", method)
			if aerr := p.conn.roundTrip(ctx, "authenticate", map[string]string{"methodId": method}, nil); aerr != nil {
				return c.startError(ctx, p, fmt.Errorf("authenticate with %s: %w", method, aerr))
			}
			err = p.conn.roundTrip(ctx, "session/new", newSession, &ns)
		}
	}
	if err != nil {
		if errors.As(err, &re) && re.Code == codeAuthRequired {
			return fmt.Errorf("acp: the agent requires authentication before session/new (auth methods %s); give it its credentials through the box's env: %w", p.authMethods, err)
		}
		return c.startError(ctx, p, err)
	}
	if ns.SessionID == "" {
		return errors.New("acp: protocol violation: session/new returned no sessionId")
	}
	c.mu.Lock()
	p.sessionID = ns.SessionID
	c.last = ns.SessionID
	c.mu.Unlock()
	p.log.Info("acp: session opened", "acp_session", ns.SessionID)
	return nil
}

// load continues the conversation's earlier ACP session with session/load
// where the agent can (loadSession): the one the kit restored the session
// with (agent.Session.Resume), or the one of the agent's process that
// died. The agent replays the conversation as session/update
// notifications before it answers: they are the past, not the next
// prompt's events, and are dropped. It reports whether the session was
// loaded; if not, the caller opens a new one.
func (c *conversation) load(ctx context.Context, p *proc, can bool) bool {
	c.mu.Lock()
	id := c.last
	c.mu.Unlock()
	if id == "" {
		return false
	}
	if !can {
		p.log.Info("acp: the agent cannot load its earlier session (no loadSession capability): its conversation starts anew", "acp_session", id)
		return false
	}
	c.mu.Lock()
	c.loading = true
	c.mu.Unlock()
	err := p.conn.roundTrip(ctx, "session/load", map[string]any{"sessionId": id, "cwd": workDir(c.s), "mcpServers": []any{}}, nil)
	c.mu.Lock()
	c.loading = false
	if err == nil {
		p.sessionID = id
	}
	c.mu.Unlock()
	if err != nil {
		p.log.Warn("acp: the agent could not load its earlier session: its conversation starts anew", "acp_session", id, "err", err)
		return false
	}
	p.log.Info("acp: session loaded", "acp_session", id)
	return true
}

// startError explains a failed handshake, with the exit status and stderr
// when the process died.
func (c *conversation) startError(ctx context.Context, p *proc, err error) error {
	if p.conn.err() != nil && ctx.Err() == nil {
		return fmt.Errorf("acp: start the agent: %w", p.exitError(ctx, c.a.stopGrace, "the handshake"))
	}
	return fmt.Errorf("acp: start the agent: %w", err)
}

// envAuthMethod picks the first auth method of type env_var whose
// variables are all set, non-empty, in env: the agent reads its
// credentials from the environment once told to use them.
func envAuthMethod(methods []json.RawMessage, env []string) string {
	for _, m := range methods {
		var v struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Vars []struct {
				Name string `json:"name"`
			} `json:"vars"`
		}
		if json.Unmarshal(m, &v) != nil || v.ID == "" || v.Type != "env_var" || len(v.Vars) == 0 {
			continue
		}
		ok := true
		for _, ev := range v.Vars {
			ok = ok && lookupEnv(env, ev.Name) != ""
		}
		if ok {
			return v.ID
		}
	}
	return ""
}

// lookupEnv returns the value of name in env; the last entry wins, as in
// exec.Cmd.
func lookupEnv(env []string, name string) string {
	val := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			val = v
		}
	}
	return val
}

func authMethodIDs(methods []json.RawMessage) string {
	var ids []string
	for _, m := range methods {
		var v struct {
			ID   string `json:"id"`
			Vars []struct {
				Name string `json:"name"`
			} `json:"vars"`
		}
		if json.Unmarshal(m, &v) != nil || v.ID == "" {
			continue
		}
		id := v.ID
		if len(v.Vars) > 0 {
			names := make([]string, len(v.Vars))
			for i, ev := range v.Vars {
				names[i] = ev.Name
			}
			id += " (set " + strings.Join(names, ", ") + ")"
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return "none"
	}
	return strings.Join(ids, ", ")
}
