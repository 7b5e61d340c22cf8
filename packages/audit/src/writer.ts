import { type Logger, runDetached } from '@toolgate/core';
import { isDoneWithBytesWhenSettled } from './batch-bytes.js';
import {
  anchorJson,
  canonicalOf,
  chainIdField,
  GENESIS_HASH,
  hashOfCanonical,
  isChainAnchor,
  parseRecordLine,
  rowOf,
} from './chain.js';
import type { ChainKey } from './chain-key.js';
import { IncidentLog } from './incident-log.js';
import { type CapturedRecord, flattenCaptured } from './record.js';
import { isPermanentSinkError } from './sink-errors.js';
import type {
  AuditBatch,
  AuditHead,
  AuditRecord,
  AuditRow,
  AuditSink,
  AuditStats,
  ChainHead,
} from './types.js';

export interface WriterSettings {
  readonly chainId: string;
  /** Hashes records with HMAC-SHA256 under it, each naming it by `keyId`; undefined: plain SHA-256. */
  readonly key: ChainKey | undefined;
  readonly batchSize: number;
  readonly maxBatchBytes: number;
  readonly batchDelayMs: number;
  readonly maxBufferBytes: number;
  readonly bufferSize: number;
  readonly maxWaitMs: number;
  readonly closeTimeoutMs: number;
  readonly logger: Logger;
  /** Called after each batch's write settled (stored, refused or given up): the writer thread publishes its counters. */
  readonly onSettled?: () => void;
}

interface Waiter {
  readonly entry: CapturedRecord;
  readonly admitted: () => void;
  readonly timer: NodeJS.Timeout;
}

const RETRY_FIRST_MS = 50;
const RETRY_MAX_MS = 5_000;
/** One log line per incident per interval, with counts. */
const LOG_INTERVAL_MS = 10_000;
/** How long past `closeTimeoutMs` close() waits for a write attempt that is still running. */
const HUNG_WRITE_GRACE_MS = 1_000;
const GIVE_UP = Symbol('give up');
const REFUSED = Symbol('refused');

type HeadOutcome =
  | { readonly head: ChainHead | undefined; readonly after: string | undefined }
  | typeof GIVE_UP
  | typeof REFUSED;

/**
 * The bounded, batched queue between calls and a sink. Records arrive serialised; the queue holds at
 * most `maxBufferBytes` of them (the batch being written included). A call that finds it full waits
 * up to `maxWaitMs` for room, then its record is dropped, counted and reported. Batches are sealed
 * onto the chain right before their write. A transient write error retries the same batch with
 * backoff; a permanent one drops it (counted as rejected) without moving the chain's head, so the
 * next batch links to the last stored record and the chain stays verifiable.
 */
export class AuditWriter {
  readonly #sink: AuditSink;
  readonly #settings: WriterSettings;
  /** `,"chainId":...`, escaped once for every record this writer seals. */
  readonly #chainField: string;
  readonly #key: ChainKey | undefined;
  /**
   * The buffer the last batch was sealed into, sealed into again by the next batch when the sink is
   * done with a batch's bytes once its write settles (this package's file and PostgreSQL sinks):
   * batches are sealed one at a time, each after the last one's write settled. A fresh buffer per
   * batch (tens of KB) cost about as much as its write (measured: 14 µs for 20 KB).
   */
  #scratch: Buffer | undefined;
  readonly #reusesBytes: boolean;
  #buffer: CapturedRecord[] = [];
  #bufferBytes = 0;
  /**
   * Records queued when, with them, more than this many bytes wait get their texts flattened
   * (`flattenCaptured`) so they hold what they count. Below it they are left as built (a record sealed within the
   * millisecond pays nothing more); such records hold at most about 32 bytes per counted character
   * (two-byte text twice what it counts), so past the bound by at most 3% of it.
   */
  readonly #flattenAbove: number;
  readonly #waiters: Waiter[] = [];
  #inFlight = 0;
  #inFlightBytes = 0;
  /** The batch being written (or refused), so close() can answer its durable calls when it gives up on it. */
  #inFlightEntries: readonly CapturedRecord[] | undefined;
  #head: ChainHead | undefined;
  /** A new chain's `after` (canonical JSON), sealed into its record with seq 1. */
  #after: string | undefined;
  #headLoaded = false;
  #headLoading: Promise<HeadOutcome> | undefined;
  #draining: Promise<void> | undefined;
  #closing = false;
  /** Set when close() gave up on a write that never settled: the drain must not resume after it. */
  #abandoned = false;
  #closeDeadline = Number.POSITIVE_INFINITY;
  #written = 0;
  #dropped = 0;
  #rejected = 0;
  #retries = 0;
  #duplicates = 0;
  #failingSince: number | undefined;
  /** When the write now outstanding began (its first attempt), or undefined. */
  #writingSince: number | undefined;
  #failures = 0;
  readonly #dropLog: IncidentLog;
  readonly #transientLog: IncidentLog;
  readonly #permanentLog: IncidentLog;

