package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DefaultPort is the port a box listens on when GLOVEBOX_PORT and PORT
// are unset: the kit's default, the port every generated image and deploy
// file exposes, and `gbx dev`'s.
const DefaultPort = 8080

// Message types. The first eleven are v1; hello and draining are additive.
const (
	TypePrompt         = "prompt"
	TypeAbort          = "abort"
	TypeDisplayResolve = "display_resolve"
	TypeDisplayReject  = "display_reject"
	TypePing           = "ping"
	TypeEvent          = "event"
	TypeDisplayPush    = "display_push"
	TypeDisplayClear   = "display_clear"
	TypeComplete       = "complete"
	TypeError          = "error"
	TypePong           = "pong"
	TypeHello          = "hello"    // both directions; additive
	TypeDraining       = "draining" // server to client; additive
	TypeEgress         = "egress"   // both directions; additive (CapEgressRules)
)

// Capabilities announced in the server's hello frame and in /environment.
// A peer uses a feature only when the other side announced it.
const (
	CapSeq          = "seq"           // server frames carry a sequence number
	CapResume       = "resume"        // a dropped session can be resumed (see Hello)
	CapOrdered      = "ordered"       // every event of a prompt precedes its complete or error
	CapCancelQueued = "cancel_queued" // abort removes a queued prompt; closing the socket cancels the queue
	CapSessions     = "sessions"      // each connection has its own agent state and directories
	CapSubprotocol  = "bearer_subprotocol"
	CapDrain        = "drain" // the box announces a shutdown with a draining frame
	// CapEgressRules: a session's egress can be narrowed (or widened
	// within the box's session_may_allow) with ClientHello.Egress or an
	// egress frame, and POST /sessions/{id}/egress.
	CapEgressRules = "egress_rules"
	// CapTerminals: PTYs in a session (/sessions/{id}/terminals).
	CapTerminals = "terminals"
	// CapProcesses: long-running processes outside the prompt flow
	// (/sessions/{id}/processes).
	CapProcesses = "processes"
	// CapWorkspaceFiles: a session's files, read, written and watched
	// (/sessions/{id}/fs).
	CapWorkspaceFiles = "fs"
	// CapPreview: a session's listening ports reached through the box
	// (/sessions/{id}/previews).
	CapPreview = "preview"
	// CapSnapshots: sessions snapshotted, restored and forked.
	CapSnapshots = "snapshots"
)

// Error codes. v1 used the name of the JavaScript error that was thrown, so
// "AbortError", "TypeError" and "Error" keep their v1 meaning.
const (
	CodeAborted      = "AbortError"   // the prompt was aborted (abort message, socket closed)
	CodeTimeout      = "TimeoutError" // limits.timeout ran out
	CodeBadMessage   = "TypeError"    // a malformed or mistyped message
	CodeError        = "Error"        // anything else
	CodeInput        = "InputError"   // an input could not be materialised
	CodeOutput       = "OutputError"  // an output could not be stored
	CodeAgent        = "AgentError"   // the agent failed or died
	CodeQueueFull    = "QueueFull"    // the session's prompt queue is full
	CodeDuplicateID  = "DuplicateID"  // a prompt id already queued or running on the session
	CodeResumeFailed = "ResumeFailed" // a resume request named an unknown or expired session
	CodeLimit        = "LimitError"   // the session hit a sandbox limit (memory, processes, disk)
	CodeDraining     = "Draining"     // the box is shutting down and takes no new prompts: reconnect elsewhere
)

// ClientMessage is a message a client sends to a box.
type ClientMessage interface{ clientMessage() }

// ServerMessage is a message a box sends to a client.
type ServerMessage interface{ serverMessage() }

// Prompt starts a turn.
type Prompt struct {
	ID            string             `json:"id"`
	Text          string             `json:"text"`
	Inputs        map[string]FileRef `json:"inputs,omitempty"`
	OutputsPolicy *OutputsOverride   `json:"outputs_policy,omitempty"`
}

