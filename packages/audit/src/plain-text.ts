import { SPLIT_SECRET_OPENER } from '@toolgate/core';

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
 * `SPLIT_SECRET_OPENER`, whose plain-text forms are `Bearer` or `Basic` at a string's end, and a
 * command's argument that may take a secret as the next one: an option such as `--password` or `-u`,
 * a program such as `curl`, `sshpass` or `mysqldump`): an argument string the redacted-JSON writer may
 * quote as it is, without running the patterns.
 */
export function isPlainValue(text: string): boolean {
  return (
    isPlainId(text) &&
    !endsWithWord(text, 'basic') &&
    !endsWithWord(text, 'bearer') &&
    !mayOpenArgvSecret(text)
  );
}

// The first letters (lower-cased) of the programs among the opener's plain forms (`sshpass`, `curl`,
// `wget`, `http`, `mysql...`): only such text pays for core's opener itself.
const PROGRAM_INITIALS = new Set(['s', 'c', 'w', 'h', 'm'].map((letter) => letter.charCodeAt(0)));

/**
 * Whether plain text may be a command's argument that core reads the next argument after: any option
 * (a leading `-`; core's list is `--password`-like names, `--user`, `-u`), or a program whose options
 * carry passwords, as core's `SPLIT_SECRET_OPENER` tells. Wider than core's opener for options on
 * purpose: such text goes to the general walk, which decides; an id starting with `-` is rare.
 */
function mayOpenArgvSecret(text: string): boolean {
  const first = text.charCodeAt(0);
  if (first === 0x2d) return true;
  return PROGRAM_INITIALS.has(first | 0x20) && SPLIT_SECRET_OPENER.test(text);
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
