import {
  createSecretRedactor,
  createStderrLogger,
  DEFAULT_SECRET_KEYS,
  SECRET_PATTERNS,
  type ToolContext,
  type ToolResult,
} from '@toolgate/core';
import { sealRecord } from './chain.js';
import { onProcessExit } from './exit-hooks.js';
import { type CallFacts, captureCall, type RecordSettings, recordOf, resultOfThrow } from './record.js';
import { createStderrSink } from './stderr-sink.js';
import type { AuditMiddleware, AuditOptions, AuditStats, AuditToolOptions } from './types.js';
import { AuditWriter } from './writer.js';

/**
 * The audit middleware: exactly one record per `tools/call` (success, failure, throw, short-circuit,
 * abort, refused arguments, unknown tool), hash-chained, written in batches off the call's path.
 * Place it right inside tracing: `otel → audit → redact-errors → ...`.
 */
export function createAudit(options: AuditOptions = {}): AuditMiddleware {
  const logger = options.logger ?? createStderrLogger();
  const maxArgsChars = positive(options.maxArgsChars ?? 65_536, 'maxArgsChars');
  const writer = new AuditWriter(options.sink ?? createStderrSink(), {
    batchSize: positive(options.batchSize ?? 256, 'batchSize'),
    bufferSize: positive(options.bufferSize ?? 10_000, 'bufferSize'),
    maxWaitMs: Math.max(0, options.maxWaitMs ?? 1_000),
    closeTimeoutMs: Math.max(0, options.closeTimeoutMs ?? 10_000),
    logger,
    seal: (entry, head) => sealRecord(recordOf(entry as CallFacts), head, maxArgsChars),
  });
  const resolve = (override: Partial<AuditToolOptions>): RecordSettings => {
    const secretKeys = override.secretKeys ?? options.secretKeys ?? [];
    const secretPatterns = override.secretPatterns ?? options.secretPatterns ?? [];
    return {
      args: override.args ?? options.args ?? 'redacted',
      redact: createSecretRedactor({
        keys: [...DEFAULT_SECRET_KEYS, ...secretKeys],
        patterns: [...SECRET_PATTERNS, ...secretPatterns],
      }),
    };
  };
  const defaults = resolve({});
  // A Map, not the options object: a client-chosen tool name such as `constructor` must not find
  // an inherited property.
  const perTool = new Map<string, RecordSettings | false>();
  for (const [name, override] of Object.entries(options.tools ?? {})) {
    perTool.set(name, override === false ? false : resolve(override));
  }

  let closing: Promise<void> | undefined;
  const unhook = (options.flushOnExit ?? true) ? onProcessExit(() => close()) : undefined;
  const close = (): Promise<void> => {
    unhook?.();
    closing ??= writer.close();
    return closing;
  };

  const middleware = async (ctx: ToolContext, next: () => Promise<ToolResult>): Promise<ToolResult> => {
    const settings = perTool.get(ctx.toolName) ?? defaults;
    if (settings === false) return next();
    let result: ToolResult;
    let thrown: { error: unknown } | undefined;
    try {
      result = await next();
    } catch (error) {
      thrown = { error };
      result = resultOfThrow(ctx, error);
    }
    const waiting = writer.push(captureCall(ctx, result, settings));
    if (waiting) await waiting;
    if (thrown) throw thrown.error;
    return result;
  };
  return Object.assign(middleware, {
    flush: (): Promise<void> => writer.flush(),
    close,
    stats: (): AuditStats => writer.stats(),
  });
}

function positive(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`createAudit: ${name} must be a positive integer`);
  return value;
}
