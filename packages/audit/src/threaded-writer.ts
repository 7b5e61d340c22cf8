import { Worker } from 'node:worker_threads';
import type { FileSinkOptions } from './file-sink.js';
import { IncidentLog } from './incident-log.js';
import { type CapturedRecord, flattenCaptured } from './record.js';
import { revivedFields } from './thread-log.js';
import {
  createRingMemory,
  encodeRecord,
  READ,
  type RingViews,
  recordSize,
  recordText,
  ringViews,
  SLEEPING,
  STAT_CONSUMED,
  STAT_DROPPED,
  STAT_DUPLICATES,
  STAT_HEAD_SEQ,
  STAT_PENDING,
  STAT_PENDING_BYTES,
  STAT_REJECTED,
  STAT_RETRIES,
  STAT_WRITING_SINCE,
  STAT_WRITTEN,
  STATS_VERSION,
  WRITE,
  writeWrap,
} from './thread-ring.js';
import type { AuditHead, AuditStats } from './types.js';
import type { WriterSettings } from './writer.js';
import type { FromWriterThread, ToWriterThread, WriterThreadData } from './writer-thread.js';

/** The ring's size: enough for thousands of records while the writer thread writes a batch. */
const RING_BYTES = 4 * 2 ** 20;
const LOG_INTERVAL_MS = 10_000;
/** How long past `closeTimeoutMs` close() waits for the writer thread (its own hung-write grace is 1 s). */
const THREAD_GRACE_MS = 2_000;
/** How long close() waits for the thread to stop once it is done with it. */
const TERMINATE_WAIT_MS = 1_000;

interface Waiter {
  readonly captured: CapturedRecord;
  readonly ackId: number;
  readonly admitted: () => void;
  readonly timer: NodeJS.Timeout;
}

interface Counters {
  written: number;
  dropped: number;
  rejected: number;
  retries: number;
  duplicates: number;
  pending: number;
  pendingBytes: number;
  headSeq: number;
  headHash: string;
  consumed: number;
  writingSince: number;
}

/**
 * `createAudit({ thread: true })`: the calls' side of a writer that runs on a worker thread. A call's
 * record is copied into a shared ring (no message, no promise, no timer), and the thread seals,
 * hashes and writes it with the same writer and file sink the calls' thread would run. Counters,
 * the head and acknowledgements of durable records come back through shared memory and messages.
 * The bounds and their meaning are the in-thread writer's: a full ring makes the call wait up to
 * `maxWaitMs`, then its record is dropped and counted.
 */
export class ThreadedWriter {
  readonly #settings: WriterSettings;
  readonly #views: RingViews;
  readonly #worker: Worker;
  readonly #bigRecordBytes: number;
  #write = 0;
  /** Records handed to the thread (wrapping Int32, as the thread's count). */
  #published = 0;
  readonly #waiting: Waiter[] = [];
  #roomTimer: NodeJS.Timeout | undefined;
  readonly #acks = new Map<number, (stored: boolean) => void>();
  #nextAck = 1;
  readonly #rpcs = new Map<
    number,
    { readonly op: string; readonly resolve: () => void; readonly reject: (error: Error) => void }
  >();
  #nextRpc = 1;
  #dropped = 0;
  /** The thread's counters as they stood when it stopped (what it held then is in `#dropped`). */
  #final: Counters | undefined;
  #closing = false;
  #closed: Promise<void> | undefined;
  /** Set once the thread is gone (closed, or failed): nothing more reaches the sink. */
  #dead = false;
  #refd = true;
  readonly #dropLog: IncidentLog;

