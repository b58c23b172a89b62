/**
 * A session's files on a box (/sessions/{id}/fs; capability "fs"): its
 * work, input and output directories, read, written and watched as the
 * session. Paths are as the session knows them, "work/notes.txt", and
 * checked here (parseFsPath, the same rules as protocol.ParseFSPath)
 * before they are sent. Box.fs(sessionId) returns one.
 */
import { ClientCodes, GloveboxError } from "./errors.js";
import type { BoxHTTP } from "./http.js";
import type { FsEntry, FsEvent, FsList } from "./wire.js";

/** The roots a file path starts with. */
export const FS_ROOTS = ["work", "input", "output"] as const;

const MAX_PATH = 4096;
const MAX_NAME = 255;
const enc = new TextEncoder();

/**
 * Splits a session file path, "work/a/b.txt", into its root and the path
 * beneath it ("" for the root). Throws a BadRequest GloveboxError for
 * anything odd: an unknown root, empty, "." or ".." names, backslashes,
 * control characters, names over 255 or paths over 4096 bytes.
 */
export function parseFsPath(p: string): { root: string; rel: string } {
  const bad = (rule: string) => new GloveboxError(ClientCodes.BadRequest, `file path ${JSON.stringify(p.slice(0, 100))}: ${rule}`);
  const i = p.indexOf("/");
  const root = i < 0 ? p : p.slice(0, i);
  let rel = i < 0 ? "" : p.slice(i + 1);
  if (!(FS_ROOTS as readonly string[]).includes(root)) {
    throw bad(`want one of the session's directories first: ${FS_ROOTS.join(", ")}, as in "work/notes.txt"`);
  }
  if (rel.endsWith("/")) rel = rel.slice(0, -1);
  if (enc.encode(rel).length > MAX_PATH) throw bad(`longer than ${MAX_PATH} bytes`);
  if (rel === "") return { root, rel };
  for (const name of rel.split("/")) {
    if (name === "") throw bad("an empty name (two slashes, or a leading one)");
    if (name === "." || name === "..") throw bad(`a ${JSON.stringify(name)} name: give the path from the ${root} directory down, without . or ..`);
    if (enc.encode(name).length > MAX_NAME) throw bad(`a name longer than ${MAX_NAME} bytes`);
  }
  for (const ch of rel) {
    const c = ch.codePointAt(0)!;
    if (ch === "\\") throw bad("a backslash: separate names with /");
    if (c < 0x20 || c === 0x7f) throw bad(`the control character U+${c.toString(16).toUpperCase().padStart(4, "0")}`);
    if (c >= 0xd800 && c <= 0xdfff) throw bad("not valid UTF-8");
  }
  return { root, rel };
}

/** Options every call takes. */
export interface FsCallOptions {
  signal?: AbortSignal;
}

/** A listing page's options. */
export interface FsListOptions extends FsCallOptions {
  /** The most entries a page holds; the box's default is 1,000, its most 10,000. */
  limit?: number;
  /** A previous page's next. */
  after?: string;
}

/** What write sends, and how. */
export interface FsWriteOptions extends FsCallOptions {
  /** Add to the end of the file (made if missing) instead of replacing it. */
  append?: boolean;
  /** Make missing directories on the way. */
  parents?: boolean;
}

/** A part of a file to read. */
export interface FsReadOptions extends FsCallOptions {
  offset?: number;
  /** At most this many bytes; undefined reads to the end. */
  length?: number;
}

/** A session's files; see Box.fs. */
export class SessionFiles {
  readonly #http: BoxHTTP;
  readonly #session: () => string;
  readonly #box: string;

  constructor(http: BoxHTTP, session: () => string, box: string) {
    this.#http = http;
    this.#session = session;
    this.#box = box;
  }

