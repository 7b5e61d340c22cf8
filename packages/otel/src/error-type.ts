import { type RedactSecretsOptions, redactSecretsInText } from '@toolgate/core';
import { OTHER } from './semconv.js';

// A type name or code: short, no spaces, nothing that could carry a message, path or value.
const SAFE_TYPE = /^[A-Za-z0-9_$.-]{1,64}$/;
const GENERIC_NAMES = new Set(['Error', 'error']);

/**
 * The low-cardinality `error.type` of a thrown value: its class name (`TypeError`), else its string
 * code (`ECONNREFUSED`, a SQLSTATE such as `42P01`), else `Error`; `_OTHER` for anything else. Never the
 * message.
 */
export function errorTypeOf(error: unknown): string {
  if (typeof error !== 'object' || error === null) return OTHER;
  try {
    const { name, code } = error as { name?: unknown; code?: unknown };
    const safeName = typeof name === 'string' && SAFE_TYPE.test(name) ? name : undefined;
    if (safeName !== undefined && !GENERIC_NAMES.has(safeName)) return safeName;
    if (typeof code === 'string' && SAFE_TYPE.test(code)) return code;
    return safeName === undefined ? OTHER : 'Error';
  } catch {
    // A hostile getter on name or code.
    return OTHER;
  }
}

/** Distinct `error.type` values one middleware records; a type first seen after them is `_OTHER`. */
export const MAX_ERROR_TYPES = 100;

/**
 * `errorTypeOf`, bounded for a hostile upstream: a name or code is what the thrower chose (an API client
 * copies the service's error code, a relayed error its name), so a type shaped like a secret (an access key
 * id, a provider's token) is `_OTHER`, and past `MAX_ERROR_TYPES` distinct types every new one is `_OTHER`,
 * so one upstream cannot mint a metric series (or a span-metrics dimension) per call. Thrown errors only.
 */
export function createErrorTypes(redact: RedactSecretsOptions | undefined): (error: unknown) => string {
  const patterns = redact?.patterns;
  const known = new Set<string>();
  return (error) => {
    const type = errorTypeOf(error);
    if (type === OTHER || known.has(type)) return type;
    if (redactSecretsInText(type, patterns) !== type || known.size >= MAX_ERROR_TYPES) return OTHER;
    known.add(type);
    return type;
  };
}
