// Package kit is the Glovebox runtime: it serves one box's agent behind an
// authenticated WebSocket endpoint, one session per connection.
//
// New checks everything a box needs before it serves (the manifest, the key,
// required environment variables, the outputs policy, the directories) and
// reports every problem at once, one line each. A Server then answers
//
//	GET|HEAD /health       readiness, no auth; the sandbox's layers, gaps and degraded only with the key or a token (health, kit/health.go)
//	GET /environment       the box's environment and capabilities (bearer); ?session=ID: with that session's egress policy (health)
//	GET /files/{id}        files parked by the localServer adapter (bearer; kit/files)
//	GET /sbom              the image's CycloneDX SBOM, 404 without one (key, environment or admin token; sbomRoute, kit/sbom_route.go)
//	GET|POST /egress       the egress policy, shown or replaced (key or admin token; egressRoutes, kit/egress.go)
//	GET /egress/log        the egress audit trail (key, audit or admin token; kit/audit_route.go)
//	PUT /uploads/{name}    a file streamed into the store, answered with its server FileRef (key or upload token; kit/upload)
//	POST|PATCH|HEAD|DELETE /uploads/...  the same, resumable (kit/upload)
//	/inspect/...           the inspector, when enabled: it reads sessions, answers their slots and aborts their prompts (key, inspect token or its cookie; kit/inspect); with the key or an inspect+exec token, opens terminals in them (/inspect/api/sessions/{id}/terminals, kit/inspected.go)
//	GET /sessions          the live sessions (key or admin token; sessionsRoute, kit/sessions_route.go)
//	GET|POST /sessions/{id}/egress  a session's own egress rules, shown or replaced (key or admin token; kit/egress_session.go)
//	/sessions/{id}/{feature}  a session's own terminals, processes, files and preview ports (the key, the feature's scope or admin, or the session's own credential; sessionRoutes, kit/session_routes.go)
//	GET|PUT|POST|DELETE /sessions/{id}/fs/{root}/{path}  a session's files, done as the session (workspace scope; kit/fsapi, kit/fs_route.go)
//	GET|POST /sessions/{id}/previews, DELETE .../previews/{link}  a session's preview links: list, mint, revoke (kit/preview.go)
//	any request to <link>.<preview domain>  a session's port, proxied for the holder of its link (HTTP and WebSocket; previews, kit/preview.go)
//	POST|GET /sessions/{id}/terminals  start a terminal on a PTY in the session, or list them; GET /sessions/{id}/terminals/{tid} upgrades to its WebSocket, DELETE kills it (exec scope; kit/terminal.go)
//	POST|GET /sessions/{id}/processes  start a long-running process in the session, or list them; .../{pid}, .../{pid}/output, .../{pid}/stdin, .../{pid}/signal, DELETE (exec scope; kit/processes.go)
//	POST /sessions/{id}/snapshot  the session's directories into the snapshot store; POST /sessions/{id}/fork {"count":N} N new sessions copying it (as the session routes; kit/snapshots.go)
//	GET /snapshots         the stored snapshots; GET|DELETE /snapshots/{id} one's manifest, or remove it; POST /snapshots/{id}/restore a new session from it (key, snapshots or admin token; kit/snapshots.go)
//	GET /files             the parked files; DELETE /files/{id} removes one (kit/files)
//	GET /logs              recent log records, ?since=, ?follow=1 (key, logs or admin token; kit/logs)
//	GET /metrics           Prometheus text format (key or metrics token; kit/metrics)
//	GET /runs/{prompt}     a prompt's signed run record; GET /runs?session=ID a session's chain of them (key, runs or admin token, or the session's own credential; runsRoute, kit/runs_route.go)
//	WebSocket upgrade      protocol v1 sessions on any other path (bearer)
//
// A request to a host under the manifest's preview domain goes to the
// previews before anything else, never to a route of the box; then CORS
// (kit/cors) and Fly's replay (kit/fly.go) see a request; then the
// routes, in the order boot.mount lists them.
//
// The bearer is "Authorization: Bearer <key>", or, for browsers, the
// subprotocols "glovebox.v1" and "bearer.<key>" (the kit selects
// glovebox.v1).
//
// Tokens. Wherever the kit accepts the key it also accepts a token minted
// from it (protocol.MintToken, gbx token): "gbt1.<claims>.<mac>", signed
// with a key derived from the box key, expiring, and scoped: "connect"
// opens the WebSocket, "files" reads /files/{id} (only the listed ids when
// the token names some), "environment" reads /environment. GET /files/{id}
// also takes a token (never the key, which would end up in logs) in
// ?token=, so that a browser downloads an output with a plain link. An
// expired, out-of-scope or foreign token gets 401 with an empty body, as a
// wrong key does. A token is checked when a request or upgrade arrives: a
// WebSocket opened with one outlives its expiry. Changing the box key
// revokes every token. The kit announces the capability "tokens".
//
// Sessions. Every connection is a session of its own: its own agent
// Conversation, ordered event stream, display slots and (unless the
// manifest shares them) work, input and output directories, removed when
// the session ends. The kit greets each connection with a hello frame
// (session id, capabilities). Prompts on a session run one at a time in
// arrival order; abort cancels the running prompt or removes a queued one;
// closing the socket cancels both.
//
// Terminals and processes (capabilities "terminals" and "processes"). A
// client runs commands in a session outside its prompts: a terminal, a
// command on a PTY whose WebSocket carries its bytes both ways as binary
// frames and JSON control frames as text (resize, signal; from the box an
// error, then exit with the status), one client attached at a time; or a
// process (a dev server, a watcher) whose stdin takes streamed request
// bodies and whose stdout and stderr are kept in a 1 MiB ring each, paged
// by absolute offset (dropped bytes counted) or followed as NDJSON. Both
// run through the session's sandbox (sandbox.Spec.TTY makes the PTY the
// command's controlling terminal), as the session's uid in its
// namespaces, cgroup, Landlock domain and egress policy, in its work
// directory with its environment, and end with the session. A session
// holds at most Options.MaxTerminals and MaxProcesses of each (default 16
// and 32; an ended one is dropped for a new one). A terminal whose client
// does not read stops being read (16 chunks queued, then the command's
// writes block in the PTY); a process that floods its output costs its
// rings. The exec scope reaches every session's; a connect token, the
// sessions it opened.
// A connection's goroutines (conn.go, ws.go, park_linux.go). A connection
// that has sent nothing since it opened, or for a second after its last
// frame (parkAfter), is parked: its socket waits in one kit-wide epoll set
// and it holds no goroutine. Between frames its reader waits in the Go
// runtime's poller, which wakes it with less work than the parker.
// Prompts run on the session's runner goroutine, which lingers a moment
// after the queue empties (queue.go). A pong, and a
// prompt's complete or error frame, are written by the goroutine that
// makes them when no writer runs; every other frame goes through the
// connection's queue to a writer goroutine that holds a burst's frames
// and writes them together. A prompt's run record is signed by its own
// goroutine once the prompt's last frame is written.
//
// The inspector's page opens terminals too (its Terminal button), through
// its own /inspect/api/sessions/{id}/terminals[/{tid}], which hands the
// request to the same terminals (inspectedTerminals, kit/inspected.go):
// the page holds no bearer, only its HttpOnly cookie. The cookie records
// at login what its credential allows; only the key, or a token with the
// exec (or admin) scope besides inspect, opens terminals, so an inspect
// token never becomes a shell. The WebSocket attaches only from a page of
// the box's own origin, and requests that change something carry the
// inspector's CSRF header.
//
// Resume. Frames about prompts (event, display_push, display_clear,
// complete, error) carry seq 1, 2, 3... per session. A client that sends
// {"type":"hello","capabilities":["resume"]} keeps its session through a
// socket that drops without a close frame, for sessions.resume_grace:
// prompts go on and their frames wait in a bounded buffer. Reconnecting to
// /?resume=<session_id>&last_seq=<n> answers with a hello whose resumed is
// true and whose last_seq is the latest seq sent so far, then replays the
// frames numbered after n. When the session is gone or the buffer no
// longer reaches back to n, the client gets a fresh session and an error
// frame with an empty id and code ResumeFailed.
//
// Snapshots (kit/snapshots.go, kit/snapshot; docs/snapshots.md). POST
// /sessions/{id}/snapshot stores the session's work, input and output
// directories in the box's snapshot store (local under the state dir, or
// the s3 adapter's bucket; manifest "snapshots"): each file's bytes once
// as a blob named by their sha256, then a manifest whose sha256 is the
// snapshot's id, written last and at once. POST /snapshots/{id}/restore
// verifies the whole snapshot (manifest hash, paths, every blob's size
// and hash, quota, the image's closure hash unless forced) before it
// makes a session and writes its directories; POST /sessions/{id}/fork
// copies a live session into new sessions (FICLONE where the file system
// can, else copy_file_range). Files are read and written through the
// session's helper (kit/sandbox), as the session. A restored or forked
// session waits detached, as a dropped one does, for its owner to attach
// with /?resume=<id>&last_seq=0. The kit announces "snapshots".
//
// Persistent sessions. With sessions.persist a session whose client
// announced resume outlives the kit (persist.go): when the kit stops or
// dies, its directories, parked outputs and ledger record stay; the next
// kit on the same state (a restart, a redeploy of the same image) brings
// it back as a detached session for sessions.resume_grace (default 24h
// where sessions persist) from the later of its last activity and the
// old kit's death (a heartbeat file in the ledger marks the kit alive),
// with no process running until it is used. A kit holds its state
// directory (a POSIX lock): a second kit on it refuses to start. Its owner resumes
// it by id as before; the hello says restarted: true (frames the client
// had not received are gone; GET /runs?session=ID has the prompts that
// ended), and a prompt the restart cut gets an error frame. An ACP
// agent that can load sessions continues the conversation
// (session/load). A client that closes its socket ends its session, as
// before.
//
// Pause and lifetime. A session waiting for a resume with no prompt
// running is paused after sessions.pause (default 30s; "off" never): its
// processes are frozen through its cgroup's freezer, keeping their memory
// and files, until a resume, a prompt or one of the session's own
// features wakes it (pause.go; GET /sessions says "paused"; without a
// cgroup freezer it keeps running). sessions.lifetime ends a session that
// long after it opened, connected or not, with a LimitError frame that
// says so.
//
// Directives. A prompt line whose first word is /output PATH,
// /clear-workspace, /environment or /workspace is a directive: the kit
// removes the line from the text the agent gets, emits hook_invoked or
// skill_invoked, and runs it (/output returns PATH with the outputs;
// /clear-workspace empties the session's work directory; the two skills
// reach the agent through Turn.Skills). A prompt made only of hook
// directives completes without running the agent.
//
// Outputs are the files created or changed under the session's output
// directory since outputs were last collected (so files a failed prompt
// left come with the next successful one), keyed by their slash path, plus
// the tagged files, keyed by base name. Symbolic links are not followed.
//
// Inputs policy. v1 never read storage_policy.inputs; here it says which
// FileRef kinds a box accepts: an input of kind inline, url, s3 or gcs is
// accepted only when some inputs rule names that kind's adapter (inline,
// url, s3, gcs), and the adapter is registered. server refs name files in
// the box's own store and follow GET /files/{id}'s rules: the session's
// credential may read the file (the key, or a files-scope token for it), or
// a session of the same credential (the key, the same token subject, the
// same token) parked it; anything else is refused as if the file did not
// exist. The default inputs policy names url and inline. Every input is
// capped by limits.max_input. Input names are plain file names
// (protocol.CheckInputName): no control, bidi or invisible characters, no
// surrounding space, no leading "-", no look-alikes of / \ and ., nothing
// starting with the box's temporary prefix ".input-".
//
// outputs_policy. A prompt's outputs_policy.s3 may only name storage the
// box declares (a bucket of an s3 rule of storage_policy.outputs, or
// GLOVEBOX_S3_BUCKET), under that place's prefix: the box's credentials
// sign the upload, so a client cannot pick another bucket or key. When
// outputs may go to s3, prompt ids must be [A-Za-z0-9_-]{1,128}, since they
// become key segments.
//
// Files. GET /files/{id} serves agent-written files as downloads
// (Content-Disposition: attachment) under Content-Security-Policy
// "default-src 'none'; sandbox" with nosniff, so an agent's .html or .svg
// never runs on the box's origin; the manifest's files.inline (glovebox.toml
// [files] inline = true) restores v1's inline serving.
//
// A session's files. /sessions/{id}/fs/{work|input|output}/{path}
// (capability "fs", Linux) lists, stats, reads (ranges), writes
// (streamed, into a temporary file renamed over the old one), makes,
// moves, removes and watches the session's files (kit/fsapi). Every
// path is resolved and opened by the session's helper (kit/sandbox), as
// the session, which hands back a descriptor the kit copies to or from;
// "..", links out of the directory and special files are refused, and
// writes count against limits.disk. docs/fs.md has the routes.
//
// Errors a client sees name paths as the session knows them ("input/x.pdf",
// "work/out.txt"), never the host's directories.
//
// Drain. On SIGTERM (Main) the box drains (Server.Drain): new sessions get
// 503, /health answers 503 with "draining": true, connected clients get a
// draining frame with the deadline (capability "drain"), new prompts get
// code Draining, and running prompts finish within sessions.drain (default
// 30s) with their outputs stored; then the box closes and exits 0. A second
// signal cuts at once.
//
// Logs and metrics. The kit logs one Info line when a session opens,
// resumes and closes, and one when a prompt ends (its id, duration,
// outcome, exit status, outputs), never a prompt's text or a credential;
// it keeps its latest records for GET /logs. GET /metrics counts sessions,
// prompts by outcome and their durations, frames and bytes sent, queue
// depth, parked files, sandbox limits hit, egress decisions and memory.
// GET /sessions and GET /files answer protocol.SessionList and
// protocol.FileList.
//
// Preview ports (kit/preview.go, docs/previews.md). With [preview] domain
// set, POST /sessions/{id}/previews {"port":N,"ttl":"1h"} mints a link
// (protocol.MintPreviewLink: HMAC-signed, expiring, bound to the session
// and the port) served at https://<link id>.<domain>/: a first visit with
// ?glovebox_preview= trades it for a host-only cookie; an API client sends
// it as a bearer. The kit proxies HTTP and WebSocket to the port, without
// the link, its cookie or the box's credentials, reaching it through the
// session's helper inside its network namespace, or, where sessions share
// the host's loopback, on the session's own port ($PORT, the only one its
// Landlock domain lets it listen on) after checking the accepting socket's
// uid. A forged link gets 401; an expired or revoked one, or one whose
// session has ended, 410. Where neither way keeps sessions' ports apart the
// box serves no previews and does not announce CapPreview.
//
// Sandbox. Every agent process runs in its session's sandbox (kit/sandbox),
// whose layers the boot log, /environment and an authenticated /health
// report, with what each layer not in force means for the box's users. A
// box fails closed: where its layers cannot keep sessions apart, or cannot
// enforce its egress policy ([network] or a brokered secret), it does not
// start, and says why, what would fix it, and that [sandbox]
// allow_degraded = true (or GLOVEBOX_SANDBOX_ALLOW_DEGRADED=1 in the kit's
// environment) lets it serve anyway, degraded: it then warns at boot and
// reports degraded: true. [sandbox] enabled = false is such a choice too.
// limits.disk is watched while a prompt runs (kit/disk.go).
//
// How a request reaches a feature. Server.Handler is handler
// (kit/handler.go): it hands a preview host's requests to the previews,
// lets CORS and Fly's replay answer first, then asks
// the routes in order (route.Route: a match and a handler) and serves the
// first that matches. Every operator feature is a small type that owns
// its state and returns its routes; boot builds it with the narrow things
// it needs (the auth check, the live sessions, the logger, the clock),
// never the Server, and mounts its routes (boot.mount, kit/boot.go).
//
// How to add a feature. Write the type in a file of its own, with its
// dependencies as fields and a routes method; GET /sessions
// (kit/sessions_route.go) is the smallest:
//
//	type sessionsRoute struct {
//		auth *auth // Admit answers 401 itself
//		live *live // the sessions: all, lookup
//	}
//
//	func (sr *sessionsRoute) routes() []route.Route {
//		return []route.Route{route.Path("/sessions", sr.serve)}
//	}
//
// Then build it in boot.mount and put its routes in the list there, before
// the WebSocket upgrade (which takes any path no route matched) and before
// any prefix route that would cover its path; add its line to the table
// above. A feature that needs nothing of a session's internals goes in a
// package of its own under kit/ and takes a route.Auth (kit/upload,
// kit/files, kit/logs, kit/metrics, kit/inspect, kit/cors), and what it
// reads of the box as funcs or small interfaces it declares.
//
// Main implements the glovebox-kit command line so that a Go agent's own
// main is a few lines.
package kit
