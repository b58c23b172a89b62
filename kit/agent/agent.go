// Package agent is the contract between the kit and the agents it serves.
//
// The kit hosts three kinds of agent behind these interfaces: Go agents
// compiled into the kit binary by their author, the built-in exec agent
// (package kit/agent/exec), and any Agent Client Protocol agent run as a
// subprocess (package kit/agent/acp). An Agent opens one Conversation per
// Glovebox session; the kit feeds it one Turn per prompt.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Agent serves a box's sessions.
type Agent interface {
	// Open starts the agent's side of one session. The kit calls it
	// lazily, before the session's first prompt, and calls Close on the
	// returned Conversation when the session ends.
	Open(ctx context.Context, s *Session) (Conversation, error)
}

// Conversation is one session's agent state: its history, its subprocess,
// whatever the agent keeps between prompts. The kit never calls Prompt
// concurrently on one Conversation.
type Conversation interface {
	// Prompt runs one turn and returns the final assistant message. When
	// ctx is cancelled (abort, timeout, socket closed) it must return
	// promptly; the kit reports the cancellation itself.
	Prompt(ctx context.Context, t Turn) (string, error)
	// Close releases the session's state. It is called once.
	Close() error
}

// Warmer is implemented by conversations that start something ahead of
// their first prompt (an agent process, its handshake). The kit opens
// conversations ahead of time for its warm pool: Ready waits until the
// conversation could take its first prompt at once, and returns a channel
// that is closed when it no longer could (its process died), in which
// case the kit closes it and never hands it to a session.
type Warmer interface {
	Ready(ctx context.Context) (lost <-chan struct{}, err error)
}

// Func adapts a function into an Agent whose sessions keep no state
// between prompts.
type Func func(ctx context.Context, t Turn) (string, error)

// Open implements Agent.
func (f Func) Open(context.Context, *Session) (Conversation, error) { return funcConversation(f), nil }

type funcConversation Func

func (f funcConversation) Prompt(ctx context.Context, t Turn) (string, error) { return f(ctx, t) }
func (funcConversation) Close() error                                         { return nil }

var _ Agent = Func(nil)

// Turn is one prompt as the agent sees it. Its methods are safe for
// concurrent use by the agent's goroutines.
type Turn interface {
	// ID is the prompt id the client chose.
	ID() string
	// Text is the prompt text with hook and skill directive lines removed.
	Text() string
	// Inputs are the prompt's input files, already written to the
	// session's input directory.
	Inputs() []Input
	// Skills are the results of skill directives the user typed
	// (/environment, /workspace), in order.
	Skills() []SkillResult
	// Session is the session the turn belongs to.
	Session() *Session
	// Emit sends an event to the client. data is marshalled to JSON (a
	// json.RawMessage is sent as is). Events reach the client in Emit
	// order and before the prompt's complete or error. Emit blocks while
	// the session's bounded outbound queue is full and fails once the
	// prompt is cancelled.
	Emit(eventType string, data any) error
	// Ask pushes a display slot and waits until the client resolves it
	// (returning the value), rejects it (returning a *RejectedError), or
	// ctx ends (the slot is cleared).
	Ask(ctx context.Context, renderer string, input any) (json.RawMessage, error)
	// Show pushes a display slot that needs no answer and returns its id.
	Show(renderer string, input any) (string, error)
	// Clear removes a slot pushed by Show.
	Clear(slotID string) error
	// TagOutput marks a file to return with the prompt's outputs, as the
	// /output hook does. The path must lie inside one of the session's
	// directories; a relative path is taken from the work directory.
	TagOutput(path string) error
}

// Input is one materialised input file.
type Input struct {
	Name string // the name the client gave (the inputs map key)
	Path string // absolute path in the session's input directory
	Mime string
	Size int64
}

// SkillResult is the outcome of a skill directive.
type SkillResult struct {
	Name    string
	Content string
}

// Dirs are a session's directories, as absolute paths.
type Dirs struct {
	Work   string
	Input  string
	Output string
}

// Session describes one Glovebox session to its agent.
type Session struct {
	// ID is the kit's session id.
	ID string
	// Dirs are the session's directories. Unless the manifest shares
	// them, each session has its own.
	Dirs Dirs
	// Env is the environment the agent and anything it starts should run
	// with, and nothing more: PATH, HOME (the work directory), locale and
	// CA variables, the variables the manifest's env and agent.env
	// declare, and GLOVEBOX_WORK, GLOVEBOX_INPUT, GLOVEBOX_OUTPUT and
	// GLOVEBOX_SESSION.
	Env []string
	// Preamble is the environment preamble: a short text telling a model
	// where its directories are and what the box offers.
	Preamble string
	// Manifest is the box's manifest. Agents must not modify it.
	Manifest *protocol.Manifest
	// Log is the session's logger.
	Log *slog.Logger
	// Sandbox starts the session's processes: every process an agent
	// starts for the session must start through it, so that it runs under
	// the session's uid, namespaces and limits and dies with the session.
	// Nil means sandbox.Plain().
	Sandbox *sandbox.Session
	// Resume, for a persistent session the kit restored after a restart,
	// is the agent's own id of the session's conversation as Resumable
	// reported it before: an agent that can load it continues that
	// conversation (ACP session/load) instead of starting a new one.
	Resume string
}

// Resumable is implemented by conversations that an agent can continue
// after the kit restarts (persistent sessions): AgentSession is the
// agent's own id of the conversation, which the kit keeps with the
// session and hands back in Session.Resume.
type Resumable interface {
	AgentSession() string
}

// RejectedError is returned by Turn.Ask when the client rejected the slot.
type RejectedError struct {
	SlotID string
	Reason json.RawMessage
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("display slot %s rejected: %s", e.SlotID, e.Reason)
}

// ErrTurnDone is returned by Turn methods called after the prompt ended.
var ErrTurnDone = errors.New("agent: turn is over")

// Error is an error with a protocol error code. An agent returns one to
// choose the code the client sees; any other error is reported as
// protocol.CodeAgent.
type Error struct {
	Code string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }
