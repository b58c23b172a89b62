import { encodeBase64 } from "./base64.js";
import { ClientCodes, GloveboxError } from "./errors.js";
import type { FileRef, OutputsOverride } from "./wire.js";

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

/** An input file given by its bytes. mime defaults to a guess from the name. */
export interface InputFile {
  mime?: string;
  bytes: Uint8Array | ArrayBuffer | Blob | string;
}

/** The prompt frame's inputs: opts.inputs as they are, opts.files inline; undefined when there are none. */
export async function buildInputs(opts: PromptOptions): Promise<Record<string, FileRef> | undefined> {
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
export function utf8Length(s: string): number {
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

/** The MIME type of a file name, by its extension; application/octet-stream for one it does not know. */
export function guessMime(name: string): string {
  const i = name.lastIndexOf(".");
  return (i >= 0 && mimeTypes[name.slice(i).toLowerCase()]) || "application/octet-stream";
}
