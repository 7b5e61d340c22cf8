import { createSilentLogger, type Logger } from '@toolgate/core';
import { type Cidr, parseCidr } from './address-ranges.js';
import { type HostPattern, parseHostPattern } from './host-pattern.js';
import { defaultResolver, signalledOf } from './lookup-resolver.js';
import type { Resolver, UrlPolicyOptions } from './types.js';

/** Response headers `fetch` returns by default: content metadata and caching, never cookies. */
export const SAFE_RESPONSE_HEADERS: readonly string[] = [
  'cache-control',
  'content-language',
  'content-length',
  'content-type',
  'date',
  'etag',
  'expires',
  'last-modified',
  'location',
  'retry-after',
];

/**
 * Request headers of the caller's that `fetch` keeps when a redirect leaves the origin: content
 * negotiation only. Anything else the caller set (API keys under any name, tenant ids, request ids,
 * signatures) was meant for the first origin and is dropped. Headers that describe a body
 * (`content-type`, `content-encoding`, `content-language`) travel with the body on 307/308.
 */
export const DEFAULT_REDIRECT_HEADERS: readonly string[] = ['accept', 'accept-language', 'user-agent'];

// Never kept across origins, whatever the keep-list says (the Fetch standard drops authorization too).
const CREDENTIAL_HEADERS: ReadonlySet<string> = new Set(['authorization', 'cookie', 'proxy-authorization']);

const DEFAULT_PORTS = { https: 443, http: 80 } as const;

/** An HTTP token (RFC 9110): what a header name or a method may be. */
export const HTTP_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** The options once normalised: every list parsed, every default filled in. */
export interface NormalPolicy {
  readonly patterns: readonly HostPattern[];
  readonly schemes: ReadonlySet<string>;
  /** Allowed ports per scheme. */
  readonly ports: Readonly<Record<'https' | 'http', ReadonlySet<number>>>;
  readonly allowPrivate: readonly Cidr[];
  readonly resolve: Resolver;
  /** `resolve`'s form that follows the call's signal, when it is a resolver made by this package. */
  readonly resolveSignalled:
    | ((hostname: string, signal: AbortSignal) => Promise<readonly string[]>)
    | undefined;
  readonly maxRedirects: number;
  readonly maxBodyBytes: number;
  readonly timeoutMs: number;
  readonly maxUrlLength: number;
  readonly responseHeaders: ReadonlySet<string>;
  readonly redirectHeaders: ReadonlySet<string>;
  readonly hintAllowedHosts: boolean;
  readonly ca: string | Buffer | (string | Buffer)[] | undefined;
  readonly logger: Logger;
}

export function normalisePolicyOptions(options: UrlPolicyOptions): NormalPolicy {
  if (typeof options !== 'object' || options === null) throw new TypeError('createUrlPolicy: give options');
  if (!Array.isArray(options.allow) || options.allow.length === 0) {
    throw new TypeError('createUrlPolicy: allow must list at least one host');
  }
  const schemes = options.schemes ?? ['https'];
  if (schemes.length === 0 || !schemes.every((scheme) => scheme === 'https' || scheme === 'http')) {
    throw new TypeError('createUrlPolicy: schemes may only contain "https" and "http"');
  }
  const ports = options.ports?.map((port) => {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new TypeError(`createUrlPolicy: port ${String(port)} is not an integer in 1..65535`);
    }
    return port;
  });
  const resolve = options.resolve ?? defaultResolver();
  const portsOf = (scheme: 'https' | 'http'): ReadonlySet<number> =>
    new Set(ports ?? [DEFAULT_PORTS[scheme]]);
  return {
    patterns: options.allow.map(parseHostPattern),
    schemes: new Set(schemes),
    ports: { https: portsOf('https'), http: portsOf('http') },
    allowPrivate: (options.allowPrivate ?? []).map(parseCidr),
    resolve,
    resolveSignalled: signalledOf(resolve),
    maxRedirects: count('maxRedirects', options.maxRedirects, 5, 0),
    maxBodyBytes: count('maxBodyBytes', options.maxBodyBytes, 1024 * 1024, 1),
    timeoutMs: count('timeoutMs', options.timeoutMs, 10_000, 1),
    maxUrlLength: count('maxUrlLength', options.maxUrlLength, 8192, 16),
    responseHeaders: new Set(
      (options.responseHeaders ?? SAFE_RESPONSE_HEADERS).map((name) => name.toLowerCase()),
    ),
    redirectHeaders: redirectHeadersOf(options.redirectHeaders),
    hintAllowedHosts: options.hintAllowedHosts ?? true,
    ca: typeof options.ca === 'object' && !Buffer.isBuffer(options.ca) ? [...options.ca] : options.ca,
    logger: options.logger ?? createSilentLogger(),
  };
}

function redirectHeadersOf(names: readonly string[] | undefined): ReadonlySet<string> {
  if (names === undefined) return new Set(DEFAULT_REDIRECT_HEADERS);
  if (!Array.isArray(names))
    throw new TypeError('createUrlPolicy: redirectHeaders must be an array of header names');
  return new Set(
    names.map((name) => {
      if (typeof name !== 'string' || !HTTP_TOKEN.test(name)) {
        throw new TypeError(`createUrlPolicy: redirectHeaders: ${JSON.stringify(name)} is not a header name`);
      }
      const lower = name.toLowerCase();
      if (CREDENTIAL_HEADERS.has(lower)) {
        throw new TypeError(`createUrlPolicy: redirectHeaders: ${lower} is never sent to another origin`);
      }
      return lower;
    }),
  );
}

export function defaultPort(scheme: string): number {
  return scheme === 'http' ? DEFAULT_PORTS.http : DEFAULT_PORTS.https;
}

function count(name: string, value: number | undefined, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) {
    throw new TypeError(`createUrlPolicy: ${name} must be an integer >= ${min}`);
  }
  return value;
}
