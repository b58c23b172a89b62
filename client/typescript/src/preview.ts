/**
 * Preview ports: a port a session's process listens on, served by the box
 * at https://<link id>.<preview domain>/ to whoever holds the link
 * (capability "preview"). POST /sessions/{id}/previews mints a link, GET
 * lists a session's links, DELETE /sessions/{id}/previews/{link} revokes
 * one (it answers 410 Gone from then on). A browser opens Preview.url,
 * which trades the link for a cookie of the preview's host; an API client
 * sends "Authorization: Bearer " + Preview.link to the URL's origin.
 */
import { ClientCodes, GloveboxError } from "./errors.js";
import type { Preview, PreviewList, PreviewRequest } from "./wire.js";

/** Options of Box.preview. */
export interface PreviewOptions {
  /** The session whose port to preview; the Box's own by default. */
  session?: string;
  /** How long the link works, as the box reads durations ("30m", "1h", "7d"); the box's default (1h) when absent. */
  ttl?: string;
}

/** What the preview functions need of a Box. */
export interface PreviewHost {
  name: string;
  /** The Box's session id, "" before its first connection. */
  session: string;
  callJSON<T>(method: string, route: string, body: unknown, ok: number): Promise<T | undefined>;
}

function sessionRoute(box: PreviewHost, session: string | undefined): string {
  const id = session || box.session;
  if (!id) {
    throw new GloveboxError(ClientCodes.BadRequest, `box ${JSON.stringify(box.name)}: no session yet: connect (send a prompt) first, or name a session`);
  }
  return `sessions/${encodeURIComponent(id)}/previews`;
}

/** Mints a link to port (POST /sessions/{id}/previews). */
export async function mintPreview(box: PreviewHost, port: number, opts: PreviewOptions = {}): Promise<Preview> {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new GloveboxError(ClientCodes.BadRequest, `preview port ${port}: want a TCP port from 1 to 65535`);
  }
  const body: PreviewRequest = { port };
  if (opts.ttl) body.ttl = opts.ttl;
  return (await box.callJSON<Preview>("POST", sessionRoute(box, opts.session), body, 201))!;
}

/** Lists a session's live links, without their credentials. */
export async function listPreviews(box: PreviewHost, session?: string): Promise<Preview[]> {
  const l = await box.callJSON<PreviewList>("GET", sessionRoute(box, session), undefined, 200);
  return l?.previews ?? [];
}

/** Revokes a link: it answers 410 Gone from then on. */
export async function revokePreview(box: PreviewHost, id: string, session?: string): Promise<void> {
  if (!/^[a-z0-9]{8,32}$/.test(id)) {
    throw new GloveboxError(ClientCodes.BadRequest, `preview link id ${JSON.stringify(id)}: want the id previews() lists`);
  }
  await box.callJSON("DELETE", `${sessionRoute(box, session)}/${id}`, undefined, 204);
}
