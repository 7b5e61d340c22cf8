import { REDACTED, SECRET_PATTERNS } from '@toolgate/core';
import { type EdgeForm, edgeForm, edgeFragmentRanges } from './cut-fragments.js';

/**
 * Hex dumps in program output, scrubbed by what they encode. `xxd`, `hexdump -C`, `od` and their kin
 * print a file's bytes as hex (or as `od -c` characters) with a text column cut every 16 bytes: a
 * credential the file holds reaches the model as `7061 7373 ...` and as `password=hunte` on one line and
 * `r2` on the next, where neither a known value nor a secret pattern matches. Each dump found is
 * decoded back to its bytes, in order, and scrubbed as text is (the known values, then core's
 * patterns); each dump line that holds any byte of a secret found is replaced whole, hex and text
 * column alike, and a run of such lines by one `[REDACTED]` line, so neither half can be put back
 * together.
 *
 * The formats (a dump is a run of consecutive lines of one format):
 * - `xxd`: `00000000: 7061 7373 ...  password=...`, any group size (`-g`), columns (`-c`) or case (`-u`);
 *   `xxd -e`'s little-endian groups (`00000000: 73736170 ...  password`) are read in the byte order
 *   the line's text column shows;
 * - spaced bytes: `hexdump -C` (`00000000  70 61 ...  |password=...|`, with `*` for repeated lines and
 *   a last line holding only the offset), `od -tx1` (`0000000 70 61 ...`, also with `-An`, `-Ax`, `-Ad`
 *   and `z`'s `>text<`);
 * - words: `od -x`/`-tx2`/`-tx4`/`-tx8` and plain `hexdump`/`hexdump -x` (`0000000 6170 7373 ...`, 2, 4
 *   or 8-byte words), plain `od`/`od -o`/`hexdump -o` (2-byte words in octal, `060560`), also with
 *   `-An`, `-Ax`, `-Ad` and `z`'s `>text<`, read little-endian (as od and hexdump print them on x86 and
 *   ARM) and, for `od --endian=big`, big-endian too;
 * - characters: `od -c`, `od -b`, `hexdump -c`/`-b` and `od -a`'s names (`0000000   p   a   s   s  \n
 *   303 ...`, `  nl nul  sp`, also with `-An`);
 * - bits: `xxd -b` (`00000000: 01110000 01100001 ...  pa`, any `-c` or `-g`), told from xxd by its text column;
 * - decimal bytes: `od -tu1` (`0000000 112  97 ...`) and `od -td1` (`  -61`), also with `-An`, `-Ax`,
 *   `-Ad` and `z`'s `>text<`;
 * - C arrays: `xxd -i` (`  0x70, 0x61, ...`, also `-u`'s `0X70`);
 * - binary: `basenc --base2msbf`/`--base2lsbf` (lines of bits only, read as one run, a byte's bits
 *   across two lines);
 * - plain: `xxd -p` (lines of hex digits only, read as one run).
 * A `*` line stands for the rows its offsets say, each the row before it (`repeatStarred`).
 * Output with no line shaped like one of them is returned as it is after one regular-expression test.
 */
