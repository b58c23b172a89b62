import { ClientCodes, GloveboxError, type Completion } from "./errors.js";
import { Stream } from "./stream.js";
import type { DisplayRejectFrame, DisplayResolveFrame, EventFrame, FileRef, Slot } from "./wire.js";

/** One agent event of a prompt: the wire event frame (event_type, data, seq), with request_id as v1's client named the prompt id. */
export type PromptEvent = EventFrame & { request_id: string };

/** A display slot pushed or cleared while the prompt runs. */
export type DisplayEvent = { type: "push"; slot: Slot; slot_id: string } | { type: "clear"; slot_id: string };

/** Options of Result.read. */
export interface ReadOptions {
  /** Delete a server-stored output once read (GET /files/{id}?consume=1). */
  consume?: boolean;
  signal?: AbortSignal;
}

/** What a Result needs from its box. */
export interface ResultHost {
  sendFrame(frame: string, what: string): Promise<void>;
  abortPrompt(r: Result, reason: GloveboxError): void;
  readRef(ref: FileRef, opts: ReadOptions): Promise<Uint8Array>;
}

export function settled<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {}); // the caller may never await it: no unhandled rejection
  return p;
}

/**
 * A prompt in flight and, once it ended, its outcome. `events` and
 * `display` are async iterables that end when the prompt ends; `done`,
 * `message` and `outputs` settle on the same boundary. Every promise here
 * is safe to ignore: none becomes an unhandled rejection.
 */
export class Result {
  readonly id: string;
  /** Agent events in the order the box sent them. */
  readonly events = new Stream<PromptEvent>();
  /** Display slots pushed and cleared for this prompt. */
  readonly display = new Stream<DisplayEvent>();
  /** Settles when the prompt ends: its completion, or a GloveboxError. */
  readonly done: Promise<Completion>;
  /** The final assistant message. */
  readonly message: Promise<string>;
  /** The output files by name. */
  readonly outputs: Promise<Record<string, FileRef>>;

  #host: ResultHost;
  #resolve!: (c: Completion) => void;
  #reject!: (e: GloveboxError) => void;
  #ended = false;
  #error: GloveboxError | undefined;

  /** @internal the encoded prompt frame, kept until the box acknowledges the prompt. */
  frame: string | undefined;
  /** @internal the box has sent a frame about this prompt. */
  seen = false;
  /** @internal the frame was sent again after a resume. */
  resent = false;
  /** @internal bytes of unread events and display updates. */
  buffered = 0;
  /** @internal drop events instead of buffering them. */
  discardEvents = false;
  /** @internal turn a non-zero exec exit into an AgentError. */
  exitAsError = false;
  /** @internal the exec agent's exit event, if one came. */
  exit: { code?: number; signal?: string } | undefined;
  /** @internal called once when the prompt ends. */
  cleanup: (() => void) | undefined;

  constructor(id: string, host: ResultHost) {
    this.id = id;
    this.#host = host;
    this.done = settled(
      new Promise<Completion>((res, rej) => {
        this.#resolve = res;
        this.#reject = rej;
      }),
    );
    this.message = settled(this.done.then((c) => c.message));
    this.outputs = settled(this.done.then((c) => c.outputs));
    this.events.onTake = (e) => {
      this.buffered -= frameCost(e);
    };
    this.display.onTake = (d) => {
      this.buffered -= d.type === "push" ? frameCost(d.slot) : 0;
    };
  }

  /** Whether the prompt has ended. */
  get ended(): boolean {
    return this.#ended;
  }

  /** The failure the prompt ended with, if it failed. */
  get error(): GloveboxError | undefined {
    return this.#error;
  }

  /** Answers a display slot with a JSON value. Safe to leave unawaited: a failure also reaches box.onSendError listeners. */
  resolve(slotId: string, value: unknown): Promise<void> {
    return settled(this.#host.sendFrame(JSON.stringify({ type: "display_resolve", slot_id: slotId, value: value ?? null } satisfies DisplayResolveFrame), `resolve slot ${slotId}`));
  }

  /** Rejects a display slot; reason (typically a string) tells the agent why. */
  reject(slotId: string, reason: unknown): Promise<void> {
    return settled(this.#host.sendFrame(JSON.stringify({ type: "display_reject", slot_id: slotId, error: reason ?? null } satisfies DisplayRejectFrame), `reject slot ${slotId}`));
  }

  /**
   * Asks the box to stop the prompt, running or queued. The prompt then
   * ends with a GloveboxError whose code is "AbortError". Aborting a
   * prompt that already ended does nothing.
   */
  abort(reason?: unknown): Promise<void> {
    if (this.#ended) return Promise.resolve();
    this.#host.abortPrompt(this, new GloveboxError("AbortError", `prompt ${this.id} aborted`, { cause: reason }));
    return Promise.resolve();
  }

  /**
   * Waits for the prompt to complete and returns the bytes of the output
   * called name: inline refs are decoded in place; server refs are fetched
   * from the box with its credential, only on the box's own origin; url
   * refs are fetched with their own headers; s3 and gcs refs are read with
   * their cloud SDKs, not here.
   */
  read(name: string, opts: ReadOptions = {}): Promise<Uint8Array> {
    return settled(this.#read(name, opts));
  }

  async #read(name: string, opts: ReadOptions): Promise<Uint8Array> {
    const outputs = await this.outputs;
    const ref = Object.hasOwn(outputs, name) ? outputs[name] : undefined;
    if (!ref) {
      const names = Object.keys(outputs).sort();
      throw new GloveboxError(ClientCodes.NoOutput, `read ${JSON.stringify(name)}: no such output (the prompt returned ${names.length ? names.join(", ") : "no outputs"})`);
    }
    return this.#host.readRef(ref, opts);
  }

  /** Reads an output as UTF-8 text. */
  readText(name: string, opts: ReadOptions = {}): Promise<string> {
    return settled(this.read(name, opts).then((b) => new TextDecoder().decode(b)));
  }

  /** @internal */
  finish(c: Completion | undefined, err: GloveboxError | undefined): void {
    if (this.#ended) return;
    this.#ended = true;
    this.frame = undefined;
    this.cleanup?.();
    this.events.end();
    this.display.end();
    if (err) {
      this.#error = err;
      this.#reject(err);
    } else {
      this.#resolve(c!);
    }
  }
}

/** The raw frame length of each buffered event and slot, for eventBufferBytes. */
const costs = new WeakMap<object, number>();

export function setCost(v: object, n: number): void {
  costs.set(v, n);
}

export function frameCost(v: object): number {
  return costs.get(v) ?? 64;
}
