import { isIPv4 } from 'node:net';
import { domainToASCII } from 'node:url';
import { canonicalAddress, parseAddress } from './address-ranges.js';
import { openWildcardReason } from './public-suffix.js';

/** A hostname in the one form every comparison uses. */
export interface NormalHost {
  /** ASCII, lowercase, no trailing dot; IPv6 without brackets, canonical. */
  readonly name: string;
  readonly kind: 'domain' | 'ipv4' | 'ipv6';
}

/** An allowlist entry, normalised at creation. */
export interface HostPattern {
  readonly source: string;
  readonly host: string;
  readonly wildcard: boolean;
}

// LDH labels (plus `_`, which real DNS names carry); anything else the WHATWG parser lets through
// (`$`, `!`, `*`, ...) is refused rather than handed to a resolver.
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;

/**
 * Code points IDNA mapping removes without a trace (UTS #46 "ignored", plus the zero-width joiners):
 * soft hyphen, combining grapheme joiner, Mongolian variation selectors, zero-width space / non-joiner
 * / joiner, word joiner and invisible operators, variation selectors, BOM, shorthand format controls,
 * variation selectors supplement. `ex\u00ADample.com` parses as `example.com`: the host checked would
 * not be the host the text shows, so a host (or an allowlist entry) holding one is refused.
 */
// A literal class draws a "combining character" lint for U+034F; each code point is matched alone, on purpose.
// biome-ignore lint/complexity/useRegexLiterals: see above.
export const IDNA_IGNORED = new RegExp(
  '[\\u00AD\\u034F\\u180B-\\u180F\\u200B-\\u200D\\u2060-\\u2064\\uFE00-\\uFE0F\\uFEFF\\u{1BCA0}-\\u{1BCA3}\\u{E0100}-\\u{E01EF}]',
  'u',
);

/** Whether `text` holds an IDNA-ignored code point, written as is or percent-encoded (hosts decode). */
export function hasIdnaIgnored(text: string): boolean {
  if (IDNA_IGNORED.test(text)) return true;
  if (!text.includes('%')) return false;
  try {
    return IDNA_IGNORED.test(decodeURIComponent(text));
  } catch {
    // Malformed percent-encoding: the URL parser refuses such a host on its own.
    return false;
  }
}

/**
 * Normalises the hostname the WHATWG URL parser produced (it already decoded `%2e`, mapped
 * fullwidth dots, lowercased and punycoded it, and canonicalised numeric IPv4 forms).
 * Returns undefined for a host no DNS name can have.
 */
export function normaliseHost(hostname: string): NormalHost | undefined {
  if (hostname.startsWith('[')) {
    const address = parseAddress(hostname.slice(1, -1));
    return address ? { name: canonicalAddress(address), kind: 'ipv6' } : undefined;
  }
  const bare = hostname.endsWith('.') ? hostname.slice(0, -1) : hostname;
  if (bare === '' || bare.length > 253) return undefined;
  const ascii = domainToASCII(bare);
  if (ascii !== bare) return undefined;
  if (isIPv4(ascii)) return { name: ascii, kind: 'ipv4' };
  if (!ascii.split('.').every((label) => LABEL.test(label))) return undefined;
  return { name: ascii, kind: 'domain' };
}

/** Parses an `allow` entry; throws a TypeError naming the entry when it is malformed. */
export function parseHostPattern(entry: unknown): HostPattern {
  if (typeof entry !== 'string' || entry === '') {
    throw new TypeError('allow: every entry must be a non-empty host name');
  }
  const wildcard = entry.startsWith('*.');
  const rest = wildcard ? entry.slice(2) : entry;
  const bracketed = rest.startsWith('[') && rest.endsWith(']');
  if (hasIdnaIgnored(rest)) {
    throw new TypeError(
      `allow: "${entry}" holds an invisible character that IDNA drops (soft hyphen, zero-width, variation selector)`,
    );
  }
  if (/[\s/?#@\\*%]/.test(rest) || (!bracketed && rest.includes(':'))) {
    throw new TypeError(`allow: "${entry}" is not a host name (no scheme, port, path or inner *)`);
  }
  let parsed: string;
  try {
    parsed = new URL(`http://${rest}/`).hostname;
  } catch {
    throw new TypeError(`allow: "${entry}" is not a valid host name`);
  }
  const host = normaliseHost(parsed);
  if (!host) throw new TypeError(`allow: "${entry}" is not a valid host name`);
  if (wildcard && host.kind !== 'domain') {
    throw new TypeError(`allow: "${entry}" puts a wildcard on an IP address`);
  }
  if (wildcard && !host.name.includes('.')) {
    throw new TypeError(
      `allow: "${entry}" is too broad: a wildcard needs at least two labels after it. List the exact hosts instead, or a wildcard under a name you control ("*.yourname.${host.name}")`,
    );
  }
  const open = wildcard ? openWildcardReason(host.name) : undefined;
  if (open !== undefined) throw new TypeError(`allow: "${entry}" is too broad: ${open}`);
  return { source: entry, host: host.name, wildcard };
}

/** Exact match, or `*.suffix` matching one or more labels before the suffix (never the suffix itself). */
export function matchesHost(host: NormalHost, patterns: readonly HostPattern[]): boolean {
  return patterns.some((pattern) =>
    pattern.wildcard
      ? host.kind === 'domain' && host.name.endsWith(`.${pattern.host}`)
      : host.name === pattern.host,
  );
}
