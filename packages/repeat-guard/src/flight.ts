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

/**
 * The flights of one guard by key. The first flight of a moment takes a slot of its own, so a call
 * that runs alone (every call of a sequential client) neither adds to nor deletes from a Map: measured,
 * the Map's delete of its one entry reallocated its table on every call (about 150 bytes a call).
 * Later flights, while the slot is taken, go into the Map. A key is in one place at most: a flight
 * is only added where `get` found none, and only its owner removes it.
 */
export class Flights {
  #soloKey: string | undefined;
  #solo: Flight | undefined;
  readonly #more = new Map<string, Flight>();

  get(key: string): Flight | undefined {
    if (this.#solo !== undefined && this.#soloKey === key) return this.#solo;
    return this.#more.size === 0 ? undefined : this.#more.get(key);
  }

  /** Adds `flight` under `key`, where `get` found none. */
  add(key: string, flight: Flight): void {
    if (this.#solo === undefined) {
      this.#soloKey = key;
      this.#solo = flight;
    } else {
      this.#more.set(key, flight);
    }
  }

  /** Removes `flight`, the one added under `key`. */
  remove(key: string, flight: Flight): void {
    if (this.#solo === flight) {
      this.#solo = undefined;
      this.#soloKey = undefined;
    } else {
      this.#more.delete(key);
    }
  }
}
