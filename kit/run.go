package kit

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// promptError is a failure with the protocol error code the client sees.
type promptError struct {
	code string
	err  error
}

func (e *promptError) Error() string { return e.err.Error() }
func (e *promptError) Unwrap() error { return e.err }

func codeErr(code string, err error) error { return &promptError{code: code, err: err} }

// runPrompt runs one prompt and sends its complete or error frame. done
// is called after the prompt has stopped and before that frame goes out,
// so that a client may reuse the id as soon as it sees the frame.
func (ss *session) runPrompt(ctx context.Context, p *promptRun, done func()) {
	if d := ss.srv.timeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, errTimeout)
		defer cancel()
	}
	ss.exitCode.Store(noExit)
	msg, outputs, err := ss.execute(ctx, p.msg)
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	done()
	defer ss.srv.runs.sealQueued(ss.srv) // once the client has its last frame
	// Frames about a prompt go out even when its context ended.
	bg := context.WithoutCancel(ctx)
	if err != nil {
		code, text := ss.describe(ctx, err)
		ss.logger().Debug("prompt failed", "id", p.msg.ID, "code", code, "err", err)
		ss.promptEnded(p, code, nil)
		ss.stream.sendErrorNow(bg, p.msg.ID, code, text)
		return
	}
	// Logged and counted before the client hears of it, so that whoever
	// reads the logs or /metrics after a prompt's end finds it there.
	ss.promptEnded(p, "complete", outputs)
	if err := ss.sendComplete(bg, p.msg.ID, msg, outputs); err != nil {
		ss.logger().Debug("complete not sent", "id", p.msg.ID, "err", err)
	}
}

// promptEnded logs a prompt's one Info line and counts it: its id, how
// long it ran, its outcome (complete or the error code sent), the exit
// status its agent reported, and its outputs. Never its text.
func (ss *session) promptEnded(p *promptRun, outcome string, outputs map[string]protocol.FileRef) {
	d := time.Since(p.started)
	ss.srv.runs.ended(ss, p, outcome) // runs.go: signed by its own goroutine once the client has its last frame
	ss.promptsRun.Add(1)
	if o := ss.srv.obs; o != nil {
		o.Prompt(outcome, d)
	}
	var size int64
	for _, ref := range outputs {
		size += refSize(ref)
	}
	attrs := []any{"prompt", p.msg.ID, "duration_ms", d.Milliseconds(), "outcome", outcome,
		"outputs", len(outputs), "output_bytes", size}
	if code := ss.exitCode.Load(); code != noExit {
		attrs = append(attrs, "exit_code", code)
	}
	ss.logger().Info("prompt", attrs...)
}

// refSize is the size of an output: its bytes for an inline one, the size
// the ref gives otherwise.
func refSize(ref protocol.FileRef) int64 {
	if ref.Kind == protocol.KindInline {
		// The kit's own refs are standard, padded base64.
		d := ref.Data
		return int64(base64.StdEncoding.DecodedLen(len(d)) - strings.Count(d[len(d)-min(2, len(d)):], "="))
	}
	return ref.Size
}

