import {
  canonicalJson,
  createSecretRedactor,
  type RedactSecretsOptions,
  redactSecretsInText,
} from '@toolgate/core';

const CUT_MARK = '…[truncated]';

/** Cuts text to `max` characters, marking the cut; never between the two halves of a surrogate pair. */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = Math.max(0, max - CUT_MARK.length);
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}${CUT_MARK}`;
}

/**
 * Text an exporter can encode: a lone UTF-16 surrogate (which the client or an upstream can send) is no
 * valid UTF-8, and a protobuf receiver that checks refuses the whole export batch it arrives in, other
 * callers' spans included. It becomes U+FFFD, as OpenTelemetry recommends.
 */
export function wellFormed(text: string): string {
  return text.isWellFormed() ? text : text.toWellFormed();
}

/**
 * A value with at most `limit` array items and object members (counted together, depth first), so that
 * redacting it costs no more than the cap can show: each entry takes at least two characters of JSON, so
 * past `maxRecordedLength / 2` of them the cap cuts anyway, and the redaction walk (every key and string
 * through every secret pattern) took half a second for one call with 50,000 arguments. Plain objects and
 * arrays are cut (their first members as sent, then a `[+N more keys]` / `[+N more items]` marker); any
 * other value is left to the redactor. Parts within the limit are the value's own (nothing is copied for
 * an ordinary call). A cycle spends the limit like any other nesting, so the walk ends.
 */
export function firstEntries(value: unknown, limit: number): unknown {
  return keepFirst(value, { left: limit });
}

function keepFirst(value: unknown, budget: { left: number }): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    const kept = Math.min(value.length, budget.left);
    budget.left -= kept;
    let out: unknown[] | undefined;
    for (let index = 0; index < kept; index += 1) {
      const item = keepFirst(value[index], budget);
      if (out === undefined && item !== value[index]) out = value.slice(0, index);
      out?.push(item);
    }
    if (value.length === kept) return out ?? value;
    out ??= value.slice(0, kept);
    out.push(`[+${value.length - kept} more items]`);
    return out;
  }
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  const kept = Math.min(keys.length, budget.left);
  budget.left -= kept;
  let out: Record<string, unknown> | undefined;
  for (let index = 0; index < kept; index += 1) {
    const key = keys[index]!;
    const item = keepFirst(record[key], budget);
    if (out === undefined && item !== record[key]) out = copyMembers(record, keys, index);
    if (out !== undefined) defineMember(out, key, item);
  }
  if (keys.length === kept) return out ?? value;
  out ??= copyMembers(record, keys, kept);
  out[`[+${keys.length - kept} more keys]`] = null;
  return out;
}

function copyMembers(record: Record<string, unknown>, keys: readonly string[], count: number) {
  const out: Record<string, unknown> = {};
  for (let index = 0; index < count; index += 1) defineMember(out, keys[index]!, record[keys[index]!]);
  return out;
}

// defineProperty, not assignment: a `__proto__` key from JSON stays a key.
function defineMember(out: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}

export interface TextRecorder {
  /** A value as redacted, capped JSON (arguments, results). */
  json(value: unknown): string;
  /** Free text with secret patterns replaced, made well-formed, capped at `max` (default maxRecordedLength): messages, stacks. */
  text(value: string, max?: number): string;
  /**
   * `text(value, max)` for words a middleware repeats on every call (a decision's reason): the last
   * few hundred distinct values are remembered, so the patterns run once per distinct text.
   */
  repeatedText(value: string, max: number): string;
}

/** Distinct repeated texts remembered; a chain writing endless new reasons only refills it. */
const REPEATED_TEXT_LIMIT = 256;

/** Redaction then JSON then a length cap: the only way a value from the call reaches a span. */
export function createTextRecorder(redact: RedactSecretsOptions | undefined, max: number): TextRecorder {
  const redactValue = createSecretRedactor(redact);
  const patterns = redact?.patterns;
  const repeated = new Map<string, { readonly cap: number; readonly text: string }>();
  const entries = Math.ceil(max / 2) + 1;
  return {
    json(value) {
      let bounded: unknown;
      try {
        bounded = firstEntries(value, entries);
      } catch {
        // A hostile getter or proxy: the redactor marks what it cannot read.
        bounded = value;
      }
      try {
        return clip(canonicalJson(redactValue(bounded)), max);
      } catch {
        return '[unserialisable]';
      }
    },
    text(value, cap = max) {
      return clip(wellFormed(redactSecretsInText(value, patterns)), cap);
    },
    repeatedText(value, cap) {
      let recorded = repeated.get(value);
      if (recorded === undefined || recorded.cap !== cap) {
        recorded = { cap, text: clip(wellFormed(redactSecretsInText(value, patterns)), cap) };
        if (repeated.size >= REPEATED_TEXT_LIMIT) repeated.clear();
        repeated.set(value, recorded);
      }
      return recorded.text;
    },
  };
}
