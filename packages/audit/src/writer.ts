import type { Logger } from '@toolgate/core';
import type { SealedRecord } from './chain.js';
import type { AuditSink, AuditStats, ChainHead } from './types.js';

export interface WriterSettings {
  readonly batchSize: number;
  readonly bufferSize: number;
  readonly maxWaitMs: number;
  readonly closeTimeoutMs: number;
  readonly logger: Logger;
  /** Turns a pushed entry into a record linked after `head`; runs at write time, off the call's path. */
  readonly seal: (entry: PendingEntry, head: ChainHead | undefined) => SealedRecord;
}

/** What a call leaves for the writer; `seal` turns it into a record in the batch. */
export type PendingEntry = object;

interface Waiter {
  readonly entry: PendingEntry;
  readonly resolve: () => void;
  readonly timer: NodeJS.Timeout;
}

const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 5_000;
const DROP_REPORT_MS = 1_000;
/** How long past `closeTimeoutMs` close() waits for a write attempt that is still running. */
const HUNG_WRITE_GRACE_MS = 1_000;

/**
 * The bounded, batched queue between calls and a sink. Policy for a slow sink: up to `bufferSize`
 * records wait (plus one batch in flight); a call arriving at a full buffer waits up to `maxWaitMs`
 * for room, then its record is dropped, counted and reported through the logger (at most once a
 * second). A failing write is retried, same batch, with backoff, until it succeeds or `close()` gives
 * up after `closeTimeoutMs`.
 */
export class AuditWriter {
  readonly #sink: AuditSink;
  readonly #settings: WriterSettings;
  readonly #buffer: PendingEntry[] = [];
  readonly #waiters: Waiter[] = [];
  #inFlight = 0;
  #head: ChainHead | undefined;
  #headLoaded = false;
  #draining: Promise<void> | undefined;
  #closing = false;
  /** Set when close() gave up on a write that never settled: the drain must not resume after it. */
  #abandoned = false;
  #closeDeadline = Number.POSITIVE_INFINITY;
  #written = 0;
  #dropped = 0;
  #droppedUnreported = 0;
  #dropTimer: NodeJS.Timeout | undefined;

  constructor(sink: AuditSink, settings: WriterSettings) {
    this.#sink = sink;
    this.#settings = settings;
  }

  /** Queues an entry; returns a promise only when the caller must wait for room. */
  push(entry: PendingEntry): Promise<void> | undefined {
    if (this.#closing) {
      this.#drop(1);
      return undefined;
    }
    if (this.#buffer.length < this.#settings.bufferSize) {
      this.#buffer.push(entry);
      this.#kick();
      return undefined;
    }
    if (this.#settings.maxWaitMs <= 0) {
      this.#drop(1);
      return undefined;
    }
    return new Promise((resolve) => {
      const waiter: Waiter = {
        entry,
        resolve,
        timer: setTimeout(() => {
          const at = this.#waiters.indexOf(waiter);
          if (at >= 0) this.#waiters.splice(at, 1);
          this.#drop(1);
          resolve();
        }, this.#settings.maxWaitMs),
      };
      this.#waiters.push(waiter);
    });
  }

  /** Resolves once everything pushed so far (and every waiting call's record) is stored or given up. */
  async flush(): Promise<void> {
    while (this.#draining || this.#buffer.length > 0 || this.#waiters.length > 0) {
      this.#kick();
      await this.#draining;
    }
  }

  /** Refuses new records, flushes (retrying a failing sink until `closeTimeoutMs`), closes the sink. */
  async close(): Promise<void> {
    this.#closing = true;
    this.#closeDeadline = Date.now() + this.#settings.closeTimeoutMs;
    // A sink whose write never settles must not hold shutdown hostage: past the deadline (and a
    // grace for the retry in progress) whatever is unwritten is counted as lost.
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<true>((resolve) => {
      timer = setTimeout(() => resolve(true), this.#settings.closeTimeoutMs + HUNG_WRITE_GRACE_MS);
    });
    const stuck = await Promise.race([this.flush().then(() => false as const), hung]);
    clearTimeout(timer);
    if (stuck) {
      this.#abandoned = true;
      this.#loseAll(this.#inFlight);
      this.#inFlight = 0;
    }
    this.#reportDrops();
    if (this.#dropTimer) clearTimeout(this.#dropTimer);
    try {
      await this.#sink.close?.();
    } catch (error) {
      this.#settings.logger.error({ err: error }, 'audit sink failed to close');
    }
  }

  stats(): AuditStats {
    return {
      written: this.#written,
      dropped: this.#dropped,
      pending: this.#buffer.length + this.#waiters.length + this.#inFlight,
    };
  }

  #kick(): void {
    this.#draining ??= this.#drain().catch((error: unknown) => {
      this.#settings.logger.error({ err: error }, 'audit writer failed');
    });
  }

