// Package acp hosts Agent Client Protocol agents as subprocesses.
//
// An ACP agent is any program that speaks JSON-RPC 2.0 as newline-delimited
// JSON over its stdin and stdout, as the Agent Client Protocol defines
// (agentclientprotocol.com, protocol version 1). New returns an
// agent.Agent that gives every Glovebox session its own agent process,
// maps the agent's session/update notifications to Glovebox events, turns
// its permission requests into display slots and serves its fs/* and
// terminal/* requests inside the session's directories.
//
// # Lifecycle
//
// Open starts the session's process in its own process group, with the
// session's work directory as cwd and Session.Env plus the manifest's
// agent.env as environment; its stderr lines go to the session's log.
// Open does not wait for the handshake: the first prompt does, for as long
// as its ctx allows (an abort or limits.timeout ends the wait, not the
// start), and a handshake that takes over 2 minutes fails. The kit sends
// initialize (advertising fs.readTextFile, fs.writeTextFile
// and terminal) and session/new (cwd = the work directory, no MCP
// servers). If session/new answers that authentication is required and
// the agent listed an auth method of type env_var whose variables are set
// in its environment, the kit calls authenticate with that method and
// tries session/new once more; otherwise the error names the agent's auth
// methods and the variables each needs. Each Prompt is one session/prompt whose content is, in order:
// the environment preamble (first prompt of an ACP session only), one text
// block "[Skill: name]\ncontent" per skill result, the prompt text, and
// one resource_link (file:// URI, name, mimeType, size) per input file.
// When the prompt's ctx ends (abort, timeout, closed socket) the kit sends
// session/cancel, answers pending permission requests with "cancelled",
// and waits up to 3 s for the prompt's response before stopping the
// process; the next prompt then starts a new one. If the process dies or breaks the protocol beyond repair (a
// line over 16 MiB), the prompt in flight fails with code AgentError and
// the next prompt starts a fresh process (initialize and session/new
// again, the preamble again). Close stops the process group: SIGTERM,
// then SIGKILL after 2 s, and reaps it.
//
// # Events
//
// session/update notifications become events, in arrival order, before
// the prompt's complete or error. The data of a passed-through update is
// the update object without its "sessionUpdate" discriminator, in the
// agent's key order. Updates that arrive between prompts (such as
// available_commands_update right after session/new) are held (up to 256)
// and emitted at the start of the next prompt. Updates an agent sends for
// a prompt that was cancelled, after the cancellation, are dropped with a
// debug log line: the client has seen that prompt's error already.
//
//	ACP sessionUpdate        Glovebox event_type  data
//	-----------------        -------------------  ----
//	agent_message_chunk      text_delta           {text} for text content; the complete
//	                                              message is the concatenated text
//	  (non-text content)     agent_message_chunk  the update
//	agent_thought_chunk      thinking_delta       {text} for text content
//	  (non-text content)     agent_thought_chunk  the update
//	tool_call                tool_use             {id, name, input, ...the update}: id is
//	                                              toolCallId, name the tool's name or its
//	                                              title, input its rawInput ({} if none)
//	  (status completed      tool_use, then       as below
//	   or failed)            tool_use_result
//	tool_call_update         tool_use_result      {tool_name, call_id, result:{status,
//	  (status completed                           data, message?}, duration_ms?, id,
//	   or failed)                                 name, ...the update}; status is
//	                                              "success" or "error", data the
//	                                              rawOutput (else content), message the
//	                                              text content of a failure
//	tool_call_update         tool_call_update     the update
//	  (any other status)
//	plan                     plan                 the update ({entries})
//	usage_update, available_commands_update, current_mode_update,
//	config_option_update, session_info_update, user_message_chunk and
//	any update this package does not know
//	                         the sessionUpdate    the update
//	                         value itself
//	(no sessionUpdate)       session_update       the whole update, as sent
//	session/prompt result    stop                 {reason, ...the result}: reason is
//	                                              the stopReason
//
// A stopReason of "cancelled" that the kit did not ask for fails the
// prompt with code AbortError; every other stopReason completes it.
//
// # Permissions
//
// session/request_permission becomes Turn.Ask with renderer
// "permission_request" (v1's renderer name) and input {renderer, toolName,
// toolInput, toolCall, options}: toolName and toolInput are what v1
// clients render, toolCall and options are ACP's. The slot's value picks
// the answer: an optionId string or {"optionId": id} selects that option;
// true picks the first allow option and false the first reject option, as
// v1 clients resolve permission slots with a boolean. A value that names
// no option is refused: the slot is pushed again with an "error" field
// saying what the valid optionIds are (three tries, then the request is
// cancelled). display_reject, an ended prompt, or a request outside any
// prompt answer {"outcome": {"outcome": "cancelled"}}.
//
// # Client methods
//
// fs/read_text_file (line, limit), fs/write_text_file and terminal/create,
// terminal/output, terminal/wait_for_exit, terminal/kill and
// terminal/release are served inside the session's work, input and output
// directories: paths must be absolute, symbolic links are resolved, and a
// path outside those directories, or a write to a read-only one (the
// input directory, unless the manifest marks it writable), is answered
// with a JSON-RPC error. Terminals run in their own process group with
// the session's environment plus the request's env, in cwd (default the
// work directory), keep at most outputByteLimit bytes of combined output
// (default 1 MiB, at most 8 MiB; the oldest bytes go first, cut at a
// character boundary), and are killed when released, when the agent
// restarts and on Close. A command with no args that is no program but
// reads like a shell line ("ls -la | wc -l") runs under /bin/sh -c, as
// some agents send whole command lines. Any other method is answered with
// method-not-found.
//
// # Limits
//
// Lines from the agent are capped at 16 MiB, the agent's concurrent
// requests at 64, terminals at 16 per session and a text file read at
// 8 MiB. A malformed line or a response to an unknown id is logged and
// skipped; it never crashes the kit.
package acp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Defaults for an agent's limits and graces.
const (
	defaultMaxLine     = 16 << 20
	defaultMaxInbound  = 64
	defaultCancelGrace = 3 * time.Second
	defaultStopGrace   = 2 * time.Second
	handshakeTimeout   = 2 * time.Minute
	maxEarlyUpdates    = 256
	maxTerminals       = 16
	maxReadBytes       = 8 << 20
	defaultTermOutput  = 1 << 20
	maxTermOutput      = 8 << 20
)

