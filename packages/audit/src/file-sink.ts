import { writeSync } from 'node:fs';
import { constants, type FileHandle, open } from 'node:fs/promises';
import { doneWithBytesWhenSettled } from './batch-bytes.js';
import { isCutShort, parseRecordLine } from './chain.js';
import { AuditSinkError, isPermanentSinkError } from './sink-errors.js';
import type { AuditBatch, AuditSink, ChainAnchor, ChainHead } from './types.js';

export interface FileSinkOptions {
  /** The file; created when missing, only ever appended to. */
  path: string;
  /**
   * `fdatasync` after every batch, so a power loss keeps what was acknowledged. A failed sync refuses
   * that batch and every later one until the audit is restarted (a later sync could pass without the
   * lost pages). @default false
   */
  fsync?: boolean;
  /** Permissions of a new file (records name principals). @default 0o600 */
  mode?: number;
  /**
   * Batches of at most this many bytes are written with one synchronous `write` on the writer's
   * turn: a few µs to the page cache, where handing the write to libuv's thread pool and back costs
   * tens of µs of CPU (measured: 1.2-2 µs against 23-37 µs for a 900-byte append). Larger batches
   * go to the thread pool, so the event loop never waits on one long write. 0: every batch on the
   * thread pool (a network filesystem, where any write may stall). A named pipe, socket or device is
   * always written on the thread pool (a write there blocks until someone reads). @default 65536
   */
  syncWriteMaxBytes?: number;
}

const TAIL_CHUNK = 64 * 1024;

// The options each file sink was made from: `createAudit({ thread: true })` makes the same sink again
// on its writer thread (a sink's closures cannot move between threads).
const optionsOfSink = new WeakMap<AuditSink, FileSinkOptions>();

/** The options a sink from `createFileSink` was made with; undefined for any other sink. */
export function fileSinkOptionsOf(sink: AuditSink): FileSinkOptions | undefined {
  return optionsOfSink.get(sink);
}
const NEWLINE = Buffer.from('\n');

/**
 * An append-only JSON-lines file. Opened with O_APPEND, each batch is one `write` that lands at the
 * end of the file whatever else happened to it, and the batch counts as stored only once the kernel
 * has all of it. Reopening an existing file continues its chain from the last complete line.
 * Each process writes its own chain (`chainId`): a restart with the same chain id continues it,
 * another id starts a new chain after the last line. One process per file at a time.
 */
