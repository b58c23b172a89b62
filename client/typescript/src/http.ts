import { decodeBase64 } from "./base64.js";
import type { BoxSettings } from "./client.js";
import { origin, type Endpoint } from "./endpoint.js";
import { ClientCodes, closedError, GloveboxError } from "./errors.js";
import type { ReadOptions } from "./result.js";
import { anySignal } from "./signals.js";
import { redact } from "./socket.js";
import type { FileRef } from "./wire.js";

/**
 * A box's HTTP side: the credential every connection and request sends,
 * its JSON routes and the files it returns. Box holds one and keeps the
 * WebSocket session.
 */
export class BoxHTTP {
  readonly #name: string;
  readonly #ep: Endpoint;
  readonly #base: URL;
  readonly #s: BoxSettings;
  readonly #life: AbortSignal;
  readonly #closed: () => boolean;

  /** life aborts every request when the box closes; closed says whether it did. */
  constructor(name: string, ep: Endpoint, base: URL, s: BoxSettings, life: AbortSignal, closed: () => boolean) {
    this.#name = name;
    this.#ep = ep;
    this.#base = base;
    this.#s = s;
    this.#life = life;
    this.#closed = closed;
  }

  /** The credential to send: the key, the token, or a fresh one from the token function. */
  async credential(): Promise<string> {
    const t = this.#ep.token;
    if (t === undefined) return this.#ep.key ?? "";
    if (typeof t === "string") return t;
    let tok: unknown;
    try {
      tok = await t();
    } catch (e) {
      throw new GloveboxError(ClientCodes.Unauthorized, `box ${JSON.stringify(this.#name)}: the token function failed: ${(e as Error)?.message ?? String(e)}`, { cause: e });
    }
    if (typeof tok !== "string" || tok === "") {
      throw new GloveboxError(ClientCodes.Unauthorized, `box ${JSON.stringify(this.#name)}: the token function returned ${tok === "" ? "an empty string" : typeof tok}, want a token string`);
    }
    return tok;
  }

  /** An HTTP route of the box, resolved against its URL with its path prefix. */
  route(name: string): URL {
    return new URL(name, this.#base);
  }

  /** GETs a JSON route of the box, with the credential when auth. */
  async getJSON<T>(route: string, auth: boolean): Promise<T> {
    const u = this.route(route);
    const headers: Record<string, string> = {};
    if (auth) headers.Authorization = "Bearer " + (await this.credential());
    const resp = await this.#fetch(u, headers, undefined, `get ${route}`, true);
    const text = await resp.text();
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new GloveboxError(ClientCodes.HTTP, `box ${JSON.stringify(this.#name)}: ${route} is not the JSON expected: ${(e as Error).message}`, { status: resp.status });
    }
  }

