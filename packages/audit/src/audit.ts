import {
  callNext,
  createStderrLogger,
  DEFAULT_SECRET_KEYS,
  fail,
  type LateOutcome,
  mapSettled,
  onLateOutcome,
  outcomeOf,
  SECRET_PATTERNS,
  type ToolContext,
  type ToolResult,
} from '@toolgate/core';
import { createShapeJson } from './args-shape.js';
import { checkChainId, defaultChainId } from './chain-id.js';
import { chainKeyOf } from './chain-key.js';
import { DurableWaits } from './durable-wait.js';
import { fileSinkOptionsOf } from './file-sink.js';
import { type CapturedRecord, captureCall, type RecordSettings, resultOfThrow } from './record.js';
import { createRedactedJson } from './redacted-json.js';
import { createStderrSink } from './stderr-sink.js';
import { ThreadedWriter } from './threaded-writer.js';
import type {
  AuditHead,
  AuditKey,
  AuditMiddleware,
  AuditOptions,
  AuditSink,
  AuditStats,
  AuditToolOptions,
} from './types.js';
import { AuditWriter, type WriterSettings } from './writer.js';

/**
 * The audit middleware: exactly one record per `tools/call` (success, failure, throw, short-circuit,
 * abort, refused arguments, unknown tool), serialised when the call ends, hash-chained and written in
 * batches off the call's path (or, `durable: true`, before the answer leaves).
 * Place it right inside tracing: `otel → audit → redact-errors → ...`. It installs no signal or exit
 * handler: the application calls `close()` in its shutdown.
 */