  constructor(sink: AuditSink, settings: WriterSettings) {
    this.#sink = sink;
    this.#settings = settings;
    this.#chainField = chainIdField(settings.chainId);
    this.#key = settings.key;
    this.#reusesBytes = isDoneWithBytesWhenSettled(sink);
    this.#flattenAbove = settings.maxBufferBytes / 1024;
    const { logger } = settings;
    this.#dropLog = new IncidentLog(logger, 'warn', 'audit records dropped', LOG_INTERVAL_MS);
    this.#transientLog = new IncidentLog(
      logger,
      'error',
      'audit sink failing (transient); retrying the same batch with backoff while records wait in the buffer',
      LOG_INTERVAL_MS,
    );
    this.#permanentLog = new IncidentLog(
      logger,
      'error',
      'audit sink refused a batch with a permanent error: its records are dropped, not retried',
      LOG_INTERVAL_MS,
    );
  }

  /**
   * Queues a record. Returns undefined when it was queued at once and nobody needs to wait; else a
   * promise that resolves once it is queued (or dropped), and for `durable` once it is stored: true
   * when stored (or, not durable, queued), false when it was lost.
   */
  push(captured: CapturedRecord, durable: boolean): Promise<boolean> | undefined {
    // The common case, a record that fits and nobody to tell: no promise, no closure.
    if (!durable && !this.#closing && this.#waiters.length === 0 && this.#hasRoom(captured.bytes)) {
      this.#enqueue(captured);
      return undefined;
    }
    return this.#pushWaiting(captured, durable);
  }

  #pushWaiting(captured: CapturedRecord, durable: boolean): Promise<boolean> | undefined {
    let ack: ((stored: boolean) => void) | undefined;
    const stored = durable
      ? new Promise<boolean>((resolve) => {
          ack = resolve;
        })
      : undefined;
    // A record that arrives with its own ack (the writer thread's, see writer-thread.ts) keeps it.
    if (durable) captured.ack = ack;
    const entry = captured;
    if (this.#closing) {
      this.#drop(1, 'audit is closed');
      ack?.(false);
      return stored;
    }
    if (this.#waiters.length === 0 && this.#hasRoom(captured.bytes)) {
      this.#enqueue(entry);
      return stored;
    }
    if (this.#settings.maxWaitMs <= 0) {
      this.#drop(1, 'the buffer is full');
      ack?.(false);
      return stored ?? Promise.resolve(false);
    }
    // Waiting for room: the buffer is full, so the record waits as long as the others.
    entry.bytes += flattenCaptured(entry);
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = {
        entry,
        admitted: () => (stored ? void stored.then(resolve) : resolve(true)),
        timer: setTimeout(() => {
          const at = this.#waiters.indexOf(waiter);
          if (at >= 0) this.#waiters.splice(at, 1);
          this.#drop(1, 'the buffer is full');
          ack?.(false);
          resolve(false);
        }, this.#settings.maxWaitMs),
      };
      this.#waiters.push(waiter);
    });
  }

  /** Counts a record that never reached the queue (it could not be serialised). */
  lose(reason: string): void {
    this.#drop(1, reason);
  }

  /**
   * Resolves once the sink is set up and the chain's head is read (a PostgreSQL sink has created its
   * table by then), so the first records need not wait for it. A transient failure is retried with
   * the writer's backoff; rejects when the sink refuses for good (logged as for a write; the next
   * record tries again) or close() gave up first. Shares its attempt with a drain that needs the head.
   */
  async ready(): Promise<void> {
    if (this.#headLoaded) return;
    if (this.#closing) throw new Error('audit is closed: its sink was not set up');
    const outcome = await runDetached(() => this.#loadHeadShared());
    if (outcome === REFUSED) {
      throw new Error('audit sink refused to set up the chain (permanent error, logged)');
    }
    if (outcome === GIVE_UP || this.#abandoned) {
      throw new Error('audit closed before its sink was set up');
    }
  }

  /** The head load in progress, or a new one: one attempt at a time, whoever asks (ready() or a drain). */
  #loadHeadShared(): Promise<HeadOutcome> {
    this.#headLoading ??= this.#attempt(() => this.#loadHead(), this.#buffer.length).then((outcome) => {
      this.#headLoading = undefined;
      if (outcome !== GIVE_UP && outcome !== REFUSED && !this.#headLoaded) {
        this.#head = outcome.head;
        this.#after = outcome.after;
        this.#headLoaded = true;
      }
      return outcome;
    });
    return this.#headLoading;
  }

  /** Resolves once everything pushed so far (and every waiting call's record) is stored or given up. */
  async flush(): Promise<void> {
    while (this.#draining || this.#buffer.length > 0 || this.#waiters.length > 0) {
      this.#kick();
      await this.#draining;
    }
  }

  /**
   * Refuses new records, flushes (retrying a failing sink until `closeTimeoutMs`), closes the sink.
   * Returns within `closeTimeoutMs` and HUNG_WRITE_GRACE_MS whatever the sink does: a write still
   * running then is abandoned (its records counted as lost, its durable calls told), and so is a sink
   * close that does not finish by then (it goes on in the background).
   */
  async close(): Promise<void> {
    this.#closing = true;
    const started = Date.now();
    this.#closeDeadline = started + this.#settings.closeTimeoutMs;
    const hardDeadline = this.#closeDeadline + HUNG_WRITE_GRACE_MS;
    // A sink whose write never settles must not hold shutdown hostage: past the deadline (and a
    // grace for the retry in progress) whatever is unwritten is counted as lost.
    const stuck = await stillRunningAt(this.flush(), hardDeadline);
    if (stuck) {
      this.#abandoned = true;
      // The batch in flight is lost with the rest: its durable calls answer now, not when (if ever)
      // the write returns (the drain then sees #abandoned and counts nothing more).
      const inFlight = this.#inFlightEntries;
      this.#inFlightEntries = undefined;
      if (inFlight !== undefined) for (const entry of inFlight) entry.ack?.(false);
      this.#loseAll(this.#inFlight);
    }
    this.#dropLog.close();
    this.#transientLog.close();
    this.#permanentLog.close();
    const closing = (async (): Promise<void> => {
      try {
        await this.#sink.close?.();
      } catch (error) {
        this.#settings.logger.error({ err: error }, 'audit sink failed to close');
      }
    })();
    if (this.#sink.close === undefined) return;
    // A write stuck in the kernel (a pipe nobody reads, a hung network filesystem) holds its file
    // handle: closing it waits for that write, which may never return. Shutdown does not.
    if (stuck || (await stillRunningAt(closing, hardDeadline))) {
      this.#settings.logger.error(
        { closeTimeoutMs: this.#settings.closeTimeoutMs, graceMs: HUNG_WRITE_GRACE_MS },
        stuck
          ? 'audit sink abandoned: a write to it never returned, so its close goes on in the background (a file stays open until that write returns)'
          : 'audit sink abandoned: its close did not finish in time and goes on in the background',
      );
    }
  }

  stats(): AuditStats {
    return {
      chainId: this.#settings.chainId,
      written: this.#written,
      dropped: this.#dropped,
      rejected: this.#rejected,
      retries: this.#retries,
      duplicateBatches: this.#duplicates,
      pending: this.#buffer.length + this.#waiters.length + this.#inFlight,
      pendingBytes: this.#bufferBytes + this.#inFlightBytes,
      // A write close() gave up on is no longer outstanding: its records are counted as lost.
      writingMs:
        this.#writingSince === undefined || this.#abandoned
          ? 0
          : Math.max(0, Date.now() - this.#writingSince),
    };
  }

  /** When the write now outstanding began (epoch ms), or 0: the writer thread reports it as a number. */
  writingSince(): number {
    return this.#abandoned ? 0 : (this.#writingSince ?? 0);
  }

  /** The chain's last stored record: the head the sink gave at start, then each acknowledged batch's last. */
  head(): AuditHead | undefined {
    const head = this.#head;
    return head === undefined
      ? undefined
      : { chainId: this.#settings.chainId, seq: head.seq, hash: head.hash };
  }

  #hasRoom(bytes: number): boolean {
    const used = this.#bufferBytes + this.#inFlightBytes;
    // One record larger than the whole bound still goes through, alone, rather than never.
    if (used === 0) return true;
    return this.#buffer.length < this.#settings.bufferSize && used + bytes <= this.#settings.maxBufferBytes;
  }

  #enqueue(entry: CapturedRecord): void {
    if (this.#bufferBytes + this.#inFlightBytes + entry.bytes > this.#flattenAbove) {
      entry.bytes += flattenCaptured(entry);
    }
    this.#buffer.push(entry);
    this.#bufferBytes += entry.bytes;
    this.#kick();
  }

  #kick(): void {
    // Outside the call whose record came first: a drain serves every call, and while records keep
    // coming it keeps running (its sink writes must not join that call's trace).
    this.#draining ??= runDetached(this.#startDrain);
  }

  readonly #startDrain = (): Promise<void> =>
    this.#drain().catch((error: unknown) => {
      this.#settings.logger.error({ err: error }, 'audit writer failed');
    });

  async #drain(): Promise<void> {
    // A short wait lets the calls that finish together share a batch (one write, one INSERT).
    const delay = this.#settings.batchDelayMs;
    await new Promise<void>((resolve) => (delay > 0 ? setTimeout(resolve, delay) : setImmediate(resolve)));
    try {
      while (this.#buffer.length > 0) {
        if (!this.#headLoaded) {
          const loaded = await this.#loadHeadShared();
          if (this.#abandoned) return;
          if (loaded === GIVE_UP) return this.#loseAll();
          if (loaded === REFUSED) {
            // Without the chain's head no record can be linked: what waits is lost, loudly; the
            // next record tries again.
            this.#refuse(this.#takeBatch(this.#buffer.length));
            continue;
          }
        }
        const entries = this.#takeBatch(this.#settings.batchSize, this.#settings.maxBatchBytes);
        let sealedHashes: string[] | undefined;
        try {
          const { batch, head: sealedHead, hashes } = this.#seal(entries);
          sealedHashes = hashes;
          const outcome = await this.#attempt(() => this.#sink.write(batch), entries.length);
          if (this.#abandoned) {
            for (const entry of entries) entry.ack?.(false);
            return;
          }
          this.#inFlight = 0;
          this.#inFlightBytes = 0;
          if (outcome === GIVE_UP) {
            for (const entry of entries) entry.ack?.(false);
            return this.#loseAll(entries.length);
          }
          if (outcome === REFUSED) {
            this.#refuse(entries);
            continue;
          }
          if (outcome && typeof outcome === 'object' && outcome.alreadyStored) this.#duplicates += 1;
          this.#head = sealedHead ?? this.#head;
          this.#written += entries.length;
          for (const entry of entries) entry.ack?.(true);
        } finally {
          // Emptied once settled: V8 may have put the array in the old generation (it pretenures
          // arrays from sites whose arrays survived), and there, dead but not yet collected, it
          // would keep every record it held alive through each young collection until a full one.
          // Measured: a quarter of the records promoted, and scavenges 2.5 times as long. Likewise
          // the batch's hashes.
          entries.length = 0;
          if (this.#inFlightEntries === entries) this.#inFlightEntries = undefined;
          if (sealedHashes !== undefined) sealedHashes.length = 0;
          // The batch's bytes are free now: a call waiting for room that did not fit beside them
          // gets in (were the buffer empty, no next batch would let it in, and it would be dropped
          // at maxWaitMs with the buffer empty).
          if (!this.#abandoned) this.#admitWaiters();
          this.#settings.onSettled?.();
        }
      }
    } finally {
      this.#inFlight = 0;
      this.#inFlightBytes = 0;
      this.#inFlightEntries = undefined;
      this.#draining = undefined;
      this.#settings.onSettled?.();
    }
  }

  /** Moves up to `count` entries from the buffer to the batch in flight, and lets waiting calls in. */
  #takeBatch(most: number, maxBytes = Number.POSITIVE_INFINITY): CapturedRecord[] {
    // Up to `most` records and `maxBytes` bytes, at least one record (a larger one goes alone).
    let count = Math.min(most, this.#buffer.length);
    let bytes = 0;
    for (let index = 0; index < count; index += 1) {
      const size = this.#buffer[index]!.bytes;
      if (index > 0 && bytes + size > maxBytes) {
        count = index;
        break;
      }
      bytes += size;
    }
    const entries = this.#buffer.length <= count ? this.#buffer : this.#buffer.slice(0, count);
    this.#buffer = this.#buffer.length <= count ? [] : this.#buffer.slice(count);
    this.#bufferBytes -= bytes;
    this.#inFlight = entries.length;
    this.#inFlightBytes = bytes;
    this.#inFlightEntries = entries;
    this.#admitWaiters();
    return entries;
  }

  /** The chain's head, and for a new chain the anchor its first record names (when the sink gives one). */
  async #loadHead(): Promise<{ head: ChainHead | undefined; after: string | undefined }> {
    const chainId = this.#settings.chainId;
    const head = await this.#sink.head?.(chainId);
    if (head !== undefined) return { head, after: undefined };
    const anchor = await this.#sink.anchor?.(chainId);
    // A custom sink's malformed anchor links nothing rather than writing a record verify would refuse.
    return { head, after: isChainAnchor(anchor) ? anchorJson(anchor) : undefined };
  }

  /**
   * Links a batch onto the chain: each record's line is built from its captured fields and hashed
   * here (under the chain's key, when it has one), on the writer's path, never on a call's. Rows
   * are built only if the sink reads them.
   */
  #seal(entries: readonly CapturedRecord[]): {
    batch: AuditBatch;
    head: ChainHead | undefined;
    hashes: string[];
  } {
    const n = entries.length;
    const hashes = new Array<string>(n);
    const firstSeq = (this.#head?.seq ?? 0) + 1;
    let prevHash = this.#head?.hash ?? GENESIS_HASH;
    // Each line is encoded once, into the batch's bytes, and hashed there: no line string is kept,
    // and a file sink writes these bytes as they are. The records' byte estimates size the buffer.
    // A reused buffer is grown below (measured exactly) only when a line does not fit.
    let bytes: Buffer;
    if (this.#scratch !== undefined) bytes = this.#scratch;
    else {
      let capacity = 0;
      for (let index = 0; index < n; index += 1) capacity += entries[index]!.bytes;
      bytes = Buffer.allocUnsafe(Math.max(capacity, this.#reusesBytes ? MIN_KEPT_BATCH_BUFFER : 1024));
    }
    let at = 0;
    const key = this.#key;
    for (let index = 0; index < n; index += 1) {
      const seq = firstSeq + index;
      const canonical = canonicalOf(
        entries[index]!,
        prevHash,
        seq,
        this.#chainField,
        seq === 1 ? this.#after : undefined,
        key?.field,
      );
      bytes = ensureRoom(bytes, at, canonical);
      const length = bytes.write(canonical, at, 'utf8');
      // A plain view of the line's bytes: `subarray` makes a Buffer through its species constructor.
      const encoded = new Uint8Array(bytes.buffer, bytes.byteOffset + at, length);
      prevHash = key === undefined ? hashOfCanonical(encoded) : key.hash(encoded);
      // The hash goes in as the last (sorted) key, over the canonical JSON's closing brace: the tail's
      // fixed bytes are stored one by one and the hash's hex is written as it is, so no tail string is
      // built and flattened per record (ensureRoom left room for LINE_TAIL bytes).
      at = writeHashTail(bytes, at + length - 1, prevHash);
      hashes[index] = prevHash;
    }
    // Kept for the next batch unless a burst made it larger than batches usually need.
    this.#scratch = this.#reusesBytes && bytes.length <= MAX_KEPT_BATCH_BUFFER ? bytes : undefined;
    return {
      batch: batchOf(this.#settings.chainId, entries, bytes.subarray(0, at), hashes, firstSeq),
      head: n === 0 ? undefined : { seq: firstSeq + n - 1, hash: prevHash },
      hashes,
    };
  }

  #admitWaiters(): void {
    while (this.#waiters.length > 0 && this.#hasRoom(this.#waiters[0]!.entry.bytes)) {
      const waiter = this.#waiters.shift()!;
      clearTimeout(waiter.timer);
      this.#buffer.push(waiter.entry);
      this.#bufferBytes += waiter.entry.bytes;
      waiter.admitted();
    }
  }

  async #attempt<T>(
    attempt: () => Promise<T>,
    records: number,
  ): Promise<T | typeof GIVE_UP | typeof REFUSED> {
    this.#writingSince = Date.now();
    try {
      return await this.#attemptUntilDone(attempt, records);
    } finally {
      this.#writingSince = undefined;
    }
  }

  async #attemptUntilDone<T>(
    attempt: () => Promise<T>,
    records: number,
  ): Promise<T | typeof GIVE_UP | typeof REFUSED> {
    for (let failures = 0; ; failures += 1) {
      // The outage starts when the failed try began: a write the sink held silent for 30 s before it
      // timed out was an outage of 30 s, not of the moment it failed.
      const tried = Date.now();
      try {
        const value = await attempt();
        if (this.#failingSince !== undefined && !this.#abandoned) {
          this.#transientLog.reset();
          this.#settings.logger.warn(
            { failures: this.#failures, outageMs: Date.now() - this.#failingSince },
            'audit sink recovered',
          );
          this.#failingSince = undefined;
          this.#failures = 0;
        }
        return value;
      } catch (error) {
        // A write close() gave up on, failing now (a pipe's reader went: EPIPE): its records are
        // counted as lost already, and the sink is closed or closing.
        if (this.#abandoned) return GIVE_UP;
        if (isPermanentSinkError(error)) {
          this.#permanentLog.note(records, { err: error, totalRejected: this.#rejected + records });
          return REFUSED;
        }
        this.#retries += 1;
        this.#failures += 1;
        this.#failingSince ??= tried;
        this.#transientLog.note(records, { err: error, pending: this.stats().pending });
        const delay = Math.min(RETRY_FIRST_MS * 2 ** failures, RETRY_MAX_MS);
        if (Date.now() + delay > this.#closeDeadline) return GIVE_UP;
        await new Promise<void>((resolve) => setTimeout(resolve, delay).unref());
        if (this.#abandoned) return GIVE_UP;
      }
    }
  }

  #refuse(entries: readonly CapturedRecord[]): void {
    this.#inFlight = 0;
    this.#inFlightBytes = 0;
    this.#inFlightEntries = undefined;
    this.#rejected += entries.length;
    this.#dropped += entries.length;
    for (const entry of entries) entry.ack?.(false);
  }

  /** At close, a sink still failing (or hung) past the deadline: everything unwritten is counted and reported. */
  #loseAll(inFlight = 0): void {
    const lost = inFlight + this.#buffer.length + this.#waiters.length;
    for (const entry of this.#buffer) entry.ack?.(false);
    this.#buffer = [];
    this.#bufferBytes = 0;
    this.#inFlight = 0;
    this.#inFlightBytes = 0;
    for (const waiter of this.#waiters.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.entry.ack?.(false);
      waiter.admitted();
    }
    this.#dropped += lost;
    this.#transientLog.reset();
    this.#settings.logger.error(
      { lost, totalDropped: this.#dropped },
      'audit records lost: the sink did not take them before close() gave up',
    );
  }

  #drop(count: number, reason: string): void {
    this.#dropped += count;
    this.#dropLog.note(count, {
      reason,
      totalDropped: this.#dropped,
      maxBufferBytes: this.#settings.maxBufferBytes,
      maxWaitMs: this.#settings.maxWaitMs,
    });
  }
}

