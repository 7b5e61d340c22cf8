/** The scrubbed form of a run's decoding, or undefined when nothing in it was found. */
type ScanDecoded = (plain: string) => string | undefined;

/**
 * Encoded text in an error: a redirect target percent-encoded (`postgres%3A%2F%2Fapp%3Ahunter2%40db`),
 * an HTML error page's entities (`postgres&#x3A;&#x2F;&#x2F;…`), a JSON or Python string's escapes
 * (`postgres\x3a\/\/…`, `ghp\u005f…`, octal `\160\141…` as shells and loggers print bytes), a
 * quoted-printable mail or log body (`password=3Dhunter2`, lines cut by `=` soft breaks), a hex dump,
 * a value base64- or base32-encoded in a header or a JSON field.
 * No pattern sees through the encoding, and a model decodes each at a glance. Each such run is decoded
 * and scanned, and so are the runs its decoding holds, `levels` deep (base64 of base64, of
 * percent-encoded text, of JSON with a base64 field). A run that held something is replaced (a
 * percent, entity, escape or quoted-printable run by its scrubbed decoding, a hex, base64 or base32
 * run whole); a run that held nothing stays exactly as it was. Each kind is tried only where a cheap
 * test finds its mark, so plain text costs a few scans.
 */
export function scrubEncodedRuns(text: string, scan: ScanDecoded, levels = MAX_LEVELS): string {
  const held: ScanDecoded = (plain) => {
    const inner = levels > 1 ? scrubEncodedRuns(plain, scan, levels - 1) : plain;
    return scan(inner) ?? (inner === plain ? undefined : inner);
  };
  let out = text;
  if (PERCENT_ESCAPE.test(out)) {
    out = out.replace(PERCENT_RUN, (run) => held(repeatedly(percentDecoded, PERCENT_ESCAPE, run)) ?? run);
  }
  if (ENTITY.test(out)) {
    out = out.replace(ENTITY_RUN, (run) => shownDecoded(run, entitiesDecoded, held, asEntity));
  }
  if (ESCAPE.test(out)) {
    out = out.replace(ESCAPE_RUN, (run) => shownDecoded(run, escapesDecoded, held, asEscape));
  }
  if (out.includes('=') && QP_MARK.test(out)) {
    out = out.replace(
      QP_RUN,
      (run) => held(qpDecoded(run))?.replace(UNSAFE_DECODED, asQuotedPrintable) ?? run,
    );
  }
  out = out.replace(HEX_RUN, (run) => hiddenWhole(run, hexText(run), held));
  if (BASE64_CANDIDATE.test(out)) {
    out = out.replace(BASE64_RUN, (run) => hiddenWhole(run, base64Text(run), held));
    // Base32's alphabet is a part of base64's: only where a base64 run could be.
    if (BASE32_CANDIDATE.test(out))
      out = out.replace(BASE32_RUN, (run) => hiddenWhole(run, base32Text(run), held));
  }
  return out;
}

/** What a hex or base64 run that held something becomes (its decoding is not shown, scrubbed or not). */
export const ENCODED_SECRET = '[REDACTED]';

const MAX_LEVELS = 3;
const MAX_DECODE_ROUNDS = 3;

/** `decode` again while `encoded` still matches (`%253A`, `&amp;#x2F;`), a bounded number of times. */
function repeatedly(decode: (run: string) => string, encoded: RegExp, run: string): string {
  let plain = run;
  for (let round = 0; round < MAX_DECODE_ROUNDS && encoded.test(plain); round += 1) plain = decode(plain);
  return plain;
}

/**
 * An entity or escape run shown by its scrubbed decoding when that held something. A quote, angle
 * bracket or control character the decoding made is written back encoded, so it cannot end the string
 * or open markup where the run sits; a backslash ending the run stays the run's (it escapes what
 * follows, as in `\"` closing a string quoted in a string).
 */
function shownDecoded(
  run: string,
  decode: (run: string) => string,
  held: ScanDecoded,
  encode: (char: string) => string,
): string {
  let end = run.length;
  while (end > 0 && run[end - 1] === '\\') end -= 1;
  const body = run.slice(0, end);
  const plain = decode(body);
  if (plain === body) return run;
  const shown = held(plain);
  return shown === undefined ? run : shown.replace(UNSAFE_DECODED, encode) + run.slice(end);
}

