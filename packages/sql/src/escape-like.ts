/**
 * Escapes a value for LIKE / ILIKE with `ESCAPE E'\\'`: the backslash itself, `%` and `_` match
 * literally, so a model's `50%_off` finds exactly that text.
 */
export function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (character) => `\\${character}`);
}
