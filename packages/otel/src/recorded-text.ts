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
  return {
    json(value) {
      try {
        return clip(canonicalJson(redactValue(value)), max);
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