/** A hex or base64 run (its decoding when that is text) goes whole when the decoding held something. */
function hiddenWhole(run: string, plain: string | undefined, held: ScanDecoded): string {
  return plain === undefined || held(plain) === undefined ? run : ENCODED_SECRET;
}

// The characters a run may not hold raw (they end the quoted string or markup it sits in), written
// back encoded when its decoding made them.
const UNSAFE_DECODED = /[<>"'`\p{Cc}]/gu;

/** Bytes as UTF-8 text, or byte by byte (Latin-1) where they are not valid UTF-8. */
function bytesText(bytes: Buffer): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    return bytes.toString('latin1');
  }
}
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

// Percent escapes. A run of characters a URL or form value holds, from a delimiter (the look-behind: a
// run is tried from its start only, so text without escapes costs one pass, never a pass per position)
// and holding at least one escape.
const PERCENT_ESCAPE = /%[0-9A-Fa-f]{2}/;
const PERCENT_RUN =
  /(?<![^\s"'<>`()[\]{},;|])[^\s"'<>`()[\]{},;|%]*(?:%[0-9A-Fa-f]{2}[^\s"'<>`()[\]{},;|%]*)+/g;

/** Each run of escapes decoded as bytes; `+` is a space, as in a form. */
function percentDecoded(run: string): string {
  return run
    .replace(/\+/g, ' ')
    .replace(/(?:%[0-9A-Fa-f]{2})+/g, (escapes) => bytesText(Buffer.from(escapes.replace(/%/g, ''), 'hex')));
}

/**
 * A run of entities or escapes: from the start of the first word holding one to the end of the last
 * word holding one on the same stretch of a line (between quotes, angle brackets and backticks), so a
 * connection string whose `=` or spaces are encoded is decoded whole (`host&#61;db01 port&#61;5432`).
 * A match starts only at a word's start and a word without a `unit` is scanned once, so a line costs
 * one pass from each word plus one from its first `unit` to its end.
 */
function runOf(unit: string): RegExp {
  const inWord = '[^\\s"\'<>`]';
  return new RegExp(`(?<!${inWord})${inWord}*?(?:${unit})(?:[^\\n"'<>\`]*(?:${unit}))?${inWord}*`, 'g');
}

// HTML character references: `&#x2F;`, `&#47;` (also without the `;`, as browsers read them) and named
// ones (`&colon;`, `&sol;`, `&commat;`).
const ENTITY_UNIT = '&(?:#[xX][0-9A-Fa-f]{1,6};?|#\\d{1,7};?|[A-Za-z][A-Za-z0-9]{1,31};)';
const ENTITY = new RegExp(ENTITY_UNIT);
const ENTITY_RUN = runOf(ENTITY_UNIT);
const ENTITY_PARTS = /&(?:#[xX]([0-9A-Fa-f]{1,6});?|#(\d{1,7});?|([A-Za-z][A-Za-z0-9]{1,31});)/g;
// The named entities that spell ASCII punctuation, a space or an invisible mark (which splits a
// keyword), by the character they spell; the two thousand others name letters and symbols no pattern
// looks for.
const ENTITY_NAMES: Readonly<Record<string, string>> = {
  '&': 'amp AMP',
  '<': 'lt LT',
  '>': 'gt GT',
  '"': 'quot QUOT',
  "'": 'apos',
  ':': 'colon',
  '/': 'sol',
  '\\': 'bsol',
  '@': 'commat',
  '.': 'period',
  ',': 'comma',
  ';': 'semi',
  '=': 'equals',
  '#': 'num',
  '%': 'percnt',
  $: 'dollar',
  '!': 'excl',
  '?': 'quest',
  '+': 'plus',
  _: 'lowbar UnderBar',
  '*': 'ast midast',
  '(': 'lpar',
  ')': 'rpar',
  '[': 'lsqb lbrack',
  ']': 'rsqb rbrack',
  '{': 'lcub lbrace',
  '}': 'rcub rbrace',
  '|': 'verbar vert VerticalLine',
  '^': 'Hat',
  '`': 'grave DiacriticalGrave',
  '\t': 'Tab',
  '\n': 'NewLine',
  '\u00a0': 'nbsp NonBreakingSpace',
  '\u00ad': 'shy',
  '\u200b': 'ZeroWidthSpace',
  '\u200c': 'zwnj',
  '\u200d': 'zwj',
  '\u2060': 'NoBreak',
};
const NAMED_ENTITIES: ReadonlyMap<string, string> = new Map(
  Object.entries(ENTITY_NAMES).flatMap(([char, names]) =>
    names.split(' ').map((name) => [name, char] as const),
  ),
);

/** Entities decoded as a browser would (an invalid code point is U+FFFD); unknown names stay. */
function entitiesDecoded(run: string): string {
  return repeatedly(
    (text) =>
      text.replace(ENTITY_PARTS, (entity, hex?: string, decimal?: string, name?: string) => {
        if (name !== undefined) return NAMED_ENTITIES.get(name) ?? entity;
        const code = hex === undefined ? Number(decimal) : Number.parseInt(hex, 16);
        return code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)
          ? '\ufffd'
          : String.fromCodePoint(code);
      }),
    ENTITY,
    run,
  );
}

function asEntity(char: string): string {
  if (char === '<') return '&lt;';
  if (char === '>') return '&gt;';
  if (char === '"') return '&quot;';
  return `&#${char.codePointAt(0)};`;
}

// Backslash escapes that spell a character by its code: `\x2F` (JavaScript, Python's repr, C),
// `\u002F`, `\u{2F}`, `\U0000002F`, JSON's `\/`, and three octal digits `\057` (C, `printf %q`, bash's
// `$'…'`, loggers that print a byte string); also with the backslash doubled, as JSON text quoted in a
// JSON string writes them. JSON's `\n`, `\t`, `\"`, `\\` are left as written: they hide nothing, and
// JSON text is full of them.
const ESCAPE_UNIT =
  '\\\\{1,2}(?:x[0-9A-Fa-f]{2}|[0-3][0-7]{2}|u[0-9A-Fa-f]{4}|u\\{[0-9A-Fa-f]{1,6}\\}|U[0-9A-Fa-f]{8}|\\/)';
const ESCAPE = new RegExp(ESCAPE_UNIT);
const ESCAPE_RUN = runOf(ESCAPE_UNIT);
const ESCAPE_PARTS =
  /(?:\\{1,2}(?:x[0-9A-Fa-f]{2}|[0-3][0-7]{2}))+|\\{1,2}(?:u([0-9A-Fa-f]{4})|u\{([0-9A-Fa-f]{1,6})\}|U([0-9A-Fa-f]{8})|\/)/g;
const BYTE_ESCAPE = /\\{1,2}(?:x([0-9A-Fa-f]{2})|([0-3][0-7]{2}))/g;

/** `\x` and octal escapes decoded as bytes (Python's `b'caf\xc3\xa9'`), the others as code points. */
function escapesDecoded(run: string): string {
  return repeatedly(
    (text) =>
      text.replace(ESCAPE_PARTS, (sequence, short?: string, braced?: string, long?: string) => {
        const unit = short ?? braced ?? long;
        if (unit !== undefined) {
          const code = Number.parseInt(unit, 16);
          return code > 0x10ffff ? sequence : String.fromCodePoint(code);
        }
        if (sequence.endsWith('/')) return '/';
        const bytes = [...sequence.matchAll(BYTE_ESCAPE)].map(([, hex, octal]) =>
          hex === undefined ? Number.parseInt(octal ?? '0', 8) : Number.parseInt(hex, 16),
        );
        return bytesText(Buffer.from(bytes));
      }),
    ESCAPE,
    run,
  );
}

// Quoted-printable (RFC 2045): `=3D` for `=`, `=20` for a space, `=C3=A9` for UTF-8 bytes, and a soft
// line break (`=` ending a line, also as JSON's escaped `=\r\n` in text quoted in JSON) where a long
// line was cut. A run is a word holding an escape or a soft break, carried on over soft breaks, so a
// secret cut across lines is decoded whole. Only text with an `=XX` escape is taken for quoted-printable
// (base64 ends lines in `=` too): the cheap test is an `=` (a string search), then such an escape.
const QP_UNIT = '=(?:[0-9A-F]{2}|\\r?\\n|(?:\\\\{1,2}r)?\\\\{1,2}n)';
const QP_MARK = /=[0-9A-F]{2}/;
const QP_PLAIN = `(?:[^\\s"'<>\`=]|=(?!${QP_UNIT.slice(1)}))`;
// From a word's start only (as the other runs), so a word is scanned once.
const QP_RUN = new RegExp(`(?<![^\\s"'<>\`])(?=${QP_PLAIN}*${QP_UNIT})(?:${QP_PLAIN}|${QP_UNIT})+`, 'g');

/** Soft line breaks removed, `=XX` decoded as bytes. */
function qpDecoded(run: string): string {
  return run
    .replace(/=(?:\r?\n|(?:\\{1,2}r)?\\{1,2}n)/g, '')
    .replace(/(?:=[0-9A-F]{2})+/g, (escapes) => bytesText(Buffer.from(escapes.replace(/=/g, ''), 'hex')));
}

function asEscape(char: string): string {
  return `\\u${(char.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`;
}

function asQuotedPrintable(char: string): string {
  return [...Buffer.from(char, 'utf8')]
    .map((byte) => `=${byte.toString(16).toUpperCase().padStart(2, '0')}`)
    .join('');
}

// A hex dump of 16 bytes or more: contiguous (`706f7374…`, `0x706f…`) or a byte or group at a time
// (`70 6f 73`, `70:6f:73`, xxd's `706f 7374`, `0x70, 0x6f`, Node's `<Buffer 70 6f …>`). Each pair has
// one reading, so a run is matched once from its start; a digest, a UUID (its groups are shorter) or
// an id decodes to binary, not text, and stays.
const HEX_RUN =
  /(?<![0-9A-Za-z_])(?:0[xX])?[0-9A-Fa-f]{2}(?:(?:[ :]|, ?)?(?:0[xX])?[0-9A-Fa-f]{2}){15,}(?![0-9A-Za-z_])/g;

function hexText(run: string): string | undefined {
  return asText(Buffer.from(run.replace(/0[xX](?=[0-9A-Fa-f]{2})|[^0-9A-Fa-f]/g, ''), 'hex'));
}

// Base64 (standard or URL-safe) long enough to hold a secret: 24 characters are 18 bytes. Tried from a
// run's start only, as above.
const BASE64_CANDIDATE = /[A-Za-z0-9+/_-]{24}/;
const BASE64_RUN = /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/_=-])/g;

