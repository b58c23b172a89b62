import { decodeBase64 } from "./base64.js";
import type { ProcessOutput } from "./wire.js";

/** Which page of a process's output to read (Box.processOutput, Box.followProcessOutput). */
export interface OutputOptions {
  /** stderr; else stdout. */
  stderr?: boolean;
  /** The absolute byte offset to start at; default 0 (the oldest byte the box holds). */
  offset?: number;
  /** Bytes at most per page; default the box's (64 KiB). */
  limit?: number;
  signal?: AbortSignal;
}

/** A page of a process's output with its bytes decoded. */
export interface OutputPage extends ProcessOutput {
  bytes: Uint8Array;
}

/** The route and query of a page (or, with follow, the stream) of a process's output. */
export function outputRoute(base: string, o: OutputOptions, follow: boolean): string {
  const q = new URLSearchParams({ stream: o.stderr ? "stderr" : "stdout", offset: String(o.offset ?? 0) });
  if (o.limit) q.set("limit", String(o.limit));
  if (follow) q.set("follow", "1");
  return `${base}/output?${q}`;
}

export function decodePage(p: ProcessOutput): OutputPage {
  return { ...p, bytes: decodeBase64(p.data) };
}

/** Checks an id the box gave, for a route. */
export function routeId(id: string): string {
  if (!id || /[/?#%]/.test(id) || id === "." || id === "..") throw new TypeError(`id ${JSON.stringify(id)}: want an id the box gave`);
  return id;
}
