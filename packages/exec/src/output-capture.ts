import { ESCAPE, escapedValueRanges } from './environment.js';

/**
 * Bytes an escape spends on one UTF-16 code unit of a value at most: `\u00e4` 6, `\U00000024` and
 * `&#0000043;` 10 (HTML's decimal references are read with up to 7 digits), `\342\202\254` (`€`, in
 * octal as git writes it) and `\xe2\x82\xac` 12, `%F0%9F%98%80` 6 for each half of its character.
 */
const ESCAPED_UNIT_BYTES = 12;

/**
 * Collects one output stream: keeps the first `limit` bytes, a rolling tail of the last `tailBytes`,
 * and the total written, plus a few bytes past each cut to tell whether it splits a character or one
 * of `secretValues` (as written, in UTF-16 or UTF-32 either way round, or written with escapes). Memory stays
 * bounded however much the program writes.
 */
export class OutputCapture {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private tail: Buffer = Buffer.alloc(0);
  private readonly secrets: readonly Buffer[];
  /** The values as text, for the forms written with escapes (`escapedValueRanges`). */
  private readonly values: readonly string[];
  /**
   * What `escapedValueRanges` searches the bytes around a cut for, read one byte a character: the
   * values, and each one holding characters past ASCII also as its UTF-8 bytes read so, for a value
   * written partly as itself and partly escaped (`printf %q` leaves `ä` as it is: `p\u00e4` is found
   * as the value, `pä\$` as its bytes).
   */
  private readonly searched: readonly string[];
  // Bytes kept past each cut: a UTF-8 sequence is at most 4 bytes, a secret value as long as its
  // longest form (written with escapes, `ESCAPED_UNIT_BYTES` a code unit).
  private readonly margin: number;
  /** Bytes written in all. */
  total = 0;

  constructor(
    private readonly limit: number,
    private readonly tailBytes: number,
    secretValues: readonly (string | Buffer)[] = [],
  ) {
    // Callers pass them encoded once (`secretBytes`), so a call allocates nothing per secret.
    const written = secretValues
      .map((secret) => (typeof secret === 'string' ? Buffer.from(secret) : secret))
      .filter((secret) => secret.length > 1);
    this.values = written.map((secret) => secret.toString('utf8'));
    this.searched = [
      ...this.values,
      ...written
        .filter((secret) => secret.some((byte) => byte >= 0x80))
        .map((secret) => secret.toString('latin1')),
    ];
    // A file in UTF-16 printed as it is holds a value as UTF-16 (`p\0a\0...`, `\0p\0a...`), one in
    // UTF-32 as UTF-32 (`p\0\0\0a...`, `\0\0\0p...`).
    const utf16 = this.values.flatMap((value) => {
      const little = Buffer.from(value, 'utf16le');
      const wide = Buffer.alloc(little.length * 2);
      for (let unit = 0; unit < little.length; unit += 2) little.copy(wide, unit * 2, unit, unit + 2);
      return [little, Buffer.from(little).swap16(), wide, Buffer.from(wide).swap32()];
    });
    this.secrets = [...written, ...utf16];
    this.margin = Math.max(3, ...this.values.map((value) => value.length * ESCAPED_UNIT_BYTES));
  }

  push(chunk: Buffer): void {
    this.total += chunk.length;
    const room = this.limit + this.margin - this.kept;
    if (room > 0) {
      const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
      this.chunks.push(part);
      this.kept += part.length;
    }
    if (this.tailBytes > 0) {
      const keep = this.tailBytes + this.margin;
      const joined = chunk.length >= keep ? chunk : Buffer.concat([this.tail, chunk]);
      this.tail = joined.subarray(Math.max(0, joined.length - keep));
    }
  }

  get truncated(): boolean {
    return this.total > this.limit;
  }

  /**
   * The kept text, cut before any character or secret value the limit would split: the model must
   * not see all of a secret but its last characters, where no exact match finds it.
   */
  text(): string {
    const head = Buffer.concat(this.chunks);
    if (head.length <= this.limit) return head.toString('utf8');
    let cut = utf8Boundary(head, this.limit);
    for (let split = this.across(head, cut); split.length > 0; ) {
      cut = Math.min(...split.map(([start]) => start));
      split = this.across(head, cut);
    }
    return head.subarray(0, cut).toString('utf8');
  }

  /**
   * The [start, end) byte ranges of the values in `bytes` that `cut` falls strictly inside: as
   * written and in UTF-16 (`secretsAcross`), and written with escapes, found in a decoded view of
   * the bytes around the cut (only where they hold an escape).
   */
  private across(bytes: Buffer, cut: number): Array<[number, number]> {
    const found = secretsAcross(bytes, cut, this.secrets);
    const from = Math.max(0, cut - this.margin);
    // Each byte a character: an escape is ASCII, and a value's non-ASCII characters written as
    // themselves are found as written, above, or as its bytes (`searched`).
    const window = bytes.toString('latin1', from, Math.min(bytes.length, cut + this.margin));
    if (this.values.length > 0 && ESCAPE.test(window)) {
      for (const [start, end] of escapedValueRanges(window, this.searched)) {
        if (from + start < cut && from + end > cut) found.push([from + start, from + end]);
      }
    }
    return found;
  }

  /** The last `tailBytes` written, starting at a character boundary and after any secret value they would split. */
  tailText(): string {
    const first = Math.max(0, this.tail.length - this.tailBytes);
    let start = first;
    while (start < this.tail.length && start - first < 3 && isContinuation(this.tail[start]!)) start += 1;
    for (let split = this.across(this.tail, start); split.length > 0; ) {
      start = Math.max(...split.map(([, end]) => end));
      split = this.across(this.tail, start);
    }
    return this.tail.subarray(start).toString('utf8');
  }
}

/** The largest cut at or before `limit` that does not fall inside a UTF-8 sequence. */
function utf8Boundary(bytes: Buffer, limit: number): number {
  let cut = limit;
  // The byte at `cut` is the first one dropped; while it continues a sequence, move the cut back to
  // the sequence's lead byte (at most 3 steps: sequences are at most 4 bytes).
  while (cut > 0 && limit - cut < 3 && isContinuation(bytes[cut]!)) cut -= 1;
  return cut;
}

/** The [start, end) byte ranges of the secret values in `bytes` that `cut` falls strictly inside. */
function secretsAcross(bytes: Buffer, cut: number, secrets: readonly Buffer[]): Array<[number, number]> {
  const found: Array<[number, number]> = [];
  for (const secret of secrets) {
    // From here on, an occurrence ends past the cut; it must also start before it.
    let start = bytes.indexOf(secret, Math.max(0, cut - secret.length + 1));
    while (start !== -1 && start < cut) {
      found.push([start, start + secret.length]);
      start = bytes.indexOf(secret, start + 1);
    }
  }
  return found;
}

function isContinuation(byte: number): boolean {
  return (byte & 0xc0) === 0x80;
}
