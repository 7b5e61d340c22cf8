import { fail, type ToolResult } from '@toolgate/core';

// What the model sees when the breaker answers instead of the handler. Messages name the tool the
// model called, never the dependency behind it (the model sees the contract, not the implementation).

/** Suggested wait after a capacity refusal: long enough for a typical in-flight call to finish. */
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

export function capacityAnswer(toolName: string): ToolResult {
  return fail('rate_limited', `Too many ${toolName} calls are running at once.`, {
    hint: 'Wait for retryAfterMs, then call again; do not send these calls in parallel.',
    retryable: true,
    retryAfterMs: CAPACITY_RETRY_AFTER_MS,
  });
}

export function timeoutAnswer(toolName: string, timeoutMs: number): ToolResult {
  return fail('timeout', `${toolName} did not finish within ${timeoutMs} ms and was cancelled.`);
}

export function cancelledAnswer(toolName: string): ToolResult {
  return fail('timeout', `${toolName} was cancelled before it finished.`, {
    hint: 'The request was cancelled. Call again only if the answer is still needed.',
  });
}

export function shutdownAnswer(toolName: string): ToolResult {
  return fail('unavailable', `${toolName} is unavailable: the server is shutting down.`, {
    hint: 'Do not retry now; tell the user the service is restarting.',
    retryable: true,
  });
}
