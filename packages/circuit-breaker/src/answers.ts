import { cancelledResult, fail, type ToolResult } from '@toolgate/core';

// What the model sees when the breaker answers instead of the handler. Messages name the tool the
// model called, never the dependency behind it (the model sees the contract, not the implementation).

/** Longest wait suggested after a capacity refusal: long enough for a typical in-flight call to finish. */
export const CAPACITY_RETRY_AFTER_MS = 1000;

function dontRetryHint(toolName: string): string {
  return `Do not retry now. Tell the user that ${toolName} is unavailable at the moment; it can be tried once more after retryAfterMs.`;
}

export function openAnswer(toolName: string, retryAfterMs: number): ToolResult {
  return fail('unavailable', `${toolName} is temporarily unavailable: a service it depends on is failing.`, {
    hint: dontRetryHint(toolName),
    retryable: true,
    retryAfterMs,
  });
}

export function probingAnswer(toolName: string, retryAfterMs: number): ToolResult {
  return fail(
    'unavailable',
    `${toolName} is temporarily unavailable: a service it depends on is being re-checked.`,
    {
      hint: dontRetryHint(toolName),
      retryable: true,
      retryAfterMs,
    },
  );
}

// Said only when the cap on calls in flight is really hit; an outage is `unavailable`, never this.
export function capacityAnswer(toolName: string, capacity: number, retryAfterMs: number): ToolResult {
  return fail(
    'rate_limited',
    `The server is at capacity: ${capacity} ${toolName} calls are already running.`,
    {
      hint: `The server is at capacity. Retry after ${retryAfterMs} ms.`,
      retryable: true,
      retryAfterMs,
    },
  );
}

// One caller holds its whole share of the capacity while other callers are about.
export function callerCapacityAnswer(toolName: string, share: number, retryAfterMs: number): ToolResult {
  return fail(
    'rate_limited',
    `You already have ${share} ${toolName} calls running, your share of the server's capacity.`,
    {
      hint: `Wait for one of your running calls to finish. Retry after ${retryAfterMs} ms.`,
      retryable: true,
      retryAfterMs,
    },
  );
}

export function timeoutAnswer(toolName: string, timeoutMs: number): ToolResult {
  return fail('timeout', `${toolName} did not finish within ${timeoutMs} ms and was cancelled.`);
}

/** Core's answer to a cancelled call, so the breaker and the boundary say the same. */
export const cancelledAnswer: (toolName: string) => ToolResult = cancelledResult;

export function shutdownAnswer(toolName: string): ToolResult {
  return fail('unavailable', `${toolName} is unavailable: the server is shutting down.`, {
    hint: 'Do not retry now; tell the user the service is restarting.',
    retryable: true,
  });
}
