import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ERROR_CODES, ERROR_META_KEY } from '@toolgate/core';

/**
 * What is wrong with a result against toolgate's result contract (empty when nothing is): a success
 * carries `structuredContent` `{ ok: true, ... }` mirrored as JSON text; a failure is `isError` with the
 * envelope as JSON text and in `_meta["toolgate/error"]`, and no `structuredContent`.
 */
export function resultContractProblems(result: CallToolResult): string[] {
  const problems: string[] = [];
  const texts = result.content.filter((part) => part.type === 'text');
  if (texts.length !== 1 || result.content.length !== 1)
    problems.push('content is not exactly one text part');
  let parsed: unknown;
  try {
    parsed = JSON.parse(texts[0]?.type === 'text' ? texts[0].text : '');
  } catch {
    problems.push('the text is not JSON');
  }
  if (result.isError === true) {
    if (result.structuredContent !== undefined) problems.push('a failure carries structuredContent');
    const envelope = parsed as Record<string, unknown> | undefined;
    if (envelope?.ok !== false) problems.push('envelope.ok is not false');
    if (!(ERROR_CODES as readonly unknown[]).includes(envelope?.error)) problems.push('unknown error code');
    if (typeof envelope?.message !== 'string' || envelope.message === '') problems.push('no message');
    if (typeof envelope?.hint !== 'string' || envelope.hint === '') problems.push('no hint');
    if (typeof envelope?.retryable !== 'boolean') problems.push('retryable is not a boolean');
    if (envelope?.retryAfterMs !== undefined && !(Number(envelope.retryAfterMs) >= 0))
      problems.push('retryAfterMs is not a non-negative number');
    if (JSON.stringify(result._meta?.[ERROR_META_KEY]) !== JSON.stringify(envelope))
      problems.push('_meta envelope differs from the text');
  } else {
    const data = result.structuredContent as Record<string, unknown> | undefined;
    if (data?.ok !== true) problems.push('success without structuredContent.ok === true');
    if (JSON.stringify(parsed) !== JSON.stringify(data)) problems.push('text differs from structuredContent');
  }
  return problems;
}

/** The error code of a result, or `ok`. */
export function outcomeCode(result: CallToolResult): string {
  if (result.isError !== true) return 'ok';
  return String((result._meta?.[ERROR_META_KEY] as { error?: unknown } | undefined)?.error ?? 'no-envelope');
}

/** The failure envelope of a result as the model reads it (the JSON text). */
export function envelopeOf(result: CallToolResult): Record<string, unknown> {
  const text = result.content.find((part) => part.type === 'text');
  return JSON.parse(text?.type === 'text' ? text.text : '{}') as Record<string, unknown>;
}
