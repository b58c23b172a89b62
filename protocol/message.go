package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
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

// ErrUnknownType is returned (wrapped) for a frame whose type this side
// does not know. Peers ignore such frames for forward compatibility.
var ErrUnknownType = errors.New("protocol: unknown message type")

// ErrBadMessage wraps every other decoding error.
var ErrBadMessage = errors.New("protocol: bad message")

// PeekID returns the "id" field of a frame when it is a string, so that a
// frame that fails to decode can still be answered for its prompt.
func PeekID(data []byte) string {
	var v struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(data, &v) == nil {
		if s, ok := v.ID.(string); ok {
			return s
		}
	}
	return ""
}

// clientWire holds every field of every client message, undecoded, so a
// frame is parsed once; each message type then decodes only its own fields.
type clientWire struct {
	Type          *string         `json:"type"`
	ID            json.RawMessage `json:"id"`
	Text          json.RawMessage `json:"text"`
	Inputs        json.RawMessage `json:"inputs"`
	OutputsPolicy json.RawMessage `json:"outputs_policy"`
	SlotID        json.RawMessage `json:"slot_id"`
	Value         json.RawMessage `json:"value"`
	Error         json.RawMessage `json:"error"`
	TS            json.RawMessage `json:"ts"`
	Capabilities  json.RawMessage `json:"capabilities"`
	Egress        json.RawMessage `json:"egress"`
	Rules         json.RawMessage `json:"rules"`
}

// DecodeClient decodes a frame a client sent. Unknown fields are ignored (a
// newer client may send more); missing or mistyped required fields are
// errors wrapping ErrBadMessage; an unknown type wraps ErrUnknownType.
func DecodeClient(data []byte) (ClientMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrBadMessage)
	}
	var w clientWire
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	if w.Type == nil {
		return nil, fmt.Errorf("%w: missing \"type\"", ErrBadMessage)
	}
	t := *w.Type
	var err error
	switch t {
	case TypePrompt:
		p := new(Prompt)
		if p.ID, err = rawString(w.ID, t, "id"); err != nil {
			return nil, err
		}
		if p.Text, err = rawString(w.Text, t, "text"); err != nil {
			return nil, err
		}
		if p.ID == "" {
			return nil, fmt.Errorf("%w: prompt: empty \"id\"", ErrBadMessage)
		}
		if err := rawDecode(w.Inputs, &p.Inputs, t); err != nil {
			return nil, err
		}
		if err := rawDecode(w.OutputsPolicy, &p.OutputsPolicy, t); err != nil {
			return nil, err
		}
		return p, nil
	case TypeAbort:
		a := new(Abort)
		if a.ID, err = rawString(w.ID, t, "id"); err != nil {
			return nil, err
		}
		return a, nil
	case TypeDisplayResolve:
		r := &DisplayResolve{Value: orNull(w.Value)}
		if r.SlotID, err = rawString(w.SlotID, t, "slot_id"); err != nil {
			return nil, err
		}
		return r, nil
	case TypeDisplayReject:
		r := &DisplayReject{Error: orNull(w.Error)}
		if r.SlotID, err = rawString(w.SlotID, t, "slot_id"); err != nil {
			return nil, err
		}
		return r, nil
	case TypePing:
		return &Ping{TS: orNull(w.TS)}, nil
	case TypeHello:
		h := new(ClientHello)
		if err := rawDecode(w.Capabilities, &h.Capabilities, t); err != nil {
			return nil, err
		}
		if err := rawDecode(w.Egress, &h.Egress, t); err != nil {
			return nil, err
		}
		return h, nil
	case TypeEgress:
		e := new(EgressSet)
		if w.Rules == nil || string(w.Rules) == "null" {
			return nil, fmt.Errorf("%w: egress: missing \"rules\"", ErrBadMessage)
		}
		if err := rawDecode(w.Rules, &e.Rules, t); err != nil {
			return nil, err
		}
		return e, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownType, t)
}

// rawString decodes a required string field.
func rawString(raw json.RawMessage, t, field string) (string, error) {
	if raw == nil {
		return "", fmt.Errorf("%w: %s: missing %q", ErrBadMessage, t, field)
	}
	if raw[0] != '"' {
		return "", fmt.Errorf("%w: %s: %q must be a string", ErrBadMessage, t, field)
	}
	if s, ok := plainString(raw); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrBadMessage, t, err)
	}
	return s, nil
}