// New returns an Agent that runs spec.Command as an ACP agent, one process
// per Glovebox session. spec.Type must be "acp" and spec.Command non-empty.
// log is used when a session has no logger of its own.
func New(spec *protocol.AgentSpec, log *slog.Logger) (agent.Agent, error) {
	if spec == nil {
		return nil, errors.New("acp: no agent spec")
	}
	if spec.Type != protocol.AgentACP {
		return nil, fmt.Errorf("acp: agent type is %q, want %q", spec.Type, protocol.AgentACP)
	}
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return nil, errors.New(`acp: agent.command is empty: set it to the ACP agent's command line, e.g. ["node", "agent.js"]`)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys))
	for _, k := range keys {
		env = append(env, k+"="+spec.Env[k])
	}
	return &acpAgent{
		command:     slices.Clone(spec.Command),
		env:         env,
		log:         log,
		maxLine:     defaultMaxLine,
		maxInbound:  defaultMaxInbound,
		cancelGrace: defaultCancelGrace,
		stopGrace:   defaultStopGrace,
	}, nil
}

type acpAgent struct {
	command []string
	env     []string // the manifest's agent.env, sorted by name
	log     *slog.Logger

	maxLine     int
	maxInbound  int
	cancelGrace time.Duration // how long a cancelled prompt may take to answer
	stopGrace   time.Duration // SIGTERM to SIGKILL
}

var _ agent.Agent = (*acpAgent)(nil)

// Open implements agent.Agent: it starts the session's agent process and
// its handshake, without waiting for them; the first Prompt waits, as long
// as its ctx allows.
func (a *acpAgent) Open(ctx context.Context, s *agent.Session) (agent.Conversation, error) {
	if s == nil {
		return nil, errors.New("acp: no session")
	}
	log := s.Log
	if log == nil {
		log = a.log
	}
	log = log.With("agent", "acp")
	c := &conversation{
		a:     a,
		s:     s,
		log:   log,
		env:   append(baseEnv(s), a.env...),
		areas: sessionAreas(s),
		last:  s.Resume,
	}
	c.terms = newTerminals(c)
	// A command that cannot start is the manifest's problem: say so now.
	// It is looked up in the PATH the agent gets, as its start does.
	if err := findCommand(a.command[0], c.env); err != nil {
		return nil, &agent.Error{Code: protocol.CodeAgent, Err: fmt.Errorf("acp: agent command %q: %w", a.command[0], err)}
	}
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.mu.Lock()
	c.relaunchLocked()
	c.mu.Unlock()
	return c, nil
}

// sessionAreas lists the directories the agent's fs and terminal requests
// may use. The input directory is writable only when the manifest says so.
func sessionAreas(s *agent.Session) []area {
	inputWritable := false
	if s.Manifest != nil {
		if m, ok := s.Manifest.FS[protocol.MountInput]; ok {
			inputWritable = m.Writable
		}
	}
	var areas []area
	add := func(name, dir string, writable bool) {
		if dir == "" {
			return
		}
		dir = filepath.Clean(dir)
		real := dir
		if r, err := filepath.EvalSymlinks(dir); err == nil {
			real = r
		}
		areas = append(areas, area{name: name, dir: dir, real: real, writable: writable})
	}
	add(protocol.MountWork, s.Dirs.Work, true)
	add(protocol.MountInput, s.Dirs.Input, inputWritable)
	add(protocol.MountOutput, s.Dirs.Output, true)
	return areas
}

// baseEnv is the session's environment; a session without one (not the
// kit's) gets the process's own.
// findCommand reports whether name is an executable: a path, or a name
// found in the PATH of env (the last PATH= entry, as the process sees it).
func findCommand(name string, env []string) error {
	if strings.Contains(name, "/") {
		_, err := exec.LookPath(name)
		return err
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if _, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: not in the agent's PATH %s", exec.ErrNotFound, path)
}

func baseEnv(s *agent.Session) []string {
	if s.Env == nil {
		return os.Environ()
	}
	return slices.Clone(s.Env)
}

func workDir(s *agent.Session) string {
	if s.Dirs.Work != "" {
		return s.Dirs.Work
	}
	wd, _ := os.Getwd()
	return wd
}