export function scrubHexDumps(text: string, secretValues: readonly string[]): string {
  if (!DUMP_LINE.test(text)) return text;
  // Every format spends at least two characters on a byte.
  const bytes = Buffer.allocUnsafe((text.length >> 1) + 1);
  const dumps: Dump[] = [];
  let length = 0;
  let current: Dump | undefined;
  for (let start = 0; start <= text.length; ) {
    let end = text.indexOf('\n', start);
    if (end === -1) end = text.length;
    const next = end + 1;
    if (end > start && text.charCodeAt(end - 1) === CR) end -= 1;
    if (current !== undefined && holdsNoBytes(text, start, end, current.kind)) {
      // The offset alone that ends od's and hexdump's output: the rows a `*` before it left out.
      length = repeatStarred(text, start, current, bytes, length, length);
      current.to = length;
      current.lines.push({ start, end, from: length, to: length });
      start = next;
      continue;
    }
    let kind: DumpKind | undefined;
    // xxd -b's groups of bits are hex digits too: its lines are told by their text column first.
    let to = parseBits(text, start, end, bytes, length);
    if (to >= 0) kind = 'bits';
    if (kind === undefined) {
      to = readXxd(text, start, end, bytes, length, current?.kind === 'xxd' ? current.order : undefined);
      if (to >= 0) kind = 'xxd';
    }
    if (kind === undefined && current?.kind === 'decimal') {
      // Inside a dump of decimal bytes, a line that od -b or od -c could have printed too is its.
      to = parseDecimal(text, start, end, bytes, length);
      if (to >= 0) kind = 'decimal';
    }
    if (kind === undefined) {
      to = parseBinary(text, start, end, bytes, length, current?.kind === 'binary');
      if (to >= 0) kind = 'binary';
    }
    if (kind === undefined) {
      for (const [format, parse] of PARSERS) {
        // od -tu1's two-digit numbers two spaces apart read as hex bytes too: inside a dump of those
        // (hexdump -C's last line, `  35`) they are its.
        if (format === 'decimal' && current?.kind === 'spaced') continue;
        to = parse(text, start, end, bytes, length);
        if (to >= 0) {
          kind = format;
          break;
        }
      }
    }
    if (kind === undefined) {
      current = undefined;
    } else {
      const order = kind === 'xxd' ? xxdLineOrder : undefined;
      // A dump starting again at offset 0 is another file's (`xxd a b`, two dumps in a row); an xxd
      // line in the other byte order than the dump's is another dump's (`xxd a; xxd -e b`).
      if (
        current?.kind !== kind ||
        (current.to > current.from && startsAtZero(text, start, end, kind)) ||
        (order !== undefined && current.order !== undefined && current.order !== order)
      ) {
        current = { kind, from: length, to: length, lines: [], order: undefined };
        dumps.push(current);
      }
      if (order !== undefined && current.order === undefined) {
        // The first line that tells: the lines before it read the same both ways against their text
        // column (dots, zeros), and are read again in this order.
        if (order === 'little') readAgainLittleEndian(text, current.lines, bytes);
        current.order = order;
      }
      const shifted = repeatStarred(text, start, current, bytes, length, to);
      current.lines.push({ start, end, from: length + shifted - to, to: shifted });
      current.to = shifted;
      length = shifted;
    }
    start = next;
  }
  let scrubbed = '';
  let copied = 0;
  // The values as the decoded bytes hold them: their UTF-8, one character a byte.
  const values = secretValues.map((value) => Buffer.from(value).toString('latin1'));
  let edges: EdgeForm[] | undefined;
  for (const dump of dumps) {
    if (dump.to === dump.from) continue;
    const decoded = bytes.toString('latin1', dump.from, dump.to);
    const found = secretRanges(decoded, values);
    // A dump of a model-chosen length (`xxd -l`, `od -N`, `hexdump -n`) may end inside a value, or
    // start inside one (`xxd -s`): a part of one at either end of its bytes goes too.
    edges ??= values.map((value) => edgeForm(value, 1));
    found.push(...edgeFragmentRanges(decoded, edges));
    // Words are read little-endian; `od --endian=big` (or a big-endian machine) prints them the other
    // way round, each word's bytes in the same line: those are searched as well.
    if (dump.kind === 'words') found.push(...secretRanges(swapWords(text, dump, decoded), values));
    if (dump.kind === 'binary') {
      // basenc --base2lsbf writes each byte's bits the other way round: searched as well. A byte
      // whose bits two lines share counts in the second: the one before goes too (±1 byte).
      found.push(...secretRanges(reverseBits(decoded), values));
      for (const range of found) {
        range[0] = Math.max(0, range[0] - 1);
        range[1] += 1;
      }
    }
    if (found.length === 0) continue;
    // By start: the first range not yet passed is the only one that can cover the next line.
    found.sort((a, b) => a[0] - b[0]);
    let range = 0;
    let previous = -1;
    for (const [index, line] of dump.lines.entries()) {
      const from = line.from - dump.from;
      const to = line.to - dump.from;
      while (range < found.length && found[range]![1] <= from) range += 1;
      if (from === to || range === found.length || found[range]![0] >= to) continue;
      // The line holds a secret's byte: it goes. Right after another that went (or only `*` lines
      // between them), it joins that one's marker.
      let joins = previous >= 0;
      for (let between = previous + 1; joins && between < index; between += 1) {
        joins = dump.lines[between]!.from === dump.lines[between]!.to;
      }
      if (!joins) scrubbed += `${text.slice(copied, line.start)}${REDACTED}`;
      copied = line.end;
      previous = index;
    }
  }
  return copied === 0 ? text : scrubbed + text.slice(copied);
}

type DumpKind = 'xxd' | 'bits' | 'spaced' | 'chars' | 'words' | 'decimal' | 'carray' | 'binary' | 'plain';

/** The byte order of an xxd dump's groups (`xxd -e`'s are little-endian), once a line has told it. */
type ByteOrder = 'big' | 'little';

interface DumpLine {
  /** The line in the text, without its line break. */
  readonly start: number;
  readonly end: number;
  /** Its bytes in the decoded buffer. */
  readonly from: number;
  readonly to: number;
}

interface Dump {
  readonly kind: DumpKind;
  readonly from: number;
  to: number;
  readonly lines: DumpLine[];
  /** The offsets' radixes (bits 8, 10, 16) that the steps between its lines so far fit. */
  radixes?: number;
  /** xxd: the order its lines' text columns showed (until one tells, undefined: big-endian). */
  order: ByteOrder | undefined;
}

// One four-character field of od -c, od -b or od -a: a character, an escape, an octal byte, a name.
const CHAR_FIELD = String.raw` {3}[!-~]| {2}\\[0abfnrtv]| [0-3][0-7]{2}| (?:nul|soh|stx|etx|eot|enq|ack|bel|dle|dc[1-4]|nak|syn|etb|can|sub|esc|del)| {2}(?:bs|ht|nl|vt|ff|cr|so|si|em|fs|gs|rs|us|sp)`;

