import { createAudit, createFileSink, createStderrSink } from '@toolgate/audit';
import { createCircuitBreaker } from '@toolgate/circuit-breaker';
import type { Logger, ToolMiddleware } from '@toolgate/core';
import { createOtel } from '@toolgate/otel';
import { createRedactErrors } from '@toolgate/redact-errors';
import { createRepeatGuard } from '@toolgate/repeat-guard';

// Every middleware factory this app calls lives in this one file, so renaming a factory is a one-line change.

export interface StackOptions {
  /** Append-only audit file; audit records go to stderr as JSON lines when undefined. @default undefined */
  auditFile?: string | undefined;
  logger: Logger;
}

/** The full middleware stack in DESIGN.md's order, and how to shut it down. */
export interface Stack {
  readonly middleware: readonly ToolMiddleware[];
  /** Flushes audit and stops the breakers; call after the HTTP server drained. */
  close(): Promise<void>;
}

/**
 * Reference tools whose answer is a conversation with the client, not a value: a repeat answered from
 * repeat-guard's cache would skip the log messages, the progress notifications, the sampling request or
 * the person's (possibly different) answer that the conformance scenarios and any real client expect
 * on every call. The static-content tools stay guarded, so the suite still passes through the guard.
 */
const CONVERSATIONAL_TOOLS = [
  'test_tool_with_logging',
  'test_tool_with_progress',
  'test_sampling',
  'test_elicitation',
  'test_elicitation_sep1034_defaults',
  'test_elicitation_sep1330_enums',
] as const;

export function createStack(options: StackOptions): Stack {
  const { logger } = options;
  const audit = createAudit({
    sink: options.auditFile ? createFileSink(options.auditFile) : createStderrSink(),
    logger,
  });
  const breaker = createCircuitBreaker({
    logger,
    tools: {
      // A person may take minutes to answer; a breaker timeout must not cut them off.
      test_elicitation: { timeout: false },
      test_elicitation_sep1034_defaults: { timeout: false },
      test_elicitation_sep1330_enums: { timeout: false },
    },
  });
  const redact = createRedactErrors({ logger });
  const repeat = createRepeatGuard({
    tools: Object.fromEntries(CONVERSATIONAL_TOOLS.map((name) => [name, false])),
  });
  const middleware: ToolMiddleware[] = [
    createOtel({ transport: 'tcp', logger }),
    audit,
    redact,
    repeat,
    breaker,
  ];
  return {
    middleware,
    async close() {
      await audit.close();
      breaker.close();
      repeat.close();
      redact.close();
    },
  };
}
