/**
 * The writer thread of `createAudit({ thread: true })`: takes captured records from the shared ring
 * and runs the same writer and sink as the calls' thread would (sealing, SHA-256, the file's write,
 * retries, close), so none of that runs between calls. See `ThreadedWriter` for the other side.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Logger } from '@toolgate/core';
import { chainKeyOf } from './chain-key.js';
import { createFileSink, type FileSinkOptions } from './file-sink.js';
import type { CapturedRecord } from './record.js';
import { crossingFields } from './thread-log.js';
import {
  decodeRecord,
  isWrap,
  READ,
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
} from './thread-ring.js';
import { AuditWriter } from './writer.js';

/** What the calls' thread hands its writer thread. */
export interface WriterThreadData {
  /** Tells this module's thread apart from any other worker that might import it. */
  readonly toolgateAuditWriter: true;
  readonly memory: SharedArrayBuffer;
  readonly file: FileSinkOptions;
  readonly chainId: string;
  readonly key: Uint8Array | undefined;
  readonly batchSize: number;
  readonly maxBatchBytes: number;
  readonly batchDelayMs: number;
  readonly maxBufferBytes: number;
  readonly bufferSize: number;
  readonly closeTimeoutMs: number;
}

/** Messages from the calls' thread. */
export type ToWriterThread =
  | { readonly type: 'rpc'; readonly id: number; readonly op: 'ready' | 'flush' | 'close' }
  | { readonly type: 'big'; readonly memory: SharedArrayBuffer };

/** Messages to the calls' thread. */
export type FromWriterThread =
  | { readonly type: 'reply'; readonly id: number; readonly error?: string }
  | { readonly type: 'acks'; readonly ids: number[]; readonly stored: boolean[] }
  | {
      readonly type: 'log';
      readonly level: keyof Logger;
      readonly fields: Record<string, unknown>;
      readonly message: string | undefined;
    }
  | { readonly type: 'idle'; readonly consumed: number };

/** Empty looks at the ring (one every batchDelayMs) before the thread sleeps until woken. */
const POLLS_BEFORE_SLEEP = 50;

/** Longest a record waits inside this thread for room in the writer's buffer (the ring holds the rest). */
const NO_DEADLINE_MS = 2_147_483_647;

if (parentPort !== null && (workerData as Partial<WriterThreadData> | null)?.toolgateAuditWriter === true) {
  runWriterThread(workerData as WriterThreadData);
}

