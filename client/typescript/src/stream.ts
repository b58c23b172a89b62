/**
 * An unbounded queue read as an async iterable. Concurrent loops share one
 * stream (each item goes to one of them); a loop started after another
 * stopped continues where it left off. It ends once end() was called and
 * every item was taken. Iterating never throws.
 */
export class Stream<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #head = 0;
  #ended = false;
  #waiters: (() => void)[] = [];
  /** Called with each item taken, to release its accounting. */
  onTake: ((item: T) => void) | undefined;

  push(item: T): void {
    if (this.#ended) return;
    this.#items.push(item);
    this.#wake();
  }

  end(): void {
    this.#ended = true;
    this.#wake();
  }

  get ended(): boolean {
    return this.#ended;
  }

  #wake(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  }

  #take(): { ok: true; value: T } | { ok: false } {
    if (this.#head < this.#items.length) {
      const value = this.#items[this.#head]!;
      (this.#items as unknown[])[this.#head] = undefined;
      this.#head++;
      if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
        this.#items = this.#items.slice(this.#head);
        this.#head = 0;
      }
      this.onTake?.(value);
      return { ok: true, value };
    }
    return { ok: false };
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for (;;) {
      const t = this.#take();
      if (t.ok) {
        yield t.value;
        continue;
      }
      if (this.#ended) return;
      await new Promise<void>((r) => this.#waiters.push(r));
    }
  }
}
