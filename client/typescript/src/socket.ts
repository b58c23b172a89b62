// The one place that knows which WebSocket implementation is in use: the
// platform's (browsers, Node 22+, Deno, Bun), the ws package (Node 20), or
// one the host passes in.

import { ClientCodes, GloveboxError } from "./errors.js";

/** Subprotocols the client offers: the box selects glovebox.v1; bearer.<credential> carries the key or token. */
export const SUBPROTOCOL_V1 = "glovebox.v1";
export const SUBPROTOCOL_BEARER_PREFIX = "bearer.";

/** A WebSocket constructor: the standard one, or ws's (which also takes options). */
export type WebSocketConstructor = new (url: string, protocols?: string | string[], options?: unknown) => WebSocketLike;

/** The part of the standard WebSocket (and of ws's) this client uses. */
export interface WebSocketLike {
  readonly readyState: number;
  readonly bufferedAmount?: number;
  readonly protocol?: string;
  binaryType?: string;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  terminate?(): void;
  onopen: ((ev: any) => void) | null;
  onmessage: ((ev: any) => void) | null;
  onclose: ((ev: any) => void) | null;
  onerror: ((ev: any) => void) | null;
}

/** A socket as the box sees it: text frames in and out, one close. */
export interface Socket {
  send(text: string): boolean;
  /** Whether sent bytes are still queued on the socket. */
  sending(): boolean;
  /** Ends the session on the box with a close frame. */
  close(code: number, reason: string): void;
  /** Drops the socket without a close frame where the platform allows, so the box keeps the session for a resume. */
  kill(): void;
  /**
   * Starts delivering frames and the close, in order. Frames that arrived
   * before start (a box's hello can come in the same packet as the
   * handshake's answer) are held until then.
   */
  start(onMessage: (text: string) => void, onClose: (cause: string) => void): void;
}

export interface DialOptions {
  url: string;
  credential: string;
  timeoutMs: number;
  maxMessageBytes: number;
  signal: AbortSignal;
  impl?: WebSocketConstructor;
}

const isNode = typeof (globalThis as any).process?.versions?.node === "string";

/** True where the code runs in a page or worker rather than a server runtime. */
export const isBrowser =
  !isNode && typeof (globalThis as any).Deno === "undefined" && typeof (globalThis as any).Bun === "undefined" &&
  (typeof (globalThis as any).window !== "undefined" || typeof (globalThis as any).importScripts === "function");

let wsPackage: Promise<WebSocketConstructor | undefined> | undefined;

async function findImpl(given?: WebSocketConstructor): Promise<{ impl: WebSocketConstructor; isWsPackage: boolean }> {
  if (given) return { impl: given, isWsPackage: (given as any).Server !== undefined || (given as any).WebSocketServer !== undefined };
  const native = (globalThis as any).WebSocket as WebSocketConstructor | undefined;
  if (native) return { impl: native, isWsPackage: false };
  wsPackage ??= (async () => {
    try {
      const name = "ws"; // not a static import: browsers and Node 22+ never load it
      const mod: any = await import(/* @vite-ignore */ /* webpackIgnore: true */ name);
      return (mod.WebSocket ?? mod.default) as WebSocketConstructor;
    } catch {
      return undefined;
    }
  })();
  const ws = await wsPackage;
  if (!ws) {
    throw new GloveboxError(ClientCodes.NoWebSocket, "no WebSocket in this runtime: on Node 20 install the ws package (npm install ws), or pass options.WebSocket");
  }
  return { impl: ws, isWsPackage: true };
}

/**
 * Opens a socket and resolves once it is open. The credential goes in an
 * Authorization header where the implementation can send one (ws, and
 * Node's own WebSocket, which takes headers), and always in the
 * bearer.<credential> subprotocol, which is all a browser can send.
 */
export async function dial(o: DialOptions): Promise<Socket> {
  return open(o, wrap);
}

