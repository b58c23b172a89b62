/**
 * Run records: a box signs a record of every prompt it runs (GET
 * /runs/{prompt}, GET /runs?session=ID). These functions verify them as
 * protocol/runrecord.go describes: each field's SHA-256 of its canonical
 * JSON against the signed digests, the ed25519 signature (WebCrypto), and
 * the chain of a session's records. They need crypto.subtle with Ed25519
 * (Node 20+, current browsers).
 */
import { decodeBase64 } from "./base64.js";
import { ClientCodes, GloveboxError } from "./errors.js";
import type { Environment, RunChain, SignedRun } from "./wire.js";

/** The prefix of the signed bytes (protocol.RunSignContext). */
export const RUN_SIGN_CONTEXT = "glovebox run record v1\n";

/** Why a record or a chain failed verification. */
export class RunVerifyError extends Error {
  /** The fields whose values no longer match their signed digests. */
  readonly fields: string[];
  /** For a chain: the record's position, from 1, where it broke. */
  readonly at: number | undefined;
  constructor(message: string, fields: string[] = [], at?: number) {
    super(message);
    this.name = "RunVerifyError";
    this.fields = fields;
    this.at = at;
  }
}

/** Compares strings by code point, which is UTF-8 byte order (Go's). */
function byCodePoint(a: string, b: string): number {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i]!.codePointAt(0)! - y[i]!.codePointAt(0)!;
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

/** The canonical encoding of a JSON value: keys sorted, no whitespace. */
export function canonicalJSON(v: unknown): string {
  if (Array.isArray(v)) return "[" + v.map(canonicalJSON).join(",") + "]";
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return "{" + Object.keys(o).sort(byCodePoint).map((k) => JSON.stringify(k) + ":" + canonicalJSON(o[k])).join(",") + "}";
  }
  return JSON.stringify(v);
}

const enc = new TextEncoder();

async function sha256Hex(s: string): Promise<string> {
  const d = new Uint8Array(await crypto.subtle.digest("SHA-256", enc.encode(s)));
  return Array.from(d, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Each field's digest, as the box computed them when it signed. */
async function fieldDigests(record: Record<string, unknown>): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(record)) {
    if ((k === "inputs" || k === "outputs") && v !== null && typeof v === "object" && !Array.isArray(v)) {
      for (const [name, mv] of Object.entries(v)) out[k + "/" + name] = await sha256Hex(canonicalJSON(mv));
    } else if (k === "egress" && Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) out[k + "/" + i] = await sha256Hex(canonicalJSON(v[i]));
    } else {
      out[k] = await sha256Hex(canonicalJSON(v));
    }
  }
  return out;
}

/**
 * Verifies one record against the box's run record key (runs.public_key
 * of its manifest, standard base64). Throws a RunVerifyError that names
 * the changed fields, or says the key is another box's.
 */
export async function verifyRun(s: SignedRun, publicKey: string): Promise<void> {
  const who = `run record ${s.record?.seq} (prompt ${JSON.stringify(s.record?.prompt)})`;
  const digests = s.digests ?? {};
  const signed = canonicalJSON(digests);
  let ok = false;
  try {
    const key = await crypto.subtle.importKey("raw", new Uint8Array(decodeBase64(publicKey)), { name: "Ed25519" }, false, ["verify"]);
    ok = await crypto.subtle.verify({ name: "Ed25519" }, key, new Uint8Array(decodeBase64(s.signature)), enc.encode(RUN_SIGN_CONTEXT + signed));
  } catch (e) {
    throw new RunVerifyError(`${who}: the key or the signature is not ed25519: ${(e as Error).message}`);
  }
  if (!ok) {
    if (s.public_key !== publicKey) {
      throw new RunVerifyError(`${who}: signed with another key (${s.public_key}) than the box's (${publicKey}): the record comes from another box, or the manifest is another box's`);
    }
    throw new RunVerifyError(`${who}: the signature does not match the field digests: the digests were changed`);
  }
  if (s.digest !== (await sha256Hex(signed))) {
    throw new RunVerifyError(`${who}: field digest was changed: it is not the SHA-256 of the signed field digests`, ["digest"]);
  }
  const got = await fieldDigests(s.record as unknown as Record<string, unknown>);
  const fields = new Set<string>();
  for (const [k, d] of Object.entries(digests)) if (got[k] !== d) fields.add(k);
  for (const k of Object.keys(got)) if (!(k in digests)) fields.add(k);
  if (fields.size > 0) {
    const list = [...fields].sort(byCodePoint);
    throw new RunVerifyError(`${who}: changed after signing: ${list.join(", ")} (the value does not match its signed digest, or the field was added or removed)`, list);
  }
}

