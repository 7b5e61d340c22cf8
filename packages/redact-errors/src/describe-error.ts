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
  // Every read is guarded: a throwing getter or proxy trap (an upstream library's error object) must
  // cost that one field, not the whole log line under the incident id the model was given.
  const read = (key: PropertyKey): unknown => {
    try {
      return (error as Record<PropertyKey, unknown>)[key];
    } catch {
      return UNREADABLE;
    }
  };
  const message = read('message');
  const out: ErrorDescription = { message: typeof message === 'string' ? message : safeJson(error) };
  const name = read('name');
  if (typeof name === 'string') out.name = name;
  const stack = read('stack');
  if (typeof stack === 'string') out.stack = stack;
  const fields: Record<string, unknown> = {};
  let keys: string[] = [];
  try {
    keys = Object.keys(error);
  } catch {
    fields.keys = UNREADABLE;
  }
  for (const key of keys) {
    if (key === 'cause' || key === 'errors' || key === 'message' || key === 'stack') continue;
    const value = read(key);
    if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) fields[key] = value;
  }
  if (Object.keys(fields).length > 0) out.fields = fields;
  const cause = read('cause');
  if (cause !== undefined) out.cause = describeError(cause, depth + 1, seen);
  const errors = read('errors');
  if (Array.isArray(errors)) {
    out.errors = errors.slice(0, 16).map((item) => describeError(item, depth + 1, seen));
  }
  return out;
}

const UNREADABLE = '[Unreadable]';

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    try {
      return String(value);
    } catch {
      return UNREADABLE;
    }
  }
}
