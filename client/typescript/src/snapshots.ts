/**
 * Snapshots (protocol/snapshot.go): a session's directories stored on the
 * box, restored as a new session, or copied into new sessions (fork). A
 * restored or forked session waits, detached, for a client to attach to
 * it (Box.attach) within the box's resume grace.
 */
import { ClientCodes, GloveboxError } from "./errors.js";
import type { ForkResult, RestoreResult, SnapshotInfo, SnapshotList, SnapshotManifest } from "./wire.js";

/** What the snapshot functions need of a Box. */
export interface SnapshotHost {
  name: string;
  send<T>(method: string, route: string, body?: unknown): Promise<T>;
  getJSON<T>(route: string): Promise<T>;
}

/** Options of Box.restore. */
export interface RestoreOptions {
  /** Restore a snapshot of another image (programs built against its store paths may not run). */
  force?: boolean;
}

const SNAPSHOT_ID = /^[0-9a-f]{64}$/;

function checkID(id: string): void {
  if (!SNAPSHOT_ID.test(id)) throw new GloveboxError(ClientCodes.BadRequest, `snapshot ${JSON.stringify(id)}: a snapshot id is 64 hex digits`);
}

function checkSession(h: SnapshotHost, id: string): void {
  if (id === "") throw new GloveboxError(ClientCodes.BadRequest, `box ${JSON.stringify(h.name)}: no session (send a prompt first, or name one)`);
}

/** POST /sessions/{id}/snapshot. */
export function snapshotSession(h: SnapshotHost, session: string): Promise<SnapshotInfo> {
  checkSession(h, session);
  return h.send<SnapshotInfo>("POST", `sessions/${encodeURIComponent(session)}/snapshot`);
}

/** GET /snapshots. */
export function listSnapshots(h: SnapshotHost): Promise<SnapshotList> {
  return h.getJSON<SnapshotList>("snapshots");
}

/** GET /snapshots/{id}. */
export function snapshotManifest(h: SnapshotHost, id: string): Promise<SnapshotManifest> {
  checkID(id);
  return h.getJSON<SnapshotManifest>(`snapshots/${id}`);
}

/** DELETE /snapshots/{id}. */
export async function deleteSnapshot(h: SnapshotHost, id: string): Promise<void> {
  checkID(id);
  await h.send<void>("DELETE", `snapshots/${id}`);
}

/** POST /snapshots/{id}/restore. */
export function restoreSnapshot(h: SnapshotHost, id: string, opts: RestoreOptions = {}): Promise<RestoreResult> {
  checkID(id);
  return h.send<RestoreResult>("POST", `snapshots/${id}/restore`, { force: !!opts.force });
}

/** POST /sessions/{id}/fork. */
export function forkSession(h: SnapshotHost, session: string, count: number): Promise<ForkResult> {
  checkSession(h, session);
  if (!Number.isInteger(count) || count < 1 || count > 16) {
    throw new GloveboxError(ClientCodes.BadRequest, `fork: count ${count}: ask for 1 to 16 sessions`);
  }
  return h.send<ForkResult>("POST", `sessions/${encodeURIComponent(session)}/fork`, { count });
}
