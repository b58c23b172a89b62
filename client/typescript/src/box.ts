import type { BoxSettings } from "./client.js";
import { newConn, startKeepalive, stopKeepalive, type Conn } from "./conn.js";
import { parseEndpoint, type Endpoint } from "./endpoint.js";
import { asError, ClientCodes, closedError, GloveboxError, type Completion } from "./errors.js";
import { SessionFiles } from "./fs.js";
import { BoxHTTP } from "./http.js";
import { buildInputs, utf8Length, type PromptOptions } from "./prompt.js";
import { Result, setCost, settled, type ReadOptions, type ResultHost } from "./result.js";
import { listPreviews, mintPreview, revokePreview, type PreviewHost, type PreviewOptions } from "./preview.js";
import { fetchRun, fetchRunChain, type RunHost, type RunOptions } from "./runs.js";
import { SessionEgress } from "./sessionegress.js";
import { deleteSnapshot, forkSession, listSnapshots, restoreSnapshot, snapshotManifest, snapshotSession, type RestoreOptions, type SnapshotHost } from "./snapshots.js";
import { raceSignal, sleep } from "./signals.js";
import { decodePage, outputRoute, routeId, type OutputOptions, type OutputPage } from "./processes.js";
import { dial, dialRaw } from "./socket.js";
import { Terminal } from "./terminal.js";
import type {
  AbortFrame,
  ClientHelloFrame,
  EgressEnvironment,
  Environment,
  FileRef,
  ForkResult,
  Health,
  NetworkSpec,
  Preview,
  Process,
  ProcessOutput,
  ProcessRequest,
  PromptFrame,
  RestoreResult,
  ServerHelloFrame,
  SignedRun,
  SnapshotInfo,
  SnapshotList,
  SnapshotManifest,
  Terminal as TerminalInfo,
  TerminalRequest,
} from "./wire.js";

export type SendErrorListener = (err: GloveboxError, what: string) => void;

/**
 * One endpoint: a lazily opened, self-healing connection to a box and the
 * prompts in flight on it.
 */
export class Box {
  readonly name: string;
  #ws: URL;
  #s: BoxSettings;
  #drainUntil: number | undefined;
  #life = new AbortController(); // aborted by close
  #conn: Conn | undefined;
  #connecting: Promise<Conn> | undefined;
  #closed = false;
  #inflight = new Map<string, Result>();
  #nextId = 0;
  #session = "";
  #attach = false; // #session was given to attach: the first dial resumes it
  #caps: Set<string> | undefined;
  #lastSeq = 0;
  #env: Promise<Environment> | undefined;
  #sendErrorListeners = new Set<SendErrorListener>();
  #host: ResultHost;
  #http: BoxHTTP;
  #egress: SessionEgress;

