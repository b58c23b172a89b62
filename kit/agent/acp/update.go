package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"time"
)

// event is one Glovebox event: its event_type and data.
type event struct {
	typ  string
	data json.RawMessage
}

// field is one member of a JSON object, kept in the order it was sent.
type field struct {
	key string
	val json.RawMessage
}

// objectFields splits a JSON object into its members, in order.
func objectFields(raw json.RawMessage) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var fs []field
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errors.New("object key is not a string")
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		fs = append(fs, field{key, val})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the object")
	}
	return fs, nil
}

// object writes a JSON object member by member. A key already written is
// skipped, so the first writer of a key wins.
type object struct {
	buf  bytes.Buffer
	seen map[string]bool
}

func newObject() *object {
	o := &object{seen: map[string]bool{}}
	o.buf.WriteByte('{')
	return o
}

func (o *object) raw(key string, val json.RawMessage) {
	if o.seen[key] || val == nil {
		return
	}
	o.seen[key] = true
	if o.buf.Len() > 1 {
		o.buf.WriteByte(',')
	}
	k, _ := json.Marshal(key)
	o.buf.Write(k)
	o.buf.WriteByte(':')
	o.buf.Write(val)
}

func (o *object) set(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null")
	}
	o.raw(key, b)
}

// rest writes every field but the discriminator.
func (o *object) rest(fs []field) {
	for _, f := range fs {
		if f.key != "sessionUpdate" {
			o.raw(f.key, f.val)
		}
	}
}

func (o *object) bytes() json.RawMessage {
	o.buf.WriteByte('}')
	return o.buf.Bytes()
}

func get(fs []field, key string) json.RawMessage {
	for _, f := range fs {
		if f.key == key {
			return f.val
		}
	}
	return nil
}

func getString(fs []field, key string) string {
	var s string
	if v := get(fs, key); v != nil {
		_ = json.Unmarshal(v, &s)
	}
	return s
}

// passThrough is an update as an event of its own name.
func passThrough(name string, fs []field) event {
	o := newObject()
	o.rest(fs)
	return event{name, o.bytes()}
}

// textOf returns the text of a text content block.
func textOf(content json.RawMessage) (string, bool) {
	var c struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(content, &c) != nil || c.Type != "text" || c.Text == nil {
		return "", false
	}
	return *c.Text, true
}

// mapUpdate turns one session/update's update into events (see the table
// in the package doc). It never drops an update: what it cannot read is
// passed through.
func (ts *turnState) mapUpdate(u json.RawMessage) []event {
	// The hot path: text chunks, read without splitting the object.
	var head struct {
		Kind    string `json:"sessionUpdate"`
		Content struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(u, &head) == nil && head.Content.Type == "text" && head.Content.Text != nil {
		if evs := ts.textChunk(head.Kind, *head.Content.Text); evs != nil {
			return evs
		}
	}
	fs, err := objectFields(u)
	kind := getString(fs, "sessionUpdate")
	if err != nil || kind == "" {
		ts.log.Error("acp: protocol violation: update without a sessionUpdate", "update", clip(u))
		if !json.Valid(u) {
			b, _ := json.Marshal(string(u))
			u = b
		}
		return []event{{"session_update", u}}
	}
	switch kind {
	case "agent_message_chunk", "agent_thought_chunk":
		if text, ok := textOf(get(fs, "content")); ok {
			return ts.textChunk(kind, text)
		}
	case "tool_call":
		return ts.toolCall(fs)
	case "tool_call_update":
		return ts.toolCallUpdate(fs)
	}
	return []event{passThrough(kind, fs)}
}

// textChunk maps a message or thought chunk with text content; nil for
// any other kind.
func (ts *turnState) textChunk(kind, text string) []event {
	switch kind {
	case "agent_message_chunk":
		ts.text.WriteString(text)
		return []event{{"text_delta", textData(text)}}
	case "agent_thought_chunk":
		return []event{{"thinking_delta", textData(text)}}
	}
	return nil
}

func textData(text string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Text string `json:"text"`
	}{text})
	return b
}

func (ts *turnState) toolName(fs []field) string {
	if name := getString(fs, "name"); name != "" {
		return name
	}
	return getString(fs, "title")
}

func (ts *turnState) toolCall(fs []field) []event {
	id := getString(fs, "toolCallId")
	name := ts.toolName(fs)
	if len(ts.tools) >= 1024 { // an agent that never finishes its tools
		clear(ts.tools)
	}
	ts.tools[id] = &toolInfo{name: name, start: time.Now()}
	input := get(fs, "rawInput")
	if input == nil || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	o := newObject()
	o.set("id", id)
	o.set("name", name)
	o.raw("input", input)
	o.rest(fs)
	evs := []event{{"tool_use", o.bytes()}}
	if st := getString(fs, "status"); st == "completed" || st == "failed" {
		evs = append(evs, ts.toolResult(id, st, fs))
	}
	return evs
}

func (ts *turnState) toolCallUpdate(fs []field) []event {
	id := getString(fs, "toolCallId")
	if info := ts.tools[id]; info != nil {
		if name := ts.toolName(fs); name != "" {
			info.name = name
		}
	}
	st := getString(fs, "status")
	if st != "completed" && st != "failed" {
		return []event{passThrough("tool_call_update", fs)}
	}
	return []event{ts.toolResult(id, st, fs)}
}

// toolResult is v1's tool_use_result for a finished ACP tool call.
func (ts *turnState) toolResult(id, status string, fs []field) event {
	info := ts.tools[id]
	delete(ts.tools, id)
	name := ts.toolName(fs)
	if info != nil && name == "" {
		name = info.name
	}
	result := newObject()
	if status == "completed" {
		result.set("status", "success")
	} else {
		result.set("status", "error")
	}
	data := get(fs, "rawOutput")
	if data == nil || string(data) == "null" {
		data = get(fs, "content")
	}
	if data == nil {
		data = json.RawMessage("null")
	}
	result.raw("data", data)
	if status == "failed" {
		if msg := contentText(get(fs, "content")); msg != "" {
			result.set("message", msg)
		}
	}
	o := newObject()
	o.set("tool_name", name)
	o.set("call_id", id)
	o.raw("result", result.bytes())
	if info != nil {
		o.set("duration_ms", time.Since(info.start).Milliseconds())
	}
	o.set("id", id)
	o.set("name", name)
	o.rest(fs)
	return event{"tool_use_result", o.bytes()}
}

// contentText joins the text of a tool call's content items.
func contentText(raw json.RawMessage) string {
	var items []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return ""
	}
	var parts []string
	for _, it := range items {
		if it.Type != "content" {
			continue
		}
		if text, ok := textOf(it.Content); ok {
			parts = append(parts, text)
		}
	}
	return strings.Join(parts, "\n")
}

// stopData is the stop event: the stopReason and the rest of the result.
func stopData(result json.RawMessage, reason string) json.RawMessage {
	o := newObject()
	o.set("reason", reason)
	if fs, err := objectFields(result); err == nil {
		for _, f := range fs {
			if f.key != "stopReason" {
				o.raw(f.key, f.val)
			}
		}
	}
	return o.bytes()
}
