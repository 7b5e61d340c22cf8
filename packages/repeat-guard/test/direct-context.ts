import { createSilentLogger, type ToolContext, type ToolDefinition } from '@toolgate/core';

const logger = createSilentLogger();
const signal = new AbortController().signal;

/**
 * A minimal context for driving the middleware directly, where a round trip through a client per
 * call would be too slow (100,000 calls) or too noisy (a micro-benchmark). The guard reads only
 * the tool, arguments, validation, session, signal, decisions and logger.
 */
export function directContext(tool: ToolDefinition, args: Record<string, unknown>): ToolContext {
  return {
    toolName: tool.name,
    tool,
    args,
    rawArgs: args,
    validation: { ok: true },
    request: { id: 1, sessionId: 'direct', authInfo: undefined, meta: undefined, headers: undefined, signal },
    signal,
    startedAt: Date.now(),
    startTime: performance.now(),
    incidentId: undefined,
    decisions: [],
    state: {},
    logger,
  };
}