  constructor(file: FileSinkOptions, key: Uint8Array | undefined, settings: WriterSettings) {
    this.#settings = settings;
    const capacity = Math.max(64 * 1024, Math.min(RING_BYTES, settings.maxBufferBytes)) & ~7;
    const memory = createRingMemory(capacity);
    this.#views = ringViews(memory);
    this.#bigRecordBytes = capacity / 4;
    this.#dropLog = new IncidentLog(settings.logger, 'warn', 'audit records dropped', LOG_INTERVAL_MS);
    const data: WriterThreadData = {
      toolgateAuditWriter: true,
      memory,
      file,
      chainId: settings.chainId,
      key,
      batchSize: settings.batchSize,
      maxBatchBytes: settings.maxBatchBytes,
      batchDelayMs: settings.batchDelayMs,
      maxBufferBytes: settings.maxBufferBytes,
      bufferSize: settings.bufferSize,
      closeTimeoutMs: settings.closeTimeoutMs,
    };
    // Run from the sources (this package's own tests), the thread is the built one.
    const entry = import.meta.url.endsWith('.ts') ? '../dist/writer-thread.js' : './writer-thread.js';
    this.#worker = new Worker(new URL(entry, import.meta.url), {
      workerData: data,
      name: 'toolgate-audit-writer',
    });
    this.#worker.on('message', (message: FromWriterThread) => this.#onMessage(message));
    this.#worker.on('error', (error) => this.#fail(error));
    this.#worker.on('exit', (code) => {
      if (!this.#dead) this.#fail(new Error(`audit writer thread exited (code ${code})`));
    });
  }

  push(captured: CapturedRecord, durable: boolean): Promise<boolean> | undefined {
    // The common case: room in the ring, nobody waiting, nobody to tell. No promise, no closure.
    if (!durable && !this.#closing && this.#waiting.length === 0 && this.#publish(captured, 0)) {
      return undefined;
    }
    return this.#pushWaiting(captured, durable);
  }

  lose(reason: string): void {
    this.#drop(1, reason);
  }

  ready(): Promise<void> {
    if (this.#closing) return Promise.reject(new Error('audit is closed: its sink was not set up'));
    return this.#rpc('ready');
  }

  async flush(): Promise<void> {
    for (;;) {
      this.#admitWaiting();
      await this.#rpc('flush');
      if (this.#waiting.length === 0 || this.#dead) return;
    }
  }

  close(): Promise<void> {
    this.#closed ??= this.#close();
    return this.#closed;
  }

  stats(): AuditStats {
    const counters = this.#counters();
    const control = this.#views.control;
    const inRing = (this.#published - counters.consumed) | 0;
    const read = Atomics.load(control, READ);
    const capacity = this.#views.capacity;
    let waitingBytes = 0;
    for (const waiter of this.#waiting) waitingBytes += waiter.captured.bytes;
    return {
      chainId: this.#settings.chainId,
      written: counters.written,
      dropped: counters.dropped + this.#dropped,
      rejected: counters.rejected,
      retries: counters.retries,
      duplicateBatches: counters.duplicates,
      pending: counters.pending + (this.#dead ? 0 : inRing) + this.#waiting.length,
      pendingBytes:
        counters.pendingBytes + (this.#dead ? 0 : (this.#write - read + capacity) % capacity) + waitingBytes,
      writingMs:
        counters.writingSince > 0 && !this.#dead ? Math.max(0, Date.now() - counters.writingSince) : 0,
    };
  }

  head(): AuditHead | undefined {
    const counters = this.#counters();
    return counters.headSeq === 0
      ? undefined
      : { chainId: this.#settings.chainId, seq: counters.headSeq, hash: counters.headHash };
  }

  /** Copies a record into the ring; false when it has no room. */
  #publish(captured: CapturedRecord, ackId: number): boolean {
    const text = recordText(captured);
    const size = recordSize(text.length);
    const views = this.#views;
    const control = views.control;
    if (size > this.#bigRecordBytes) return this.#publishBig(captured, text, size, ackId);
    const read = Atomics.load(control, READ);
    let at = this.#write;
    if (at >= read) {
      // After the reader: the ring's end, else its beginning (up to the reader, never onto it).
      if (size >= views.capacity - at) {
        if (size >= read) return false;
        writeWrap(views, at);
        at = 0;
      }
    } else if (size >= read - at) return false;
    encodeRecord(views, at, size, captured, text, ackId);
    this.#write = at + size;
    Atomics.store(control, WRITE, this.#write);
    this.#handed();
    return true;
  }

  /** A record larger than a quarter of the ring goes in shared memory of its own, by message. */
  #publishBig(captured: CapturedRecord, text: string, size: number, ackId: number): boolean {
    const memory = createRingMemory(size);
    encodeRecord(ringViews(memory), 0, size, captured, text, ackId);
    this.#worker.postMessage({ type: 'big', memory } satisfies ToWriterThread);
    this.#handed();
    return true;
  }

  #handed(): void {
    this.#published = (this.#published + 1) | 0;
    const control = this.#views.control;
    if (Atomics.load(control, SLEEPING) === 1) Atomics.notify(control, WRITE, 1);
    if (!this.#refd) {
      // Records on their way keep the process alive until they are written, as the in-thread writer's timer does.
      this.#worker.ref();
      this.#refd = true;
    }
  }

  #pushWaiting(captured: CapturedRecord, durable: boolean): Promise<boolean> | undefined {
    let ackId = 0;
    let stored: Promise<boolean> | undefined;
    if (durable) {
      ackId = this.#nextAck;
      this.#nextAck = this.#nextAck >= 0x7fffffff ? 1 : this.#nextAck + 1;
      stored = new Promise<boolean>((resolve) => this.#acks.set(ackId, resolve));
    }
    if (this.#closing || this.#dead) {
      this.#drop(1, 'audit is closed');
      this.#ack(ackId, false);
      return stored;
    }
    if (this.#waiting.length === 0 && this.#publish(captured, ackId)) return stored;
    if (this.#settings.maxWaitMs <= 0) {
      this.#drop(1, 'the buffer is full');
      this.#ack(ackId, false);
      return stored ?? Promise.resolve(false);
    }
    // Waiting for room in a full ring: flat, so it holds what its bytes count (see flattenCaptured; the
    // thread's writer counts a two-byte text twice once it holds the record).
    flattenCaptured(captured);
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = {
        captured,
        ackId,
        admitted: () => (stored ? void stored.then(resolve) : resolve(true)),
        timer: setTimeout(() => {
          const at = this.#waiting.indexOf(waiter);
          if (at >= 0) this.#waiting.splice(at, 1);
          this.#drop(1, 'the buffer is full');
          this.#ack(ackId, false);
          resolve(false);
        }, this.#settings.maxWaitMs),
      };
      this.#waiting.push(waiter);
      this.#watchRoom();
    });
  }

  /** While calls wait for room, looks for it every millisecond (the thread frees it as it takes records). */
  #watchRoom(): void {
    this.#roomTimer ??= setTimeout(() => {
      this.#roomTimer = undefined;
      this.#admitWaiting();
      if (this.#waiting.length > 0 && !this.#dead) this.#watchRoom();
    }, 1);
  }

  #admitWaiting(): void {
    while (this.#waiting.length > 0 && !this.#dead) {
      const waiter = this.#waiting[0]!;
      if (!this.#publish(waiter.captured, waiter.ackId)) return;
      this.#waiting.shift();
      clearTimeout(waiter.timer);
      waiter.admitted();
    }
  }

  #ack(id: number, stored: boolean): void {
    if (id === 0) return;
    const resolve = this.#acks.get(id);
    this.#acks.delete(id);
    resolve?.(stored);
  }

  #rpc(op: 'ready' | 'flush' | 'close'): Promise<void> {
    if (this.#dead) {
      return op === 'ready'
        ? Promise.reject(new Error('audit writer thread stopped: its sink was not set up'))
        : Promise.resolve();
    }
    const id = this.#nextRpc++;
    return new Promise<void>((resolve, reject) => {
      this.#rpcs.set(id, { op, resolve, reject });
      if (!this.#refd) {
        this.#worker.ref();
        this.#refd = true;
      }
      this.#worker.postMessage({ type: 'rpc', id, op } satisfies ToWriterThread);
    });
  }

  #onMessage(message: FromWriterThread): void {
    switch (message.type) {
      case 'acks':
        for (let index = 0; index < message.ids.length; index += 1) {
          this.#ack(message.ids[index]!, message.stored[index]!);
        }
        return;
      case 'reply': {
        const rpc = this.#rpcs.get(message.id);
        this.#rpcs.delete(message.id);
        if (message.error === undefined) rpc?.resolve();
        else rpc?.reject(new Error(message.error));
        return;
      }
      case 'log':
        this.#settings.logger[message.level](revivedFields(message.fields), message.message);
        return;
      case 'idle':
        // Everything handed over is written and nobody waits on the thread: it need not keep the
        // process alive (a record handed over later refs it again).
        if (
          message.consumed === this.#published &&
          this.#rpcs.size === 0 &&
          this.#acks.size === 0 &&
          this.#waiting.length === 0 &&
          this.#refd
        ) {
          this.#worker.unref();
          this.#refd = false;
        }
        return;
    }
  }

  /** The thread's counters and head, read consistently (the thread rewrites them under a seqlock). */
  #counters(): Counters {
    if (this.#final !== undefined) return this.#final;
    const { control, stats, headHash } = this.#views;
    // A thread stopped while rewriting them (terminate() ends it anywhere) leaves the version odd:
    // after a while the counters are read as they are rather than waited for forever.
    for (let tries = 0; ; tries += 1) {
      const before = Atomics.load(control, STATS_VERSION);
      if ((before & 1) === 0 || tries >= 100_000) {
        const counters: Counters = {
          written: stats[STAT_WRITTEN]!,
          dropped: stats[STAT_DROPPED]!,
          rejected: stats[STAT_REJECTED]!,
          retries: stats[STAT_RETRIES]!,
          duplicates: stats[STAT_DUPLICATES]!,
          pending: stats[STAT_PENDING]!,
          pendingBytes: stats[STAT_PENDING_BYTES]!,
          headSeq: stats[STAT_HEAD_SEQ]!,
          consumed: stats[STAT_CONSUMED]!,
          writingSince: stats[STAT_WRITING_SINCE]!,
          headHash: Buffer.from(headHash).toString('latin1'),
        };
        if (Atomics.load(control, STATS_VERSION) === before || tries >= 100_000) return counters;
      }
    }
  }

  async #close(): Promise<void> {
    this.#closing = true;
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<true>((resolve) => {
      timer = setTimeout(() => resolve(true), this.#settings.closeTimeoutMs + THREAD_GRACE_MS);
    });
    const closed = (async (): Promise<false> => {
      // Calls still waiting for room go in as the thread frees it, then the thread closes its writer.
      while (this.#waiting.length > 0 && !this.#dead) await this.#rpc('flush');
      await this.#rpc('close');
      return false;
    })();
    const stuck = await Promise.race([closed, hung]);
    clearTimeout(timer);
    if (stuck) {
      const { pending } = this.stats();
      this.#settings.logger.error(
        { lost: pending },
        'audit records lost: the writer thread did not store them before close() gave up',
      );
      this.#stop(pending);
    } else {
      this.#stop(0);
    }
    this.#dropLog.close();
    // A write the thread is stuck in (a pipe nobody reads, a hung network filesystem) holds the thread
    // until it returns; shutdown does not wait for that, and the thread no longer keeps the process alive.
    this.#worker.unref();
    let waited: NodeJS.Timeout | undefined;
    await Promise.race([
      this.#worker.terminate(),
      new Promise((resolve) => {
        waited = setTimeout(resolve, TERMINATE_WAIT_MS);
      }),
    ]);
    clearTimeout(waited);
  }

  /** The thread failed: what it had not stored is lost, counted and reported. */
  #fail(error: unknown): void {
    if (this.#dead) return;
    const { pending } = this.stats();
    this.#settings.logger.error(
      { err: error, lost: pending },
      'audit writer thread failed: records it had not stored are lost',
    );
    this.#stop(pending);
  }

  /** No more records reach the sink: the lost ones are counted, everyone waiting is told. */
  #stop(lost: number): void {
    // Frozen: a thread still running after a deadline must not count what was just counted as lost.
    this.#final = { ...this.#counters(), pending: 0, pendingBytes: 0, writingSince: 0 };
    this.#dead = true;
    this.#dropped += lost;
    if (this.#roomTimer !== undefined) clearTimeout(this.#roomTimer);
    for (const waiter of this.#waiting.splice(0)) {
      clearTimeout(waiter.timer);
      waiter.admitted();
    }
    for (const resolve of this.#acks.values()) resolve(false);
    this.#acks.clear();
    // ready() learns the sink was never set up; flush() and close() are over (what was lost is counted).
    for (const rpc of this.#rpcs.values()) {
      if (rpc.op === 'ready') rpc.reject(new Error('audit writer thread stopped: its sink was not set up'));
      else rpc.resolve();
    }
    this.#rpcs.clear();
  }

  #drop(count: number, reason: string): void {
    this.#dropped += count;
    this.#dropLog.note(count, {
      reason,
      totalDropped: this.stats().dropped,
      maxBufferBytes: this.#settings.maxBufferBytes,
      maxWaitMs: this.#settings.maxWaitMs,
    });
  }
}