/**
 * One line of the dump formats, the cheap test before any decoding: a line starting with an offset and
 * `: ` (xxd, xxd -b), with an offset or spaces and then a two-digit byte (hexdump -C, od -tx1), with two of
 * od -c's or od -a's four-character fields or an offset and one (`-w1`), with an offset or spaces and
 * then a word of 4 to 16 hex digits or 6 octal ones (od -x, hexdump, od; one a line with `-w2`), or a
 * decimal number of up to 3 digits (od -tu1, od -td1), with `0x` and two hex digits (xxd -i), or of
 * 8 hex digits or more alone (xxd -p). Anchored at line starts, so text is read once.
 */
const DUMP_LINE = new RegExp(
  String.raw`^(?:[0-9a-f]{4,}(?:: [0-9a-f]{2}| {1,2}[0-9a-f]{2}(?: |\r?$))| {1,2}[0-9a-f]{2}(?: |\r?$)|[0-9a-f]*(?:${CHAR_FIELD}){2}|[0-9a-f]{4,}(?:${CHAR_FIELD})\r?$|[0-9a-f]{8,}\r?$|(?:[0-9a-f]{4,})? {1,4}(?:(?:[0-9a-f]{4}){1,4}|[01][0-7]{5})(?: |\r?$)|(?:[0-9a-f]{4,})? {1,3}-?[0-9]{1,3}(?: |\r?$)|[\t ]*0x[0-9a-f]{2}(?:,|\r?$))`,
  'im',
);

const CR = 0x0d;
const SPACE = 0x20;
const BACKSLASH = 0x5c;
const DOT = 0x2e;

/** The value of the hex digit at `index`, or -1. */
function hexAt(text: string, index: number): number {
  const code = text.charCodeAt(index);
  if (code >= 0x30 && code <= 0x39) return code - 0x30;
  const lower = code | 0x20;
  return lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1;
}

/** The end of the run of hex digits from `index` (not past `end`). */
function hexRunEnd(text: string, index: number, end: number): number {
  let at = index;
  while (at < end && hexAt(text, at) >= 0) at += 1;
  return at;
}

/**
 * A `*` line (lines like the one before it left out: hexdump, od, `xxd -a`), or the line holding only
 * the offset that ends hexdump's and od's output (xxd has none: there a line of hex digits is `xxd -p`'s).
 */
function holdsNoBytes(text: string, start: number, end: number, kind: DumpKind): boolean {
  if (end - start === 1 && text.charCodeAt(start) === 0x2a) return true;
  return (
    (kind === 'spaced' || kind === 'chars' || kind === 'words' || kind === 'decimal') &&
    end - start >= 4 &&
    end - start <= 16 &&
    hexRunEnd(text, start, end) === end
  );
}

/** Whether the line's offset is 0 (`00000000:`, `0000000 `); `xxd -p` lines have none. */
function startsAtZero(text: string, start: number, end: number, kind: DumpKind): boolean {
  if (kind === 'plain' || kind === 'carray' || kind === 'binary') return false;
  let at = start;
  while (at < end && text.charCodeAt(at) === 0x30) at += 1;
  return at > start && (at === end || text.charCodeAt(at) === 0x3a || text.charCodeAt(at) === SPACE);
}

const RADIXES = [8, 10, 16] as const;
/** At most this many bytes of rows a `*` left out are put back (a secret repeats no longer run). */
const MAX_REPEATED = 4096;

/** The line's offset (its leading hex digits) in `radix`, or -1 (none, or a digit the radix lacks). */
function offsetIn(text: string, start: number, radix: number): number {
  let value = 0;
  let index = start;
  for (let digit = hexAt(text, index); digit >= 0; digit = hexAt(text, ++index)) {
    if (digit >= radix) return -1;
    value = value * radix + digit;
  }
  return index - start >= 4 ? value : -1;
}

/**
 * Puts back the rows od and hexdump leave out as `*` (a row equal to the one before it): with `-w1`,
 * the second `s` of `password`. Called as the line at `start` joins `dump`, its bytes (if any) read
 * into [at, to); when the line before it is a `*` after a row of bytes, the row is repeated as many
 * times as the two offsets say (in the radix the dump's other steps fit, or the only one that
 * gives a whole number), written where the `*` line is, the new line's bytes moved after them.
 * Returns where the new line's bytes end now. Lines without offsets (`-An`), offsets no radix
 * explains, or more than `MAX_REPEATED` bytes: nothing is put back.
 */
function repeatStarred(text: string, start: number, dump: Dump, out: Buffer, at: number, to: number): number {
  const lines = dump.lines;
  const star = lines.at(-1);
  const row =
    star !== undefined && star.from === star.to && text.charCodeAt(star.start) === 0x2a ? lines.at(-2) : star;
  if (row === undefined || row.to === row.from) return to;
  const width = row.to - row.from;
  let fits = 0;
  let count = -1;
  for (const [bit, radix] of RADIXES.entries()) {
    const from = offsetIn(text, row.start, radix);
    const here = offsetIn(text, start, radix);
    if (from < 0 || here < 0) continue;
    if (row === star) {
      if (here - from === width) fits |= 1 << bit;
    } else if ((here - from) % width === 0 && here - from >= 2 * width) {
      const rows = (here - from) / width - 1;
      if ((dump.radixes ?? 7) & (1 << bit)) count = count === -1 || count === rows ? rows : -2;
    }
  }
  if (row === star) {
    // Two rows in a row: the radixes their step fits.
    if (fits !== 0) dump.radixes = (dump.radixes ?? 7) & fits;
    return to;
  }
  const repeated = count * width;
  if (count < 1 || repeated > MAX_REPEATED || to + repeated > out.length) return to;
  out.copy(out, at + repeated, at, to);
  for (let written = at; written < at + repeated; written += width) out.copy(out, written, row.from, row.to);
  lines[lines.length - 1] = { start: star!.start, end: star!.end, from: at, to: at + repeated };
  return to + repeated;
}

