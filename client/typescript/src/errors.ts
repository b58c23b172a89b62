import type { FileRef } from "./wire.js";

/**
 * Codes of failures the client itself detects. Failures the box reports
 * carry the box's code instead (see ERROR_CODES in wire.ts: AbortError,
 * TimeoutError, AgentError, ...; from a v1 box, the name of the error it threw).
 */
export const ClientCodes = {
  /** The client or box was closed while the call was under way. */
  Closed: "Closed",
  /** The socket dropped and the session could not be resumed. */
  ConnectionLost: "ConnectionLost",
  /** The box refused the key or token (HTTP 401). */
  Unauthorized: "Unauthorized",
  /** The prompt's unread events outgrew eventBufferBytes; it was aborted. */
  BufferFull: "BufferFull",
  /** read() named an output the prompt did not return. */
  NoOutput: "NoOutput",
  /** A server ref points off the box's origin; the credential is not sent there. */
  ForeignOrigin: "ForeignOrigin",
  /** An HTTP route answered with a status other than 200 (see status). */
  HTTP: "HTTPError",
  /** The prompt message is over maxMessageBytes. */
  TooLarge: "TooLarge",
  /** Bad options or arguments, found before anything was sent. */
  BadRequest: "BadRequest",
  /** The platform has no usable WebSocket (Node 20 without the ws package). */
  NoWebSocket: "NoWebSocket",
} as const;

/** A prompt's successful end: the final message and the output files by name. */
export interface Completion {
  message: string;
  outputs: Record<string, FileRef>;
}

/**
 * Every error this package rejects with. `code` is the box's error code for
 * failures the box reported (`fromBox` true), or one of ClientCodes.
 */
export class GloveboxError extends Error {
  override name = "GloveboxError";
  readonly code: string;
  readonly fromBox: boolean;
  /** The HTTP status, for Unauthorized and HTTPError. */
  readonly status?: number;
  /** The prompt's completion, for an exec exit turned into an error (execExitAsError). */
  completion?: Completion;

  constructor(code: string, message: string, opts: { fromBox?: boolean; status?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    this.fromBox = opts.fromBox ?? false;
    if (opts.status !== undefined) this.status = opts.status;
  }
}

export function isGloveboxError(e: unknown, code?: string): e is GloveboxError {
  return e instanceof GloveboxError && (code === undefined || e.code === code);
}

/** The error of anything asked of a box after close(). */
export function closedError(name: string): GloveboxError {
  return new GloveboxError(ClientCodes.Closed, `box ${JSON.stringify(name)}: closed`);
}

/** e as a GloveboxError: itself when it is one, else wrapped with what failed. */
export function asError(e: unknown, what: string): GloveboxError {
  if (e instanceof GloveboxError) return e;
  return new GloveboxError("Error", `${what}: ${(e as Error)?.message ?? String(e)}`, { cause: e });
}