  /**
   * Sends a request to the box with the credential and answers its
   * response, whatever its status. timeout bounds small JSON requests;
   * streams are bounded by signal only.
   */
  async request(method: string, u: URL, what: string, init: { body?: BodyInit | null; headers?: Record<string, string>; signal?: AbortSignal; timeout?: boolean } = {}): Promise<Response> {
    const signals = [this.#life];
    if (init.timeout) signals.push(AbortSignal.timeout(this.#s.requestTimeoutMs));
    if (init.signal) signals.push(init.signal);
    const headers = { ...(init.headers ?? {}), Authorization: "Bearer " + (await this.credential()) };
    const req: RequestInit & { duplex?: string } = { method, headers, signal: anySignal(signals), cache: "no-store", credentials: "omit", redirect: "error" };
    if (init.body !== undefined && init.body !== null) {
      req.body = init.body;
      if (typeof ReadableStream !== "undefined" && init.body instanceof ReadableStream) req.duplex = "half";
    }
    try {
      return await this.#s.fetch(u.toString(), req);
    } catch (e) {
      if (this.#closed()) throw closedError(this.#name);
      throw new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.#name)}: ${what} at ${redact(u.toString())}: ${(e as Error).message}`, { cause: e });
    }
  }

  /** The error for an answer of another status than expected. */
  async statusError(resp: Response, u: URL, what: string): Promise<GloveboxError> {
    const snippet = (await resp.text().catch(() => "")).slice(0, 300).trim();
    if (resp.status === 401) {
      return new GloveboxError(ClientCodes.Unauthorized, `box ${JSON.stringify(this.#name)}: ${what}: the box refused the credential (HTTP 401): check the key or token, its expiry and its scopes`, { status: 401 });
    }
    return new GloveboxError(ClientCodes.HTTP, `box ${JSON.stringify(this.#name)}: ${what} at ${redact(u.toString())}: HTTP ${resp.status}${snippet ? `: ${snippet}` : ""}`, { status: resp.status });
  }

  /**
   * Sends method to a route of the box with the credential and a JSON
   * body (if any), expecting status ok: the decoded answer, or undefined
   * for an empty one (204).
   */
  async callJSON<T>(method: string, route: string, body: unknown, ok: number): Promise<T | undefined> {
    return this.call<T | undefined>(method, route, body === undefined ? undefined : JSON.stringify(body), ok);
  }

  /**
   * Sends method to a JSON route of the box with the credential and body
   * as JSON; resolves the answer's JSON (undefined for 204); any 2xx
   * status is success.
   */
  async send<T>(method: string, route: string, body?: unknown): Promise<T> {
    return this.call<T>(method, route, body === undefined ? undefined : JSON.stringify(body), 0);
  }

  /**
   * Sends a request with the credential to a route and returns its JSON
   * answer (undefined for 204); any status but want is an error.
   */
  async call<T>(method: string, route: string, body: BodyInit | undefined, want: number, signal?: AbortSignal): Promise<T> {
    const u = this.route(route);
    const headers: Record<string, string> = { Authorization: "Bearer " + (await this.credential()) };
    if (typeof body === "string") headers["Content-Type"] = "application/json";
    const resp = await this.#fetch(u, headers, signal, `${method.toLowerCase()} ${route}`, !signal, { method, body, want });
    if (resp.status === 204) return undefined as T;
    const text = await resp.text();
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new GloveboxError(ClientCodes.HTTP, `box ${JSON.stringify(this.#name)}: ${route} is not the JSON expected: ${(e as Error).message}`, { status: resp.status });
    }
  }

  /** GETs a route that answers one JSON document a line, and yields each until it ends or signal does. */
  async *lines<T>(route: string, signal?: AbortSignal): AsyncGenerator<T> {
    const u = this.route(route);
    const resp = await this.#fetch(u, { Authorization: "Bearer " + (await this.credential()) }, signal, `get ${route}`);
    if (!resp.body) return;
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let i: number;
        while ((i = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.trim() !== "") yield JSON.parse(line) as T;
        }
      }
      if (buf.trim() !== "") yield JSON.parse(buf) as T;
    } finally {
      reader.cancel().catch(() => undefined);
    }
  }

  /** GETs u. timeout bounds JSON routes; a file read is bounded by its signal only, as it may be large. */
  async #fetch(
    u: URL,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
    what: string,
    timeout = false,
    req: { method: string; body: BodyInit | undefined; want: number } = { method: "GET", body: undefined, want: 200 },
  ): Promise<Response> {
    const signals = [this.#life];
    if (timeout) signals.push(AbortSignal.timeout(this.#s.requestTimeoutMs));
    if (signal) signals.push(signal);
    let resp: Response;
    try {
      const init: RequestInit & { duplex?: string } = { method: req.method, headers, signal: anySignal(signals), cache: "no-store", credentials: "omit", redirect: "error" };
      if (req.body !== undefined) {
        init.body = req.body;
        if (typeof ReadableStream !== "undefined" && req.body instanceof ReadableStream) init.duplex = "half";
      }
      resp = await this.#s.fetch(u.toString(), init);
    } catch (e) {
      if (this.#closed()) throw closedError(this.#name);
      throw new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(this.#name)}: ${what} at ${redact(u.toString())}: ${(e as Error).message}`, { cause: e });
    }
    // want 0 takes any 2xx.
    if (resp.status === req.want || (req.want === 0 && resp.status >= 200 && resp.status < 300)) return resp;
    const snippet = (await resp.text().catch(() => "")).slice(0, 200).trim();
    if (resp.status === 401) {
      throw new GloveboxError(ClientCodes.Unauthorized, `box ${JSON.stringify(this.#name)}: ${what}: the box refused the credential (HTTP 401): check the key or token, its expiry and its scopes`, { status: 401 });
    }
    const gone = resp.status === 410 ? ": the file expired on the box or was consumed" : "";
    throw new GloveboxError(ClientCodes.HTTP, `box ${JSON.stringify(this.#name)}: ${what} at ${redact(u.toString())}: HTTP ${resp.status}${gone}${snippet ? `: ${snippet}` : ""}`, { status: resp.status });
  }

  /** Reads a FileRef the box returned (see Box.open). */
  async open(ref: FileRef, opts: ReadOptions): Promise<Uint8Array> {
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
        const resp = await this.#fetch(u, { Authorization: "Bearer " + (await this.credential()) }, opts.signal, `read ${name}`);
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
}