/**
 * Each parser reads the line [start, end) into `out` from `at` and returns where its bytes end there,
 * or -1 when the line is not of its format.
 */
type LineParser = (text: string, start: number, end: number, out: Buffer, at: number) => number;

/**
 * `00000000: 7061 7373 ...  password=...`: an offset, `: `, groups of hex digits one space apart, then
 * (two spaces or more) the text column, which is not read: the bytes say what it shows. A group cut
 * short at the line's end (the output cap) gives its whole bytes.
 */
const parseXxd: LineParser = (text, start, end, out, at) => {
  let index = hexRunEnd(text, start, end);
  if (index - start < 4 || text.charCodeAt(index) !== 0x3a || text.charCodeAt(index + 1) !== SPACE) return -1;
  index += 2;
  let length = at;
  for (;;) {
    const groupEnd = hexRunEnd(text, index, end);
    if (groupEnd === index || (((groupEnd - index) & 1) === 1 && groupEnd < end)) return -1;
    for (; index + 1 < groupEnd; index += 2) out[length++] = hexAt(text, index) * 16 + hexAt(text, index + 1);
    index = groupEnd;
    if (index === end) return length;
    if (text.charCodeAt(index) !== SPACE) return -1;
    // Two spaces (or one ending the line) end the bytes: the text column follows.
    if (index + 1 === end || text.charCodeAt(index + 1) === SPACE) return length;
    index += 1;
  }
};

/** The order `readXxd`'s last line showed: undefined when its text column fits both or neither. */
let xxdLineOrder: ByteOrder | undefined;

/**
 * An xxd line (or -1), in the byte order its text column shows: `xxd -e` prints each group as a
 * little-endian word (`73736170` for `pass`), plain xxd in the file's order. A line whose column fits
 * both (dots and zeros) takes the dump's order (`dumpOrder`), big-endian until a line has told; one
 * whose column fits neither (cut by the output cap, `-E`'s EBCDIC) is read as plain xxd.
 * Sets `xxdLineOrder`.
 */
function readXxd(
  text: string,
  start: number,
  end: number,
  out: Buffer,
  at: number,
  dumpOrder: ByteOrder | undefined,
): number {
  const little = parseXxdLittle(text, start, end, out, at);
  const big = parseXxd(text, start, end, out, at);
  const bigShown = big >= 0 && columnShows(text, end - (big - at) - 2, end, out, at, big);
  if (little >= 0 && (!bigShown || dumpOrder === 'little')) {
    xxdLineOrder = bigShown ? undefined : 'little';
    return parseXxdLittle(text, start, end, out, at);
  }
  xxdLineOrder = bigShown && little < 0 ? 'big' : undefined;
  return big;
}

/** Lines of an xxd dump read big-endian so far, read again as `xxd -e`'s (those it cannot read stay). */
function readAgainLittleEndian(text: string, lines: readonly DumpLine[], out: Buffer): void {
  for (const line of lines) {
    if (line.to > line.from && parseXxdLittle(text, line.start, line.end, out, line.from) < 0) {
      parseXxd(text, line.start, line.end, out, line.from);
    }
  }
}

/**
 * `00000000: 73736170 64726f77  password` (xxd -e): an offset, `: `, groups of one even width (4 hex
 * digits or more) one space apart, each a little-endian word, the last one cut short (at the file's
 * end) right-aligned in its field (`    0a01` for the bytes 01 0a); then the text column, which must show
 * the bytes read so (else -1).
 */
const parseXxdLittle: LineParser = (text, start, end, out, at) => {
  let index = hexRunEnd(text, start, end);
  if (index - start < 4 || text.charCodeAt(index) !== 0x3a || text.charCodeAt(index + 1) !== SPACE) return -1;
  index += 2;
  let width = 0;
  let length = at;
  for (;;) {
    const groupEnd = hexRunEnd(text, index, end);
    if (groupEnd === index) break;
    if (width === 0) width = groupEnd - index;
    if (groupEnd - index !== width || width < 4 || (width & 1) === 1) return -1;
    length = writeWord(text, index, groupEnd, out, length);
    index = groupEnd;
    if (text.charCodeAt(index) !== SPACE || hexAt(text, index + 1) < 0) break;
    index += 1;
  }
  if (length > at && columnShows(text, index, end, out, at, length)) return length;
  // The last group, cut short: spaces, then its digits, filling the field.
  const field = length > at ? index + 1 : index;
  if (length > at && text.charCodeAt(index) !== SPACE) return -1;
  let digits = field;
  while (digits < end && text.charCodeAt(digits) === SPACE) digits += 1;
  const groupEnd = hexRunEnd(text, digits, end);
  if (width === 0) width = groupEnd - field;
  const size = groupEnd - digits;
  if (digits === field || size < 2 || (size & 1) === 1 || groupEnd - field !== width || (width & 1) === 1)
    return -1;
  length = writeWord(text, digits, groupEnd, out, length);
  return columnShows(text, groupEnd, end, out, at, length) ? length : -1;
};

