/**
 * Encoded text in an error: a redirect target or query string percent-encoded
 * (`postgres%3A%2F%2Fapp%3Ahunter2%40db.internal`), a value base64-encoded in a header or a JSON field.
 * No pattern sees through the encoding, and a model decodes both at a glance. Each such run is decoded
 * and scanned (`scan` answers the scrubbed text, or undefined when it removed nothing); a run that held
 * something is replaced (a percent-encoded run by its scrubbed decoding, a base64 run whole), and a run
 * that held nothing stays exactly as it was.
 */
export function scrubEncodedRuns(text: string, scan: (plain: string) => string | undefined): string {
  let out = text;
  if (PERCENT_ESCAPE.test(out)) {
    out = out.replace(PERCENT_RUN, (run) => {
      let plain = run;
      // Twice-encoded text (`%253A`) is decoded again, a bounded number of times.
      for (let round = 0; round < MAX_DECODE_ROUNDS && PERCENT_ESCAPE.test(plain); round += 1) {
        plain = percentDecoded(plain);
      }
      return scan(plain) ?? run;
    });
  }
  if (BASE64_CANDIDATE.test(out)) {
    out = out.replace(BASE64_RUN, (run) => {
      const plain = base64Text(run);
      return plain === undefined || scan(plain) === undefined ? run : ENCODED_SECRET;
    });
  }
  return out;
}

/** What a base64 run that held something becomes (its decoding is not shown, scrubbed or not). */
export const ENCODED_SECRET = '[REDACTED]';

const PERCENT_ESCAPE = /%[0-9A-Fa-f]{2}/;
// A run of characters a URL or form value holds, from a delimiter (the look-behind: a run is tried
// from its start only, so text without escapes costs one pass, never a pass per position) and holding
// at least one escape.
const PERCENT_RUN =
  /(?<![^\s"'<>`()[\]{},;|])[^\s"'<>`()[\]{},;|%]*(?:%[0-9A-Fa-f]{2}[^\s"'<>`()[\]{},;|%]*)+/g;
const MAX_DECODE_ROUNDS = 3;

/** Each run of escapes decoded as UTF-8 (as Latin-1 where that fails); `+` is a space, as in a form. */
function percentDecoded(run: string): string {
  return run.replace(/\+/g, ' ').replace(/(?:%[0-9A-Fa-f]{2})+/g, (escapes) => {
    try {
      return decodeURIComponent(escapes);
    } catch {
      return escapes.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) =>
        String.fromCharCode(Number.parseInt(hex, 16)),
      );
    }
  });
}

// Base64 (standard or URL-safe) long enough to hold a secret: 24 characters are 18 bytes. Tried from a
// run's start only, as above.
const BASE64_CANDIDATE = /[A-Za-z0-9+/_-]{24}/;
const BASE64_RUN = /(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/_=-])/g;
/** Control characters other than tab, line feed and carriage return: binary, not text. */
const NOT_TEXT = /[^\P{Cc}\t\n\r]|\uFFFD/u;

/** The run's decoding when it is text (valid UTF-8 without control characters), else undefined. */
function base64Text(run: string): string | undefined {
  // One alphabet or the other: a run mixing `+`/`/` with `-`/`_` is not base64.
  if (/[+/]/.test(run) && /[-_]/.test(run)) return undefined;
  const bytes = Buffer.from(run, /[-_]/.test(run) ? 'base64url' : 'base64');
  if (bytes.length < 16) return undefined;
  const plain = bytes.toString('utf8');
  // Invalid UTF-8 decodes to U+FFFD: random ids and binary are left alone.
  return NOT_TEXT.test(plain) ? undefined : plain;
}
