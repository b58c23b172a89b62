import { GloveboxError } from "./errors.js";

/** Resolves true after ms, or false as soon as signal aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise((res) => {
    if (signal.aborted) return res(false);
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      res(true);
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      res(false);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** p, or a rejection with code AbortError once signal aborts (p goes on for others). */
export function raceSignal<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return p;
  const abortErr = () => new GloveboxError("AbortError", `aborted: ${String(signal.reason ?? "signal")}`, { cause: signal.reason });
  if (signal.aborted) return Promise.reject(abortErr());
  return new Promise<T>((res, rej) => {
    const onAbort = () => rej(abortErr());
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        res(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        rej(e);
      },
    );
  });
}

/** A signal that aborts when any of signals does (AbortSignal.any where the runtime has it). */
export function anySignal(signals: AbortSignal[]): AbortSignal {
  const any = (AbortSignal as any).any as ((s: AbortSignal[]) => AbortSignal) | undefined;
  if (any) return any(signals);
  const c = new AbortController();
  for (const s of signals) {
    if (s.aborted) c.abort(s.reason);
    else s.addEventListener("abort", () => c.abort(s.reason), { once: true });
  }
  return c.signal;
}
