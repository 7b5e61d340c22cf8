/** A thrown value as plain data for the server log: everything, including the stack and causes. */
export interface ErrorDescription {
  name?: string;
  message: string;
  stack?: string;
  /** Own enumerable fields: `code`, `errno`, `syscall`, `address`, `port`, pg's `severity`, `detail`, ... */
  fields?: Record<string, unknown>;
  cause?: ErrorDescription;
  /** The members of an AggregateError. */
  errors?: ErrorDescription[];
}

const MAX_DEPTH = 8;

/**
 * Describes a thrown value as plain JSON-safe data, so any logger (core's, pino) keeps the stack
 * and the whole `cause` chain rather than `{}`.
 */
export function describeError(error: unknown, depth = 0, seen: Set<unknown> = new Set()): ErrorDescription {
  if (typeof error !== 'object' || error === null) return { message: String(error) };
  if (seen.has(error) || depth >= MAX_DEPTH) return { message: '[Circular or too deep]' };
  seen.add(error);
  const source = error as {
    name?: unknown;
    message?: unknown;
    stack?: unknown;
    cause?: unknown;
    errors?: unknown;
  };
  const out: ErrorDescription = {
    message: typeof source.message === 'string' ? source.message : safeJson(error),
  };
  if (typeof source.name === 'string') out.name = source.name;
  if (typeof source.stack === 'string') out.stack = source.stack;
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(error)) {
    if (key === 'cause' || key === 'errors' || key === 'message' || key === 'stack') continue;
    if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) fields[key] = value;
  }
  if (Object.keys(fields).length > 0) out.fields = fields;
  if (source.cause !== undefined) out.cause = describeError(source.cause, depth + 1, seen);
  if (Array.isArray(source.errors)) {
    out.errors = source.errors.slice(0, 16).map((item) => describeError(item, depth + 1, seen));
  }
  return out;
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
