import { decodeBase64, encodeBase64 } from "./base64.js";
import { ClientCodes, GloveboxError, type Completion } from "./errors.js";
import { Result, setCost, settled, type ReadOptions, type ResultHost } from "./result.js";
import { verifyRun, verifyRunChain } from "./runs.js";
import { dial, redact, type Socket, type WebSocketConstructor } from "./socket.js";
import type { AbortFrame, ClientHelloFrame, EgressEnvironment, EgressPolicyFrame, EgressSetFrame, Environment, FileRef, Health, NetworkSpec, OutputsOverride, PingFrame, PromptFrame, RunChain, ServerHelloFrame, SignedRun } from "./wire.js";

/** Where a box listens and the credential it accepts. */
export interface Endpoint {
  /** The box's WebSocket URL (ws:, wss:; http: and https: mean the same). HTTP routes resolve against it, path prefix kept. */
  url: string;
  /** The box key (GLOVEBOX_KEY). Servers only: a browser must use a token. */
  key?: string;
  /** A token minted from the key (gbx token, protocol.MintToken), or a function that returns a fresh one; asked again on every connection and request. */
  token?: string | (() => string | Promise<string>);
}

/** An input file given by its bytes. mime defaults to a guess from the name. */
export interface InputFile {
  mime?: string;
  bytes: Uint8Array | ArrayBuffer | Blob | string;
}

/** A prompt's optional parts. */
export interface PromptOptions {
  /** Files sent inline, by name (a slash name lands in a subdirectory). A name in both files and inputs takes the files entry. */
  files?: Record<string, InputFile>;
  /** Ready-made FileRefs (url, server, s3, gcs, inline), by name. */
  inputs?: Record<string, FileRef>;
  /** Per-prompt changes to how outputs are stored. */
  outputsPolicy?: OutputsOverride;
  /** Aborts the prompt on the box when it fires; the result then fails with code AbortError. */
  signal?: AbortSignal;
  /** Drop events instead of buffering them, for callers that only await the outcome. */
  discardEvents?: boolean;
  /** Overrides ClientOptions.execExitAsError for this prompt. */
  execExitAsError?: boolean;
}

/** Client settings shared by every box (see ClientOptions). */
export interface BoxSettings {
  WebSocket?: WebSocketConstructor;
  fetch: typeof fetch;
  dialTimeoutMs: number;
  requestTimeoutMs: number;
  keepaliveMs: number;
  reconnectAttempts: number;
  backoffMs: number;
  maxBackoffMs: number;
  eventBufferBytes: number;
  maxMessageBytes: number;
  execExitAsError: boolean;
  log: (msg: string, fields?: Record<string, unknown>) => void;
  onDraining?: ((box: string, deadline: number) => void) | undefined;
  egress?: NetworkSpec | undefined;
}

interface Conn {
  sock: Socket;
  resumed: boolean;
  replayUntil: number;
  resendDone: boolean;
  unacked: Result[];
  /** A frame came since the last keepalive tick. */
  heard: boolean;
  /** Keepalive ticks in a row with nothing heard. */
  silentTicks: number;
  keepalive: ReturnType<typeof setInterval> | undefined;
  hello: ((h: ServerHelloFrame | undefined) => void) | undefined;
}

export type SendErrorListener = (err: GloveboxError, what: string) => void;

/**
 * One endpoint: a lazily opened, self-healing connection to a box and the
 * prompts in flight on it.
 */
export class Box {
  readonly name: string;
  #ep: Endpoint;
  #ws: URL;
  #base: URL;
  #s: BoxSettings;
  #drainUntil: number | undefined;
  #life = new AbortController(); // aborted by close
  #conn: Conn | undefined;
  #connecting: Promise<Conn> | undefined;
  #closed = false;
  #inflight = new Map<string, Result>();
  #nextId = 0;
  #session = "";
  #caps: Set<string> | undefined;
  #lastSeq = 0;
  #env: Promise<Environment> | undefined;
  #sendErrorListeners = new Set<SendErrorListener>();
  #host: ResultHost;
  /** The session's own egress rules its hello carries. */
  #egress: NetworkSpec | undefined;
  /** The session's effective egress policy, as the box last reported it. */
  #egressView: EgressEnvironment | undefined;
  /** The answer to the hello's egress rules is still to come. */
  #egressHello = false;
  #egressWait: ((f: EgressPolicyFrame) => void) | undefined;
  #egressQueue: Promise<unknown> = Promise.resolve();