/** Writes the little-endian word in hex digits [from, to) at `at`, its last byte first; returns the end. */
function writeWord(text: string, from: number, to: number, out: Buffer, at: number): number {
  let length = at;
  for (let index = to - 2; index >= from; index -= 2)
    out[length++] = hexAt(text, index) * 16 + hexAt(text, index + 1);
  return length;
}

/**
 * Whether the line's last `to - from` characters are xxd's text column for the bytes `out[from, to)`
 * (printable ASCII as itself, any other byte as `.`), two spaces or more after `hexEnd`.
 */
function columnShows(
  text: string,
  hexEnd: number,
  end: number,
  out: Buffer,
  from: number,
  to: number,
): boolean {
  const column = end - (to - from);
  if (to <= from || column - hexEnd < 2) return false;
  for (let index = hexEnd; index < column; index += 1) if (text.charCodeAt(index) !== SPACE) return false;
  for (let index = from; index < to; index += 1) {
    const byte = out[index]!;
    const shown = byte >= SPACE && byte <= 0x7e ? byte : DOT;
    if (text.charCodeAt(column + index - from) !== shown) return false;
  }
  return true;
}

/**
 * `00000000  70 61 73 ...  |password=...|` (hexdump -C), `0000000 70 61 73 ...` (od -tx1), and without
 * the offset, ` 70 61 73 ...` (od -An -tx1): two-digit bytes one or two spaces apart, then the line's
 * end or (two spaces or more) a text column in `|...|` or `>...<`.
 */
const parseSpaced: LineParser = (text, start, end, out, at) => {
  let index = hexRunEnd(text, start, end);
  if (index === start ? text.charCodeAt(start) !== SPACE : index - start < 4) return -1;
  let length = at;
  for (;;) {
    let digits = index;
    while (digits < end && digits - index <= 2 && text.charCodeAt(digits) === SPACE) digits += 1;
    const spaces = digits - index;
    if (
      spaces >= 1 &&
      spaces <= 2 &&
      digits + 2 <= end &&
      hexAt(text, digits) >= 0 &&
      hexAt(text, digits + 1) >= 0 &&
      (digits + 2 === end || text.charCodeAt(digits + 2) === SPACE)
    ) {
      out[length++] = hexAt(text, digits) * 16 + hexAt(text, digits + 1);
      index = digits + 2;
      continue;
    }
    if (length === at) return -1;
    let rest = index;
    while (rest < end && text.charCodeAt(rest) === SPACE) rest += 1;
    if (rest === end) return length;
    const column = text.charCodeAt(rest);
    return rest - index >= 2 && (column === 0x7c || column === 0x3e) ? length : -1;
  }
};

/**
 * `0000000 6170 7373 6f77 ...` (od -x, -tx2, plain hexdump), `0000000    6170    7373 ...` (hexdump -x),
 * `0000000 73736170 ...` (od -tx4, -tx8), `0000000 060560 071563 ...` (plain od, od -o, hexdump -o:
 * 2-byte words in octal), and without the offset, ` 6170 7373 ...` (od -An -x): words of 4, 8 or 16 hex
 * digits or 6 octal ones, one width a line, one to four spaces apart, each read little-endian (a last
 * odd byte shows as `000a`, read as 0a 00); then the line's end, hexdump's padding, or (two spaces or
 * more) `z`'s `>text<` column.
 */
const parseWords: LineParser = (text, start, end, out, at) => {
  let index = hexRunEnd(text, start, end);
  if (index === start ? text.charCodeAt(start) !== SPACE : index - start < 4) return -1;
  let width = 0;
  let length = at;
  for (;;) {
    let digits = index;
    while (digits < end && digits - index <= 4 && text.charCodeAt(digits) === SPACE) digits += 1;
    const spaces = digits - index;
    const wordEnd = spaces >= 1 && spaces <= 4 ? hexRunEnd(text, digits, end) : digits;
    const size = wordEnd - digits;
    if (
      (width === 0 ? size === 4 || size === 6 || size === 8 || size === 16 : size === width) &&
      (wordEnd === end || text.charCodeAt(wordEnd) === SPACE)
    ) {
      if (size === OCTAL_WORD) {
        const word = octalWord(text, digits);
        if (word < 0) return -1;
        out[length++] = word & 0xff;
        out[length++] = word >> 8;
      } else {
        length = writeWord(text, digits, wordEnd, out, length);
      }
      width = size;
      index = wordEnd;
      continue;
    }
    if (length === at) return -1;
    let rest = index;
    while (rest < end && text.charCodeAt(rest) === SPACE) rest += 1;
    if (rest === end) return length;
    return rest - index >= 2 && text.charCodeAt(rest) === 0x3e ? length : -1;
  }
};

/** The digits of a 2-byte word in octal (`060560`). */
const OCTAL_WORD = 6;

