import { Box } from "./box.js";
import { parseEndpoint, type Endpoint } from "./endpoint.js";
import { ClientCodes, GloveboxError } from "./errors.js";
import { isBrowser, type WebSocketConstructor } from "./socket.js";
import type { NetworkSpec } from "./wire.js";

/** GloveboxClient's options. Every duration is in milliseconds. */
export interface ClientOptions {
  /** Boxes by name. */
  endpoints: Record<string, Endpoint>;
  /** The WebSocket constructor. Default: the platform's, else the ws package (Node 20). */
  WebSocket?: WebSocketConstructor;
  /** The fetch used for /environment, /health and file reads. Default: globalThis.fetch. */
  fetch?: typeof fetch;
  /** Bounds opening a socket, handshake included (default 15000). */
  dialTimeoutMs?: number;
  /** Bounds environment() and health() (default 30000). */
  requestTimeoutMs?: number;
  /** How often a socket is pinged; one that hears nothing, not even a pong, for two intervals in a row is dropped and resumed (default 25000; 0 turns it off). */
  keepaliveMs?: number;
  /** Redials of a dropped socket with prompts in flight (default 5), first delay (default 250, doubling up to 8000, with jitter). */
  reconnect?: { attempts?: number; backoffMs?: number; maxBackoffMs?: number };
  /** Caps the bytes of unread events and display updates per prompt (default 64 MiB); a prompt over it is aborted with code BufferFull. */
  eventBufferBytes?: number;
  /** Caps one prompt message (default 100 MiB, v1's limit). */
  maxMessageBytes?: number;
  /**
   * v1 semantics for the exec agent: a command that exits non-zero fails
   * the prompt with code AgentError (the completion rides on the error)
   * instead of completing with an exit event. Default false.
   */
  execExitAsError?: boolean;
  /** Where connection changes are logged. Default: nowhere. */
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /**
   * Called when a box says it is shutting down (a deploy sent it SIGTERM;
   * capability "drain"): it takes no new sessions or prompts (a prompt
   * sent now fails with code "Draining"), and prompts in flight go on
   * until deadline (ms since the epoch) and complete as usual. Send new
   * prompts elsewhere. Box.draining reports the same.
   */
  onDraining?: (box: string, deadline: number) => void;
  /**
   * Every session's own egress rules, sent in its hello so that they are
   * in force before its first prompt (and again on a new session after a
   * reconnect). A box with an egress proxy (capability "egress_rules")
   * lets the session's agents reach only what both its policy and these
   * rules allow, or what these rules allow within its [network]
   * session_may_allow. Box.setEgress changes them during the session.
   */
  egress?: NetworkSpec;
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

/** One client per app, with one named entry per box. Boxes connect lazily, on first prompt. */
export class GloveboxClient {
  #endpoints: Record<string, Endpoint>;
  #settings: BoxSettings;
  #boxes = new Map<string, Box>();
  #closed = false;

  /** The original client's constructor, kept so a v1 host migrates by changing an import. */
  static make(opts: ClientOptions): GloveboxClient {
    return new GloveboxClient(opts);
  }

  constructor(opts: ClientOptions) {
    const problems: string[] = [];
    const eps: Record<string, Endpoint> = {};
    for (const name of Object.keys(opts.endpoints ?? {}).sort()) {
      const ep = opts.endpoints[name]!;
      try {
        parseEndpoint(ep?.url ?? "");
      } catch (e) {
        problems.push(`endpoint ${JSON.stringify(name)}: ${(e as Error).message}`);
        continue;
      }
      const hasKey = typeof ep.key === "string" && ep.key.trim() !== "";
      if (!hasKey && ep.token === undefined) {
        problems.push(`endpoint ${JSON.stringify(name)}: missing key or token (the box's GLOVEBOX_KEY, or a token from gbx token)`);
        continue;
      }
      if (isBrowser && hasKey) {
        problems.push(`endpoint ${JSON.stringify(name)}: a browser must not hold the box key: mint a token on your server (gbx token, protocol.MintToken) and pass token instead`);
        continue;
      }
      eps[name] = { ...ep };
    }
    if (problems.length) throw new GloveboxError(ClientCodes.BadRequest, problems.join("; "));
    const f = opts.fetch ?? (globalThis.fetch ? globalThis.fetch.bind(globalThis) : undefined);
    if (!f) throw new GloveboxError(ClientCodes.BadRequest, "no fetch in this runtime: pass options.fetch");
    const pos = (v: number | undefined, d: number) => (typeof v === "number" && v >= 0 && Number.isFinite(v) ? v : d);
    this.#endpoints = eps;
    this.#settings = {
      fetch: f,
      dialTimeoutMs: pos(opts.dialTimeoutMs, 15000) || 15000,
      requestTimeoutMs: pos(opts.requestTimeoutMs, 30000) || 30000,
      keepaliveMs: pos(opts.keepaliveMs, 25000),
      reconnectAttempts: Math.floor(pos(opts.reconnect?.attempts, 5)),
      backoffMs: pos(opts.reconnect?.backoffMs, 250) || 250,
      maxBackoffMs: pos(opts.reconnect?.maxBackoffMs, 8000) || 8000,
      eventBufferBytes: pos(opts.eventBufferBytes, 64 << 20),
      maxMessageBytes: pos(opts.maxMessageBytes, 100 << 20),
      execExitAsError: opts.execExitAsError ?? false,
      log: opts.log ?? (() => {}),
      onDraining: opts.onDraining,
      egress: opts.egress,
    };
    if (opts.WebSocket) this.#settings.WebSocket = opts.WebSocket;
  }

  /** The box for an endpoint name, created on first use and cached; a closed box is replaced by a fresh one. */
  box(name: string): Box {
    if (this.#closed) throw new GloveboxError(ClientCodes.Closed, "client closed");
    const b = this.#boxes.get(name);
    if (b && !b.closed) return b;
    const ep = this.#endpoints[name];
    if (!ep) {
      throw new GloveboxError(ClientCodes.BadRequest, `unknown box ${JSON.stringify(name)} (known: ${Object.keys(this.#endpoints).join(", ") || "none"})`);
    }
    const nb = new Box(name, ep, this.#settings);
    this.#boxes.set(name, nb);
    return nb;
  }

  /** Closes every box; prompts in flight fail with code Closed. */
  async close(): Promise<void> {
    this.#closed = true;
    const boxes = [...this.#boxes.values()];
    this.#boxes.clear();
    await Promise.all(boxes.map((b) => b.close()));
  }
}