  /** @internal use GloveboxClient.box */
  constructor(name: string, ep: Endpoint, s: BoxSettings) {
    this.name = name;
    this.#ep = ep;
    const { ws, base } = parseEndpoint(ep.url);
    this.#ws = ws;
    this.#base = base;
    this.#s = s;
    this.#egress = s.egress;
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
    return this.#egressView;
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
    const run = this.#egressQueue.then(() => this.#setEgress(rules));
    this.#egressQueue = run.catch(() => undefined);
    return run;
  }

  async #setEgress(rules: NetworkSpec): Promise<EgressEnvironment> {
    const c = await this.#getConn(undefined);
    // Before the box's hello the frame goes anyway: the box answers it
    // after the hello (and after the answer to the hello's own rules).
    if (this.#caps && !this.#caps.has("egress_rules")) {
      throw new GloveboxError(ClientCodes.BadRequest, `box ${JSON.stringify(this.name)} takes no session egress rules (it has no egress proxy, or is older than them)`);
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const answer = new Promise<EgressPolicyFrame | undefined>((res) => {
      this.#egressWait = res;
      timer = setTimeout(() => res(undefined), this.#s.requestTimeoutMs);
    });
    if (!c.sock.send(JSON.stringify({ type: "egress", rules } satisfies EgressSetFrame))) {
      clearTimeout(timer);
      this.#egressWait = undefined;
      throw new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.name)}: the socket went away before the egress rules were sent; retry`);
    }
    const f = await answer;
    clearTimeout(timer);
    this.#egressWait = undefined;
    if (!f) throw new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.name)}: no answer to the session egress rules within ${this.#s.requestTimeoutMs}ms`);
    if (f.error) throw new GloveboxError(ClientCodes.BadRequest, `box ${JSON.stringify(this.name)} refused the session egress rules: ${f.error}`, { fromBox: true });
    this.#egress = rules;
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
    return !!this.#caps?.has("resume") && this.#session !== "";
  }

  async #credential(): Promise<string> {
    const t = this.#ep.token;
    if (t === undefined) return this.#ep.key ?? "";
    if (typeof t === "string") return t;
    let tok: unknown;
    try {
      tok = await t();
    } catch (e) {
      throw new GloveboxError(ClientCodes.Unauthorized, `box ${JSON.stringify(this.name)}: the token function failed: ${(e as Error)?.message ?? String(e)}`, { cause: e });
    }
    if (typeof tok !== "string" || tok === "") {
      throw new GloveboxError(ClientCodes.Unauthorized, `box ${JSON.stringify(this.name)}: the token function returned ${tok === "" ? "an empty string" : typeof tok}, want a token string`);
    }
    return tok;
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
      credential: await this.#credential(),
      timeoutMs: this.#s.dialTimeoutMs,
      maxMessageBytes: this.#s.maxMessageBytes,
      signal: this.#life.signal,
      impl: this.#s.WebSocket,
    }).catch((e) => {
      throw asError(e, `box ${JSON.stringify(this.name)}`);
    });
    const c: Conn = { sock, resumed: false, replayUntil: 0, resendDone: false, unacked: [], heard: true, silentTicks: 0, keepalive: undefined, hello: undefined };
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
    if (this.#egress) hello.egress = this.#egress;
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
      c.replayUntil = h.last_seq ?? 0;
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
      const every = this.#s.keepaliveMs;
      c.keepalive = setInterval(() => {
        // Ticks, not wall time: a stalled event loop fires one late tick,
        // never two, so a busy host does not drop a live socket.
        if (c.heard || c.sock.sending()) c.silentTicks = 0;
        else c.silentTicks++;
        c.heard = false;
        if (c.silentTicks >= 2) {
          this.#s.log("no frame from the box for two keepalive intervals; dropping the socket", { box: this.name });
          stopKeepalive(c);
          c.sock.kill();
          this.#dropped(c, "keepalive timeout");
          return;
        }
        c.sock.send(JSON.stringify({ type: "ping", ts: Date.now() } satisfies PingFrame));
      }, every);
      (c.keepalive as any).unref?.();
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
    const id = typeof m.id === "string" ? m.id : "";
    switch (m.type) {
      case "hello": {
        if (typeof m.session_id !== "string") return;
        if (!m.resumed || m.session_id !== this.#session) {
          this.#lastSeq = 0;
          this.#drainUntil = undefined; // a new session: perhaps another instance
        }
        this.#session = m.session_id;
        this.#caps = new Set(Array.isArray(m.capabilities) ? m.capabilities.filter((x: unknown) => typeof x === "string") : []);
        this.#egressView = m.egress && typeof m.egress === "object" ? m.egress : undefined;
        // A box that takes session rules answers the hello's with an egress frame, after this hello.
        this.#egressHello = !!this.#egress && this.#caps.has("egress_rules");
        c.hello?.(m as ServerHelloFrame);
        break;
      }
      case "egress": {
        if (m.policy && typeof m.policy === "object") this.#egressView = m.policy;
        if (this.#egressHello) {
          this.#egressHello = false;
          if (typeof m.error === "string") this.#s.log("the box refused the session egress rules", { box: this.name, err: m.error });
          break;
        }
        this.#egressWait?.(m as EgressPolicyFrame);
        break;
      }
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
    this.#resend(c);
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
      const p = this.#getJSON<Environment>("environment", true);
      this.#env = p;
      p.catch(() => {
        if (this.#env === p) this.#env = undefined;
      });
    }
    return settled(raceSignal(this.#env, opts.signal));
  }

  /** The box's GET /health. It needs no credential. */
  health(opts: { signal?: AbortSignal } = {}): Promise<Health> {
    return settled(raceSignal(this.#getJSON<Health>("health", false), opts.signal));
  }

  /** An HTTP route of the box, resolved against its URL with its path prefix. */
  route(name: string): URL {
    return new URL(name, this.#base);
  }

  async #getJSON<T>(route: string, auth: boolean): Promise<T> {
    const u = this.route(route);
    const headers: Record<string, string> = {};
    if (auth) headers.Authorization = "Bearer " + (await this.#credential());
    const resp = await this.#fetch(u, headers, undefined, `get ${route}`, true);
    const text = await resp.text();
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new GloveboxError(ClientCodes.HTTP, `box ${JSON.stringify(this.name)}: ${route} is not the JSON expected: ${(e as Error).message}`, { status: resp.status });
    }
  }

  /** GETs u. timeout bounds JSON routes; a file read is bounded by its signal only, as it may be large. */
  async #fetch(u: URL, headers: Record<string, string>, signal: AbortSignal | undefined, what: string, timeout = false): Promise<Response> {
    const signals = [this.#life.signal];
    if (timeout) signals.push(AbortSignal.timeout(this.#s.requestTimeoutMs));
    if (signal) signals.push(signal);
    let resp: Response;
    try {
      resp = await this.#s.fetch(u.toString(), { headers, signal: anySignal(signals), cache: "no-store", credentials: "omit", redirect: "error" });
    } catch (e) {
      if (this.#closed) throw closedError(this.name);
      throw new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.name)}: ${what} at ${redact(u.toString())}: ${(e as Error).message}`, { cause: e });
    }
    if (resp.status === 200) return resp;
    const snippet = (await resp.text().catch(() => "")).slice(0, 200).trim();
    if (resp.status === 401) {
      throw new GloveboxError(ClientCodes.Unauthorized, `box ${JSON.stringify(this.name)}: ${what}: the box refused the credential (HTTP 401): check the key or token, its expiry and its scopes`, { status: 401 });
    }
    const gone = resp.status === 410 ? ": the file expired on the box or was consumed" : "";
    throw new GloveboxError(ClientCodes.HTTP, `box ${JSON.stringify(this.name)}: ${what} at ${redact(u.toString())}: HTTP ${resp.status}${gone}${snippet ? `: ${snippet}` : ""}`, { status: resp.status });
  }

  /**
   * Reads a FileRef the box returned. Server refs are fetched with the
   * box's credential, which is sent only to the box's own origin.
   */
  open(ref: FileRef, opts: ReadOptions = {}): Promise<Uint8Array> {
    return settled(this.#open(ref, opts));
  }

  async #open(ref: FileRef, opts: ReadOptions): Promise<Uint8Array> {
    const name = JSON.stringify(ref.name);
    switch (ref.kind) {
      case "inline":
        try {
          return decodeBase64(ref.data);
        } catch (e) {
          throw new GloveboxError(ClientCodes.BadRequest, `read ${name}: ${(e as Error).message}`);
        }
      case "server": {
        let u: URL;
        try {
          u = new URL(ref.url, this.#base);
        } catch {
          throw new GloveboxError(ClientCodes.BadRequest, `read ${name}: bad url ${JSON.stringify(ref.url)}`);
        }
        if (origin(u) !== origin(this.#base)) {
          throw new GloveboxError(
            ClientCodes.ForeignOrigin,
            `read ${name}: it is at ${origin(u)}, the box at ${origin(this.#base)}; not sending the credential there (check the box's GLOVEBOX_PUBLIC_URL)`,
          );
        }
        if (opts.consume) u.searchParams.set("consume", "1");
        const resp = await this.#fetch(u, { Authorization: "Bearer " + (await this.#credential()) }, opts.signal, `read ${name}`);
        return new Uint8Array(await resp.arrayBuffer());
      }
      case "url": {
        let u: URL;
        try {
          u = new URL(ref.url);
        } catch {
          u = new URL("invalid:");
        }
        if (u.protocol !== "http:" && u.protocol !== "https:") {
          throw new GloveboxError(ClientCodes.BadRequest, `read ${name}: url ${JSON.stringify(ref.url)} is not an http(s) URL`);
        }
        const resp = await this.#fetch(u, { ...(ref.headers ?? {}) }, opts.signal, `read ${name}`);
        return new Uint8Array(await resp.arrayBuffer());
      }
      default:
        throw new GloveboxError(ClientCodes.BadRequest, `read ${name}: a ${(ref as FileRef).kind} ref is read with its cloud SDK, not with this client`);
    }
  }

  /**
   * Fetches the signed record of a prompt (GET /runs/{prompt}; the key, a
   * runs or admin token, or the credential that opened its session), in
   * this Box's session unless another is given, and verifies it with
   * publicKey (runs.public_key of the box's manifest) or, without one,
   * the key the box's /environment reports. Rejects with a
   * RunVerifyError naming what was changed.
   */
  run(prompt: string, opts: { session?: string; publicKey?: string; signal?: AbortSignal } = {}): Promise<SignedRun> {
    return settled(raceSignal(this.#runs(`runs/${encodeURIComponent(prompt)}`, opts, async (body, key) => {
      const s = body as SignedRun;
      await verifyRun(s, key);
      return s;
    }), opts.signal));
  }

  /**
   * Fetches a session's chain of run records (GET /runs?session=ID;
   * this Box's session unless another is given) and verifies every
   * record and link (see run for the key).
   */
  runChain(opts: { session?: string; publicKey?: string; signal?: AbortSignal } = {}): Promise<SignedRun[]> {
    return settled(raceSignal(this.#runs("runs", opts, async (body, key) => {
      const c = body as RunChain;
      await verifyRunChain(c.records, key);
      return c.records;
    }), opts.signal));
  }

  async #runs<T>(route: string, opts: { session?: string; publicKey?: string }, check: (body: unknown, key: string) => Promise<T>): Promise<T> {
    let key = opts.publicKey;
    if (!key) {
      key = (await this.environment()).runs?.public_key;
      if (!key) throw new GloveboxError(ClientCodes.HTTP, `box ${JSON.stringify(this.name)} keeps no run records (its /environment has no runs.public_key)`);
    }
    const session = opts.session || this.#session;
    const body = await this.#getJSON<unknown>(session ? `${route}?session=${encodeURIComponent(session)}` : route, true);
    return check(body, key);
  }

  /** Reads the file the box stores under id (GET /files/{id}). */
  file(id: string, opts: ReadOptions = {}): Promise<Uint8Array> {
    if (!/^[A-Za-z0-9_-]+$/.test(id)) {
      return settled(Promise.reject(new GloveboxError(ClientCodes.BadRequest, `file id ${JSON.stringify(id)}: want letters, digits, _ and - only`)));
    }
    return this.open({ kind: "server", name: id, mime: "", size: 0, id, url: this.route("files/" + id).toString() }, opts);
  }
}

