import { ClientCodes, GloveboxError } from "./errors.js";
import type { EgressEnvironment, EgressPolicyFrame, EgressSetFrame, NetworkSpec } from "./wire.js";

/**
 * A session's own egress rules and its effective policy as the box last
 * reported it. The rules go with every hello, so a session the box opens
 * anew gets them too; Box.setEgress replaces them one call at a time.
 */
export class SessionEgress {
  /** The session's own egress rules its hello carries. */
  rules: NetworkSpec | undefined;
  /** The session's effective egress policy, as the box last reported it. */
  view: EgressEnvironment | undefined;
  /** The answer to the hello's egress rules is still to come. */
  #helloAnswer = false;
  #wait: ((f: EgressPolicyFrame) => void) | undefined;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(rules: NetworkSpec | undefined) {
    this.rules = rules;
  }

  /** Runs change once the changes queued before it have settled. */
  queue<T>(change: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(change);
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** Takes the box's hello: the policy it reports, and whether an answer to the hello's rules follows. */
  hello(m: any, caps: ReadonlySet<string>): void {
    this.view = m.egress && typeof m.egress === "object" ? m.egress : undefined;
    // A box that takes session rules answers the hello's with an egress frame, after this hello.
    this.#helloAnswer = !!this.rules && caps.has("egress_rules");
  }

  /** Takes an egress frame: the answer to the hello's rules (refused tells why), or to exchange's. */
  frame(m: any, refused: (err: string) => void): void {
    if (m.policy && typeof m.policy === "object") this.view = m.policy;
    if (this.#helloAnswer) {
      this.#helloAnswer = false;
      if (typeof m.error === "string") refused(m.error);
      return;
    }
    this.#wait?.(m as EgressPolicyFrame);
  }

  /** Sends rules and waits timeoutMs at most for the box's answer: undefined when none came. */
  async exchange(rules: NetworkSpec, send: (frame: string) => boolean, timeoutMs: number, box: string): Promise<EgressPolicyFrame | undefined> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const answer = new Promise<EgressPolicyFrame | undefined>((res) => {
      this.#wait = res;
      timer = setTimeout(() => res(undefined), timeoutMs);
    });
    if (!send(JSON.stringify({ type: "egress", rules } satisfies EgressSetFrame))) {
      clearTimeout(timer);
      this.#wait = undefined;
      throw new GloveboxError(ClientCodes.ConnectionLost, `box ${JSON.stringify(box)}: the socket went away before the egress rules were sent; retry`);
    }
    const f = await answer;
    clearTimeout(timer);
    this.#wait = undefined;
    return f;
  }
}