export function createFileSink(options: FileSinkOptions | string): AuditSink {
  const settings = typeof options === 'string' ? { path: options } : options;
  const { path } = settings;
  const syncWriteMaxBytes = settings.syncWriteMaxBytes ?? 65_536;
  if (!Number.isSafeInteger(syncWriteMaxBytes) || syncWriteMaxBytes < 0) {
    throw new RangeError('createFileSink: syncWriteMaxBytes must be a non-negative integer');
  }
  let handle: FileHandle | undefined;
  // Synchronous writes go to a regular file only. A write to a named pipe, socket or device can block
  // until someone reads: on the writer's thread it would stop that thread's event loop (and with it
  // close()'s deadline) for as long as nobody does.
  let syncLimit = 0;
  let tornTail = false;
  let partial: { batch: AuditBatch; bytes: Uint8Array; offset: number } | undefined;
  // The last line head() found, when it belongs to another chain: the record a new chain names.
  let lastOther: ChainAnchor | undefined;
  // Set by a failed fdatasync. Linux reports a failed writeback once and may drop the pages it could
  // not write, so the next sync passes without them: no later sync on this handle proves anything.
  let syncFailure: Error | undefined;
  // Done with a batch's bytes once write() settles: a retry of the same batch resumes from `partial`,
  // and a new batch replaces it.
  const sink = doneWithBytesWhenSettled({
    async head(chainId: string): Promise<ChainHead | undefined> {
      // head() is retried after a failure: open once, not once per attempt.
      if (handle === undefined) {
        const opened = await open(
          path,
          constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT,
          settings.mode ?? 0o600,
        );
        try {
          syncLimit = (await opened.stat()).isFile() ? syncWriteMaxBytes : 0;
        } catch (error) {
          await opened.close().catch(() => {});
          throw error;
        }
        handle = opened;
      }
      const tail = await readLastLine(path);
      tornTail = tail.torn;
      if (tail.line === undefined) return undefined;
      const record = parseRecordLine(tail.line);
      if (!record)
        throw new AuditSinkError(
          `audit file ${path}: the last line is not an audit record; refusing to append after it`,
          { permanent: true },
        );
      // Another chain's record (an earlier process): this writer starts its own chain after it, and
      // names it (`anchor`), so deleting that chain whole is found by verify.
      if ((record.chainId ?? '') !== chainId) {
        lastOther = { chainId: record.chainId ?? '', seq: record.seq, hash: record.hash };
        return undefined;
      }
      lastOther = undefined;
      return { seq: record.seq, hash: record.hash };
    },
    async anchor(): Promise<ChainAnchor | undefined> {
      return lastOther;
    },
    async write(batch: AuditBatch): Promise<void> {
      if (!handle) throw new Error('audit file sink: head() must run before write()');
      if (syncFailure !== undefined) throw syncFailure;
      // A retry of a batch that was partly written resumes where the kernel stopped: no record
      // is written twice. The writer retries the same batch object.
      if (partial?.batch !== batch) {
        // A last line without its newline (a crash mid-write, or one that cut only the newline) is
        // closed first, so it cannot swallow the next record.
        const bytes = tornTail ? Buffer.concat([NEWLINE, batch.bytes]) : batch.bytes;
        partial = { batch, bytes, offset: 0 };
      }
      const current = partial;
      try {
        // A small batch: written now, synchronously (a partial write resumes below, on the pool).
        if (current.bytes.length - current.offset <= syncLimit) {
          current.offset += writeSync(
            handle.fd,
            current.bytes,
            current.offset,
            current.bytes.length - current.offset,
          );
        }
        while (current.offset < current.bytes.length) {
          const { bytesWritten } = await handle.write(
            current.bytes,
            current.offset,
            current.bytes.length - current.offset,
          );
          current.offset += bytesWritten;
        }
        tornTail = false;
      } catch (error) {
        // Once part of the batch is in the file it can only be finished: dropped, its records would
        // stay in the file while the next batch reused their seqs, or glue onto the cut line.
        if (current.offset > 0 && isPermanentSinkError(error)) {
          throw new AuditSinkError(`audit file ${path}: a batch failed after part of it was written`, {
            permanent: false,
            cause: error,
          });
        }
        throw error;
      }
      partial = undefined;
      if (settings.fsync) {
        try {
          await handle.datasync();
        } catch (error) {
          // Permanent: this batch and every later one are refused (durable calls answer
          // `unavailable`) and none is written, so no seq is reused; a restart reads the tail again.
          syncFailure = new AuditSinkError(
            `audit file ${path}: fdatasync failed (${(error as Error).message}); records written since the last good sync may not be on disk, so this sink acknowledges none until the audit is restarted`,
            { permanent: true, cause: error },
          );
          throw syncFailure;
        }
      }
    },
    async close(): Promise<void> {
      await handle?.close();
      handle = undefined;
    },
  });
  optionsOfSink.set(sink, { ...settings });
  return sink;
}

/**
 * The last record of a file that no crash cut short (read backwards in chunks), and whether the file
 * does not end in a newline (`torn`: the next write must close the last line first). That last line is
 * either partial (a crash mid-write: passed over, the record before it is the last) or a whole record
 * whose newline a crash cut off (the write stopped one byte short): that record is the last, as the
 * verifier reads it, and the chain goes on after it.
 */
async function readLastLine(path: string): Promise<{ line: string | undefined; torn: boolean }> {
  const file = await open(path, 'r');
  try {
    const { size } = await file.stat();
    if (size === 0) return { line: undefined, torn: false };
    let end = size;
    let tail = Buffer.alloc(0);
    let torn: boolean | undefined;
    // Whether the unterminated last line was read whole (and tested for a record).
    let tornChecked = false;
    while (end > 0) {
      const start = Math.max(0, end - TAIL_CHUNK);
      const chunk = Buffer.alloc(end - start);
      await file.read(chunk, 0, chunk.length, start);
      tail = Buffer.concat([chunk, tail]);
      end = start;
      torn ??= tail[tail.length - 1] !== 0x0a;
      const text = tail.toString('utf8');
      const lines = text.split('\n');
      // Complete lines end in '\n'; with a torn tail the last element is the unterminated line.
      const last = lines.pop()!;
      // Once its start is read (a newline before it, or the file's start): a whole record is the last.
      if (torn && !tornChecked && (lines.length > 0 || end === 0)) {
        tornChecked = true;
        if (parseRecordLine(last) !== undefined) return { line: last, torn };
      }
      // The first element is whole only once the file's start is read. Lines an earlier crash cut
      // short (closed off by the writer after it) are passed over: the chain goes on from the last
      // whole record, as the writer after the first crash did, rather than refusing every later record.
      for (let index = lines.length - 1; index >= (end === 0 ? 0 : 1); index -= 1) {
        if (!isCutShort(lines[index]!)) return { line: lines[index], torn };
      }
    }
    return { line: undefined, torn: torn ?? false };
  } finally {
    await file.close();
  }
}