// sendComplete encodes a complete frame by hand (the common case has no
// outputs) and queues it.
func (ss *session) sendComplete(ctx context.Context, id, msg string, outputs map[string]protocol.FileRef) error {
	b := make([]byte, 0, 64+len(id)+len(msg))
	b = append(b, `{"type":"complete","id":`...)
	b = appendString(b, id)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"outputs":`...)
	if len(outputs) == 0 {
		b = append(b, '{', '}')
	} else {
		j, err := json.Marshal(outputs)
		if err != nil {
			return err
		}
		b = append(b, j...)
	}
	return ss.stream.sendSeqNow(ctx, b)
}

// describe maps a prompt's failure to a protocol error code and message,
// with the box's host paths in it made session-relative (relPaths).
func (ss *session) describe(ctx context.Context, err error) (code, msg string) {
	code, msg = ss.describeRaw(ctx, err)
	return code, ss.relPaths(msg)
}

// relPaths rewrites the host paths of the session's directories, the
// box's mounts and its state directory in a message for the client to
// session-relative ones ("input/x.pdf", "work", "state/files/..."): a
// client learns nothing about the host's layout, and reads the path as
// its prompt knows it.
func (ss *session) relPaths(msg string) string {
	type repl struct{ from, to string }
	var rs []repl
	if info := ss.workspace.info; info != nil {
		d := info.Dirs
		for _, r := range []repl{{d.Work, protocol.MountWork}, {d.Input, protocol.MountInput}, {d.Output, protocol.MountOutput}} {
			if r.from != "" {
				rs = append(rs, r)
			}
		}
	}
	srv := ss.srv
	for k, p := range srv.mounts {
		rs = append(rs, repl{p, k})
	}
	if srv.stateDir != "" {
		rs = append(rs, repl{srv.stateDir, "state"})
	}
	if srv.opts.Root != "" {
		rs = append(rs, repl{srv.opts.Root, "box"})
	}
	// Longest first: a session's directory lies inside its mount.
	slices.SortFunc(rs, func(a, b repl) int { return len(b.from) - len(a.from) })
	for _, r := range rs {
		if r.from == "" || r.from == "/" || !strings.Contains(msg, r.from) {
			continue
		}
		msg = replacePath(msg, r.from, r.to)
	}
	return msg
}

// replacePath replaces the path from in msg with to wherever it stands as
// a whole path or a path's leading directories ("/work" in "/work/x", not
// in "/workspace").
func replacePath(msg, from, to string) string {
	var b strings.Builder
	for {
		i := strings.Index(msg, from)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		end := i + len(from)
		whole := end == len(msg) || !isPathByte(msg[end]) || msg[end] == '/'
		b.WriteString(msg[:i])
		if whole {
			b.WriteString(to)
		} else {
			b.WriteString(from)
		}
		msg = msg[end:]
	}
}

func isPathByte(c byte) bool {
	return c == '/' || c == '.' || c == '-' || c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c >= 0x80
}

func (ss *session) describeRaw(ctx context.Context, err error) (code, msg string) {
	if ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errTimeout):
			return protocol.CodeTimeout, fmt.Sprintf("prompt exceeded limits.timeout (%s)", ss.srv.man.Limits.Timeout)
		default:
			return protocol.CodeAborted, abortMessage
		}
	}
	var pe *promptError
	if errors.As(err, &pe) {
		return pe.code, pe.Error()
	}
	var ae *agent.Error
	if errors.As(err, &ae) && ae.Code != "" {
		return ae.Code, ae.Error()
	}
	return protocol.CodeAgent, err.Error()
}

// execute runs a prompt: policy, directives, inputs, the agent, outputs.
func (ss *session) execute(ctx context.Context, m *protocol.Prompt) (string, map[string]protocol.FileRef, error) {
	policy, err := ss.outputsPolicy(m)
	if err != nil {
		return "", nil, err
	}
	text, directives := parseDirectives(m.Text)

	if err := ss.prepare(); err != nil {
		return "", nil, err
	}
	if err := ss.wake(); err != nil {
		return "", nil, err
	}
	t := newTurn(ctx, ss, m.ID)
	t.text = text
	ss.prompts.turnNow.Store(t)
	defer ss.prompts.turnNow.Store(nil)
	defer ss.slots.clear(m.ID)
	defer t.finish()

	if err := ss.outputTags(t, directives); err != nil {
		return "", nil, err
	}
	inputs, err := ss.workspace.materialise(ctx, m.Inputs)
	if err != nil {
		return "", nil, err
	}
	t.inputs = inputs

	// What changed since the last outputs were collected is this
	// prompt's: files a failed prompt left come with the next one.
	before := ss.workspace.baseline()

	onlyHooks, err := ss.runDirectives(t, directives, text)
	if err != nil {
		return "", nil, err
	}
	var message string
	if !onlyHooks {
		if message, err = ss.prompt(ctx, t); err != nil {
			return "", nil, err
		}
	}
	if ctx.Err() != nil {
		return "", nil, context.Cause(ctx)
	}
	t.finish()
	ss.slots.clear(m.ID)
	if err := ss.checkDisk(); err != nil {
		return "", nil, err
	}

	outputs, err := ss.workspace.collect(ctx, m.ID, before, t.tags, policy)
	if err != nil {
		return "", nil, err
	}
	return message, outputs, nil
}

// outputsPolicy is the outputs policy a prompt runs under: the box's,
// narrowed by the prompt's own. It is checked before anything runs,
// with the prompt's id where the id becomes an object key segment.
func (ss *session) outputsPolicy(m *protocol.Prompt) (protocol.Policy, error) {
	srv := ss.srv
	policy := srv.man.StoragePolicy.Outputs
	if m.OutputsPolicy != nil {
		if err := m.OutputsPolicy.Check(); err != nil {
			return policy, codeErr(protocol.CodeBadMessage, err)
		}
		o, err := srv.confine(m.OutputsPolicy, srv.man.StoragePolicy.Outputs)
		if err != nil {
			return policy, codeErr(protocol.CodeBadMessage, err)
		}
		policy = o.Apply(policy)
		if err := srv.registry.ValidateOutputs(policy); err != nil {
			return policy, codeErr(protocol.CodeError, err)
		}
	}
	if policyKeysIDs(policy) && !storage.ValidID(m.ID) {
		// The id becomes an object key segment when the outputs are
		// stored.
		return policy, codeErr(protocol.CodeBadMessage, fmt.Errorf("prompt id %q cannot name stored outputs: on this box (its outputs may go to %s) prompt ids use letters, digits, '_' and '-', at most 128", m.ID, policyAdapters(policy)))
	}
	return policy, nil
}

// outputTags resolves the paths the /output directives tag into t.tags,
// so that a bad one fails the prompt before anything runs.
func (ss *session) outputTags(t *turn, directives []directive) error {
	for _, d := range directives {
		if d.name == dirOutput {
			if d.args == "" {
				return codeErr(protocol.CodeInput, errors.New("/output needs a path: /output <path>"))
			}
			p, err := ss.workspace.resolveTag(d.args)
			if err != nil {
				return codeErr(protocol.CodeInput, fmt.Errorf("/output: %w", err))
			}
			t.tags = append(t.tags, p)
		}
	}
	return nil
}

// runDirectives carries out the directives in order and emits an event
// for each: hooks act on the workspace, skills join t.skills for the
// agent. onlyHooks says that the prompt is hooks and no text, so the
// agent has nothing to answer.
func (ss *session) runDirectives(t *turn, directives []directive, text string) (onlyHooks bool, err error) {
	onlyHooks = len(directives) > 0 && text == ""
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, d := range directives {
		switch d.name {
		case dirOutput, dirClearWorkspace:
			name := d.name[1:]
			if d.name == dirClearWorkspace {
				ss.workspace.clear()
			}
			err = t.emitLocked("hook_invoked", hookEvent{Name: name})
		case dirEnvironment, dirWorkspace:
			onlyHooks = false
			name := d.name[1:]
			err = t.emitLocked("skill_invoked", skillEvent{Name: name, Source: "user", Args: d.args})
			t.skills = append(t.skills, agent.SkillResult{Name: name, Content: ss.skill(name)})
		}
		if err != nil {
			return onlyHooks, err
		}
	}
	return onlyHooks, nil
}

// prompt runs the agent's Prompt for t while the workspace's disk use is
// watched: going over the disk limit cancels it, and that is the error
// unless ctx ended first.
func (ss *session) prompt(ctx context.Context, t *turn) (string, error) {
	pctx, stop := context.WithCancelCause(ctx)
	w := ss.watchDisk(stop) // disk.go
	message, err := guard("the agent's Prompt", func() (string, error) { return ss.conv.Prompt(pctx, t) })
	over := w.end()
	stop(nil)
	if over != nil && ctx.Err() == nil {
		return "", over
	}
	return message, err
}

// policyAdapters names a policy's adapters, for messages.
func policyAdapters(p protocol.Policy) string {
	var names []string
	for _, r := range p.Rules {
		if !slices.Contains(names, r.Use.Adapter) {
			names = append(names, r.Use.Adapter)
		}
	}
	return strings.Join(names, ", ")
}

// guard calls an agent's code and turns a panic into an error, so that a
// faulty agent fails its prompt instead of the whole box.
func guard(what string, f func() (string, error)) (s string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = codeErr(protocol.CodeAgent, fmt.Errorf("%s panicked: %v", what, r))
		}
	}()
	return f()
}

type hookEvent struct {
	Name string `json:"name"`
}

type skillEvent struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Args   string `json:"args,omitempty"`
}

// prepare makes the session's workspace and opens the agent's
// conversation, the first time a prompt runs. The conversation lives as
// long as the session, so it opens with the session's context.
func (ss *session) prepare() error {
	if ss.conv != nil {
		return nil
	}
	if err := ss.workspace.prepare(); err != nil {
		return err
	}
	srv := ss.srv
	var conv agent.Conversation
	_, err := guard("the agent's Open", func() (string, error) {
		var err error
		conv, err = srv.opts.Agent.Open(ss.ctx, ss.workspace.info)
		return "", err
	})
	if err != nil {
		return codeErr(protocol.CodeAgent, fmt.Errorf("start the agent: %w", err))
	}
	if conv == nil {
		return codeErr(protocol.CodeAgent, errors.New("start the agent: Open returned no conversation"))
	}
	ss.conv = conv
	ss.noteAgent(conv) // persist.go
	return nil
}
