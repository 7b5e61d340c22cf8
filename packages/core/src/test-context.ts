import { type CallerIdentity, identifyCaller } from './identity.js';
import { createSilentLogger } from './logger.js';
import { createServerAccess } from './server-access.js';
import type { Logger, ToolContext, ToolDefinition, ToolRequest } from './types.js';

/** One entry a recording logger kept. */
export interface LogEntry {
  level: 'debug' | 'info' | 'warn' | 'error';
  fields: Record<string, unknown>;
  message: string | undefined;
}

/** A logger that keeps every entry in `entries`, for tests that assert what reached the log. */
export function recordingLogger(entries: LogEntry[]): Logger {
  const at =
    (level: LogEntry['level']) =>
    (fields: Record<string, unknown>, message?: string): void => {
      entries.push({ level, fields, message });
    };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

export interface TestContextOptions {
  /** The tool the call is for; an unknown tool when undefined. */
  tool?: ToolDefinition;
  /** Validated (and raw) arguments. @default {} */
  args?: Record<string, unknown>;
  /**
   * Request fields to override (id, sessionId, authInfo, meta, headers, local, signal). `local` defaults
   * to true unless `headers` are given: a bare context stands for a call over stdio, one with headers for
   * a call over HTTP.
   */
  request?: Partial<ToolRequest>;
  /** @default createSilentLogger() */
  logger?: Logger;
  /** @default identifyCaller(request) (`local` without auth info and headers) */
  caller?: CallerIdentity;
  /** Values bound from the caller. @default {} */
  bindings?: Record<string, unknown>;
}

/**
 * A context for driving a middleware directly, where a client round trip per call is too slow
 * (100,000 calls) or too noisy (a micro-benchmark). Tests of behaviour go through `connectTestClient`.
 */
export function createTestContext(options: TestContextOptions = {}): ToolContext {
  const args = options.args ?? {};
  const signal = options.request?.signal ?? new AbortController().signal;
  const request: ToolRequest = {
    id: 1,
    sessionId: undefined,
    authInfo: undefined,
    meta: undefined,
    headers: undefined,
    local: options.request?.headers === undefined,
    ...options.request,
    signal,
  };
  return {
    toolName: options.tool?.name ?? 'unknown_tool',
    tool: options.tool,
    args,
    rawArgs: args,
    validation: { ok: true },
    request,
    caller: options.caller ?? identifyCaller(request),
    bindings: Object.freeze({ ...options.bindings }),
    // No client behind a bare context: progress and logs go nowhere, requests to the client refuse.
    server: createServerAccess({
      signal: () => signal,
      progressToken: undefined,
      sendNotification: async () => {},
      sendRequest: () => Promise.reject(new Error('no client')),
      clientCapabilities: () => undefined,
      canRequest: false,
      logLevel: () => undefined,
    }),
    signal,
    startedAt: Date.now(),
    startTime: performance.now(),
    incidentId: undefined,
    decisions: [],
    state: {},
    logger: options.logger ?? createSilentLogger(),
  };
}