async function buildInputs(opts: PromptOptions): Promise<Record<string, FileRef> | undefined> {
  const out: Record<string, FileRef> = {};
  let any = false;
  for (const [name, ref] of Object.entries(opts.inputs ?? {})) {
    if (name === "") throw new GloveboxError(ClientCodes.BadRequest, "an input has an empty name");
    if (!ref || typeof ref !== "object" || typeof (ref as FileRef).kind !== "string") {
      throw new GloveboxError(ClientCodes.BadRequest, `input ${JSON.stringify(name)}: not a FileRef (want kind inline, url, server, s3 or gcs)`);
    }
    out[name] = ref;
    any = true;
  }
  for (const [name, f] of Object.entries(opts.files ?? {})) {
    if (name === "") throw new GloveboxError(ClientCodes.BadRequest, "a file has an empty name");
    if (!f || f.bytes === undefined || f.bytes === null) throw new GloveboxError(ClientCodes.BadRequest, `file ${JSON.stringify(name)}: missing bytes`);
    const b = f.bytes;
    let bytes: Uint8Array;
    if (typeof b === "string") bytes = new TextEncoder().encode(b);
    else if (b instanceof Uint8Array) bytes = b;
    else if (b instanceof ArrayBuffer) bytes = new Uint8Array(b);
    else if (typeof Blob !== "undefined" && b instanceof Blob) bytes = new Uint8Array(await b.arrayBuffer());
    else throw new GloveboxError(ClientCodes.BadRequest, `file ${JSON.stringify(name)}: bytes must be a Uint8Array, ArrayBuffer, Blob or string`);
    out[name] = { kind: "inline", name, mime: f.mime || guessMime(name), data: encodeBase64(bytes) };
    any = true;
  }
  return any ? out : undefined;
}

