import { ERROR_META_KEY, type ErrorEnvelope, isErrorCode, type ToolResult } from '@toolgate/core';
import type { RemovedCounts, Scrubber } from './scrub.js';
import {
  createBudget,
  type Exempt,
  fitsBudget,
  type ScrubBudget,
  WITHHELD,
  withinBudget,
} from './scrub-budget.js';

type ContentPart = ToolResult['content'][number];

// Fields of a content part that are not text: the discriminant, media types, base64 payloads (a
// pattern could corrupt base64 and finds nothing the model reads there).
const NOT_TEXT = new Set(['type', 'mimeType', 'data', 'blob']);

/** The toolgate envelope of an error result, or undefined for a raw `isError` result. */
export function envelopeOf(result: ToolResult): ErrorEnvelope | undefined {
  const meta = result._meta?.[ERROR_META_KEY] as Partial<ErrorEnvelope> | undefined;
  return meta !== undefined && isErrorCode(meta.error) ? (meta as ErrorEnvelope) : undefined;
}

// An envelope's code and incident id are kept whole (core checks their shapes; the envelope is
// rebuilt around them); a part's discriminant, media type and payloads are not scrubbed, so not charged.
const ENVELOPE_KEPT: Exempt = (key, value) => (key === 'error' || key === 'incidentId') && value.length <= 64;
const PART_KEPT: Exempt = (key) => NOT_TEXT.has(key);
const WITHHELD_PART: ContentPart = { type: 'text', text: WITHHELD };

/**
 * `result` itself when its strings fit `maxChars` (counted, not copied), else a copy whose strings past
 * the budget are withheld (`WITHHELD`), in the order the model needs them: the envelope (message,
 * hint, fields), the content parts (an envelope's own JSON text is re-derived, so never withheld),
 * the other `_meta`, `structuredContent`. `withheld` is how many strings (or cut-off rests) went.
 */
export function withinScrubBudget(
  result: ToolResult,
  maxChars: number,
): { result: ToolResult; withheld: number } {
  if (fitsBudget(result, maxChars)) return { result, withheld: 0 };
  const budget = createBudget(maxChars);
  const envelope = envelopeOf(result);
  const out: ToolResult = { ...result };
  const bounded =
    envelope === undefined ? undefined : (withinBudget(envelope, budget, ENVELOPE_KEPT) as ErrorEnvelope);
  // A cut-off list of fields ends in a field the model can read as such (core keeps only those).
  const fields = bounded?.fields as unknown[] | undefined;
  if (bounded !== envelope && Array.isArray(fields) && fields.at(-1) === WITHHELD) {
    fields[fields.length - 1] = { path: WITHHELD, expected: WITHHELD };
  }
  const content: ContentPart[] = [];
  for (const part of result.content) {
    if (budget.left < 0) {
      budget.withheld += 1;
      content.push(WITHHELD_PART);
      break;
    }
    if (envelope !== undefined && part.type === 'text' && isEnvelopeText(part, envelope)) {
      const { text, ...rest } = part;
      content.push({ ...(withinBudget(rest, budget, PART_KEPT) as object), text } as ContentPart);
    } else content.push(withinBudget(part, budget, PART_KEPT) as ContentPart);
  }
  out.content = content;
  if (result._meta !== undefined) {
    const { [ERROR_META_KEY]: raw, ...rest } = result._meta;
    const meta = objectWithin(rest, budget);
    if (ERROR_META_KEY in result._meta) {
      Object.defineProperty(meta, ERROR_META_KEY, {
        value: bounded ?? withinBudget(raw, budget),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    out._meta = meta;
  }
  if (result.structuredContent !== undefined) {
    out.structuredContent = objectWithin(result.structuredContent, budget);
  }
  return { result: out, withheld: budget.withheld };
}

/** An object stays an object (the SDK's schema asks it of `_meta` and `structuredContent`). */
function objectWithin(value: object, budget: ScrubBudget): Record<string, unknown> {
  const bounded = withinBudget(value, budget);
  return typeof bounded === 'object' && bounded !== null
    ? (bounded as Record<string, unknown>)
    : { [WITHHELD]: WITHHELD };
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
    out.content = scrubParts(result.content, () => false, '', scrubber, removed);
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
    // The envelope's text is re-derived, not scrubbed again; the part's other fields are walked.
    out.content = scrubParts(
      result.content,
      (part) => isEnvelopeText(part, envelope),
      text,
      scrubber,
      removed,
    );
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

/**
 * The parts scrubbed one by one, their texts also as one run of sibling strings (core's walk), so a
 * secret split over consecutive text parts (a key's lines, one part each) is found across them. A part
 * `isEnvelope` says is the envelope's text gets `envelopeText` instead, and stays out of the run.
 */
function scrubParts(
  parts: readonly ContentPart[],
  isEnvelope: (part: ContentPart) => boolean,
  envelopeText: string,
  scrubber: Scrubber,
  removed: RemovedCounts,
): ContentPart[] {
  const envelopes = parts.map((part) => part.type === 'text' && isEnvelope(part));
  const texts: string[] = [];
  for (const [index, part] of parts.entries()) {
    if (part.type === 'text' && typeof part.text === 'string' && !envelopes[index]) texts.push(part.text);
  }
  // One text alone has no sibling: the part's own walk scrubs it.
  const clean = texts.length < 2 ? undefined : (scrubber.value(texts, removed) as string[]);
  let next = 0;
  return parts.map((part, index) => {
    if (envelopes[index]) return scrubPart(part, scrubber, removed, envelopeText);
    if (clean === undefined || part.type !== 'text' || typeof part.text !== 'string') {
      return scrubPart(part, scrubber, removed);
    }
    next += 1;
    return scrubPart(part, scrubber, removed, clean[next - 1]);
  });
}

// Every field of a part is walked (text, uri, name, title, annotations, `_meta` at any depth) except
// the discriminant, media types and base64 payloads; an embedded resource is a part of its own.
// `text`: the part's text, already scrubbed (or re-derived), in place of walking it again.
function scrubPart<T extends object>(part: T, scrubber: Scrubber, removed: RemovedCounts, text?: string): T {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(part)) {
    if (key === 'text' && text !== undefined) {
      out.text = text;
      continue;
    }
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