/** A socket of raw frames: a terminal's (binary both ways, text for control). */
export interface RawSocket {
  sendBytes(data: Uint8Array): boolean;
  sendText(text: string): boolean;
  close(code: number, reason: string): void;
  /** Starts delivering frames and the close. */
  start(onBytes: (data: Uint8Array) => void, onText: (text: string) => void, onClose: (cause: string) => void): void;
}

/** Opens a socket of binary and text frames (a terminal's), as dial opens the session's. */
export async function dialRaw(o: DialOptions): Promise<RawSocket> {
  return open(o, wrapRaw);
}

function wrapRaw(ws: WebSocketLike): RawSocket {
  const decoder = new TextDecoder();
  let closed = false;
  // Frames and the close that come before start (in the handshake's
  // packet) are held until then.
  type Ev = { bytes?: Uint8Array; text?: string; close?: string };
  let held: Ev[] | undefined = [];
  let deliver: (e: Ev) => void = (e) => {
    held?.push(e);
  };
  let errText = "";
  ws.onerror = (ev: any) => {
    errText = ev?.message ?? ev?.error?.message ?? "socket error";
  };
  ws.onmessage = (ev: any) => {
    const d = ev.data;
    if (typeof d === "string") deliver({ text: d });
    else if (d instanceof ArrayBuffer) deliver({ bytes: new Uint8Array(d) });
    else if (ArrayBuffer.isView(d)) deliver({ bytes: new Uint8Array(d.buffer, d.byteOffset, d.byteLength) });
    else deliver({ text: decoder.decode(d) });
  };
  ws.onclose = (ev: any) => {
    if (closed) return;
    closed = true;
    deliver({ close: errText || `closed with code ${ev?.code ?? "?"}${ev?.reason ? ` (${ev.reason})` : ""}` });
  };
  const send = (d: string | Uint8Array) => {
    if (closed || ws.readyState !== 1) return false;
    try {
      ws.send(d);
      return true;
    } catch {
      return false;
    }
  };
  return {
    sendBytes: send,
    sendText: send,
    close(code, reason) {
      try {
        ws.close(code, reason);
      } catch {
        /* already closing */
      }
    },
    start(onBytes, onText, onClose) {
      deliver = (e) => {
        if (e.bytes) onBytes(e.bytes);
        else if (e.text !== undefined) onText(e.text);
        else if (e.close !== undefined) onClose(e.close);
      };
      const early = held ?? [];
      held = undefined;
      for (const e of early) deliver(e);
    },
  };
}

