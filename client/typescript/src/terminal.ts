import { ClientCodes, GloveboxError } from "./errors.js";
import type { RawSocket } from "./socket.js";
import type { ExitInfo, TermControl } from "./wire.js";

/**
 * An attached terminal of a session (GET /sessions/{id}/terminals/{tid}
 * as a WebSocket): its output as bytes, input as bytes or text, resize,
 * signals, and how its command ended. The box stops reading the
 * command's output while nothing takes it: set onData before the
 * command prints much.
 */
export class Terminal {
  readonly id: string;
  /** Settles once the terminal's socket closes: how the command ended, or an error when the socket ended first. */
  readonly exited: Promise<ExitInfo>;
  /** The box's last refusal of a control message, if any. */
  lastError: string | undefined;
  #sock: RawSocket;
  #onData: ((data: Uint8Array) => void) | undefined;
  #held: Uint8Array[] = [];
  #encoder = new TextEncoder();

  constructor(id: string, sock: RawSocket) {
    this.id = id;
    this.#sock = sock;
    let exit: ExitInfo | undefined;
    this.exited = new Promise<ExitInfo>((resolve, reject) => {
      sock.start(
        (data) => {
          if (this.#onData) this.#onData(data);
          else this.#held.push(data);
        },
        (text) => {
          let m: TermControl;
          try {
            m = JSON.parse(text);
          } catch {
            return;
          }
          if (m.type === "exit") exit = m.exit ?? { code: -1 };
          else if (m.type === "error") this.lastError = m.message;
        },
        (cause) => {
          if (exit) resolve(exit);
          else reject(new GloveboxError(ClientCodes.ConnectionLost, `terminal ${id}: the socket closed before the command ended: ${cause}`));
        },
      );
    });
    this.exited.catch(() => undefined); // unobserved: not an unhandled rejection
  }

  /** Sets the receiver of the terminal's output (what arrived before is passed at once). */
  set onData(f: ((data: Uint8Array) => void) | undefined) {
    this.#onData = f;
    if (f) for (const d of this.#held.splice(0)) f(d);
  }

  /** Sends input: keystrokes as a terminal sends them ("\r" for Enter, "\x03" for ^C). */
  write(data: string | Uint8Array): boolean {
    const b = typeof data === "string" ? this.#encoder.encode(data) : data;
    // Frames of at most 32 KiB: the box takes up to 64 KiB a frame.
    for (let i = 0; i < b.length || i === 0; i += 32768) {
      if (!this.#sock.sendBytes(b.subarray(i, i + 32768))) return false;
      if (b.length === 0) break;
    }
    return true;
  }

  /** Sets the terminal's size. */
  resize(cols: number, rows: number): boolean {
    return this.#sock.sendText(JSON.stringify({ type: "resize", cols, rows } satisfies TermControl));
  }

  /** Sends a signal ("SIGINT", "SIGTERM", ...) to the command's process group. */
  signal(name: string): boolean {
    return this.#sock.sendText(JSON.stringify({ type: "signal", signal: name } satisfies TermControl));
  }

  /** Detaches: the command goes on (Box.deleteTerminal ends it). */
  close(): void {
    this.#sock.close(1000, "detached");
  }
}