/**
 * Whether `work` was still running at `deadline` (a Date.now() time): true when it was (it goes on,
 * unwatched), false once it settled before.
 */
async function stillRunningAt(work: Promise<unknown>, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<true>((resolve) => {
    timer = setTimeout(() => resolve(true), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([work.then(() => false as const), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The smallest and the largest batch buffer kept for reuse (see `#scratch`). */
const MIN_KEPT_BATCH_BUFFER = 16 * 1024;
const MAX_KEPT_BATCH_BUFFER = 2 * 1024 * 1024;

/** What a line adds after its canonical JSON: `,"hash":"<64 hex>"}` and the newline. */
const LINE_TAIL = 76;

/**
 * `bytes`, or a larger copy of its first `at` bytes, with room for `canonical`'s line. UTF-8 takes at
 * most 3 bytes per UTF-16 unit; only when that bound does not fit is the exact size measured.
 */
function ensureRoom(bytes: Buffer, at: number, canonical: string): Buffer {
  const room = bytes.length - at;
  if (room >= canonical.length * 3 + LINE_TAIL) return bytes;
  const needed = Buffer.byteLength(canonical, 'utf8') + LINE_TAIL;
  if (room >= needed) return bytes;
  const grown = Buffer.allocUnsafe(Math.max(bytes.length * 2, at + needed));
  bytes.copy(grown, 0, 0, at);
  return grown;
}

/** `,"hash":"` before a line's hash, and `"}` and the newline after it (`hashTail` and the line's end). */
const HASH_HEAD = Buffer.from(',"hash":"', 'latin1');
const HASH_END = Buffer.from('"}\n', 'latin1');

/**
 * Writes `hashTail(hash)` and a newline at `at` (the hash is 64 hex digits, so one byte a character);
 * returns the offset after them. `bytes` has room for them (LINE_TAIL).
 */
function writeHashTail(bytes: Buffer, at: number, hash: string): number {
  let offset = at;
  for (let index = 0; index < HASH_HEAD.length; index += 1) bytes[offset++] = HASH_HEAD[index]!;
  offset += bytes.write(hash, offset, 'latin1');
  for (let index = 0; index < HASH_END.length; index += 1) bytes[offset++] = HASH_END[index]!;
  return offset;
}

/**
 * A sealed batch as the sink sees it: `bytes` at once; `lines`, `rows` and `records` built only when
 * a sink asks for them (the file sink reads none). One object per batch.
 */
function batchOf(
  chainId: string,
  entries: readonly CapturedRecord[],
  bytes: Buffer,
  hashes: readonly string[],
  firstSeq: number,
): AuditBatch {
  const count = entries.length;
  let lines: string[] | undefined;
  let rows: AuditRow[] | undefined;
  let records: AuditRecord[] | undefined;
  return {
    chainId,
    bytes,
    get lines(): readonly string[] {
      // A line never holds a raw newline (JSON escapes it): the text splits back into its lines.
      lines ??= bytes.length === 0 ? [] : bytes.toString('utf8', 0, bytes.length - 1).split('\n');
      return lines;
    },
    get rows(): readonly AuditRow[] {
      if (rows === undefined && (entries.length !== count || hashes.length !== count)) {
        throw new Error('audit batch: rows can be read only while write() runs');
      }
      rows ??= entries.map((entry, index) => rowOf(entry, chainId, firstSeq + index, hashes[index]!));
      return rows;
    },
    get records(): readonly AuditRecord[] {
      records ??= this.lines.map((line) => parseRecordLine(line)!);
      return records;
    },
  };
}
