import type { Logger } from '@toolgate/core';

/**
 * Resolves a hostname to all of its addresses (A and AAAA). Injected in tests to map names to
 * loopback without real DNS. Every address returned is checked; the connection is pinned to the first.
 */
export type Resolver = (hostname: string) => Promise<readonly string[]>;

/** Options of `createUrlPolicy`. Normalised once, when the policy is created. */
export interface UrlPolicyOptions {
  /**
   * Hosts that may be fetched: exact names (`api.carrier.example`), IP literals (`127.0.0.1`,
   * `[::1]`) or `*.suffix` wildcards (`*.example.org` matches `a.example.org` and `a.b.example.org`,
   * not `example.org`). IDNA names are accepted and compared in their ASCII (punycode) form.
   * A wildcard over a public suffix (`*.co.uk`, `*.github.io`: Public Suffix List, ICANN and private
   * sections) or a wildcard DNS service (`*.nip.io`) throws; exact hosts under them are fine.
   */
  allow: readonly string[];
  /** URL schemes that may be fetched; only `https` and `http` are supported. @default ['https'] */
  schemes?: readonly ('https' | 'http')[];
  /** Ports that may be fetched; when omitted, only the scheme's default port (443, 80). @default undefined */
  ports?: readonly number[];
  /**
   * Non-public addresses or CIDRs that may be connected to anyway (a local test server:
   * `['127.0.0.1']`). Cloud metadata addresses stay refused even when a range here covers them.
   * @default []
   */
  allowPrivate?: readonly string[];
  /**
   * How hostnames are resolved. The default is the OS resolver (`dns.lookup`, every A and AAAA answer)
   * with at most one lookup in flight per process (`createLookupResolver()`, shared by every policy
   * without `resolve`); `createDnsResolver()` asks DNS servers directly, off the thread pool.
   * @default createLookupResolver() (one instance for the process)
   */
  resolve?: Resolver;
  /** Redirects `fetch` follows, each checked as a new URL; one more is `unavailable` (0 refuses any redirect). @default 5 */
  maxRedirects?: number;
  /**
   * Bytes of a response body `fetch` reads (decoded); the rest is cut and `truncated` set. Also bounds
   * what one response may send on the wire, framing included: 8 x this + 1 MiB + 2 x `http.maxHeaderSize`;
   * past it the connection is cut (`unavailable`). @default 1048576
   */
  maxBodyBytes?: number;
  /**
   * Total time of one `fetch`, resolution and every redirect included, in ms; also the longest a
   * `check` on its own waits for resolution. @default 10000
   */
  timeoutMs?: number;
  /** Longest URL accepted, in characters. @default 8192 */
  maxUrlLength?: number;
  /** Response headers `fetch` returns (lowercase names); others are dropped. @default SAFE_RESPONSE_HEADERS */
  responseHeaders?: readonly string[];
  /**
   * Request headers (case-insensitive) of the caller's kept when a redirect leads to another origin
   * (scheme, host or port); every other caller header is dropped on that hop and all after it.
   * `authorization`, `cookie` and `proxy-authorization` are always dropped and may not be listed.
   * `content-type`, `content-encoding` and `content-language` travel with a body a 307/308 resends.
   * @default DEFAULT_REDIRECT_HEADERS (accept, accept-language, user-agent)
   */
  redirectHeaders?: readonly string[];
  /** Whether the hint of a refused host lists the allowed hosts, so the model can correct itself. @default true */
  hintAllowedHosts?: boolean;
  /** CA certificates (PEM) trusted for https in place of Node's, e.g. a private CA (add `tls.rootCertificates` to keep the public ones). @default undefined (Node's bundled CAs) */
  ca?: string | Buffer | readonly (string | Buffer)[];
  /** Where refusals and connection failures are logged, with the addresses involved. @default createSilentLogger() */
  logger?: Logger;
}

/** A URL that passed the policy: what was checked, and the addresses the connection may use. */
export interface CheckedUrl {
  /** The normalised URL (ASCII host, no trailing dot, no userinfo). */
  readonly url: URL;
  /** The normalised hostname (IPv6 literals without brackets). */
  readonly hostname: string;
  /** The port connected to (the scheme's default when the URL names none). */
  readonly port: number;
  /**
   * Every address the host resolved to, all checked. The connection is pinned to the first.
   * Server-side facts: never show them to the model (they map internal DNS).
   */
  readonly addresses: readonly string[];
}

/** What a caller may pass to `fetch`. Only replayable bodies, so 307/308 redirects can resend them. */
export interface UrlFetchInit {
  /** An HTTP token; CONNECT, TRACE and TRACK are refused (`invalid_argument`, reason `request`). @default 'GET' */
  method?: string;
  /**
   * Sent as given to the first origin. A name that is no token, a value fetch cannot send (NUL,
   * CR, LF, a character above U+00FF) and `host` or hop-by-hop headers are refused before anything
   * is resolved (`invalid_argument`, reason `request`). Without `accept-encoding`, fetch asks for
   * `gzip, deflate` and refuses a br or zstd body. @default {}
   */
  headers?: Record<string, string>;
  body?: string | Uint8Array;
  /** Follows the caller (pass `ctx.signal`); the policy's own `timeoutMs` applies as well. */
  signal?: AbortSignal;
}

/** A fetched response, read and capped. */
export interface UrlFetchResult {
  readonly status: number;
  /** The response headers kept by `responseHeaders`, lowercase names. */
  readonly headers: Readonly<Record<string, string>>;
  /** The body decoded as UTF-8 (malformed bytes replaced), at most `maxBodyBytes` of it. */
  readonly body: string;
  /** Bytes of body read. */
  readonly bytes: number;
  /** True when the body was longer than `maxBodyBytes` and was cut. */
  readonly truncated: boolean;
  /** The final URL, after redirects. */
  readonly url: string;
  /** Redirects followed. */
  readonly redirects: number;
  /** A note for the model when the body was cut. */
  readonly note?: string;
}

/** A URL policy: check a URL, or fetch it with every safeguard. */
export interface UrlPolicy {
  /**
   * Checks a URL: parse, scheme, host, port, then every resolved address. Resolves to the
   * checked URL, or rejects with a `ToolError` (`invalid_argument`, `permission_denied`,
   * `unavailable`, `timeout`) whose message names the host, never an address.
   */
  check(url: string | URL, options?: { signal?: AbortSignal }): Promise<CheckedUrl>;
  /**
   * Checks, then fetches over a connection pinned to the checked address; follows redirects
   * manually (each hop checked again); caps body and time. Rejects with a `ToolError`.
   * A `CheckedUrl` from this policy's `check` is fetched without resolving again.
   */
  fetch(url: string | URL | CheckedUrl, init?: UrlFetchInit): Promise<UrlFetchResult>;
}