/** The value of the 2-byte octal word at `index` (0 to 177777), or -1. */
function octalWord(text: string, index: number): number {
  let value = 0;
  for (let digit = index; digit < index + OCTAL_WORD; digit += 1) {
    const code = text.charCodeAt(digit);
    if (!isOctal(code)) return -1;
    value = value * 8 + code - 0x30;
  }
  return value <= 0xffff ? value : -1;
}

/**
 * A words dump's bytes (`decoded`, read little-endian) with each word's bytes the other way round:
 * what the dump shows read big-endian. The width of a line's words is that of its first.
 */
function swapWords(text: string, dump: Dump, decoded: string): string {
  let swapped = '';
  let width = 1;
  for (const line of dump.lines) {
    if (line.to === line.from) continue;
    // A `*` line's rows put back (`repeatStarred`) are those of the line before it: its width.
    if (text.charCodeAt(line.start) !== 0x2a) {
      let digits = hexRunEnd(text, line.start, line.end);
      while (digits < line.end && text.charCodeAt(digits) === SPACE) digits += 1;
      const size = hexRunEnd(text, digits, line.end) - digits;
      width = Math.max(1, size === OCTAL_WORD ? 2 : size >> 1);
    }
    for (let word = line.from - dump.from; word < line.to - dump.from; word += width) {
      for (let index = word + width - 1; index >= word; index -= 1) swapped += decoded[index];
    }
  }
  return swapped;
}

// od -c's escapes (`\0`, `\a`, `\b`, `\f`, `\n`, `\r`, `\t`, `\v`) and the bytes they stand for.
const CHAR_ESCAPES = '0abfnrtv';
const ESCAPED_BYTES = [0, 7, 8, 12, 10, 13, 9, 11];

// od -a's names of the bytes it does not show as themselves (the high bit is dropped: 0xc3 is `C`).
const NAMED_BYTES = new Map(
  'nul soh stx etx eot enq ack bel bs ht nl vt ff cr so si dle dc1 dc2 dc3 dc4 nak syn etb can em sub esc fs gs rs us sp'
    .split(' ')
    .map((name, byte): [string, number] => [name, byte])
    .concat([['del', 0x7f]]),
);

/**
 * `0000000   p   a   s   s  \n 303 251`: an offset (or none, `-An`), then fields of four characters,
 * right-aligned: a printable character, a backslash escape, three octal digits (od -c, od -b, hexdump
 * -c, -b), od -a's name of a byte (`  nl`, ` nul`, `  sp`), or four spaces (a space).
 */
const parseChars: LineParser = (text, start, end, out, at) => {
  let index = hexRunEnd(text, start, end);
  const offset = index > start;
  if (index === end || (end - index) % 4 !== 0) return -1;
  let length = at;
  let shown = false;
  for (; index < end; index += 4) {
    if (text.charCodeAt(index) !== SPACE) return -1;
    const first = text.charCodeAt(index + 1);
    const second = text.charCodeAt(index + 2);
    const last = text.charCodeAt(index + 3);
    if (first === SPACE && second === SPACE) {
      if (last < SPACE || last > 0x7e) return -1;
      shown ||= last !== SPACE;
      out[length++] = last;
    } else if (first === SPACE && second === BACKSLASH) {
      const escaped = CHAR_ESCAPES.indexOf(text[index + 3]!);
      if (escaped === -1) return -1;
      shown = true;
      out[length++] = ESCAPED_BYTES[escaped]!;
    } else if (isOctal(first) && first <= 0x33 && isOctal(second) && isOctal(last)) {
      shown = true;
      out[length++] = (first - 0x30) * 64 + (second - 0x30) * 8 + (last - 0x30);
    } else if (first === SPACE || (first >= 0x61 && first <= 0x7a)) {
      const named = NAMED_BYTES.get(text.slice(first === SPACE ? index + 2 : index + 1, index + 4));
      if (named === undefined) return -1;
      shown = true;
      out[length++] = named;
    } else {
      return -1;
    }
  }
  return offset || shown ? length : -1;
};

function isOctal(code: number): boolean {
  return code >= 0x30 && code <= 0x37;
}

/**
 * `00000000: 01110000 01100001 ...  pa` (xxd -b): an offset, `: `, groups of bits (8 a byte, `-g` bytes
 * a group) one space apart, then (two spaces or more) the text column, which must show the bytes read
 * (else -1: a line of plain xxd whose hex digits are all 0 and 1 shows other bytes).
 */
const parseBits: LineParser = (text, start, end, out, at) => {
  let index = hexRunEnd(text, start, end);
  if (index - start < 4 || text.charCodeAt(index) !== 0x3a || text.charCodeAt(index + 1) !== SPACE) return -1;
  index += 2;
  let length = at;
  for (;;) {
    let groupEnd = index;
    while (groupEnd < end && (text.charCodeAt(groupEnd) | 1) === 0x31) groupEnd += 1;
    const size = groupEnd - index;
    if (size === 0 || size % 8 !== 0 || (groupEnd < end && text.charCodeAt(groupEnd) !== SPACE)) return -1;
    for (; index < groupEnd; index += 8) {
      let byte = 0;
      for (let bit = index; bit < index + 8; bit += 1) byte = byte * 2 + text.charCodeAt(bit) - 0x30;
      out[length++] = byte;
    }
    if (index + 1 >= end || text.charCodeAt(index + 1) === SPACE) break;
    index += 1;
  }
  return columnShows(text, index, end, out, at, length) ? length : -1;
};

