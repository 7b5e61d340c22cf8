import {
  type ErrorEnvelope,
  errorOf,
  fail,
  mirrorsStructuredContent,
  resultFromEnvelope,
  type ToolResult,
} from '@toolgate/core';

/** "moments ago" or "12 s ago": how old the earlier answer is, in words the model reads. */
export function describeAge(ageMs: number): string {
  return ageMs < 1000 ? 'moments ago' : `${Math.round(ageMs / 1000)} s ago`;
}

/**
 * Adds a sentence for the model to a result without touching the original: on a success, to
 * `structuredContent.note` and to the JSON text that mirrors it (the output schema core publishes
 * always allows `note`); on a failure, to the envelope's hint.
 */
export function withNote(result: ToolResult, text: string): ToolResult {
  const envelope = errorOf(result);
  if (envelope) return resultFromEnvelope({ ...envelope, hint: `${envelope.hint} ${text}` });
  const structured = result.structuredContent;
  if (structured === undefined) {
    return { ...result, content: [...result.content, { type: 'text', text }] };
  }
  // An `ok()` result's first part is its mirror: no need to serialise the data to find it.
  const okBuilt = mirrorsStructuredContent(result);
  const mirror = okBuilt ? undefined : JSON.stringify(structured);
  const earlier = structured.note;
  const annotated = {
    ...structured,
    note: typeof earlier === 'string' && earlier !== '' ? `${earlier} ${text}` : text,
  };
  const annotatedText = JSON.stringify(annotated);
  let mirrored = false;
  const content = result.content.map((part, index) => {
    if (part.type !== 'text' || (okBuilt ? index !== 0 : part.text !== mirror)) return part;
    mirrored = true;
    return { ...part, text: annotatedText };
  });
  // A hand-built result without the JSON mirror still tells text-only clients.
  if (!mirrored) content.push({ type: 'text', text });
  return { ...result, content, structuredContent: annotated };
}

/** The note on a success answered from the earlier identical call. */
export function repeatNote(ageMs: number): string {
  return `Repeated call: this is the unchanged result of the identical call made ${describeAge(ageMs)}. Calling again with the same arguments will not change it; change the arguments or answer the user.`;
}

/** The `repeated_call` failure for `onRepeat: 'fail'`, with core's default hint. */
export function repeatedCallFailure(toolName: string, ageMs: number): ToolResult {
  return fail('repeated_call', `This exact call to ${toolName} was already answered ${describeAge(ageMs)}.`);
}

/** The earlier error again, told not to retry unchanged (or to wait the rest of its retryAfterMs). */
export function refusedFailure(
  envelope: ErrorEnvelope,
  ageMs: number,
  waitMs: number | undefined,
): ToolResult {
  if (waitMs !== undefined) {
    return resultFromEnvelope({
      ...envelope,
      retryAfterMs: waitMs,
      hint: `This exact call failed ${describeAge(ageMs)}; wait retryAfterMs before retrying it unchanged. ${envelope.hint}`,
    });
  }
  return resultFromEnvelope({
    ...envelope,
    hint: `This exact call already failed ${describeAge(ageMs)} with this error and would fail the same way; do not retry it unchanged. ${envelope.hint}`,
  });
}

/** The note on a result that ends a no-progress streak. */
export function noProgressNote(toolName: string, streak: number): string {
  return `No progress: the last ${streak} calls to ${toolName} returned this same result with different arguments. Varying the arguments is not changing the answer; answer the user with what you have.`;
}

/** The `repeated_call` failure for `onNoProgress: 'fail'`. */
export function noProgressFailure(toolName: string, streak: number): ToolResult {
  return fail(
    'repeated_call',
    `The last ${streak} calls to ${toolName} returned the same result with different arguments.`,
    {
      hint: 'Varying the arguments is not changing the result. Stop calling this tool with variations and answer the user with what you have.',
    },
  );
}

/** Retry suggestion when a fail-closed guard cannot reach its store. */
export const STORE_RETRY_AFTER_MS = 5000;

export function storeUnavailableFailure(toolName: string): ToolResult {
  return fail('unavailable', `${toolName} is temporarily unavailable.`, {
    hint: 'Do not retry now; it can be tried once more after retryAfterMs.',
    retryable: true,
    retryAfterMs: STORE_RETRY_AFTER_MS,
  });
}
