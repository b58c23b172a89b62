package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Decoding frames: DecodeClient and DecodeServer parse a frame once into
// its undecoded fields, then decode only the fields of its type.

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
// A prompt's text and inputs, which may be most of a large frame, are the
// exception: kept raw, they would be one more copy of it.
type clientWire struct {
	Type          *string         `json:"type"`
	ID            json.RawMessage `json:"id"`
	Text          textField       `json:"text"`
	Inputs        inputsField     `json:"inputs"`
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
		if p.Text, err = w.Text.value(t, "text"); err != nil {
			return nil, err
		}
		if p.ID == "" {
			return nil, fmt.Errorf("%w: prompt: empty \"id\"", ErrBadMessage)
		}
		if w.Inputs.err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadMessage, t, w.Inputs.err)
		}
		p.Inputs = w.Inputs.refs
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

// textField is a string field decoded as the frame is, copied once into
// its value. Its errors wait for value, which words them as rawString
// does, so that a message type without the field ignores them.
type textField struct {
	set, isString bool
	s             string
	err           error
}

func (f *textField) UnmarshalJSON(b []byte) error {
	*f = textField{set: true, isString: b[0] == '"'}
	if !f.isString {
		return nil
	}
	if s, ok := plainString(b); ok {
		f.s = s
		return nil
	}
	f.err = json.Unmarshal(b, &f.s)
	return nil
}

// value returns the field as a required string of a message of type t.
func (f *textField) value(t, field string) (string, error) {
	switch {
	case !f.set:
		return "", fmt.Errorf("%w: %s: missing %q", ErrBadMessage, t, field)
	case !f.isString:
		return "", fmt.Errorf("%w: %s: %q must be a string", ErrBadMessage, t, field)
	case f.err != nil:
		return "", fmt.Errorf("%w: %s: %v", ErrBadMessage, t, f.err)
	}
	return f.s, nil
}

// inputsField is a prompt's inputs decoded as the frame is; null is none.
// Its error waits for the prompt's decode to report it.
type inputsField struct {
	refs map[string]FileRef
	err  error
}

func (f *inputsField) UnmarshalJSON(b []byte) error {
	*f = inputsField{}
	if string(b) != "null" {
		f.err = json.Unmarshal(b, &f.refs)
	}
	return nil
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
	switch t {
	case TypeEvent:
		return w.event(t)
	case TypeDisplayPush:
		return w.displayPush(t)
	case TypeDisplayClear:
		return w.displayClear(t)
	case TypeComplete:
		return w.complete(t)
	case TypeError:
		return w.errorFrame(t)
	case TypePong:
		return &Pong{TS: orNull(w.TS)}, nil
	case TypeHello:
		return decodeAs[ServerHello](data, t)
	case TypeDraining:
		return decodeAs[Draining](data, t)
	case TypeEgress:
		return decodeAs[EgressPolicy](data, t)
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownType, t)
}

// The frames DecodeServer reads field by field, from the frame's raw
// fields; t is the frame's type, for errors.

func (w *serverFrame) event(t string) (ServerMessage, error) {
	e := &Event{Data: orNull(w.Data)}
	var err error
	if e.ID, err = rawString(w.ID, t, "id"); err != nil {
		return nil, err
	}
	if e.EventType, err = rawString(w.EventType, t, "event_type"); err != nil {
		return nil, err
	}
	if e.Seq, err = rawUint(w.Seq, t); err != nil {
		return nil, err
	}
	return e, nil
}

func (w *serverFrame) displayPush(t string) (ServerMessage, error) {
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
	var err error
	if p.Seq, err = rawUint(w.Seq, t); err != nil {
		return nil, err
	}
	return p, nil
}

func (w *serverFrame) displayClear(t string) (ServerMessage, error) {
	c := new(DisplayClear)
	var err error
	if c.SlotID, err = rawString(w.SlotID, t, "slot_id"); err != nil {
		return nil, err
	}
	if err := rawDecode(w.ID, &c.PromptID, t); err != nil {
		return nil, err
	}
	if c.Seq, err = rawUint(w.Seq, t); err != nil {
		return nil, err
	}
	return c, nil
}

func (w *serverFrame) complete(t string) (ServerMessage, error) {
	c := new(Complete)
	var err error
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
	if c.Seq, err = rawUint(w.Seq, t); err != nil {
		return nil, err
	}
	return c, nil
}

func (w *serverFrame) errorFrame(t string) (ServerMessage, error) {
	e := new(Error)
	var err error
	if e.ID, err = rawString(w.ID, t, "id"); err != nil {
		return nil, err
	}
	if err := rawDecode(w.Error, &e.Error, t); err != nil {
		return nil, err
	}
	if e.Seq, err = rawUint(w.Seq, t); err != nil {
		return nil, err
	}
	return e, nil
}

// decodeAs decodes a whole frame of type t into a new T.
func decodeAs[T any, P interface {
	*T
	ServerMessage
}](data []byte, t string) (ServerMessage, error) {
	v := P(new(T))
	if err := decodeInto(data, v, t); err != nil {
		return nil, err
	}
	return v, nil
}

func decodeInto(data []byte, v any, t string) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadMessage, t, err)
	}
	return nil
}