  /** @internal use GloveboxClient.box */
  constructor(name: string, ep: Endpoint, s: BoxSettings) {
    this.name = name;
    const { ws, base } = parseEndpoint(ep.url);
    this.#ws = ws;
    this.#http = new BoxHTTP(name, ep, base, s, this.#life.signal, () => this.#closed);
    this.#s = s;
    this.#egress = new SessionEgress(s.egress);
    this.#host = {
      sendFrame: (frame, what) => this.#sendFrame(frame, what),
      abortPrompt: (r, reason) => this.#cancelPrompt(r, reason, true),
      readRef: (ref, opts) => this.open(ref, opts),
    };
  }

  /** Capabilities from the box's hello; undefined until connected, empty for a v1 box. */
  get capabilities(): ReadonlySet<string> | undefined {
    return this.#caps;
  }

  /** When the box this session is on cuts what still runs, in ms since the epoch, once it said it is shutting down (a draining frame); undefined otherwise. A new session clears it. */
  get draining(): number | undefined {
    return this.#drainUntil;
  }

  /** The session's effective egress policy as the box last reported it (its hello, or the answer to the session's rules); undefined before the session opened or from a box without an egress proxy. */
  get egress(): EgressEnvironment | undefined {
    return this.#egress.view;
  }

  /**
   * Replaces the session's own egress rules (opening the session if need
   * be) and resolves to its effective policy. New connections of the
   * session's agents follow them at once. Rules with no rules and no
   * default clear them. A box that refuses them (the error says why)
   * keeps the rules it had; a box without an egress proxy fails with
   * code BadRequest.
   */
  setEgress(rules: NetworkSpec): Promise<EgressEnvironment> {
    return this.#egress.queue(() => this.#setEgress(rules));
  }

  async #setEgress(rules: NetworkSpec): Promise<EgressEnvironment> {
    const c = await this.#getConn(undefined);
    // Before the box's hello the frame goes anyway: the box answers it
    // after the hello (and after the answer to the hello's own rules).
    if (this.#caps && !this.#caps.has("egress_rules")) {
      throw new GloveboxError(ClientCodes.BadRequest, `box ${JSON.stringify(this.name)} takes no session egress rules (it has no egress proxy, or is older than them)`);
    }
    const f = await this.#egress.exchange(rules, (frame) => c.sock.send(frame), this.#s.requestTimeoutMs, this.name);
    if (!f) throw new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.name)}: no answer to the session egress rules within ${this.#s.requestTimeoutMs}ms`);
    if (f.error) throw new GloveboxError(ClientCodes.BadRequest, `box ${JSON.stringify(this.name)} refused the session egress rules: ${f.error}`, { fromBox: true });
    this.#egress.rules = rules;
    return f.policy!;
  }

  /** The box's session id, from its hello ("" from a v1 box). */
  get sessionId(): string {
    return this.#session;
  }

  /** Whether close() was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Subscribes to failures of fire-and-forget sends (resolve, reject). Returns the unsubscribe function. */
  onSendError(listener: SendErrorListener): () => void {
    this.#sendErrorListeners.add(listener);
    return () => this.#sendErrorListeners.delete(listener);
  }

  /**
   * Sends a prompt and returns its Result at once; the box is connected on
   * first use. Every failure, bad options included, settles the result's
   * promises with a GloveboxError.
   */
  prompt(text: string, opts: PromptOptions = {}): Result {
    const id = `req_${++this.#nextId}`;
    const r = new Result(id, this.#host);
    r.discardEvents = opts.discardEvents ?? false;
    r.exitAsError = opts.execExitAsError ?? this.#s.execExitAsError;
    if (this.#closed) {
      r.finish(undefined, closedError(this.name));
      return r;
    }
    const signal = opts.signal;
    if (signal) {
      const onAbort = () => this.#cancelPrompt(r, new GloveboxError("AbortError", `prompt ${id} aborted: ${String(signal.reason ?? "signal")}`, { cause: signal.reason }));
      if (signal.aborted) {
        onAbort();
        return r;
      }
      signal.addEventListener("abort", onAbort, { once: true });
      r.cleanup = () => signal.removeEventListener("abort", onAbort);
    }
    this.#start(r, text, opts, signal).catch((e) => r.finish(undefined, asError(e, `prompt ${id}`)));
    return r;
  }

  async #start(r: Result, text: string, opts: PromptOptions, signal: AbortSignal | undefined): Promise<void> {
    const inputs = await buildInputs(opts);
    const frame: PromptFrame = { type: "prompt", id: r.id, text };
    if (inputs) frame.inputs = inputs;
    if (opts.outputsPolicy) frame.outputs_policy = opts.outputsPolicy;
    const data = JSON.stringify(frame);
    const size = utf8Length(data);
    if (size > this.#s.maxMessageBytes) {
      throw new GloveboxError(ClientCodes.TooLarge, `prompt ${r.id}: the message is ${size} bytes, over the ${this.#s.maxMessageBytes}-byte limit: send large files as url refs in inputs`);
    }
    r.frame = data;
    for (;;) {
      if (r.ended) return;
      const c = await this.#getConn(signal);
      if (r.ended) return;
      if (this.#conn !== c) continue;
      this.#inflight.set(r.id, r);
      if (c.sock.send(data)) return;
      // The socket is going away before the frame left: the box never saw
      // this prompt. Try again on the next socket, unless the drop failed it.
      this.#inflight.delete(r.id);
      this.#deadSocket(c);
    }
  }

  /**
   * Aborts a prompt on the box. With viaBox, a prompt the box has is left
   * to end with the box's own AbortError; otherwise (a signal, a full
   * buffer) it ends here at once with reason.
   */
  #cancelPrompt(r: Result, reason: GloveboxError, viaBox = false): void {
    if (r.ended) return;
    const wasSent = this.#inflight.get(r.id) === r;
    const told = wasSent && !!this.#conn?.sock.send(JSON.stringify({ type: "abort", id: r.id } satisfies AbortFrame));
    if (viaBox && told) return;
    this.#inflight.delete(r.id);
    r.finish(undefined, reason);
  }

  /** Gives up on a socket that no longer takes frames, so the next send waits for a new one. */
  #deadSocket(c: Conn): void {
    if (this.#conn !== c) return;
    c.sock.kill();
    this.#dropped(c, "the socket stopped taking frames");
  }

  async #sendFrame(frame: string, what: string): Promise<void> {
    try {
      for (;;) {
        const c = await this.#getConn(undefined);
        if (c.sock.send(frame)) return;
        this.#deadSocket(c);
      }
    } catch (e) {
      const err = asError(e, what);
      for (const l of this.#sendErrorListeners) {
        try {
          l(err, what);
        } catch {
          /* a listener's failure is its own */
        }
      }
      throw err;
    }
  }

  /**
   * Closes the box: prompts in flight fail with code Closed and the socket
   * is closed with a close frame, which ends the session on the box.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#life.abort();
    const c = this.#conn;
    this.#conn = undefined;
    const victims = [...this.#inflight.values()];
    this.#inflight.clear();
    for (const r of victims) r.finish(undefined, closedError(this.name));
    if (c) {
      stopKeepalive(c);
      c.sock.close(1000, "client closed");
    }
  }

  async #getConn(signal: AbortSignal | undefined): Promise<Conn> {
    for (;;) {
      if (this.#closed) throw closedError(this.name);
      if (this.#conn) return this.#conn;
      if (this.#connecting) {
        // A dial or reconnect is under way: wait for it, then look again.
        await raceSignal(this.#connecting.catch(() => undefined), signal);
        continue;
      }
      const p = this.#track(
        this.#dial(this.#resumable()).then((c) => {
          this.#install(c);
          return c;
        }),
      );
      return await raceSignal(p, signal);
    }
  }

  /** Makes inner the connection under way; it stops being so just before it settles. */
  #track(inner: Promise<Conn>): Promise<Conn> {
    let p: Promise<Conn> | undefined = undefined;
    p = (async () => {
      try {
        return await inner;
      } finally {
        if (this.#connecting === p) this.#connecting = undefined;
      }
    })();
    this.#connecting = p;
    p.catch(() => {});
    return p;
  }

  #resumable(): boolean {
    return (!!this.#caps?.has("resume") || this.#attach) && this.#session !== "";
  }

  /** Opens a socket and sends the hello; with resume, waits for the box's hello. */
  async #dial(resume: boolean): Promise<Conn> {
    if (this.#closed) throw closedError(this.name);
    const u = new URL(this.#ws);
    const session = this.#session;
    if (resume) {
      u.searchParams.set("resume", session);
      u.searchParams.set("last_seq", String(this.#lastSeq));
    }
    const sock = await dial({
      url: u.toString(),
      credential: await this.#http.credential(),
      timeoutMs: this.#s.dialTimeoutMs,
      maxMessageBytes: this.#s.maxMessageBytes,
      signal: this.#life.signal,
      impl: this.#s.WebSocket,
    }).catch((e) => {
      throw asError(e, `box ${JSON.stringify(this.name)}`);
    });
    const c = newConn(sock);
    let helloWait: Promise<ServerHelloFrame | undefined> | undefined;
    if (resume) helloWait = new Promise((res) => (c.hello = res));
    sock.start(
      (text) => this.#handle(c, text),
      (cause) => {
        c.hello?.(undefined);
        this.#dropped(c, cause);
      },
    );
    const hello: ClientHelloFrame = { type: "hello", capabilities: ["resume"] };
    if (this.#egress.rules) hello.egress = this.#egress.rules;
    sock.send(JSON.stringify(hello));
    if (helloWait) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const h = await Promise.race([helloWait, new Promise<undefined>((res) => (timer = setTimeout(() => res(undefined), this.#s.dialTimeoutMs)))]);
      clearTimeout(timer);
      c.hello = undefined;
      if (!h) {
        sock.kill();
        throw new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.name)}: the box answered a resume without a hello`);
      }
      c.resumed = !!h.resumed && h.session_id === session;
      // After the box restarted (a persistent session) nothing is
      // replayed: resend at once.
      c.replayUntil = h.restarted ? 0 : (h.last_seq ?? 0);
    }
    return c;
  }

  #install(c: Conn): void {
    if (this.#closed) {
      c.sock.close(1000, "client closed");
      throw closedError(this.name);
    }
    this.#conn = c;
    if (this.#s.keepaliveMs > 0) {
      startKeepalive(c, this.#s.keepaliveMs, () => {
        this.#s.log("no frame from the box for two keepalive intervals; dropping the socket", { box: this.name });
        c.sock.kill();
        this.#dropped(c, "keepalive timeout");
      });
    }
    if (c.resumed) {
      for (const r of this.#inflight.values()) if (!r.seen && r.frame) c.unacked.push(r);
    }
    this.#resend(c);
  }

  /**
   * Sends again, once the replay of a resumed session is in, the prompts
   * the box has said nothing about: their frame may have died with the old
   * socket. A prompt the box does have is refused as a DuplicateID, which
   * the prompt ignores.
   */
  #resend(c: Conn): void {
    if (!c.resumed || c.resendDone || this.#lastSeq < c.replayUntil || this.#conn !== c) return;
    c.resendDone = true;
    for (const r of c.unacked) {
      if (this.#inflight.get(r.id) === r && !r.seen && r.frame) {
        r.resent = true;
        c.sock.send(r.frame);
      }
    }
    c.unacked = [];
  }

  #dropped(c: Conn, cause: string): void {
    stopKeepalive(c);
    if (this.#conn !== c || this.#closed) return;
    this.#conn = undefined;
    if (this.#inflight.size === 0) return; // the next use dials again, resuming if it can
    if (this.#resumable() && this.#s.reconnectAttempts > 0) {
      this.#s.log("socket dropped; resuming", { box: this.name, cause });
      this.#track(this.#reconnect(cause));
      return;
    }
    const why = this.#s.reconnectAttempts > 0 ? " (the box does not support resume)" : "";
    this.#failAll(new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.name)}: connection lost: ${cause}${why}`));
  }

  async #reconnect(cause: string): Promise<Conn> {
    let last = cause;
    let delay = this.#s.backoffMs;
    for (let attempt = 0; attempt < this.#s.reconnectAttempts; attempt++) {
      const wait = delay / 2 + Math.random() * (delay / 2);
      const ok = await sleep(wait, this.#life.signal);
      if (!ok) throw closedError(this.name);
      try {
        const c = await this.#dial(true);
        this.#install(c);
        if (c.resumed) {
          this.#s.log("session resumed", { box: this.name });
          return c;
        }
        this.#failAll(new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.name)}: connection lost: the box did not resume the session (it expired or the box restarted)`));
        return c;
      } catch (e) {
        const err = asError(e, "reconnect");
        last = err.message;
        this.#s.log("reconnect failed", { box: this.name, attempt: attempt + 1, err: last });
        if (err.code === ClientCodes.Unauthorized || err.code === ClientCodes.Closed) break;
        delay = Math.min(2 * delay, this.#s.maxBackoffMs);
      }
    }
    const err = new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.name)}: connection lost: ${last}`);
    this.#failAll(err);
    throw err;
  }

  #failAll(err: GloveboxError): void {
    const victims = [...this.#inflight.values()];
    this.#inflight.clear();
    for (const r of victims) r.finish(undefined, err);
  }

  /** Routes one frame from the box. */
  #handle(c: Conn, text: string): void {
    c.heard = true;
    let m: any;
    try {
      m = JSON.parse(text);
    } catch {
      this.#s.log("ignoring a frame that is not JSON", { box: this.name });
      return;
    }
    if (m === null || typeof m !== "object" || typeof m.type !== "string") return;
    if (typeof m.seq === "number" && m.seq > 0) {
      if (m.seq <= this.#lastSeq) return; // already seen: a replay after resume
      this.#lastSeq = m.seq;
    }
    switch (m.type) {
      case "hello": {
        if (typeof m.session_id !== "string") return;
        if (!m.resumed || m.session_id !== this.#session) {
          this.#lastSeq = 0;
          this.#drainUntil = undefined; // a new session: perhaps another instance
        }
        this.#session = m.session_id;
        this.#attach = false;
        this.#caps = new Set(Array.isArray(m.capabilities) ? m.capabilities.filter((x: unknown) => typeof x === "string") : []);
        this.#egress.hello(m, this.#caps);
        c.hello?.(m as ServerHelloFrame);
        break;
      }
      case "egress":
        this.#egress.frame(m, (err) => this.#s.log("the box refused the session egress rules", { box: this.name, err }));
        break;
      case "draining": {
        if (typeof m.deadline !== "number") return;
        this.#drainUntil = m.deadline;
        this.#s.log("box is shutting down", { box: this.name, deadline: m.deadline });
        try {
          this.#s.onDraining?.(this.name, m.deadline);
        } catch (e) {
          this.#s.log("onDraining threw", { box: this.name, err: String(e) });
        }
        break;
      }
      default:
        this.#promptFrame(m, text);
    }
    this.#resend(c);
  }

  /**
   * Routes a frame about prompts: an event, a display update (for every
   * prompt in flight when a v1 box names none), a completion, an error (one
   * naming no prompt is the box's own, and is logged).
   */
  #promptFrame(m: any, text: string): void {
    const id = typeof m.id === "string" ? m.id : "";
    switch (m.type) {
      case "event": {
        const r = this.#inflight.get(id);
        if (!r || typeof m.event_type !== "string") break;
        r.seen = true;
        r.frame = undefined;
        if (m.event_type === "exit" && m.data && typeof m.data === "object") r.exit = m.data;
        if (r.discardEvents) break;
        setCost(m, text.length);
        m.request_id = id;
        if (!this.#buffer(r, text.length)) break;
        r.events.push(m);
        break;
      }
      case "display_push": {
        const slot = m.slot;
        if (!slot || typeof slot !== "object" || typeof slot.id !== "string") break;
        setCost(slot, text.length);
        this.#fanOut(id, { type: "push", slot, slot_id: slot.id }, text.length);
        break;
      }
      case "display_clear": {
        if (typeof m.slot_id !== "string") break;
        this.#fanOut(id, { type: "clear", slot_id: m.slot_id }, 0);
        break;
      }
      case "complete": {
        const r = this.#inflight.get(id);
        if (!r) break;
        this.#inflight.delete(id);
        const done: Completion = { message: typeof m.message === "string" ? m.message : "", outputs: m.outputs && typeof m.outputs === "object" ? m.outputs : {} };
        const code = r.exit?.code;
        if (r.exitAsError && typeof code === "number" && code !== 0) {
          const sig = r.exit?.signal ? ` (${r.exit.signal})` : "";
          const err = new GloveboxError("AgentError", `the command exited with code ${code}${sig}`, { fromBox: true });
          err.completion = done;
          r.finish(undefined, err);
        } else {
          r.finish(done, undefined);
        }
        break;
      }
      case "error": {
        const body = m.error && typeof m.error === "object" ? m.error : {};
        const code = typeof body.code === "string" ? body.code : "Error";
        const msg = typeof body.message === "string" ? body.message : "";
        if (id === "") {
          this.#s.log("the box reported an error", { box: this.name, code, message: msg });
          break;
        }
        const r = this.#inflight.get(id);
        if (!r) break;
        if (r.resent && code === "DuplicateID") break; // the box had the prompt after all
        this.#inflight.delete(id);
        r.finish(undefined, new GloveboxError(code, msg || code, { fromBox: true }));
        break;
      }
    }
  }

  /** Delivers a display update to its prompt, or to every prompt in flight when the box did not say which (v1). */
  #fanOut(promptId: string, d: Parameters<Result["display"]["push"]>[0], size: number): void {
    const targets = promptId !== "" ? [this.#inflight.get(promptId)].filter((r): r is Result => !!r) : [...this.#inflight.values()];
    for (const r of targets) {
      if (promptId !== "") {
        r.seen = true;
        r.frame = undefined;
      }
      if (this.#buffer(r, size)) r.display.push(d);
    }
  }

  /** Accounts for size more unread bytes; fails and aborts the prompt when that is over the cap. */
  #buffer(r: Result, size: number): boolean {
    if (r.buffered + size <= this.#s.eventBufferBytes) {
      r.buffered += size;
      return true;
    }
    this.#cancelPrompt(
      r,
      new GloveboxError(ClientCodes.BufferFull, `prompt ${r.id}: over ${this.#s.eventBufferBytes} bytes of events unread: iterate result.events and result.display while the prompt runs, or set discardEvents`),
    );
    return false;
  }

  /**
   * The box's environment (GET /environment): name, version, base,
   * packages, limits, capabilities. The first success is cached;
   * concurrent first calls share one request; a failure is not cached.
   */
  environment(opts: { signal?: AbortSignal } = {}): Promise<Environment> {
    if (!this.#env) {
      const p = this.#http.getJSON<Environment>("environment", true);
      this.#env = p;
      p.catch(() => {
        if (this.#env === p) this.#env = undefined;
      });
    }
    return settled(raceSignal(this.#env, opts.signal));
  }

  /** The box's GET /health. It needs no credential. */
  health(opts: { signal?: AbortSignal } = {}): Promise<Health> {
    return settled(raceSignal(this.#http.getJSON<Health>("health", false), opts.signal));
  }

  /** An HTTP route of the box, resolved against its URL with its path prefix. */
  route(name: string): URL {
    return this.#http.route(name);
  }

  /**
   * Reads a FileRef the box returned. Server refs are fetched with the
   * box's credential, which is sent only to the box's own origin.
   */
  open(ref: FileRef, opts: ReadOptions = {}): Promise<Uint8Array> {
    return settled(this.#http.open(ref, opts));
  }

  /**
   * Fetches a prompt's signed record (GET /runs/{prompt}), in this Box's
   * session unless another is given, and verifies it with opts.publicKey
   * (the manifest's runs.public_key) or else the key /environment
   * reports; rejects with a RunVerifyError naming what was changed.
   */
  run(prompt: string, opts: RunOptions = {}): Promise<SignedRun> {
    return settled(raceSignal(fetchRun(this.#runHost(), prompt, opts), opts.signal));
  }

  /**
   * Fetches a session's chain of run records (GET /runs?session=ID;
   * this Box's session unless another is given) and verifies every
   * record and link (see run for the key).
   */
  runChain(opts: RunOptions = {}): Promise<SignedRun[]> {
    return settled(raceSignal(fetchRunChain(this.#runHost(), opts), opts.signal));
  }

  /**
   * Mints a link to a port a process of this Box's session (or
   * opts.session) listens on (the box's "preview" capability): open
   * preview.url in a browser, or send "Authorization: Bearer " +
   * preview.link to its origin.
   */
  preview(port: number, opts: PreviewOptions = {}): Promise<Preview> {
    return settled(mintPreview(this.#previewHost(), port, opts));
  }

  /** Lists the session's live preview links, without their credentials. */
  previews(session?: string): Promise<Preview[]> {
    return settled(listPreviews(this.#previewHost(), session));
  }

  /** Revokes a preview link: it answers 410 Gone from then on. */
  revokePreview(id: string, session?: string): Promise<void> {
    return settled(revokePreview(this.#previewHost(), id, session));
  }

  #previewHost(): PreviewHost {
    return { name: this.name, session: this.#session, callJSON: (m, r, b, ok) => this.#http.callJSON(m, r, b, ok) };
  }

  #runHost(): RunHost {
    return { name: this.name, session: this.#session, environment: () => this.environment(), getJSON: (route) => this.#http.getJSON<unknown>(route, true) };
  }

  /**
   * A session's files (/sessions/{id}/fs; capability "fs"): this Box's
   * session unless another id is given.
   */
  fs(sessionId?: string): SessionFiles {
    return new SessionFiles(this.#http, () => sessionId ?? this.#session, this.name);
  }

  /** Snapshots this Box's session, or the session given (POST /sessions/{id}/snapshot). */
  snapshot(session: string = this.#session): Promise<SnapshotInfo> {
    return settled(Promise.resolve().then(() => snapshotSession(this.#snapHost(), session)));
  }

  /** Lists the box's snapshots, newest first (GET /snapshots). */
  snapshots(): Promise<SnapshotList> {
    return settled(listSnapshots(this.#snapHost()));
  }

  /** A snapshot's manifest (GET /snapshots/{id}). */
  snapshotManifest(id: string): Promise<SnapshotManifest> {
    return settled(Promise.resolve().then(() => snapshotManifest(this.#snapHost(), id)));
  }

  /** Deletes a snapshot (DELETE /snapshots/{id}). */
  deleteSnapshot(id: string): Promise<void> {
    return settled(Promise.resolve().then(() => deleteSnapshot(this.#snapHost(), id)));
  }

  /** Makes a new session from a snapshot (POST /snapshots/{id}/restore); attach a Box to it to use it. */
  restore(id: string, opts: RestoreOptions = {}): Promise<RestoreResult> {
    return settled(Promise.resolve().then(() => restoreSnapshot(this.#snapHost(), id, opts)));
  }

  /** Copies this Box's session, or the session given, into count new sessions (POST /sessions/{id}/fork). */
  fork(count = 1, session: string = this.#session): Promise<ForkResult> {
    return settled(Promise.resolve().then(() => forkSession(this.#snapHost(), session, count)));
  }

  /**
   * Makes this Box's first connection attach to session id (a restored or
   * forked one, waiting detached) instead of opening a new session.
   * Throws once the Box has a session.
   */
  attach(id: string): void {
    if (this.#session !== "" || this.#conn || this.#connecting) {
      throw new GloveboxError(ClientCodes.BadRequest, `box ${JSON.stringify(this.name)}: attach ${id}: this Box has a session already (${this.#session || "connecting"})`);
    }
    if (id === "") throw new GloveboxError(ClientCodes.BadRequest, "attach: no session id");
    this.#session = id;
    this.#lastSeq = 0;
    this.#attach = true;
  }

  #snapHost(): SnapshotHost {
    return { name: this.name, send: (m, r, b) => this.#http.send(m, r, b), getJSON: (r) => this.#http.getJSON(r, true) };
  }

  /** Reads the file the box stores under id (GET /files/{id}). */
  file(id: string, opts: ReadOptions = {}): Promise<Uint8Array> {
    if (!/^[A-Za-z0-9_-]+$/.test(id)) {
      return settled(Promise.reject(new GloveboxError(ClientCodes.BadRequest, `file id ${JSON.stringify(id)}: want letters, digits, _ and - only`)));
    }
    return this.open({ kind: "server", name: id, mime: "", size: 0, id, url: this.route("files/" + id).toString() }, opts);
  }

  /**
   * Opens this Box's session, if it has none yet, and resolves with its
   * id: its terminals and processes live as long as it does.
   */
  async connect(opts: { signal?: AbortSignal } = {}): Promise<string> {
    await this.#getConn(opts.signal);
    const deadline = Date.now() + this.#s.dialTimeoutMs;
    while (this.#session === "") {
      if (Date.now() > deadline) throw new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.name)}: no hello within ${this.#s.dialTimeoutMs}ms`);
      await sleep(2, opts.signal ?? this.#life.signal);
    }
    return this.#session;
  }

  #execRoute(session: string, feature: string, ...parts: string[]): string {
    return ["sessions", routeId(session), feature, ...parts.map(routeId)].join("/");
  }

  /** Lists a session's terminals (the key, an exec token, or the session's own credential). */
  terminals(session: string): Promise<TerminalInfo[]> {
    return this.#http.call<TerminalInfo[]>("GET", this.#execRoute(session, "terminals"), undefined, 200);
  }

  /** Starts a terminal in a session and attaches to it. */
  async startTerminal(session: string, req: TerminalRequest = {}): Promise<Terminal> {
    const t = await this.#http.call<TerminalInfo>("POST", this.#execRoute(session, "terminals"), JSON.stringify(req), 201);
    try {
      return await this.attachTerminal(session, t.id);
    } catch (e) {
      await this.deleteTerminal(session, t.id).catch(() => undefined);
      throw e;
    }
  }

  /** Attaches to a terminal of a session (one client at a time). */
  async attachTerminal(session: string, id: string): Promise<Terminal> {
    const u = new URL(this.#execRoute(session, "terminals", id), this.#ws);
    const sock = await dialRaw({
      url: u.toString(),
      credential: await this.#http.credential(),
      timeoutMs: this.#s.dialTimeoutMs,
      maxMessageBytes: this.#s.maxMessageBytes,
      signal: this.#life.signal,
      impl: this.#s.WebSocket,
    }).catch((e) => {
      throw asError(e, `box ${JSON.stringify(this.name)}: attach terminal ${id}`);
    });
    return new Terminal(id, sock);
  }

  /** Kills a terminal's command and forgets it. */
  async deleteTerminal(session: string, id: string): Promise<void> {
    await this.#http.call<void>("DELETE", this.#execRoute(session, "terminals", id), undefined, 204);
  }

  /** Lists a session's processes. */
  processes(session: string): Promise<Process[]> {
    return this.#http.call<Process[]>("GET", this.#execRoute(session, "processes"), undefined, 200);
  }

  /** Starts a long-running process in a session (a dev server, a watcher). */
  startProcess(session: string, req: ProcessRequest): Promise<Process> {
    return this.#http.call<Process>("POST", this.#execRoute(session, "processes"), JSON.stringify(req), 201);
  }

  /** Shows one process of a session. */
  process(session: string, id: string): Promise<Process> {
    return this.#http.call<Process>("GET", this.#execRoute(session, "processes", id), undefined, 200);
  }

  /** Sends a signal ("SIGTERM") to a process's group. */
  async signalProcess(session: string, id: string, signal: string): Promise<void> {
    await this.#http.call<void>("POST", this.#execRoute(session, "processes", id, "signal"), JSON.stringify({ signal }), 204);
  }

  /** Stops a process (SIGTERM, SIGKILL after the box's grace) and forgets it. */
  async deleteProcess(session: string, id: string): Promise<void> {
    await this.#http.call<void>("DELETE", this.#execRoute(session, "processes", id), undefined, 204);
  }

  /** Writes data to a process's stdin; close closes its stdin after it. */
  async writeStdin(session: string, id: string, data: string | Uint8Array, opts: { close?: boolean } = {}): Promise<void> {
    const route = this.#execRoute(session, "processes", id, "stdin") + (opts.close ? "?close=1" : "");
    const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
    await this.#http.call<void>("POST", route, body as BodyInit, 204);
  }

  /** Reads a page of a process's output: bytes from offset, what the box dropped before them, and whether the stream ended. */
  async processOutput(session: string, id: string, opts: OutputOptions = {}): Promise<OutputPage> {
    const p = await this.#http.call<ProcessOutput>("GET", outputRoute(this.#execRoute(session, "processes", id), opts, false), undefined, 200, opts.signal);
    return decodePage(p);
  }

  /** Follows a process's output until the stream ends (the last page says eof and the exit) or the signal aborts. */
  async *followProcessOutput(session: string, id: string, opts: OutputOptions = {}): AsyncGenerator<OutputPage> {
    for await (const p of this.#http.lines<ProcessOutput>(outputRoute(this.#execRoute(session, "processes", id), opts, true), opts.signal)) {
      yield decodePage(p);
    }
  }
}