export function createAudit(options: AuditOptions = {}): AuditMiddleware {
  const logger = options.logger ?? createStderrLogger();
  const maxArgsChars = positive(options.maxArgsChars ?? 65_536, 'maxArgsChars');
  const chainId = options.chainId === undefined ? defaultChainId() : checkChainId(options.chainId);
  const durable = options.durable ?? false;
  const durableWaitMs = options.durableWaitMs ?? 10_000;
  // Infinity: a durable call waits for its record until it is stored or given up (close()).
  if (durableWaitMs !== Number.POSITIVE_INFINITY) positive(durableWaitMs, 'durableWaitMs');
  const waits =
    durable && durableWaitMs !== Number.POSITIVE_INFINITY ? new DurableWaits(durableWaitMs) : undefined;
  const key = options.key === undefined ? undefined : chainKeyOf(options.key, 'createAudit: key');
  const sink = options.sink ?? createStderrSink();
  const writerSettings: WriterSettings = {
    chainId,
    key,
    batchSize: positive(options.batchSize ?? 4096, 'batchSize'),
    maxBatchBytes: positive(options.maxBatchBytes ?? 4 * 2 ** 20, 'maxBatchBytes'),
    // Durable calls wait for their batch: a timer would add a millisecond to each, and batches form
    // anyway while the previous write is in flight.
    batchDelayMs: Math.max(0, options.batchDelayMs ?? (durable ? 0 : 1)),
    maxBufferBytes: positive(options.maxBufferBytes ?? 64 * 2 ** 20, 'maxBufferBytes'),
    bufferSize: positive(options.bufferSize ?? 1_000_000, 'bufferSize'),
    maxWaitMs: Math.max(0, options.maxWaitMs ?? 1_000),
    closeTimeoutMs: Math.max(0, options.closeTimeoutMs ?? 10_000),
    logger,
  };
  const writer =
    options.thread === true
      ? threadedWriter(sink, options.key, writerSettings)
      : new AuditWriter(sink, writerSettings);
  const resolve = (override: Partial<AuditToolOptions>): RecordSettings => {
    const secretKeys = override.secretKeys ?? options.secretKeys ?? [];
    const secretPatterns = override.secretPatterns ?? options.secretPatterns ?? [];
    const patterns = [...SECRET_PATTERNS, ...secretPatterns];
    return {
      args: override.args ?? options.args ?? 'redacted',
      redactedJson: createRedactedJson([...DEFAULT_SECRET_KEYS, ...secretKeys], patterns),
      shapeJson: createShapeJson(patterns),
      plainIds: secretPatterns.length === 0,
    };
  };
  const defaults = resolve({});
  // A Map, not the options object: a client-chosen tool name such as `constructor` must not find
  // an inherited property.
  const perTool = new Map<string, RecordSettings | false>();
  for (const [name, override] of Object.entries(options.tools ?? {})) {
    perTool.set(name, override === false ? false : resolve(override));
  }
  const hasOverrides = perTool.size > 0;

  // Calls inside the middleware now, so drain() can wait for them.
  let inside = 0;
  const idle: (() => void)[] = [];
  const leave = (): void => {
    inside -= 1;
    // Checked first: splice(0) builds a new array, and sequential calls reach zero on every call.
    if (inside === 0 && idle.length > 0) for (const wake of idle.splice(0)) wake();
  };
  const drain = async (): Promise<void> => {
    if (inside > 0) await new Promise<void>((wake) => idle.push(wake));
    await writer.flush();
  };
  let closing: Promise<void> | undefined;
  // Flushes with a deadline (closeTimeoutMs). Calls still running get their records dropped and
  // counted: the application drains its calls first (see the README's shutdown order).
  const close = (): Promise<void> => {
    closing ??= writer.close();
    return closing;
  };

  /** Captures a finished call's record; undefined when it cannot be serialised (counted, logged). */
  const capture = (
    ctx: ToolContext,
    result: ToolResult,
    settings: RecordSettings,
  ): CapturedRecord | undefined => {
    try {
      return captureCall(ctx, result, settings, chainId, maxArgsChars);
    } catch (error) {
      // A record that cannot be serialised is counted and reported, never silently skipped.
      logger.error({ err: error, tool: ctx.toolName }, 'audit record could not be serialised');
      writer.lose('the record could not be serialised');
      return undefined;
    }
  };

  /** Queues a call's record; a promise only when the buffer is full and the call must wait for room. */
  const queue = (
    ctx: ToolContext,
    result: ToolResult,
    settings: RecordSettings,
  ): Promise<unknown> | undefined => {
    const captured = capture(ctx, result, settings);
    if (result.isError === true) watchLate(ctx, result, settings);
    return captured === undefined ? undefined : writer.push(captured, false);
  };

  /**
   * A call answered `timeout` may still have done its side effect: its handler ran on (core abandoned it,
   * or a breaker's deadline answered for it). What it came to, should it settle later (core's
   * `onLateOutcome`), is recorded as a second record of the same call, its decisions ending with
   * `{ by: 'audit', action: 'late-outcome' }` and its outcome the handler's, so the trail shows a refund
   * that went through after the model was told it timed out.
   */
  const watchLate = (ctx: ToolContext, result: ToolResult, settings: RecordSettings): void => {
    if (outcomeOf(result) !== 'timeout') return;
    onLateOutcome(ctx, (late: LateOutcome) => {
      const lateResult = late.result ?? resultOfThrow(ctx, late.error);
      ctx.decisions.push({
        by: 'audit',
        action: 'late-outcome',
        reason: 'the handler finished after its call was answered timeout',
        detail: { outcome: outcomeOf(lateResult) },
      });
      const captured = capture(ctx, lateResult, settings);
      // Nobody waits for it: a full buffer drops it (counted), a closed audit too.
      if (captured !== undefined) void writer.push(captured, false);
    });
  };

  // Durable: the answer waits until its record is stored (or is withheld).
  const durableCall = async (
    ctx: ToolContext,
    next: () => Promise<ToolResult>,
    settings: RecordSettings,
  ): Promise<ToolResult> => {
    inside += 1;
    try {
      let result: ToolResult;
      let thrown: { error: unknown } | undefined;
      try {
        result = await next();
      } catch (error) {
        thrown = { error };
        result = resultOfThrow(ctx, error);
      }
      const captured = capture(ctx, result, settings);
      if (result.isError === true) watchLate(ctx, result, settings);
      const pushed = captured ? writer.push(captured, true) : undefined;
      // Past durableWaitMs the answer is withheld while the record stays queued: written once the sink
      // takes it, a record without an answer (as after a crash between the write and the answer).
      const stored = pushed === undefined ? false : await (waits === undefined ? pushed : waits.wait(pushed));
      if (stored !== true) {
        return fail('unavailable', 'The call could not be recorded; its result is withheld.', {
          hint: 'The audit trail is unavailable. Try again later.',
          retryable: true,
          retryAfterMs: RETRY_AFTER_MS,
        });
      }
      if (thrown) throw thrown.error;
      return result;
    } finally {
      leave();
    }
  };

  // Not durable (the default): the record is queued as the call ends and the answer goes on at once,
  // unless the buffer is full (then it waits for room, up to maxWaitMs). An after-call step on next()'s
  // promise rather than an async frame per call, stacked with the steps of the middleware inside it
  // (core's mapSettled): no microtask hop of its own.
  const middleware = (ctx: ToolContext, next: () => Promise<ToolResult>): Promise<ToolResult> => {
    const settings = hasOverrides ? (perTool.get(ctx.toolName) ?? defaults) : defaults;
    if (settings === false) return next();
    if (durable) return durableCall(ctx, next, settings);
    inside += 1;
    const pending = callNext(next);
    return mapSettled(
      pending,
      (result) => {
        let waiting: Promise<unknown> | undefined;
        try {
          waiting = queue(ctx, result, settings);
        } finally {
          if (waiting === undefined) leave();
        }
        return waiting === undefined ? result : waiting.then(() => result).finally(leave);
      },
      (error: unknown) => {
        let waiting: Promise<unknown> | undefined;
        try {
          waiting = queue(ctx, resultOfThrow(ctx, error), settings);
        } finally {
          if (waiting === undefined) leave();
        }
        if (waiting === undefined) throw error;
        return waiting.then(() => Promise.reject(error)).finally(leave);
      },
    );
  };
  return Object.assign(middleware, {
    ready: (): Promise<void> => writer.ready(),
    flush: (): Promise<void> => writer.flush(),
    drain,
    close,
    stats: (): AuditStats => writer.stats(),
    head: (): AuditHead | undefined => writer.head(),
  });
}

/** The writer for `thread: true`: a file sink's, made again on a worker thread. */
function threadedWriter(
  sink: AuditSink,
  key: AuditKey | undefined,
  settings: WriterSettings,
): ThreadedWriter {
  const file = fileSinkOptionsOf(sink);
  if (file === undefined) {
    throw new TypeError(
      "createAudit: thread: true needs a sink made by createFileSink (other sinks run on the calls' thread)",
    );
  }
  // The key's bytes go to the thread, which makes its own ChainKey (checked above already).
  const bytes =
    key === undefined ? undefined : typeof key === 'string' ? Buffer.from(key, 'utf8') : Uint8Array.from(key);
  return new ThreadedWriter(file, bytes, settings);
}

/**
 * What a durable call answered `unavailable` suggests to wait before trying again: the writer's longest
 * backoff between two tries of a failing sink, so the sink has been tried again by then.
 */
const RETRY_AFTER_MS = 5_000;

function positive(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`createAudit: ${name} must be a positive integer`);
  return value;
}