/** The UTF-8 length of s, without encoding it. */
function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) {
      n += 1;
    } else if (c >= 0xd800 && c <= 0xdbff) {
      n += 2; // with its low surrogate: 4 bytes for 2 units
      i++;
    } else {
      n += 2;
    }
  }
  return n;
}

/** v1's guessMime table, by lowercased extension, as protocol.GuessMime. */
const mimeTypes: Record<string, string> = {
  ".json": "application/json", ".txt": "text/plain", ".md": "text/markdown", ".pdf": "application/pdf",
  ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
  ".mp4": "video/mp4", ".webm": "video/webm", ".mp3": "audio/mpeg", ".wav": "audio/wav", ".html": "text/html",
  ".csv": "text/csv", ".svg": "image/svg+xml", ".zip": "application/zip", ".xml": "application/xml",
  ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
  ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
  ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
  ".ogg": "audio/ogg", ".flac": "audio/flac", ".mov": "video/quicktime", ".tar": "application/x-tar", ".gz": "application/gzip",
};

export function guessMime(name: string): string {
  const i = name.lastIndexOf(".");
  return (i >= 0 && mimeTypes[name.slice(i).toLowerCase()]) || "application/octet-stream";
}

export function parseEndpoint(raw: string): { ws: URL; base: URL } {
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    throw new GloveboxError(ClientCodes.BadRequest, `bad url ${JSON.stringify(raw)}: want ws://, wss://, http:// or https://`);
  }
  const secure = u.protocol === "wss:" || u.protocol === "https:";
  if (!secure && u.protocol !== "ws:" && u.protocol !== "http:") {
    throw new GloveboxError(ClientCodes.BadRequest, `url ${JSON.stringify(raw)}: scheme must be ws, wss, http or https`);
  }
  if (u.username || u.password) {
    throw new GloveboxError(ClientCodes.BadRequest, `url ${redact(raw)}: credentials in the URL; pass key or token instead`);
  }
  u.hash = "";
  const ws = new URL(u);
  ws.protocol = secure ? "wss:" : "ws:";
  const base = new URL(u);
  base.protocol = secure ? "https:" : "http:";
  base.search = "";
  return { ws, base };
}