/**
 * A line of decimal bytes (`parseDecimal`) with a field od -b and od -c never print (`  35`: od -b's
 * are three octal digits, od -c's one character), or of `od -td1`'s 5-character fields: the first
 * line of a dump of them. Later lines of one are read by `parseDecimal` itself.
 */
const parseDecimalStrict: LineParser = (text, start, end, out, at) =>
  readDecimal(text, start, end, out, at, true);

/**
 * `0000000  99 111 110 ...` (od -tu1) and `0000000   99  111 ...  -61` (od -td1), also with `-An`,
 * `-Ax`, `-Ad` and `z`'s `>text<`: decimal bytes in fields of one width a line, 4 characters (` %3u`,
 * 0 to 255) or 5 (` %4d`, -128 to 127), each a right-aligned number without leading zeros after at
 * least one space; then the line's end or (two spaces or more) the text column.
 */
const parseDecimal: LineParser = (text, start, end, out, at) => readDecimal(text, start, end, out, at, false);

function readDecimal(
  text: string,
  start: number,
  end: number,
  out: Buffer,
  at: number,
  strict: boolean,
): number {
  let index = hexRunEnd(text, start, end);
  if (index === start ? text.charCodeAt(start) !== SPACE : index - start < 4) return -1;
  // The width, from the first field: its spaces, then its digits.
  let digits = index;
  while (digits < end && text.charCodeAt(digits) === SPACE) digits += 1;
  if (text.charCodeAt(digits) === 0x2d) digits += 1;
  const width = decimalRunEnd(text, digits, end) - index;
  if (width !== 4 && width !== 5) return -1;
  let length = at;
  let distinct = false;
  for (; index + width <= end; index += width) {
    let field = index;
    while (field < index + width && text.charCodeAt(field) === SPACE) field += 1;
    if (field === index) break;
    const negative = text.charCodeAt(field) === 0x2d;
    const from = negative ? field + 1 : field;
    if (from === index + width || decimalRunEnd(text, from, index + width) !== index + width) break;
    // od prints no leading zeros (od -b's `075` is octal).
    if (text.charCodeAt(from) === 0x30 && from + 1 < index + width) return -1;
    let value = 0;
    for (let digit = from; digit < index + width; digit += 1)
      value = value * 10 + text.charCodeAt(digit) - 0x30;
    if (negative) value = -value;
    if (width === 4 ? value > 255 : value < -128 || value > 127) return -1;
    // Two digits, or an 8 or 9 among three: no od -c character, no od -b octal byte.
    distinct ||= width === 5 || index + width - from === 2 || (value >= 100 && hasEightOrNine(value));
    out[length++] = value & 0xff;
  }
  if (length === at || (strict && !distinct)) return -1;
  let rest = index;
  while (rest < end && text.charCodeAt(rest) === SPACE) rest += 1;
  if (rest === end) return length;
  return rest - index >= 2 && text.charCodeAt(rest) === 0x3e ? length : -1;
}

/** Whether the decimal digits of `value` hold an 8 or a 9 (od -b's octal digits never do). */
function hasEightOrNine(value: number): boolean {
  for (let rest = value; rest > 0; rest = Math.floor(rest / 10)) if (rest % 10 >= 8) return true;
  return false;
}

/** The end of the run of decimal digits from `index` (not past `end`). */
function decimalRunEnd(text: string, index: number, end: number): number {
  let at = index;
  while (at < end && text.charCodeAt(at) >= 0x30 && text.charCodeAt(at) <= 0x39) at += 1;
  return at;
}

/**
 * `  0x70, 0x61, 0x73,` (xxd -i, also `-u`'s `0X70`; and C arrays written so by other tools, `0x70,0x61`):
 * indentation, then bytes of `0x` and exactly two hex digits, each but the last followed by `,` and
 * spaces; a `,` may end the line.
 */
const parseCArray: LineParser = (text, start, end, out, at) => {
  let index = start;
  while (index < end && (text.charCodeAt(index) === SPACE || text.charCodeAt(index) === 0x09)) index += 1;
  let length = at;
  for (;;) {
    if (
      index + 4 > end ||
      text.charCodeAt(index) !== 0x30 ||
      (text.charCodeAt(index + 1) | 0x20) !== 0x78 ||
      hexAt(text, index + 2) < 0 ||
      hexAt(text, index + 3) < 0
    ) {
      return -1;
    }
    out[length++] = hexAt(text, index + 2) * 16 + hexAt(text, index + 3);
    index += 4;
    if (index === end) return length;
    if (text.charCodeAt(index) !== 0x2c) return -1;
    index += 1;
    while (index < end && text.charCodeAt(index) === SPACE) index += 1;
    if (index === end) return length;
  }
};

/** The bits `parseBinary` has read of a byte not yet whole, and how many (a dump's byte crosses lines). */
let binaryCarry = 0;
let binaryCarried = 0;

