// Text as a reader takes it in, for finding known values however they are written: escapes decoded,
// invisible characters dropped, compatibility forms folded, case folded; each unit of the view knows
// the span of the text it came from, so a value found in the view is redacted in the text.
// (@toolgate/exec's output scrubber keeps its own, larger view of program output; it does not export
// it, so the service keeps this small one for third-party text.)

/** The view's text (lower case) and, for each of its UTF-16 units, the [start, end) of the text it came from. */
export interface DecodedView {
  readonly view: string;
  readonly starts: Uint32Array;
  readonly ends: Uint32Array;
}

/**
 * Text the view reads differently from its plain lower case: an escape's first character (`%`, `\`,
 * `&`), a control character but a line break, and anything past ASCII (an invisible character, a
 * fullwidth form). Text without one is its own view, lower-cased: the cheap path.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what the view drops.
export const NEEDS_VIEW = /[%\\&\u0000-\u0009\u000b\u000c\u000e-\u001f\u007f-\uffff]/;

/** Characters a reader never sees (format characters: zero-width ones, soft hyphen, bidi controls; other default-ignorables). */
const INVISIBLE = /^[\p{Cf}\p{Default_Ignorable_Code_Point}]$/u;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what the view drops.
const CONTROL = /^[\u0000-\u0009\u000b\u000c\u000e-\u001f\u007f-\u009f]$/;
/** What each code point past ASCII reads as (NFKC, lower case; '' when dropped), filled on first use. */
const folded = new Map<number, string>();
/** Rounds of decoding: a value escaped twice (JSON in JSON, `%252B`) is read, three times too. */
const MAX_ROUNDS = 3;
/** An escape left in a view (lower case): only then is it read again. */
const ESCAPED = /%[0-9a-f]{2}|\\(?:[^a-z0-9]|[bfnrtv]|u[0-9a-f{]|x[0-9a-f]{2})|&(?:#|[a-z]{2,8};)/;

// The HTML character references of ASCII punctuation (HTML5 names) and the five XML ones.
const NAMED: Readonly<Record<string, number>> = {
  amp: 0x26,
  lt: 0x3c,
  gt: 0x3e,
  quot: 0x22,
  apos: 0x27,
  plus: 0x2b,
  sol: 0x2f,
  bsol: 0x5c,
  lowbar: 0x5f,
  equals: 0x3d,
  period: 0x2e,
  colon: 0x3a,
  semi: 0x3b,
  comma: 0x2c,
  num: 0x23,
  dollar: 0x24,
  percnt: 0x25,
  excl: 0x21,
  quest: 0x3f,
  commat: 0x40,
  ast: 0x2a,
  hyphen: 0x2d,
  dash: 0x2d,
  tilde: 0x7e,
  verbar: 0x7c,
  nbsp: 0x20,
};
// `&#95;`, `&#x5F;` (the `;` optional, as browsers read them), `&lowbar;`.
const ENTITY = /&(?:#([0-9]{1,7});?|#[xX]([0-9a-fA-F]{1,6});?|([A-Za-z]{2,8});)/y;
const CONTROL_LETTERS: Readonly<Record<string, number>> = { b: 8, f: 12, n: 10, r: 13, t: 9, v: 11 };

/** Growable parallel arrays of the view being built. */
class Builder {
  units: Uint16Array;
  starts: Uint32Array;
  ends: Uint32Array;
  length = 0;
  constructor(size: number) {
    this.units = new Uint16Array(size + 16);
    this.starts = new Uint32Array(size + 16);
    this.ends = new Uint32Array(size + 16);
  }
  /** Appends code point `point` of the text's [start, end), folded (or nothing when invisible). */
  emit(point: number, start: number, end: number): void {
    if (point < 0x80) {
      if (CONTROL_CHARS[point] === 1) return;
      this.unit(point >= 0x41 && point <= 0x5a ? point + 0x20 : point, start, end);
      return;
    }
    let text = folded.get(point);
    if (text === undefined) {
      const character = String.fromCodePoint(point);
      text =
        INVISIBLE.test(character) || CONTROL.test(character) ? '' : character.normalize('NFKC').toLowerCase();
      folded.set(point, text);
    }
    for (let index = 0; index < text.length; index += 1) this.unit(text.charCodeAt(index), start, end);
  }
  unit(code: number, start: number, end: number): void {
    if (this.length === this.units.length) {
      const grow = <T extends Uint16Array | Uint32Array>(array: T, make: (n: number) => T): T => {
        const next = make(array.length * 2);
        next.set(array);
        return next;
      };
      this.units = grow(this.units, (n) => new Uint16Array(n));
      this.starts = grow(this.starts, (n) => new Uint32Array(n));
      this.ends = grow(this.ends, (n) => new Uint32Array(n));
    }
    this.units[this.length] = code;
    this.starts[this.length] = start;
    this.ends[this.length] = end;
    this.length += 1;
  }
}

const CONTROL_CHARS = new Uint8Array(0x80);
for (let code = 0; code < 0x20; code += 1) if (code !== 0x0a && code !== 0x0d) CONTROL_CHARS[code] = 1;
CONTROL_CHARS[0x7f] = 1;
const UTF16 = new TextDecoder('utf-16le');

/**
 * `text` as read: percent-escapes in any case (`%2b`, `%5F`; a run of them read as UTF-8), the string
 * literals' escapes (`\u005f`, `\u{5f}`, `\x5f`, JSON's `\/` and any backslash before punctuation,
 * `\n`), HTML character references (`&#95;`, `&#x5f;`, `&lowbar;`), each decoded up to three times
 * over (a value escaped in JSON inside JSON); format and control characters dropped (zero-width
 * space, soft hyphen, bidi controls, BEL; line breaks stay); compatibility forms folded (NFKC:
 * fullwidth `Ｚ` is `z`); and lower case. A value split over two strings is in neither's view.
 */
export function decodedView(text: string): DecodedView {
  let view = decodeOnce(text);
  for (let round = 1; round < MAX_ROUNDS && ESCAPED.test(view.view); round += 1) {
    const again = decodeOnce(view.view);
    if (again.view === view.view) break;
    // Each unit of the second view came from units of the first: their spans in the text.
    const starts = new Uint32Array(again.view.length);
    const ends = new Uint32Array(again.view.length);
    for (let index = 0; index < again.view.length; index += 1) {
      starts[index] = view.starts[again.starts[index]!]!;
      ends[index] = view.ends[again.ends[index]! - 1]!;
    }
    view = { view: again.view, starts, ends };
  }
  return view;
}

function decodeOnce(text: string): DecodedView {
  const out = new Builder(text.length);
  for (let index = 0; index < text.length; ) {
    const code = text.charCodeAt(index);
    if (code === 0x25 || (code === 0x5c && (text.charCodeAt(index + 1) | 0x20) === 0x78)) {
      const end = decodeByteRun(text, index, out);
      if (end > index) {
        index = end;
        continue;
      }
    }
    if (code === 0x5c) {
      const end = decodeBackslash(text, index, out);
      if (end > index) {
        index = end;
        continue;
      }
    } else if (code === 0x26) {
      ENTITY.lastIndex = index;
      const found = ENTITY.exec(text);
      const point =
        found === null
          ? undefined
          : found[1] !== undefined
            ? Number(found[1])
            : found[2] !== undefined
              ? Number.parseInt(found[2], 16)
              : NAMED[found[3]!.toLowerCase()];
      if (found !== null && point !== undefined && point <= 0x10ffff) {
        out.emit(point, index, index + found[0].length);
        index += found[0].length;
        continue;
      }
    }
    const point = text.codePointAt(index)!;
    const width = point > 0xffff ? 2 : 1;
    out.emit(point, index, index + width);
    index += width;
  }
  return {
    view: UTF16.decode(out.units.subarray(0, out.length)),
    starts: out.starts.subarray(0, out.length),
    ends: out.ends.subarray(0, out.length),
  };
}

/** The byte at `index` written `%XX` or `\xXX`, as `length * 256 + byte`, or -1. */
function byteAt(text: string, index: number): number {
  const code = text.charCodeAt(index);
  if (code === 0x25) {
    const value = hex(text, index + 1, 2);
    return value >= 0 ? 3 * 256 + value : -1;
  }
  if (code === 0x5c && (text.charCodeAt(index + 1) | 0x20) === 0x78) {
    const value = hex(text, index + 2, 2);
    return value >= 0 ? 4 * 256 + value : -1;
  }
  return -1;
}

/** Emits the run of byte escapes at `index` read as UTF-8 (a byte no sequence starts as itself); returns its end. */
function decodeByteRun(text: string, index: number, out: Builder): number {
  let at = index;
  for (let first = byteAt(text, at); first >= 0; first = byteAt(text, at)) {
    const lead = first & 0xff;
    const size = lead >= 0xf0 && lead <= 0xf4 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc2 && lead < 0xe0 ? 2 : 1;
    let point = size === 1 ? lead : lead & (0x7f >> size);
    let end = at + (first >> 8);
    let valid = lead < 0x80 || size > 1;
    for (let part = 1; valid && part < size; part += 1) {
      const next = byteAt(text, end);
      valid = next >= 0 && (next & 0xc0) === 0x80;
      point = (point << 6) | (next & 0x3f);
      end += next >> 8;
    }
    if (valid && point <= 0x10ffff) {
      out.emit(point, at, end);
      at = end;
    } else {
      out.emit(lead, at, at + (first >> 8));
      at += first >> 8;
    }
  }
  return at;
}

/** Emits the backslash escape at `index` (`\uXXXX`, `\u{X}`, `\UXXXXXXXX`, `\n`, `\/`); returns its end, or `index`. */
function decodeBackslash(text: string, index: number, out: Builder): number {
  const next = text[index + 1];
  if (next === undefined) return index;
  if (next === 'u' && text[index + 2] === '{') {
    const close = text.indexOf('}', index + 3);
    const value = close > index + 3 && close <= index + 9 ? hex(text, index + 3, close - index - 3) : -1;
    if (value >= 0 && value <= 0x10ffff) {
      out.emit(value, index, close + 1);
      return close + 1;
    }
    return index;
  }
  if (next === 'u' || next === 'U') {
    const digits = next === 'u' ? 4 : 8;
    const value = hex(text, index + 2, digits);
    if (value < 0 || value > 0x10ffff) return index;
    out.emit(value, index, index + 2 + digits);
    return index + 2 + digits;
  }
  const control = CONTROL_LETTERS[next];
  if (control !== undefined) {
    out.emit(control, index, index + 2);
    return index + 2;
  }
  if (/[A-Za-z0-9]/.test(next)) return index;
  const point = text.codePointAt(index + 1)!;
  const end = index + 1 + (point > 0xffff ? 2 : 1);
  out.emit(point, index, end);
  return end;
}

/** The value of `digits` hex digits at `index`, or -1. */
function hex(text: string, index: number, digits: number): number {
  if (index + digits > text.length) return -1;
  let value = 0;
  for (let at = index; at < index + digits; at += 1) {
    const code = text.charCodeAt(at);
    const lower = code | 0x20;
    const digit =
      code >= 0x30 && code <= 0x39 ? code - 0x30 : lower >= 0x61 && lower <= 0x66 ? lower - 0x57 : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}