function origin(u: URL): string {
  const port = u.port || (u.protocol === "https:" || u.protocol === "wss:" ? "443" : "80");
  const scheme = u.protocol === "wss:" ? "https:" : u.protocol === "ws:" ? "http:" : u.protocol;
  return `${scheme}//${u.hostname.toLowerCase()}:${port}`;
}

function closedError(name: string): GloveboxError {
  return new GloveboxError(ClientCodes.Closed, `box ${JSON.stringify(name)}: closed`);
}

function asError(e: unknown, what: string): GloveboxError {
  if (e instanceof GloveboxError) return e;
  return new GloveboxError("Error", `${what}: ${(e as Error)?.message ?? String(e)}`, { cause: e });
}

function stopKeepalive(c: Conn): void {
  if (c.keepalive !== undefined) clearInterval(c.keepalive);
  c.keepalive = undefined;
}

/** Resolves true after ms, or false as soon as signal aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((res) => {
    if (signal.aborted) return res(false);
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      res(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      res(false);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** p, or a rejection with code AbortError once signal aborts (p goes on for others). */
function raceSignal<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  const abortErr = () => new GloveboxError("AbortError", `aborted: ${String(signal.reason ?? "signal")}`, { cause: signal.reason });
  if (signal.aborted) return Promise.reject(abortErr());
  return new Promise<T>((res, rej) => {
    const onAbort = () => rej(abortErr());
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        res(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        rej(e);
      },
    );
  });
}

function anySignal(signals: AbortSignal[]): AbortSignal {
  const any = (AbortSignal as any).any as ((s: AbortSignal[]) => AbortSignal) | undefined;
  if (any) return any(signals);
  const c = new AbortController();
  for (const s of signals) {
    if (s.aborted) c.abort(s.reason);
    else s.addEventListener("abort", () => c.abort(s.reason), { once: true });
  }
  return c.signal;
}
