/** Most characters of canonical JSON an `argsPreview` holds (and never more than `maxArgsChars`). */
export const ARGS_PREVIEW_CHARS = 2048;
/** Shortest cut tried for a string before the preview is given up. */
const MIN_CUT = 8;

/**
 * What an oversized call's record keeps of its arguments beside the `[Truncated: N characters]`
 * marker: the same redacted arguments (`argsJson`, already canonical JSON with secrets redacted, so
 * cutting it reveals nothing the record would not) with every long string, key, array and object cut,
 * as canonical JSON of at most `budget` characters; undefined when even the tightest cut does not fit.
 *
 * Why: `maxArgsChars` bounds a record, but replacing the whole arguments by their size let a client
 * hide any call from the record by padding one argument (`{ sql: 'DROP ...', note: '<70 KB>' }`
 * was recorded as `[Truncated: 70031 characters]` alone). The preview keeps every argument's name and
 * the start of each value. Cuts are marked in the text (`…[+N characters]`, `[+N more items]`,
 * `[+N more keys]`); the field's presence says the arguments were cut.
 *
 * Runs only for arguments over `maxArgsChars` (never on an ordinary call's path): one parse of the
 * redacted text, then a few passes that halve the cut until the preview fits, each no larger than
 * the last.
 */
export function argsPreview(argsJson: string, budget: number): string | undefined {
  let value: unknown;
  try {
    value = JSON.parse(argsJson);
  } catch {
    return undefined;
  }
  // Each object's first keys, chosen once (by the first, widest pass) and reused by the narrower ones.
  const keys = new WeakMap<object, FirstKeys>();
  for (let chars = budget; chars >= MIN_CUT; chars = Math.floor(chars / 2)) {
    // Fewer items as the strings shrink: a 100,000-item array of numbers needs the item cut, not the string cut.
    const items = Math.max(1, Math.floor(chars / 16));
    const text = write(value, { chars, items, budget, keys });
    if (text !== undefined) return text;
  }
  return undefined;
}

interface Cut {
  /** Longest string or key kept whole. */
  readonly chars: number;
  /** Most items of an array, keys of an object, kept. */
  readonly items: number;
  /** Longest text: a pass stops as soon as what it writes is longer (each pass costs about its budget). */
  readonly budget: number;
  readonly keys: WeakMap<object, FirstKeys>;
}

/** An object's first keys in canonical (sorted) order, and how many keys it has. */
interface FirstKeys {
  readonly first: readonly string[];
  readonly total: number;
}

/**
 * The `items` smallest keys of `record`, sorted, without sorting them all: 200,000 keys sorted on
 * every pass took half a second. One pass over the keys keeps a sorted list of at most `items`;
 * a key past the list's last is passed over with one comparison (JSON.parse gives canonical JSON's
 * keys in order, but for integer-like ones, which V8 lists first, by number).
 */
function firstKeys(record: object, items: number, cache: WeakMap<object, FirstKeys>): FirstKeys {
  const cached = cache.get(record);
  if (cached !== undefined && (cached.first.length >= items || cached.first.length === cached.total)) {
    return cached.first.length > items
      ? { first: cached.first.slice(0, items), total: cached.total }
      : cached;
  }
  const first: string[] = [];
  let total = 0;
  for (const key in record) {
    if (!Object.hasOwn(record, key)) continue;
    total += 1;
    if (first.length === items && !(key < first[items - 1]!)) continue;
    let low = 0;
    let high = first.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (first[middle]! < key) low = middle + 1;
      else high = middle;
    }
    first.splice(low, 0, key);
    if (first.length > items) first.pop();
  }
  const found = { first, total };
  cache.set(record, found);
  return found;
}

/**
 * Canonical JSON (keys sorted, as core's `canonicalJson` writes parsed JSON) of `value` with strings
 * and keys over `chars` characters, and arrays and objects over `items` entries, cut; undefined once
 * the text passes the budget.
 */
function write(value: unknown, cut: Cut): string | undefined {
  let text: string | undefined;
  if (typeof value === 'string') text = JSON.stringify(cutText(value, cut.chars));
  else if (typeof value !== 'object' || value === null) text = JSON.stringify(value);
  else if (Array.isArray(value)) {
    text = '[';
    const kept = Math.min(value.length, cut.items);
    for (let index = 0; index < kept; index += 1) {
      const item = write(value[index], cut);
      if (item === undefined) return undefined;
      text += index === 0 ? item : `,${item}`;
      if (text.length > cut.budget) return undefined;
    }
    if (value.length > kept) {
      text += `${kept === 0 ? '' : ','}${JSON.stringify(`[+${value.length - kept} more items]`)}`;
    }
    text += ']';
  } else {
    const record = value as Record<string, unknown>;
    const { first: keys, total } = firstKeys(record, cut.items, cut.keys);
    // Recorded names first (a cut key, numbered when two cut to one name), then written in their
    // sorted order: the preview must be canonical JSON, or the verifier would find the line altered.
    // The marker of keys left out maps to undefined (no key of the arguments).
    const names = new Map<string, string | undefined>();
    for (const key of keys) names.set(unique(names, cutText(key, cut.chars)), key);
    if (total > keys.length) names.set(unique(names, `[+${total - keys.length} more keys]`), undefined);
    text = '{';
    let first = true;
    for (const name of [...names.keys()].sort()) {
      const key = names.get(name);
      const item = key === undefined ? 'null' : write(record[key], cut);
      if (item === undefined) return undefined;
      text += `${first ? '' : ','}${JSON.stringify(name)}:${item}`;
      first = false;
      if (text.length > cut.budget) return undefined;
    }
    text += '}';
  }
  return text.length > cut.budget ? undefined : text;
}

/** `text`, or its first `chars` characters (a surrogate pair kept whole) and how many were cut. */
function cutText(text: string, chars: number): string {
  if (text.length <= chars) return text;
  const code = text.charCodeAt(chars - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? chars - 1 : chars;
  return `${text.slice(0, end)}…[+${text.length - end} characters]`;
}

/**
 * `name`, or `name (2)`, `name (3)`, ... when `names` has it: two long keys cut to one prefix stay two
 * keys, as two keys redacted to one name do (core's `mapStrings`). At most `items` keys per object,
 * so counting up is bounded.
 */
function unique(names: ReadonlyMap<string, string | undefined>, name: string): string {
  if (!names.has(name)) return name;
  let number = 2;
  while (names.has(`${name} (${number})`)) number += 1;
  return `${name} (${number})`;
}