// plainString is the common case of rawString without a second pass of
// the JSON decoder: a string without escapes, whose bytes between the
// quotes are its value. Anything else (an escape, a control character,
// bytes that are not UTF-8, which the decoder would replace) reports
// false. raw is a value the frame's decode has already checked.
func plainString(raw []byte) (string, bool) {
	n := len(raw)
	if n < 2 || raw[0] != '"' || raw[n-1] != '"' {
		return "", false
	}
	body := raw[1 : n-1]
	for _, c := range body {
		if c < 0x20 || c == '\\' || c == '"' {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// rawUint decodes an optional unsigned integer field (seq); absent and
// null are 0. Plain digits are parsed directly; anything else goes
// through the JSON decoder, which words the errors.
func rawUint(raw json.RawMessage, t string) (uint64, error) {
	if raw == nil || string(raw) == "null" {
		return 0, nil
	}
	if len(raw) <= 19 && (raw[0] != '0' || len(raw) == 1) {
		digits := true
		for _, c := range raw {
			digits = digits && c >= '0' && c <= '9'
		}
		if digits {
			if n, err := strconv.ParseUint(string(raw), 10, 64); err == nil {
				return n, nil
			}
		}
	}
	var n uint64
	err := rawDecode(raw, &n, t)
	return n, err
}

// rawDecode decodes an optional field; absent and null leave v as it is.
func rawDecode(raw json.RawMessage, v any, t string) error {
	if raw == nil || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadMessage, t, err)
	}
	return nil
}

// orNull returns raw, or JSON null when the field was absent.
func orNull(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return json.RawMessage("null")
	}
	return raw
}

// serverFrame holds every field of the frequent server messages, undecoded,
// so a frame is parsed once; each message type then decodes only its own
// fields.
type serverFrame struct {
	Type      *string         `json:"type"`
	ID        json.RawMessage `json:"id"`
	EventType json.RawMessage `json:"event_type"`
	Data      json.RawMessage `json:"data"`
	Seq       json.RawMessage `json:"seq"`
	Slot      json.RawMessage `json:"slot"`
	SlotID    json.RawMessage `json:"slot_id"`
	Message   json.RawMessage `json:"message"`
	Outputs   json.RawMessage `json:"outputs"`
	Error     json.RawMessage `json:"error"`
	TS        json.RawMessage `json:"ts"`
}

// DecodeServer decodes a frame a box sent, with the same rules as
// DecodeClient.
func DecodeServer(data []byte) (ServerMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrBadMessage)
	}
	var w serverFrame
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	if w.Type == nil {
		return nil, fmt.Errorf("%w: missing \"type\"", ErrBadMessage)
	}
	t := *w.Type
	var err error
	seq := func() (uint64, error) { return rawUint(w.Seq, t) }
	switch t {
	case TypeEvent:
		e := &Event{Data: orNull(w.Data)}
		if e.ID, err = rawString(w.ID, t, "id"); err != nil {
			return nil, err
		}
		if e.EventType, err = rawString(w.EventType, t, "event_type"); err != nil {
			return nil, err
		}
		if e.Seq, err = seq(); err != nil {
			return nil, err
		}
		return e, nil
	case TypeDisplayPush:
		p := new(DisplayPush)
		if err := rawDecode(w.Slot, &p.Slot, t); err != nil {
			return nil, err
		}
		if p.Slot.ID == "" {
			return nil, fmt.Errorf("%w: display_push: slot without \"id\"", ErrBadMessage)
		}
		if err := rawDecode(w.ID, &p.PromptID, t); err != nil {
			return nil, err
		}
		if p.Seq, err = seq(); err != nil {
			return nil, err
		}
		return p, nil
	case TypeDisplayClear:
		c := new(DisplayClear)
		if c.SlotID, err = rawString(w.SlotID, t, "slot_id"); err != nil {
			return nil, err
		}
		if err := rawDecode(w.ID, &c.PromptID, t); err != nil {
			return nil, err
		}
		if c.Seq, err = seq(); err != nil {
			return nil, err
		}
		return c, nil
	case TypeComplete:
		c := new(Complete)
		if c.ID, err = rawString(w.ID, t, "id"); err != nil {
			return nil, err
		}
		if err := rawDecode(w.Message, &c.Message, t); err != nil {
			return nil, err
		}
		if err := rawDecode(w.Outputs, &c.Outputs, t); err != nil {
			return nil, err
		}
		if c.Outputs == nil {
			c.Outputs = map[string]FileRef{}
		}
		if c.Seq, err = seq(); err != nil {
			return nil, err
		}
		return c, nil
	case TypeError:
		e := new(Error)
		if e.ID, err = rawString(w.ID, t, "id"); err != nil {
			return nil, err
		}
		if err := rawDecode(w.Error, &e.Error, t); err != nil {
			return nil, err
		}
		if e.Seq, err = seq(); err != nil {
			return nil, err
		}
		return e, nil
	case TypePong:
		return &Pong{TS: orNull(w.TS)}, nil
	case TypeHello:
		h := new(ServerHello)
		if err := decodeInto(data, h, t); err != nil {
			return nil, err
		}
		return h, nil
	case TypeDraining:
		d := new(Draining)
		if err := decodeInto(data, d, t); err != nil {
			return nil, err
		}
		return d, nil
	case TypeEgress:
		e := new(EgressPolicy)
		if err := decodeInto(data, e, t); err != nil {
			return nil, err
		}
		return e, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownType, t)
}

func decodeInto(data []byte, v any, t string) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadMessage, t, err)
	}
	return nil
}
