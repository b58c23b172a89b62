import { ClientCodes, GloveboxError } from "./errors.js";
import { redact } from "./socket.js";

/** Where a box listens and the credential it accepts. */
export interface Endpoint {
  /** The box's WebSocket URL (ws:, wss:; http: and https: mean the same). HTTP routes resolve against it, path prefix kept. */
  url: string;
  /** The box key (GLOVEBOX_KEY). Servers only: a browser must use a token. */
  key?: string;
  /** A token minted from the key (gbx token, protocol.MintToken), or a function that returns a fresh one; asked again on every connection and request. */
  token?: string | (() => string | Promise<string>);
}

/**
 * The box's WebSocket URL and the base its HTTP routes resolve against,
 * from the URL a caller gave (ws:, wss:, http: or https:, without
 * credentials).
 */
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

/** The origin of u, ws: and wss: counted as http: and https:, with its port. */
export function origin(u: URL): string {
  const port = u.port || (u.protocol === "https:" || u.protocol === "wss:" ? "443" : "80");
  const scheme = u.protocol === "wss:" ? "https:" : u.protocol === "ws:" ? "http:" : u.protocol;
  return `${scheme}//${u.hostname.toLowerCase()}:${port}`;
}
