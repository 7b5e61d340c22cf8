import { ERROR_META_KEY, type ErrorEnvelope, isErrorCode, type ToolResult } from '@toolgate/core';
import type { RemovedCounts, Scrubber } from './scrub.js';

type ContentPart = ToolResult['content'][number];

// Fields of a content part that are not text: the discriminant, media types, base64 payloads (a
// pattern could corrupt base64 and finds nothing the model reads there).
const NOT_TEXT = new Set(['type', 'mimeType', 'data', 'blob']);

/** The toolgate envelope of an error result, or undefined for a raw `isError` result. */
export function envelopeOf(result: ToolResult): ErrorEnvelope | undefined {
  const meta = result._meta?.[ERROR_META_KEY] as Partial<ErrorEnvelope> | undefined;
  return meta !== undefined && isErrorCode(meta.error) ? (meta as ErrorEnvelope) : undefined;
}

/**
 * A copy of an error result with every string the model may see scrubbed: the envelope (its code
 * and incident id kept), the content (the envelope's JSON text re-derived from the scrubbed
 * envelope; every other field of every part, its `_meta` included), any `structuredContent` and the
 * whole `_meta`, keys and values at any depth, all through core's walk (`mapStrings`).
 * `incidentId` is added to an envelope that has none.
 */
export function scrubErrorResult(
  result: ToolResult,
  scrubber: Scrubber,
  removed: RemovedCounts,
  incidentId?: string,
): ToolResult {
  const envelope = envelopeOf(result);
  const out: ToolResult = { ...result };
  let meta: Record<string, unknown> | undefined;
  if (result._meta !== undefined) {
    // Rest and spread copy own keys as data properties: a "__proto__" key cannot set a prototype.
    const { [ERROR_META_KEY]: _envelope, ...rest } = result._meta;
    meta = scrubber.value(rest, removed) as Record<string, unknown>;
  }
  if (envelope === undefined) {
    out.content = result.content.map((part) => scrubPart(part, scrubber, removed));
    if (result._meta !== undefined && ERROR_META_KEY in result._meta) {
      meta = { ...meta, [ERROR_META_KEY]: scrubber.value(result._meta[ERROR_META_KEY], removed) };
    }
  } else {
    const clean = scrubber.value(envelope, removed) as ErrorEnvelope;
    clean.ok = false;
    clean.error = envelope.error;
    const id = envelope.incidentId ?? incidentId;
    if (id !== undefined) clean.incidentId = id;
    const text = JSON.stringify(clean);
    out.content = result.content.map((part) => {
      if (!isEnvelopeText(part, envelope)) return scrubPart(part, scrubber, removed);
      // The envelope's text is re-derived, not scrubbed again; the part's other fields are walked.
      const { text: _old, ...rest } = part as Extract<ContentPart, { type: 'text' }>;
      return { ...scrubPart(rest, scrubber, removed), text };
    });
    meta = { ...meta, [ERROR_META_KEY]: clean };
  }
  if (meta !== undefined) out._meta = meta;
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

// Every field of a part is walked (text, uri, name, title, annotations, `_meta` at any depth) except
// the discriminant, media types and base64 payloads; an embedded resource is a part of its own.
function scrubPart<T extends object>(part: T, scrubber: Scrubber, removed: RemovedCounts): T {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(part)) {
    const embedded =
      key === 'resource' && typeof value === 'object' && value !== null && !Array.isArray(value);
    const clean = NOT_TEXT.has(key)
      ? value
      : embedded
        ? scrubPart(value as Record<string, unknown>, scrubber, removed)
        : scrubber.value(value, removed);
    Object.defineProperty(out, key, { value: clean, enumerable: true, writable: true, configurable: true });
  }
  return out as T;
}
