import { runDetached } from '@toolgate/core';

/**
 * A call waiting in a DeadlineQueue. The call's own object carries the links, so joining the queue
 * allocates nothing (no entry, no closure per call).
 */
export interface DeadlineEntry {
  deadline: number;
  prev: DeadlineEntry | undefined;
  next: DeadlineEntry | undefined;
  linked: boolean;
  /** Called once when the deadline passes while the entry is still queued. */
  expire(): void;
}

/**
 * The deadlines of one breaker's calls in flight, oldest first. They all share one timeout, so the
 * oldest always expires first and one timer serves them all: adding and removing a call is a list
 * link, not a timer (a timer per call measured several microseconds). The timer is unref'd, so a
 * stale one never holds the process open; when it fires it expires what is due and re-arms for the
 * oldest call left.
 */
export class DeadlineQueue {
  readonly timeoutMs: number;
  #head: DeadlineEntry | undefined;
  #tail: DeadlineEntry | undefined;
  #armed = false;

  constructor(timeoutMs: number) {
    this.timeoutMs = timeoutMs;
  }

  add(entry: DeadlineEntry): void {
    entry.deadline = performance.now() + this.timeoutMs;
    entry.prev = this.#tail;
    entry.next = undefined;
    entry.linked = true;
    if (this.#tail) this.#tail.next = entry;
    else this.#head = entry;
    this.#tail = entry;
    if (!this.#armed) this.#arm(this.timeoutMs);
  }

  /** Milliseconds until the oldest call in the queue reaches its deadline; undefined when empty. */
  untilOldestMs(): number | undefined {
    if (this.#head === undefined) return undefined;
    return Math.max(0, Math.ceil(this.#head.deadline - performance.now()));
  }

  remove(entry: DeadlineEntry): void {
    if (!entry.linked) return;
    entry.linked = false;
    if (entry.prev) entry.prev.next = entry.next;
    else this.#head = entry.next;
    if (entry.next) entry.next.prev = entry.prev;
    else this.#tail = entry.prev;
    entry.prev = undefined;
    entry.next = undefined;
  }

  #arm(delayMs: number): void {
    this.#armed = true;
    // The timer serves every call in the queue: armed outside the call that happened to arm it.
    runDetached(() => setTimeout(this.#fire, Math.max(1, Math.ceil(delayMs))).unref());
  }

  readonly #fire = (): void => {
    this.#armed = false;
    const now = performance.now();
    while (this.#head !== undefined && this.#head.deadline <= now) {
      const due = this.#head;
      this.remove(due);
      due.expire();
    }
    if (this.#head !== undefined) this.#arm(this.#head.deadline - now);
  };
}
