import type { Result } from "./result.js";
import type { Socket } from "./socket.js";
import type { PingFrame, ServerHelloFrame } from "./wire.js";

/** One socket of a box's session, and what the box has said on it. */
export interface Conn {
  sock: Socket;
  resumed: boolean;
  replayUntil: number;
  resendDone: boolean;
  unacked: Result[];
  /** A frame came since the last keepalive tick. */
  heard: boolean;
  /** Keepalive ticks in a row with nothing heard. */
  silentTicks: number;
  keepalive: ReturnType<typeof setInterval> | undefined;
  hello: ((h: ServerHelloFrame | undefined) => void) | undefined;
}

/** A Conn on a socket just opened: nothing resumed, nothing unanswered. */
export function newConn(sock: Socket): Conn {
  return { sock, resumed: false, replayUntil: 0, resendDone: false, unacked: [], heard: true, silentTicks: 0, keepalive: undefined, hello: undefined };
}

/**
 * Pings the box every ms on c. When two ticks in a row heard nothing from
 * it (and sent nothing), the keepalive stops and silent is called: the
 * socket is dead without either side having noticed.
 */
export function startKeepalive(c: Conn, every: number, silent: () => void): void {
  c.keepalive = setInterval(() => {
    // Ticks, not wall time: a stalled event loop fires one late tick,
    // never two, so a busy host does not drop a live socket.
    if (c.heard || c.sock.sending()) c.silentTicks = 0;
    else c.silentTicks++;
    c.heard = false;
    if (c.silentTicks >= 2) {
      stopKeepalive(c);
      silent();
      return;
    }
    c.sock.send(JSON.stringify({ type: "ping", ts: Date.now() } satisfies PingFrame));
  }, every);
  (c.keepalive as any).unref?.();
}

/** Stops c's keepalive, if it runs. */
export function stopKeepalive(c: Conn): void {
  if (c.keepalive !== undefined) clearInterval(c.keepalive);
  c.keepalive = undefined;
}
