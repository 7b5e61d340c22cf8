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
