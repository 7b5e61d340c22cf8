/**
 * `JSON.stringify(text)` remembered for strings that repeat (key names, callers, tools, sessions):
 * at most `limit` of them (the memo is emptied when full, so endless new strings only refill it), and
 * none longer than `maxChars` (those are quoted each time rather than kept). With `suffix`, the JSON
 * and the suffix (a key's colon), as one string.
 */
export function createQuoted(
  limit: number,
  maxChars = Number.POSITIVE_INFINITY,
  suffix = '',
): (text: string) => string {
  const memo = new Map<string, string>();
  return (text) => {
    if (text.length > maxChars) return JSON.stringify(text) + suffix;
    let json = memo.get(text);
    if (json === undefined) {
      json = JSON.stringify(text) + suffix;
      if (memo.size >= limit) memo.clear();
      memo.set(text, json);
    }
    return json;
  };
}