/**
 * `0111000001100001...` (basenc --base2msbf): lines of `0` and `1` only, read as one run of bits, 8 a
 * byte, most significant first (`--base2lsbf`'s are searched reversed, by the caller); a byte not
 * whole at a line's end is finished by the next line (`continues`: the line before was one). A first
 * line holds both digits and at least 8 (a line of zeros is `xxd -p`'s).
 */
function parseBinary(
  text: string,
  start: number,
  end: number,
  out: Buffer,
  at: number,
  continues: boolean,
): number {
  let ones = 0;
  for (let index = start; index < end; index += 1) {
    const code = text.charCodeAt(index);
    if ((code | 1) !== 0x31) return -1;
    ones += code - 0x30;
  }
  if (!continues && (end - start < 8 || ones === 0 || ones === end - start)) return -1;
  if (end === start) return -1;
  if (!continues) binaryCarried = 0;
  let length = at;
  for (let index = start; index < end; index += 1) {
    binaryCarry = ((binaryCarry << 1) | (text.charCodeAt(index) - 0x30)) & 0xff;
    binaryCarried += 1;
    if (binaryCarried === 8) {
      out[length++] = binaryCarry;
      binaryCarried = 0;
    }
  }
  return length;
}

/** `decoded` (one character a byte) with each byte's bits in the other order. */
function reverseBits(decoded: string): string {
  let reversed = '';
  for (let index = 0; index < decoded.length; index += 1) {
    let byte = decoded.charCodeAt(index);
    let flipped = 0;
    for (let bit = 0; bit < 8; bit += 1, byte >>= 1) flipped = (flipped << 1) | (byte & 1);
    reversed += String.fromCharCode(flipped);
  }
  return reversed;
}

/** `70617373776f7264...` (xxd -p): hex digits only, an even number of them (or odd where the line was cut). */
const parsePlain: LineParser = (text, start, end, out, at) => {
  if (end - start < 2 || hexRunEnd(text, start, end) !== end) return -1;
  let length = at;
  for (let index = start; index + 1 < end; index += 2) {
    out[length++] = hexAt(text, index) * 16 + hexAt(text, index + 1);
  }
  return length;
};

// xxd's lines are read first, by `readXxd`.
const PARSERS: ReadonlyArray<readonly [DumpKind, LineParser]> = [
  // Before hex bytes: `  35  32` (od -tu1) is hex bytes' shape too, but no hex dump spaces every byte by two.
  ['decimal', parseDecimalStrict],
  ['spaced', parseSpaced],
  ['chars', parseChars],
  ['words', parseWords],
  ['carray', parseCArray],
  ['plain', parsePlain],
];

/**
 * The [start, end) ranges of `decoded` (a dump's bytes one character a byte, or the text a UTF-16 run
 * shows) that scrubbing would replace: each occurrence of a known value (`values`, as `decoded` holds
 * them: a dump's, as their UTF-8 bytes), and the part of each match of core's patterns
 * that the pattern's replacement changes (`password=` stays, its value does not). Each is found in the
 * decoded text as it is, so a match is never missed for another one's replacement.
 */
export function secretRanges(decoded: string, values: readonly string[]): Array<[number, number]> {
  const found: Array<[number, number]> = [];
  for (const value of values) {
    if (value === '') continue;
    for (let at = decoded.indexOf(value); at !== -1; at = decoded.indexOf(value, at + value.length)) {
      found.push([at, at + value.length]);
    }
  }
  for (const { pattern, replace, requires } of SECRET_PATTERNS) {
    if (requires !== undefined && !requires.test(decoded)) continue;
    for (const match of decoded.matchAll(pattern)) {
      const whole = match[0];
      const replaced = expandReplacement(replace, match);
      // What the replacement keeps of the match: the same text before and after its marker, never a
      // secret's first or last character that happens to equal the marker's `[` or `]`.
      const marker = replaced.indexOf(REDACTED);
      const keptBefore = marker === -1 ? replaced.length : marker;
      const keptAfter = marker === -1 ? replaced.length : replaced.length - marker - REDACTED.length;
      let head = 0;
      while (head < keptBefore && head < whole.length && whole[head] === replaced[head]) head += 1;
      let tail = 0;
      while (
        tail < keptAfter &&
        tail < whole.length - head &&
        whole[whole.length - 1 - tail] === replaced[replaced.length - 1 - tail]
      ) {
        tail += 1;
      }
      if (head + tail < whole.length) found.push([match.index + head, match.index + whole.length - tail]);
    }
  }
  return found;
}

/** A replacement template (`$1`, `$<name>`, `$&`, `$$`) filled in from one match, as `String.replace` does. */
function expandReplacement(template: string, match: RegExpMatchArray): string {
  if (!template.includes('$')) return template;
  return template.replace(/\$(?:(\$)|(&)|<([^>]*)>|(\d\d?))/g, (token, dollar, whole, name, group) => {
    if (dollar !== undefined) return '$';
    if (whole !== undefined) return match[0];
    if (name !== undefined) return match.groups?.[name as string] ?? '';
    const number = Number(group);
    return number > 0 && number < match.length ? (match[number] ?? '') : token;
  });
}