// Abort cancels a running or queued prompt.
type Abort struct {
	ID string `json:"id"`
}

// DisplayResolve answers a display slot with a value.
type DisplayResolve struct {
	SlotID string          `json:"slot_id"`
	Value  json.RawMessage `json:"value"`
}

// DisplayReject rejects a display slot.
type DisplayReject struct {
	SlotID string          `json:"slot_id"`
	Error  json.RawMessage `json:"error"`
}

// Ping asks for a pong echoing TS verbatim.
type Ping struct {
	TS json.RawMessage `json:"ts"`
}

// ClientHello is the additive first frame a capable client sends. With
// "resume" among its capabilities, the box keeps the session alive for the
// resume grace period when the socket drops, instead of cancelling it.
type ClientHello struct {
	Capabilities []string `json:"capabilities,omitempty"`
	// Egress is the session's own egress rule set, in force before any
	// prompt of the session runs (see EgressSet). Additive.
	Egress *NetworkSpec `json:"egress,omitempty"`
}

// EgressSet replaces the session's egress rule set (client to box, wire
// type "egress"): new connections follow it at once. A connection goes
// ahead when the box's policy and these rules both allow it, or when the
// box's policy denies it only by its default, these rules allow it by an
// allow rule, and the box's session_may_allow covers it. Rules with no
// rules and no default clear the set. The box answers with an
// EgressPolicy frame.
type EgressSet struct {
	Rules NetworkSpec `json:"rules"`
}

// EgressPolicy is the box's answer to a hello with egress rules or an
// EgressSet (wire type "egress"): the session's effective policy, or
// Error when the rules were refused (the session keeps the rules it had).
type EgressPolicy struct {
	Policy *EgressEnvironment `json:"policy,omitempty"`
	Error  string             `json:"error,omitempty"`
}

// Event is one agent event for a prompt.
type Event struct {
	ID        string          `json:"id"`
	EventType string          `json:"event_type"`
	Data      json.RawMessage `json:"data"`
	Seq       uint64          `json:"seq,omitempty"`
}

// Slot is a display slot. Wire key order is renderer, input, id.
type Slot struct {
	Renderer string          `json:"renderer"`
	Input    json.RawMessage `json:"input"`
	ID       string          `json:"id"`
}

// DisplayPush asks the client to render a slot. PromptID (wire "id") is
// additive: v1 did not say which prompt pushed a slot.
type DisplayPush struct {
	Slot     Slot   `json:"slot"`
	PromptID string `json:"id,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
}

// DisplayClear removes a slot.
type DisplayClear struct {
	SlotID   string `json:"slot_id"`
	PromptID string `json:"id,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
}

// Complete ends a prompt successfully.
type Complete struct {
	ID      string             `json:"id"`
	Message string             `json:"message"`
	Outputs map[string]FileRef `json:"outputs"`
	Seq     uint64             `json:"seq,omitempty"`
}

// ErrorBody is the v1 error object.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error ends a prompt with a failure. An Error with an empty ID is about the
// connection, not a prompt (a malformed frame, a failed resume); v1 clients
// drop it.
type Error struct {
	ID    string    `json:"id"`
	Error ErrorBody `json:"error"`
	Seq   uint64    `json:"seq,omitempty"`
}

// Pong answers a ping.
type Pong struct {
	TS json.RawMessage `json:"ts"`
}

// ServerHello is the additive first frame the box sends after the upgrade.
// A v1 client ignores it. SessionID and LastSeq let a client reconnect with
// GET /?resume=<session_id>&last_seq=<n>; Resumed says whether that worked.
type ServerHello struct {
	ProtocolVersion int      `json:"protocol_version"`
	SessionID       string   `json:"session_id"`
	Capabilities    []string `json:"capabilities"`
	Resumed         bool     `json:"resumed,omitempty"`
	// Restarted, with Resumed: the box restarted since the client last
	// saw the session (a persistent session, sessions.persist): frames
	// after the client's last_seq that it had not received are lost;
	// GET /runs?session=ID has the prompts that ended. Additive.
	Restarted bool `json:"restarted,omitempty"`
	LastSeq         uint64   `json:"last_seq,omitempty"`
	Name            string   `json:"name,omitempty"`
	Version         string   `json:"version,omitempty"`
	// Egress is the session's effective egress policy, when the box has
	// an egress proxy. Additive.
	Egress *EgressEnvironment `json:"egress,omitempty"`
}

