/**
 * `JSON.stringify(text)` remembered for strings that repeat (key names, callers, tools, sessions):
 * at most `limit` of them (the memo is emptied when full, so endless new strings only refill it), and
 * none longer than `maxChars` (those are quoted each time rather than kept).
 */
export function createQuoted(limit: number, maxChars = Number.POSITIVE_INFINITY): (text: string) => string {
  const memo = new Map<string, string>();
  return (text) => {
    if (text.length > maxChars) return JSON.stringify(text);
    let json = memo.get(text);
    if (json === undefined) {
      json = JSON.stringify(text);
      if (memo.size >= limit) memo.clear();
      memo.set(text, json);
    }
    return json;
  };
}