/** The run's decoding when it is text, else undefined. */
function base64Text(run: string): string | undefined {
  // One alphabet or the other: a run mixing `+`/`/` with `-`/`_` is not base64.
  if (/[+/]/.test(run) && /[-_]/.test(run)) return undefined;
  return asText(Buffer.from(run, /[-_]/.test(run) ? 'base64url' : 'base64'));
}

// Base32 (RFC 4648, upper or lower case, `=` padding): TOTP seeds, DNS-safe ids, some key encodings.
// 24 characters are 15 bytes; `asText` asks for 16, so a shorter run (an AWS key id) is never tried.
const BASE32_CANDIDATE = /[A-Z2-7]{24}|[a-z2-7]{24}/;
const BASE32_RUN = /(?<![A-Za-z0-9+/_-])(?:[A-Z2-7]{24,}|[a-z2-7]{24,})={0,6}(?![A-Za-z0-9+/_=-])/g;
const BASE32_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** The run's decoding when it is text, else undefined. */
function base32Text(run: string): string | undefined {
  const digits = run.replace(/=+$/, '').toUpperCase();
  const bytes: number[] = [];
  let buffer = 0;
  let bits = 0;
  for (const digit of digits) {
    buffer = ((buffer << 5) | BASE32_ALPHABET.indexOf(digit)) & 0xfff;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      bytes.push((buffer >> bits) & 0xff);
    }
  }
  return asText(Buffer.from(bytes));
}

/** Control characters other than tab, line feed and carriage return: binary, not text. */
const NOT_TEXT = /[^\P{Cc}\t\n\r]|\uFFFD/u;

/** The bytes as text (16 or more, valid UTF-8 without control characters), else undefined. */
function asText(bytes: Buffer): string | undefined {
  if (bytes.length < 16) return undefined;
  const plain = bytes.toString('utf8');
  // Invalid UTF-8 decodes to U+FFFD: random ids and binary are left alone.
  return NOT_TEXT.test(plain) ? undefined : plain;
}
