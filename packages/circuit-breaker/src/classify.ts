import { classifyFailure, type ErrorCode, errorOf, isToolError, type ToolResult } from '@toolgate/core';

/** How an outcome weighs on the breaker. */
export type Verdict = 'success' | 'failure' | 'ignored';

// A dependency failing or too slow. Everything else an error can say (invalid_argument, not_found,
// permission_denied, repeated_call, rate_limited) is the model's or the caller's business, and must
// weigh neither way: counted as success it would dilute the error rate and close a half-open breaker.
const DEPENDENCY_FAILURES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'unavailable',
  'timeout',
  'internal',
]);

export function verdictOfResult(result: ToolResult): Verdict {
  if (result.isError !== true) return 'success';
  return DEPENDENCY_FAILURES.has(errorOf(result)!.error) ? 'failure' : 'ignored';
}

/**
 * A thrown ToolError weighs by its code; any other throw by the code core's one classifier
 * (`classifyFailure`) gives it, so a pg 42501 (`permission_denied`: this caller's role may not read
 * this) weighs neither way, as redact-errors will answer it. Anything unclassified is a failure.
 */
export function verdictOfThrow(error: unknown): Verdict {
  if (isToolError(error)) return DEPENDENCY_FAILURES.has(error.code) ? 'failure' : 'ignored';
  const known = classifyFailure(error);
  if (known !== undefined) return DEPENDENCY_FAILURES.has(known.code) ? 'failure' : 'ignored';
  return refusesInput(error) ? 'ignored' : 'failure';
}

// PostgreSQL answered and refused the call's values (class 22, data exception: a number out of range,
// a malformed date) or its change (class 23, integrity constraint: a duplicate key, a missing
// reference): the database is healthy and the input is at fault, so it weighs neither way, also
// thrown raw by a handler that queries pg itself (or wrapped as an ORM does, with the pg error as cause).
const PG_INPUT_REFUSED = /^2[23][0-9A-Z]{3}$/;

// Node.js refused to send the call's values at all: a URL that does not parse (`new URL`, `fetch`,
// which wraps it as its cause), a request path with unescaped characters, a header name or value with
// a control character (a CR/LF the model put in an argument). Nothing reached the dependency, so it
// says nothing about its health: counted, five such arguments in a row would open the breaker for
// every caller, and one at each probe would keep it open.
const NODE_INPUT_REFUSED: ReadonlySet<string> = new Set([
  'ERR_INVALID_URL',
  'ERR_UNESCAPED_CHARACTERS',
  'ERR_INVALID_CHAR',
  'ERR_INVALID_HTTP_TOKEN',
]);

// fetch (undici, Node's own and the npm package alike: same words in 6.x and 7.x) refuses the call's
// values with a TypeError that has no code and no cause, thrown while building the Request, before
// any connection exists: a header name or value it cannot send (a CR/LF or NUL, a space in a name, a
// character above U+00FF), credentials in the URL, a method that is no token or is forbidden, a body
// on GET/HEAD. Only these exact sentences match; a failed request is always `fetch failed` with the
// network error as its cause (or `terminated` for a cut body), and a handler's own TypeError (a bug)
// says neither, so both still count.
const FETCH_INPUT_REFUSED: readonly RegExp[] = [
  /^Headers\.(?:append|set|get|has|delete): ".*" is an invalid header (?:name|value)\.$/s,
  /^Cannot convert argument to a ByteString because the character at index \d+ has a value of \d+ which is greater than 255\.$/,
  /^Request cannot be constructed from a URL that includes credentials: /,
  /^'.*' (?:is not a valid HTTP method|HTTP method is unsupported)\.$/s,
  /^Request with GET\/HEAD method cannot have body\.$/,
];

function refusesInput(error: unknown): boolean {
  let item: unknown = error;
  for (let depth = 0; depth < 8 && typeof item === 'object' && item !== null; depth += 1) {
    try {
      const { code, cause } = item as { code?: unknown; cause?: unknown };
      if (typeof code === 'string' && (PG_INPUT_REFUSED.test(code) || NODE_INPUT_REFUSED.has(code))) {
        return true;
      }
      if (code === undefined && cause === undefined && item instanceof TypeError) {
        const { message } = item;
        return typeof message === 'string' && FETCH_INPUT_REFUSED.some((sentence) => sentence.test(message));
      }
      item = cause;
    } catch {
      // A hostile getter: not something PostgreSQL or Node.js answered.
      return false;
    }
  }
  return false;
}