  #url(path: string, query: Record<string, string> = {}): URL {
    const s = this.#session();
    if (!s) throw new GloveboxError(ClientCodes.BadRequest, `box ${JSON.stringify(this.#box)}: files: no session given, and this Box has none yet`);
    let name = `sessions/${encodeURIComponent(s)}/fs`;
    if (path !== "") {
      const { root, rel } = parseFsPath(path);
      name += "/" + root;
      if (rel !== "") name += "/" + rel.split("/").map(encodeURIComponent).join("/");
    }
    const u = this.#http.route(name);
    for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
    return u;
  }

  async #call(method: string, u: URL, what: string, ok: number[], init: { body?: BodyInit; signal?: AbortSignal; headers?: Record<string, string>; timeout?: boolean }): Promise<Response> {
    const resp = await this.#http.request(method, u, what, init);
    if (!ok.includes(resp.status)) throw await this.#http.statusError(resp, u, what);
    return resp;
  }

  async #json<T>(method: string, path: string, query: Record<string, string>, what: string, ok: number[], opts: FsCallOptions, body?: string): Promise<T> {
    const u = this.#url(path, query);
    const resp = await this.#call(method, u, what, ok, { body, signal: opts.signal, timeout: true, headers: body ? { "Content-Type": "application/json" } : {} });
    const text = await resp.text();
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new GloveboxError(ClientCodes.HTTP, `box ${JSON.stringify(this.#box)}: ${what}: the answer is not the JSON expected: ${(e as Error).message}`, { status: resp.status });
    }
  }

  /** One page of a directory's entries, in the directory's order; "" lists the session's roots. */
  list(path = "", opts: FsListOptions = {}): Promise<FsList> {
    const q: Record<string, string> = {};
    if (opts.limit) q.limit = String(opts.limit);
    if (opts.after) q.after = opts.after;
    return this.#json<FsList>("GET", path, q, `list ${path}`, [200], opts);
  }

  /** Every entry of a directory, page by page. */
  async *listAll(path = "", opts: FsCallOptions = {}): AsyncGenerator<FsEntry> {
    let after: string | undefined;
    for (;;) {
      const l = await this.list(path, { limit: 10000, after, signal: opts.signal });
      yield* l.entries;
      if (!l.next) return;
      after = l.next;
    }
  }

  /** One entry; a symbolic link is described, not followed. */
  stat(path: string, opts: FsCallOptions = {}): Promise<FsEntry> {
    return this.#json<FsEntry>("GET", path, { stat: "1" }, `stat ${path}`, [200], opts);
  }

  /** A file's bytes, or a part of them, as a stream. */
  async readStream(path: string, opts: FsReadOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const { rel } = parseFsPath(path);
    if (rel === "") throw new GloveboxError(ClientCodes.BadRequest, `read ${path}: a session's directory: list it`);
    const headers: Record<string, string> = {};
    let ok = [200];
    const off = opts.offset ?? 0;
    if (off > 0 || opts.length !== undefined) {
      if (opts.length === 0) return new Blob([]).stream();
      headers.Range = `bytes=${off}-${opts.length !== undefined ? off + opts.length - 1 : ""}`;
      ok = [206];
    }
    const u = this.#url(path);
    const resp = await this.#call("GET", u, `read ${path}`, ok, { headers, signal: opts.signal });
    if (resp.headers.get("Content-Type") === "application/json") {
      await resp.body?.cancel();
      throw new GloveboxError(ClientCodes.BadRequest, `read ${path}: a directory: list it`);
    }
    return resp.body ?? new Blob([]).stream();
  }

  /** A file's bytes, or a part of them. */
  async read(path: string, opts: FsReadOptions = {}): Promise<Uint8Array> {
    const s = await this.readStream(path, opts);
    return new Uint8Array(await new Response(s).arrayBuffer());
  }

  /**
   * Writes a file: into a temporary file beside it, renamed over it once
   * whole (or appended). A ReadableStream is streamed; answers the file's entry.
   */
  async write(path: string, data: Uint8Array | string | Blob | ReadableStream<Uint8Array>, opts: FsWriteOptions = {}): Promise<FsEntry> {
    const q: Record<string, string> = {};
    if (opts.append) q.append = "1";
    if (opts.parents) q.parents = "1";
    const u = this.#url(path, q);
    const resp = await this.#call("PUT", u, `write ${path}`, [201], { body: data as BodyInit, signal: opts.signal, headers: { "Content-Type": "application/octet-stream" } });
    return (await resp.json()) as FsEntry;
  }

  /** Makes a directory; with parents, missing ones too, and an existing one is no error. */
  mkdir(path: string, opts: FsCallOptions & { parents?: boolean } = {}): Promise<FsEntry> {
    return this.#json<FsEntry>("POST", path, { op: "mkdir" }, `mkdir ${path}`, [200, 201], opts, JSON.stringify(opts.parents ? { parents: true } : {}));
  }

  /** Renames a file or directory within a root; across roots (other mounts) a file is copied, then removed. A file at to is replaced. */
  move(from: string, to: string, opts: FsCallOptions = {}): Promise<FsEntry> {
    parseFsPath(to);
    return this.#json<FsEntry>("POST", from, { op: "move" }, `move ${from}`, [200], opts, JSON.stringify({ to }));
  }

  /** Deletes a file, a link or an empty directory; with recursive, a whole tree. */
  async remove(path: string, opts: FsCallOptions & { recursive?: boolean } = {}): Promise<void> {
    const u = this.#url(path, opts.recursive ? { recursive: "1" } : {});
    await this.#call("DELETE", u, `remove ${path}`, [204], { signal: opts.signal, timeout: true });
  }

  /**
   * Watches a directory, recursively: resolves once the box watches, with
   * the events (created, written, removed, renamed; lost when some were
   * dropped) until signal aborts, the session ends or the directory goes.
   */
  async watch(path = "work", opts: FsCallOptions = {}): Promise<AsyncIterable<FsEvent>> {
    const u = this.#url(path, { watch: "1" });
    const resp = await this.#call("GET", u, `watch ${path}`, [200], { signal: opts.signal });
    const body = resp.body;
    return {
      async *[Symbol.asyncIterator]() {
        if (!body) return;
        const reader = body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        try {
          for (;;) {
            let r: ReadableStreamReadResult<string>;
            try {
              r = await reader.read();
            } catch (e) {
              if (opts.signal?.aborted) return;
              throw e;
            }
            if (r.done) return;
            buf += r.value;
            let nl: number;
            while ((nl = buf.indexOf("\n")) >= 0) {
              const line = buf.slice(0, nl);
              buf = buf.slice(nl + 1);
              if (line.trim() !== "") yield JSON.parse(line) as FsEvent;
            }
            if (buf.length > 1 << 20) throw new GloveboxError(ClientCodes.HTTP, `watch ${path}: a line over 1 MiB`);
          }
        } finally {
          reader.cancel().catch(() => undefined);
        }
      },
    };
  }
}
