package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/agent"
)

// permissionRenderer is v1's renderer name for permission slots.
const permissionRenderer = "permission_request"

// maxPermissionAsks bounds how often a slot is pushed again after an
// answer that names no option.
const maxPermissionAsks = 3

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

var cancelledOutcome = map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}

// requestPermission serves session/request_permission through a display
// slot (see the package doc).
func (c *conversation) requestPermission(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		ToolCall json.RawMessage    `json:"toolCall"`
		Options  []permissionOption `json:"options"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, rpcErrorf(codeInvalidParams, "invalid params: %v", err)
	}
	if len(p.Options) == 0 {
		return nil, rpcErrorf(codeInvalidParams, "options are empty")
	}
	var rawOptions json.RawMessage
	if fs, err := objectFields(params); err == nil {
		rawOptions = get(fs, "options")
	}
	c.mu.Lock()
	ts := c.cur
	c.mu.Unlock()
	if ts == nil {
		c.log.Warn("acp: permission requested outside a prompt; answering cancelled")
		return cancelledOutcome, nil
	}
	// The slot lives as long as both the request and the prompt.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(ts.ctx, stop)()

	var toolName string
	var toolInput json.RawMessage
	if fs, err := objectFields(p.ToolCall); err == nil {
		toolName = ts.toolName(fs)
		toolInput = get(fs, "rawInput")
	}
	if toolInput == nil {
		toolInput = json.RawMessage("null")
	}
	var problem string
	for range maxPermissionAsks {
		input := newObject()
		input.set("renderer", permissionRenderer)
		input.set("toolName", toolName)
		input.raw("toolInput", toolInput)
		input.raw("toolCall", p.ToolCall)
		input.raw("options", rawOptions)
		if problem != "" {
			input.set("error", problem)
		}
		v, err := ts.t.Ask(ctx, permissionRenderer, input.bytes())
		if err != nil {
			var rej *agent.RejectedError
			if !errors.As(err, &rej) && ctx.Err() == nil {
				c.log.Warn("acp: permission slot ended with an error; answering cancelled", "err", err)
			}
			return cancelledOutcome, nil
		}
		id, err := pickOption(v, p.Options)
		if err == nil {
			c.log.Info("acp: permission answered", "tool", toolName, "option", id)
			return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": id}}, nil
		}
		problem = err.Error()
		c.log.Warn("acp: permission answer refused", "err", err)
	}
	return cancelledOutcome, nil
}

// pickOption reads a display_resolve value as one of the options.
func pickOption(v json.RawMessage, options []permissionOption) (string, error) {
	var id string
	var obj struct {
		OptionID *string `json:"optionId"`
	}
	var b bool
	switch {
	case json.Unmarshal(v, &id) == nil:
	case json.Unmarshal(v, &obj) == nil && obj.OptionID != nil:
		id = *obj.OptionID
	case json.Unmarshal(v, &b) == nil:
		kinds := []string{"reject_once", "reject_always"}
		if b {
			kinds = []string{"allow_once", "allow_always"}
		}
		for _, k := range kinds {
			for _, o := range options {
				if o.Kind == k {
					return o.OptionID, nil
				}
			}
		}
		return "", fmt.Errorf("%s: no option of kind %s; choose an optionId: %s", v, strings.Join(kinds, " or "), optionIDs(options))
	default:
		return "", fmt.Errorf("value %s is not an optionId; choose one of %s (as a string or {\"optionId\": id})", clip(v), optionIDs(options))
	}
	for _, o := range options {
		if o.OptionID == id {
			return id, nil
		}
	}
	return "", fmt.Errorf("unknown optionId %q; choose one of %s", id, optionIDs(options))
}

func optionIDs(options []permissionOption) string {
	ids := make([]string, len(options))
	for i, o := range options {
		ids[i] = strconv.Quote(o.OptionID)
	}
	return strings.Join(ids, ", ")
}
