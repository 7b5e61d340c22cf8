import type { CallEntry } from './call-entry.js';

/**
 * Identical calls running now in this process: later ones wait for the first one's answer. The
 * promise a waiter awaits is only made when a waiter comes, so a call that runs alone (nearly all of
 * them) costs one small object and no promise or closure.
 */
export class Flight {
  /** Calls of this key running now (they were below the threshold when they started). */
  running = 0;
  #settled = false;
  #entry: CallEntry | undefined;
  #done: Promise<CallEntry | undefined> | undefined;
  #resolve: ((entry: CallEntry | undefined) => void) | undefined;

  /** The first runner's remembered entry, or undefined when it threw, was aborted or was not remembered. */
  wait(): Promise<CallEntry | undefined> {
    if (this.#settled) return Promise.resolve(this.#entry);
    this.#done ??= new Promise((resolve) => {
      this.#resolve = resolve;
    });
    return this.#done;
  }

  /** Hands the first runner's entry to every waiter; later settles are ignored. */
  settle(entry: CallEntry | undefined): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#entry = entry;
    this.#resolve?.(entry);
  }
}