  async #drain(): Promise<void> {
    // One macrotask turn lets the calls that finish together share a batch.
    await new Promise<void>((resolve) => setImmediate(resolve));
    try {
      if (!this.#headLoaded) {
        const head = await this.#retry(() => this.#sink.head?.() ?? Promise.resolve(undefined), 0);
        if (head === GIVE_UP) return this.#loseAll();
        this.#head = head;
        this.#headLoaded = true;
      }
      while (this.#buffer.length > 0) {
        const entries = this.#buffer.splice(0, this.#settings.batchSize);
        this.#inFlight = entries.length;
        this.#admitWaiters();
        const sealed = this.#seal(entries);
        this.#inFlight = sealed.length;
        const batch = { records: sealed.map((item) => item.record), lines: sealed.map((item) => item.line) };
        const outcome = await this.#retry(() => this.#sink.write(batch), sealed.length);
        if (this.#abandoned) return;
        this.#inFlight = 0;
        if (outcome === GIVE_UP) return this.#loseAll(sealed.length);
        this.#head = sealed.at(-1)?.record ?? this.#head;
        this.#written += sealed.length;
      }
    } finally {
      this.#inFlight = 0;
      this.#draining = undefined;
    }
  }

  #seal(entries: readonly PendingEntry[]): SealedRecord[] {
    const sealed: SealedRecord[] = [];
    let head = this.#head;
    for (const entry of entries) {
      let item: SealedRecord;
      try {
        item = this.#settings.seal(entry, head);
      } catch (error) {
        // One unserialisable record must not stall the queue; it is counted and reported.
        this.#settings.logger.error({ err: error }, 'audit record could not be serialised');
        this.#drop(1);
        continue;
      }
      sealed.push(item);
      head = item.record;
    }
    return sealed;
  }

  #admitWaiters(): void {
    while (this.#waiters.length > 0 && this.#buffer.length < this.#settings.bufferSize) {
      const waiter = this.#waiters.shift()!;
      clearTimeout(waiter.timer);
      this.#buffer.push(waiter.entry);
      waiter.resolve();
    }
  }

  async #retry<T>(attempt: () => Promise<T>, records: number): Promise<T | typeof GIVE_UP> {
    for (let failures = 0; ; failures += 1) {
      try {
        return await attempt();
      } catch (error) {
        if (failures === 0 || failures % 10 === 0) {
          this.#settings.logger.error(
            { err: error, records, attempt: failures + 1 },
            'audit sink failed; retrying the same batch',
          );
        }
        const delay = Math.min(RETRY_FIRST_MS * 2 ** failures, RETRY_MAX_MS);
        if (Date.now() + delay > this.#closeDeadline) return GIVE_UP;
        await new Promise<void>((resolve) => setTimeout(resolve, delay).unref());
      }
    }
  }

  /** At close, a sink still failing (or hung) past the deadline: everything unwritten is counted and reported. */
  #loseAll(inFlight = 0): void {
    const lost = inFlight + this.#buffer.length + this.#waiters.length;
    this.#buffer.length = 0;
    for (const waiter of this.#waiters.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.resolve();
    }
    this.#dropped += lost;
    this.#settings.logger.error(
      { lost, totalDropped: this.#dropped },
      'audit records lost: the sink did not take them before close() gave up',
    );
  }

  #drop(count: number): void {
    this.#dropped += count;
    this.#droppedUnreported += count;
    if (this.#dropTimer) return;
    this.#reportDrops();
    const tick = (): void => {
      if (this.#droppedUnreported === 0) {
        this.#dropTimer = undefined;
        return;
      }
      this.#reportDrops();
      this.#dropTimer = setTimeout(tick, DROP_REPORT_MS).unref();
    };
    this.#dropTimer = setTimeout(tick, DROP_REPORT_MS).unref();
  }

  #reportDrops(): void {
    if (this.#droppedUnreported === 0) return;
    this.#settings.logger.warn(
      {
        dropped: this.#droppedUnreported,
        totalDropped: this.#dropped,
        bufferSize: this.#settings.bufferSize,
        maxWaitMs: this.#settings.maxWaitMs,
      },
      this.#closing
        ? 'audit records dropped: audit is closed'
        : 'audit records dropped: the sink is too slow',
    );
    this.#droppedUnreported = 0;
  }
}

const GIVE_UP = Symbol('give up');
