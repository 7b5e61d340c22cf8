import { ERROR_META_KEY, type ErrorEnvelope, isErrorCode, type ToolResult } from '@toolgate/core';
import type { RemovedCounts, Scrubber } from './scrub.js';

type ContentPart = ToolResult['content'][number];

// Fields of a content part that are not text the model reads: the discriminant, media types,
// base64 payloads, client annotations.
const NOT_TEXT = new Set(['type', 'mimeType', 'data', 'blob', 'annotations', '_meta']);

/** The toolgate envelope of an error result, or undefined for a raw `isError` result. */
export function envelopeOf(result: ToolResult): ErrorEnvelope | undefined {
  const meta = result._meta?.[ERROR_META_KEY] as Partial<ErrorEnvelope> | undefined;
  return meta !== undefined && isErrorCode(meta.error) ? (meta as ErrorEnvelope) : undefined;
}

/**
 * A copy of an error result with every string the model may see scrubbed: the envelope (its code
 * and incident id kept), the content (the envelope's JSON text re-derived from the scrubbed
 * envelope), and any `structuredContent`, nested. `incidentId` is added to an envelope that has none.
 */
export function scrubErrorResult(
  result: ToolResult,
  scrubber: Scrubber,
  removed: RemovedCounts,
  incidentId?: string,
): ToolResult {
  const envelope = envelopeOf(result);
  const out: ToolResult = { ...result };
  if (envelope === undefined) {
    out.content = result.content.map((part) => scrubPart(part, scrubber, removed));
  } else {
    const clean = scrubber.value(envelope, removed) as ErrorEnvelope;
    clean.ok = false;
    clean.error = envelope.error;
    const id = envelope.incidentId ?? incidentId;
    if (id !== undefined) clean.incidentId = id;
    const text = JSON.stringify(clean);
    out.content = result.content.map((part) =>
      isEnvelopeText(part, envelope) ? { ...part, text } : scrubPart(part, scrubber, removed),
    );
    out._meta = { ...result._meta, [ERROR_META_KEY]: clean };
  }
  if (result.structuredContent !== undefined) {
    out.structuredContent = scrubber.value(result.structuredContent, removed) as Record<string, unknown>;
  }
  return out;
}

function isEnvelopeText(part: ContentPart, envelope: ErrorEnvelope): boolean {
  if (part.type !== 'text' || !part.text.startsWith('{')) return false;
  try {
    const parsed = JSON.parse(part.text) as Partial<ErrorEnvelope>;
    return parsed.ok === false && parsed.error === envelope.error;
  } catch {
    return false;
  }
}

function scrubPart<T extends object>(part: T, scrubber: Scrubber, removed: RemovedCounts): T {
  const out = { ...part } as Record<string, unknown>;
  for (const [key, value] of Object.entries(part)) {
    if (NOT_TEXT.has(key)) continue;
    if (typeof value === 'string') out[key] = scrubber.text(value, removed);
    else if (key === 'resource' && typeof value === 'object' && value !== null) {
      out[key] = scrubPart(value as Record<string, unknown>, scrubber, removed);
    }
  }
  return out as T;
}
