/**
 * Text no pattern of core's `SECRET_PATTERNS` matches, told by one pass over its char codes: up to 12
 * letters, digits, `_`, `.` and `-` (the shortest such match is 13: `eyJxxxx.xxxx.`, a JWT's shape),
 * or up to 64 digits, `a`-`f` and `-` (a UUID; every key shape needs a letter past `f`, or capitals).
 * Such text also needs no escaping in JSON. Valid only while core's patterns are the only ones: a
 * custom pattern may match anything.
 */
export function isPlainId(text: string): boolean {
  const short = text.length <= 12;
  if (!short && text.length > 64) return false;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if ((code >= 0x30 && code <= 0x39) || (code >= 0x61 && code <= 0x66) || code === 0x2d) continue;
    if (
      short &&
      ((code >= 0x41 && code <= 0x5a) || (code >= 0x61 && code <= 0x7a) || code === 0x5f || code === 0x2e)
    )
      continue;
    return false;
  }
  return true;
}

/**
 * `isPlainId` text that cannot open a secret split over sibling strings either (core's
 * `SPLIT_SECRET_OPENER`, whose only plain-text form is `Bearer` or `Basic` at a string's end): an
 * argument string the redacted-JSON writer may quote as it is, without running the patterns.
 */
export function isPlainValue(text: string): boolean {
  return isPlainId(text) && !endsWithWord(text, 'basic') && !endsWithWord(text, 'bearer');
}

/** Whether `text` ends in `word` (lower-case letters), in any letter case. */
function endsWithWord(text: string, word: string): boolean {
  const start = text.length - word.length;
  if (start < 0) return false;
  for (let index = 0; index < word.length; index += 1) {
    // `| 0x20` lower-cases a capital; among plain characters only letters land on a lower-case letter.
    if ((text.charCodeAt(start + index) | 0x20) !== word.charCodeAt(index)) return false;
  }
  return true;
}