/** Opens a WebSocket and resolves, once it is open, with what adopt makes of it (in the open event itself, before any frame). */
async function open<T>(o: DialOptions, adopt: (ws: WebSocketLike) => T): Promise<T> {
  const { impl, isWsPackage } = await findImpl(o.impl);
  const protocols = [SUBPROTOCOL_V1, SUBPROTOCOL_BEARER_PREFIX + o.credential];
  const auth = { Authorization: "Bearer " + o.credential };
  let ws: WebSocketLike;
  try {
    if (isWsPackage) {
      // No subprotocol: the header is enough, and a v1 box may select none.
      ws = new impl(o.url, [], { headers: auth, handshakeTimeout: o.timeoutMs, maxPayload: o.maxMessageBytes, perMessageDeflate: false });
    } else if (isNode) {
      // Node's WebSocket (undici) takes headers through its init object.
      ws = new impl(o.url, { protocols, headers: auth } as any);
    } else {
      ws = new impl(o.url, protocols);
    }
  } catch (e) {
    throw new GloveboxError(ClientCodes.BadRequest, `open ${redact(o.url)}: ${(e as Error).message}`, { cause: e });
  }
  if ("binaryType" in ws) ws.binaryType = isWsPackage ? "nodebuffer" : "arraybuffer";
  return await new Promise<T>((resolve, reject) => {
    let settled = false;
    const fail = (err: GloveboxError) => {
      if (settled) return;
      settled = true;
      cleanup();
      try {
        ws.onopen = ws.onmessage = ws.onclose = ws.onerror = null;
        if (ws.terminate) ws.terminate();
        else ws.close();
      } catch {
        /* already closed */
      }
      reject(err);
    };
    const timer = setTimeout(() => fail(new GloveboxError(ClientCodes.ConnectionLost, `connect to ${redact(o.url)}: no answer within ${o.timeoutMs}ms`)), o.timeoutMs);
    const onAbort = () => fail(new GloveboxError(ClientCodes.Closed, `connect to ${redact(o.url)}: cancelled`, { cause: o.signal.reason }));
    o.signal.addEventListener("abort", onAbort, { once: true });
    const cleanup = () => {
      clearTimeout(timer);
      o.signal.removeEventListener("abort", onAbort);
    };
    if (o.signal.aborted) return onAbort();
    let errText = "";
    // Some implementations (Node's) fire error without a close when the
    // handshake fails, so either one ends the dial.
    ws.onerror = (ev: any) => {
      errText = ev?.message ?? ev?.error?.message ?? "";
      failed(undefined);
    };
    ws.onclose = (ev: any) => failed(ev);
    const failed = (ev: any) => {
      const m = /Unexpected server response: (\d+)/.exec(errText);
      if (m?.[1] === "401") {
        fail(new GloveboxError(ClientCodes.Unauthorized, `connect to ${redact(o.url)}: the box refused the credential (HTTP 401): check the key or token, its expiry and its connect scope`, { status: 401 }));
        return;
      }
      const why = errText || (ev?.code ? `closed with code ${ev.code}` : "the handshake failed");
      const hint = isWsPackage ? "" : " (the platform WebSocket hides the HTTP status: a wrong or expired key or token is the usual cause)";
      fail(new GloveboxError(ClientCodes.ConnectionLost, `connect to ${redact(o.url)}: ${why}${hint}`, m ? { status: Number(m[1]) } : {}));
    };
    ws.onopen = () => {
      if (settled) return;
      settled = true;
      cleanup();
      ws.onopen = null;
      resolve(adopt(ws));
    };
  });
}

function wrap(ws: WebSocketLike): Socket {
  const decoder = new TextDecoder();
  let closed = false;
  let held: string[] | undefined = [];
  let heldClose: string | undefined;
  let onMessage: (text: string) => void = (t) => held?.push(t);
  let onClose: (cause: string) => void = (c) => (heldClose = c);
  const s: Socket = {
    start(m, c) {
      const early = held ?? [];
      held = undefined;
      onMessage = m;
      onClose = c;
      for (const t of early) m(t);
      if (heldClose !== undefined) c(heldClose);
    },
    send(text) {
      if (closed || ws.readyState !== 1) return false;
      try {
        ws.send(text);
        return true;
      } catch {
        return false;
      }
    },
    sending() {
      return (ws.bufferedAmount ?? 0) > 0;
    },
    close(code, reason) {
      try {
        ws.close(code, reason);
      } catch {
        /* already closing */
      }
    },
    kill() {
      try {
        if (ws.terminate) ws.terminate();
        else ws.close(4000, "keepalive timeout");
      } catch {
        /* already closed */
      }
    },
  };
  let errText = "";
  ws.onerror = (ev: any) => {
    errText = ev?.message ?? ev?.error?.message ?? "socket error";
  };
  ws.onmessage = (ev: any) => {
    const d = ev.data;
    onMessage(typeof d === "string" ? d : decoder.decode(d instanceof ArrayBuffer ? new Uint8Array(d) : d));
  };
  ws.onclose = (ev: any) => {
    if (closed) return;
    closed = true;
    onClose(errText || `closed with code ${ev?.code ?? "?"}${ev?.reason ? ` (${ev.reason})` : ""}`);
  };
  return s;
}

/** The URL without its query (which may carry a resume id) or credentials. */
export function redact(u: string): string {
  try {
    const x = new URL(u);
    x.username = x.password = "";
    x.search = "";
    return x.toString();
  } catch {
    return "<bad url>";
  }
}
