/**
 * Egress asks. With `[network] ask = true`, a box holds an agent's
 * connection to a host no rule covers and pushes a display slot with the
 * renderer {@link EGRESS_ASK_RENDERER}; answer it with
 * `result.resolve(slotId, answer)`, one of {@link EGRESS_ASK_CHOICES}, or
 * let its timeout deny it.
 */
import type { DisplayEvent } from "./result.js";

/** The renderer of an egress-ask slot. */
export const EGRESS_ASK_RENDERER = "glovebox.egress_ask";

/** The answers to an egress ask: this connection, the session, the box's live policy, or deny. */
export const EGRESS_ASK_CHOICES = ["once", "session", "box", "deny"] as const;
export type EgressAskAnswer = (typeof EGRESS_ASK_CHOICES)[number];

/** The input of an egress-ask slot. */
export interface EgressAsk {
  /** "the agent wants api.github.com:443" */
  message: string;
  host: string;
  port: number;
  choices: EgressAskAnswer[];
  /** The glovebox.toml line an approval for the box adds. */
  line: string;
  /** How long the box waits before it denies. */
  timeout_ms: number;
}

/** Recognises an egress-ask slot: its input, or undefined for any other display event. */
export function egressAsk(d: DisplayEvent): EgressAsk | undefined {
  if (d.type !== "push" || d.slot.renderer !== EGRESS_ASK_RENDERER) return undefined;
  const input = d.slot.input as Partial<EgressAsk> | null;
  if (!input || typeof input !== "object" || typeof input.host !== "string" || typeof input.port !== "number") return undefined;
  return input as EgressAsk;
}