/** The prev of a session's first record (protocol.RunChainStart). */
export function runChainStart(session: string): Promise<string> {
  return sha256Hex("glovebox run chain v1\u0000" + session);
}

/**
 * Verifies a session's records, in order from its first: each record, one
 * session, seq 1, 2, 3... and each prev the digest of the record before.
 * Throws a RunVerifyError whose `at` says where the chain broke.
 */
export async function verifyRunChain(records: SignedRun[], publicKey: string): Promise<void> {
  let session = "";
  let prev = "";
  let prevSeq = 0;
  for (let i = 0; i < records.length; i++) {
    const s = records[i]!;
    await verifyRun(s, publicKey);
    const r = s.record;
    const at = i + 1;
    if (i === 0) {
      session = r.session;
      prev = await runChainStart(session);
    }
    const broken = (problem: string) => new RunVerifyError(`run chain broken at record ${at}: ${problem}`, [], at);
    if (r.session !== session) throw broken(`it belongs to session ${JSON.stringify(r.session)}, the chain to ${JSON.stringify(session)}`);
    if (r.prev !== prev) {
      if (i === 0) throw broken(`it is seq ${r.seq} and does not start the session: the records before it are missing`);
      if (r.seq <= prevSeq) throw broken(`seq ${r.seq} comes after seq ${prevSeq}: the records are out of order`);
      throw broken(`seq ${r.seq} does not name record ${i} (seq ${prevSeq}) as its previous one: a record between them is missing or was replaced`);
    }
    if (r.seq !== prevSeq + 1) throw broken(`seq ${r.seq} follows seq ${prevSeq}`);
    prev = s.digest;
    prevSeq = r.seq;
  }
}

/** What fetching a run record takes of a Box. */
export interface RunHost {
  name: string;
  /** The Box's session id, "" before its first connection. */
  session: string;
  environment(): Promise<Environment>;
  /** GET a route of the box with its credential, decoded. */
  getJSON(route: string): Promise<unknown>;
}

/** Options of Box.run and Box.runChain. */
export interface RunOptions {
  /** The session whose records to read; the Box's own by default. */
  session?: string;
  /** runs.public_key of the box's manifest; the one /environment reports by default. */
  publicKey?: string;
  signal?: AbortSignal;
}

/** Fetches and verifies the record of a prompt (GET /runs/{prompt}). */
export async function fetchRun(box: RunHost, prompt: string, opts: RunOptions): Promise<SignedRun> {
  const { key, body } = await fetchRuns(box, `runs/${encodeURIComponent(prompt)}`, opts);
  const s = body as SignedRun;
  await verifyRun(s, key);
  return s;
}

/** Fetches and verifies a session's chain of records (GET /runs?session=ID). */
export async function fetchRunChain(box: RunHost, opts: RunOptions): Promise<SignedRun[]> {
  const { key, body } = await fetchRuns(box, "runs", opts);
  const c = body as RunChain;
  await verifyRunChain(c.records, key);
  return c.records;
}

async function fetchRuns(box: RunHost, route: string, opts: RunOptions): Promise<{ key: string; body: unknown }> {
  let key = opts.publicKey;
  if (!key) {
    key = (await box.environment()).runs?.public_key;
    if (!key) throw new GloveboxError(ClientCodes.HTTP, `box ${JSON.stringify(box.name)} keeps no run records (its /environment has no runs.public_key)`);
  }
  const session = opts.session || box.session;
  const body = await box.getJSON(session ? `${route}?session=${encodeURIComponent(session)}` : route);
  return { key, body };
}
