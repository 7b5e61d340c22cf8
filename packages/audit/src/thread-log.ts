// Log fields crossing from the audit writer thread to the calls' thread's logger, and back into errors.

/** Marks an error sent as a plain object (a structured clone of an Error keeps only name, message and stack). */
export const CROSSED_ERROR = '__toolgateCrossedError';

/**
 * Log fields as they can cross to the calls' thread: an error as its name, message, stack and own
 * properties (a Node system error's `code`, `syscall`, `path`; a sink error's `permanent`), with its
 * `cause` likewise; any other value that cannot be copied, as text.
 */
export function crossingFields(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) out[name] = crossing(value, 0);
  return out;
}

function crossing(value: unknown, depth: number): unknown {
  if (value instanceof Error) {
    const plain: Record<string, unknown> = { [CROSSED_ERROR]: true };
    for (const key of Object.getOwnPropertyNames(value)) {
      const own = (value as unknown as Record<string, unknown>)[key];
      plain[key] = key === 'cause' && depth < 4 ? crossing(own, depth + 1) : copyable(own);
    }
    plain.name = value.name;
    return plain;
  }
  return copyable(value);
}

function copyable(value: unknown): unknown {
  try {
    structuredClone(value);
    return value;
  } catch {
    return String(value);
  }
}

/** An error that crossed from the writer thread, made an Error again (with its own properties). */
export function revivedFields(fields: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(fields)) out[name] = revived(value);
  return out;
}

function revived(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || !(CROSSED_ERROR in value)) return value;
  const { [CROSSED_ERROR]: _mark, message, name, stack, cause, ...rest } = value as Record<string, unknown>;
  const error = new Error(String(message ?? ''), cause === undefined ? undefined : { cause: revived(cause) });
  error.name = String(name ?? 'Error');
  if (typeof stack === 'string') error.stack = stack;
  return Object.assign(error, rest);
}
