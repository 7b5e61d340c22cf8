// The most errors one walk visits: a chain deeper than this is a loop or an attack, not a diagnosis.
const MAX_ERRORS = 32;

/**
 * The error, then its `cause` chain and the members of an `AggregateError` (Node's connect to
 * `localhost` tries ::1 and 127.0.0.1 and throws one), breadth first, each object once.
 */
export function errorChain(error: unknown): object[] {
  const chain: object[] = [];
  const queue: unknown[] = [error];
  const seen = new Set<unknown>();
  while (queue.length > 0 && chain.length < MAX_ERRORS) {
    const item = queue.shift();
    if (typeof item !== 'object' || item === null || seen.has(item)) continue;
    seen.add(item);
    chain.push(item);
    const { cause, errors } = item as { cause?: unknown; errors?: unknown };
    if (cause !== undefined) queue.push(cause);
    if (Array.isArray(errors)) queue.push(...errors);
  }
  return chain;
}