// Draining is the additive frame a box sends to every connected client
// when it starts shutting down (SIGTERM on a deploy). The box takes no new
// sessions or prompts; the prompts already running go on until Deadline
// (Unix milliseconds), and their complete frames still arrive. A client
// should open new sessions elsewhere (another replica, or this address
// again once the new instance is up). v1 clients ignore it.
type Draining struct {
	Deadline int64  `json:"deadline"`
	Message  string `json:"message,omitempty"`
}

func (*Prompt) clientMessage()         {}
func (*Abort) clientMessage()          {}
func (*DisplayResolve) clientMessage() {}
func (*DisplayReject) clientMessage()  {}
func (*Ping) clientMessage()           {}
func (*ClientHello) clientMessage()    {}
func (*EgressSet) clientMessage()      {}

func (*Event) serverMessage()        {}
func (*DisplayPush) serverMessage()  {}
func (*DisplayClear) serverMessage() {}
func (*Complete) serverMessage()     {}
func (*Error) serverMessage()        {}
func (*Pong) serverMessage()         {}
func (*ServerHello) serverMessage()  {}
func (*Draining) serverMessage()     {}
func (*EgressPolicy) serverMessage() {}

// TypeOf returns the wire type of a message.
func TypeOf(m any) string {
	switch m.(type) {
	case *Prompt:
		return TypePrompt
	case *Abort:
		return TypeAbort
	case *DisplayResolve:
		return TypeDisplayResolve
	case *DisplayReject:
		return TypeDisplayReject
	case *Ping:
		return TypePing
	case *ClientHello, *ServerHello:
		return TypeHello
	case *Event:
		return TypeEvent
	case *DisplayPush:
		return TypeDisplayPush
	case *DisplayClear:
		return TypeDisplayClear
	case *Complete:
		return TypeComplete
	case *Error:
		return TypeError
	case *Pong:
		return TypePong
	case *Draining:
		return TypeDraining
	case *EgressSet, *EgressPolicy:
		return TypeEgress
	}
	return ""
}

// Encode writes a message as one JSON object with "type" first, as v1 does.
func Encode(m any) ([]byte, error) {
	t := TypeOf(m)
	if t == "" {
		return nil, fmt.Errorf("protocol: cannot encode %T", m)
	}
	if c, ok := m.(*Complete); ok && c != nil && c.Outputs == nil {
		cc := *c
		cc.Outputs = map[string]FileRef{}
		m = &cc
	}
	if h, ok := m.(*ServerHello); ok && h != nil && h.Capabilities == nil {
		hh := *h
		hh.Capabilities = []string{}
		m = &hh
	}
	if e, ok := m.(*Event); ok && e != nil && len(e.Data) == 0 {
		ee := *e
		ee.Data = json.RawMessage("{}")
		m = &ee
	}
	body, err := marshal(m)
	if err != nil {
		return nil, fmt.Errorf("protocol: encode %s: %w", t, err)
	}
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("protocol: cannot encode a nil %s", t)
	}
	buf := make([]byte, 0, len(body)+len(t)+12)
	buf = append(buf, `{"type":"`...)
	buf = append(buf, t...)
	buf = append(buf, '"')
	if len(body) > 2 {
		buf = append(buf, ',')
	}
	buf = append(buf, body[1:]...)
	return buf, nil
}

// marshal is json.Marshal without HTML escaping: v1 peers write "<", ">"
// and "&" as they are, and so do we.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
