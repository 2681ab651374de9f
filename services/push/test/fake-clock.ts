import type { DebounceClock } from "../src/server/debounce.js";

/** A clock that moves only when the test advances it. */
export class FakeClock implements DebounceClock {
  #now = 0;
  #timers = new Map<number, { at: number; callback: () => void }>();
  #ids = 0;
  now = () => this.#now;
  setTimer = (callback: () => void, ms: number) => {
    const id = ++this.#ids;
    this.#timers.set(id, { at: this.#now + ms, callback });
    return id;
  };
  clearTimer = (timer: unknown) => {
    this.#timers.delete(timer as number);
  };
  /** Moves time forward, firing due timers in order. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      const due = [...this.#timers.entries()]
        .filter(([, timer]) => timer.at <= end)
        .sort(([, a], [, b]) => a.at - b.at)[0];
      if (!due) break;
      this.#timers.delete(due[0]);
      this.#now = due[1].at;
      due[1].callback();
    }
    this.#now = end;
  }
}