function runWriterThread(data: WriterThreadData): void {
  const port = parentPort!;
  const post = (message: FromWriterThread): void => port.postMessage(message);
  const views = ringViews(data.memory);
  const { control } = views;
  const logger: Logger = {
    error: (fields, message) => postLog(post, 'error', fields, message),
    warn: (fields, message) => postLog(post, 'warn', fields, message),
    info: (fields, message) => postLog(post, 'info', fields, message),
    debug: (fields, message) => postLog(post, 'debug', fields, message),
  };
  const key = data.key === undefined ? undefined : chainKeyOf(data.key, 'createAudit: key');
  const writer = new AuditWriter(createFileSink(data.file), {
    chainId: data.chainId,
    key,
    batchSize: data.batchSize,
    maxBatchBytes: data.maxBatchBytes,
    // The ring's wait (below) gathers the batch.
    batchDelayMs: 0,
    maxBufferBytes: data.maxBufferBytes,
    bufferSize: data.bufferSize,
    // A full buffer holds records in the ring; the calls' thread waits (its maxWaitMs) and drops.
    maxWaitMs: NO_DEADLINE_MS,
    closeTimeoutMs: data.closeTimeoutMs,
    logger,
    onSettled: () => {
      publish();
      // The last batch settled after the thread went to sleep.
      if (asleep) idleIfDone();
    },
  });

  let read = Atomics.load(control, READ);
  let consumed = 0;
  let stopped = false;
  let idleSent = false;

  /** Copies the writer's counters and head where the calls' thread reads them (a seqlock). */
  const publish = (): void => {
    const stats = writer.stats();
    const head = writer.head();
    Atomics.add(control, STATS_VERSION, 1);
    const out = views.stats;
    out[STAT_WRITTEN] = stats.written;
    out[STAT_DROPPED] = stats.dropped;
    out[STAT_REJECTED] = stats.rejected;
    out[STAT_RETRIES] = stats.retries;
    out[STAT_DUPLICATES] = stats.duplicateBatches;
    out[STAT_PENDING] = stats.pending;
    out[STAT_PENDING_BYTES] = stats.pendingBytes;
    out[STAT_HEAD_SEQ] = head?.seq ?? 0;
    out[STAT_CONSUMED] = consumed;
    out[STAT_WRITING_SINCE] = writer.writingSince();
    if (head !== undefined) views.headHash.set(Buffer.from(head.hash, 'latin1'));
    Atomics.add(control, STATS_VERSION, 1);
  };

  // Acks of durable records, sent once per turn.
  let ackIds: number[] = [];
  let ackStored: boolean[] = [];
  const sendAcks = (): void => {
    const ids = ackIds;
    const stored = ackStored;
    ackIds = [];
    ackStored = [];
    publish();
    post({ type: 'acks', ids, stored });
  };
  const ack = (id: number, stored: boolean): void => {
    if (ackIds.length === 0) setImmediate(sendAcks);
    ackIds.push(id);
    ackStored.push(stored);
  };

  /** Hands one record to the writer; resolves when it is in the writer's buffer (or dropped). */
  const hand = (captured: CapturedRecord, ackId: number): Promise<unknown> | undefined => {
    if (ackId !== 0) {
      let told = false;
      const tell = (stored: boolean): void => {
        if (told) return;
        told = true;
        ack(ackId, stored);
      };
      captured.ack = tell;
      const admitted = writer.push(captured, false);
      return admitted?.then((queued) => {
        if (!queued) tell(false);
      });
    }
    return writer.push(captured, false);
  };

  /** Takes every record published so far; one taker at a time. */
  let taking: Promise<void> | undefined;
  const take = (): Promise<void> => {
    taking ??= takeAll().finally(() => {
      taking = undefined;
    });
    return taking;
  };
  const takeAll = async (): Promise<void> => {
    const before = consumed;
    while (read !== Atomics.load(control, WRITE)) {
      if (isWrap(views, read)) {
        read = 0;
        continue;
      }
      const { captured, ackId, size } = decodeRecord(views, read);
      read += size;
      idleSent = false;
      consumed = (consumed + 1) | 0;
      const waiting = hand(captured, ackId);
      if (waiting !== undefined) {
        // The writer's buffer is full: what is taken so far is freed, the rest waits in the ring.
        release();
        publish();
        await waiting;
      }
    }
    release();
    // What was taken now counts as the writer's (pending): the calls' thread reads it there.
    if (consumed !== before) publish();
  };
  const release = (): void => {
    Atomics.store(control, READ, read);
  };

  const idleIfDone = (): void => {
    if (idleSent || taking !== undefined || read !== Atomics.load(control, WRITE)) return;
    if (writer.stats().pending > 0) return;
    idleSent = true;
    post({ type: 'idle', consumed });
  };

  // While records come, the thread looks for them every batchDelayMs: the calls' thread then never
  // wakes it (no futex call between calls). After POLLS_BEFORE_SLEEP empty looks it sleeps until the
  // calls' thread wakes it, and tells it it is idle once everything is written (the process may then
  // exit). With no delay (durable mode's default) it sleeps as soon as the ring is empty.
  let asleep = false;
  const pump = async (): Promise<void> => {
    let emptyPolls = 0;
    while (!stopped) {
      if (read !== Atomics.load(control, WRITE)) emptyPolls = 0;
      else if (data.batchDelayMs > 0 && emptyPolls < POLLS_BEFORE_SLEEP) emptyPolls += 1;
      else {
        Atomics.store(control, SLEEPING, 1);
        const seen = Atomics.load(control, WRITE);
        if (read === seen) {
          asleep = true;
          idleIfDone();
          const wait = Atomics.waitAsync(control, WRITE, seen);
          if (wait.async) await wait.value;
          asleep = false;
        }
        Atomics.store(control, SLEEPING, 0);
        emptyPolls = 0;
        if (stopped) break;
      }
      // Calls that end together share a batch (one write for all of them), and the thread's own
      // work (the writer's drain, messages) gets its turn between takes.
      await new Promise((resolve) =>
        data.batchDelayMs > 0 ? setTimeout(resolve, data.batchDelayMs) : setImmediate(resolve),
      );
      await take();
    }
  };

  port.on('message', (message: ToWriterThread) => {
    if (message.type === 'big') {
      // One record too large for the ring, sent on its own after what the ring held before it.
      void take().then(() => {
        const { captured, ackId } = decodeRecord(ringViews(message.memory), 0);
        consumed = (consumed + 1) | 0;
        idleSent = false;
        const waiting = hand(captured, ackId);
        publish();
        return waiting;
      });
      return;
    }
    const { id, op } = message;
    const reply = (error?: unknown): void =>
      post({
        type: 'reply',
        id,
        ...(error === undefined ? {} : { error: error instanceof Error ? error.message : String(error) }),
      });
    const settle = (work: Promise<unknown>): void => {
      work.then(
        () => {
          publish();
          reply();
        },
        (error: unknown) => {
          publish();
          reply(error ?? 'failed');
        },
      );
    };
    if (op === 'ready') settle(writer.ready());
    else if (op === 'flush') settle(take().then(() => writer.flush()));
    else {
      stopped = true;
      Atomics.notify(control, WRITE);
      settle(take().then(() => writer.close()));
    }
  });

  pump().catch((error: unknown) => logger.error({ err: error }, 'audit writer thread failed'));
}

/** A log line for the calls' thread's logger (see `logFields` for what crosses). */
function postLog(
  post: (message: FromWriterThread) => void,
  level: keyof Logger,
  fields: Record<string, unknown>,
  message: string | undefined,
): void {
  post({ type: 'log', level, fields: crossingFields(fields), message });
}
