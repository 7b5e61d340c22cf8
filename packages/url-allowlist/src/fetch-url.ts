import { maxHeaderSize } from 'node:http';
import { createDeadline } from '@toolgate/core';
import { Agent, fetch as undiciFetch } from 'undici';
import { HTTP_TOKEN, type NormalPolicy } from './options.js';
import { createPinnedConnector } from './pinned-connector.js';
import { UrlRefusedError } from './refusal.js';
import type { CheckedUrl, UrlFetchInit, UrlFetchResult } from './types.js';

type Check = (url: string | URL, signal: AbortSignal) => Promise<CheckedUrl>;

const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);
// Set by the client from the checked URL and the body; a caller's own value would let it
// address another virtual host on the pinned server, or desynchronise the framing (`expect`:
// undici cannot send it).
const FORBIDDEN_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'connection',
  'content-length',
  'expect',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
// Methods fetch refuses to send.
const FORBIDDEN_METHODS: ReadonlySet<string> = new Set(['CONNECT', 'TRACE', 'TRACK']);
const METHOD_HINT = 'Use GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS.';
const HEADER_NAME_HINT = 'Header names are letters, digits and - (for example x-request-id).';
const HEADER_VALUE_HINT =
  'Send each header value on one line, as Latin-1 text; leave out line breaks and NUL.';
const HOP_HEADER_HINT =
  'Leave out host, connection, content-length, transfer-encoding, expect and other hop-by-hop headers: they come from the URL and the body.';
// What fetch asks for unless the caller names its own: undici would add br on https (and zstd on
// Node versions that decode it), whose decoders take the window the server declares (brotli up to
// 16 MiB, zstd up to 128 MiB) for every response, however little of it is read.
const DEFAULT_ACCEPT_ENCODING = 'gzip, deflate';
const WINDOWED_CODINGS: ReadonlySet<string> = new Set(['br', 'zstd']);
// Wire bytes one response may spend per byte of maxBodyBytes. A genuine server may send its body in
// 1-byte chunks (`1\r\nX\r\n`: 6 bytes on the wire per body byte); such a body of maxBodyBytes must
// arrive whole, and one past it must be cut as too long, not refused as hostile. 8 leaves room on top
// for codings that grow incompressible data (deflate adds 5 bytes per 64 KiB block).
const WIRE_BYTES_PER_BODY_BYTE = 8;
// Beyond that: the head (status line and headers, which undici caps at http.maxHeaderSize), an interim
// 100/103 or two, and what undici parses ahead of the body reader before a long body is cut there: two
// stream buffers (64 KiB each from Node 22) of body in 1-byte chunks, 6 wire bytes each, and a socket read.
const RESPONSE_BYTES_ALLOWANCE = 2 * maxHeaderSize + 1024 * 1024;
// Describe the body: dropped with it (303), kept with it on any hop that resends it (307/308).
const BODY_HEADERS: ReadonlySet<string> = new Set(['content-type', 'content-encoding', 'content-language']);

interface HopRequest {
  method: string;
  headers: Record<string, string>;
  body: string | Uint8Array | undefined;
}

/**
 * Fetches a checked URL over a pinned connection, following redirects by hand: each Location is
 * checked as a new URL (scheme, host, port, resolution) before anything connects to it.
 */
export async function fetchUrl(
  policy: NormalPolicy,
  check: Check,
  first: CheckedUrl | string | URL,
  init: UrlFetchInit,
): Promise<UrlFetchResult> {
  // Released when the fetch is done (its body is read by then): the timer and the listener on the
  // caller's signal go with it instead of staying until timeoutMs.
  const deadline = createDeadline(init.signal, policy.timeoutMs);
  const signal = deadline.signal;
  let request = initialRequest(init);
  let host = isCheckedUrl(first) ? first.hostname : undefined;
  try {
    let checked = isCheckedUrl(first) ? first : await check(first, signal);
    host = checked.hostname;
    for (let redirects = 0; ; redirects += 1) {
      const hop = await fetchPinned(policy, checked, request, signal);
      if (hop.location === undefined) return { ...hop.result, redirects };
      if (redirects >= policy.maxRedirects) {
        throw new UrlRefusedError('redirects', `${host} redirected more than ${policy.maxRedirects} times.`, {
          host,
          retryable: false,
          hint: 'The page cannot be fetched through this tool; tell the user.',
        });
      }
      const next = await checkRedirect(check, checked, hop.location, signal);
      request = redirectedRequest(
        request,
        hop.result.status,
        checked.url.origin !== next.url.origin ? policy.redirectHeaders : undefined,
      );
      checked = next;
      host = checked.hostname;
    }
  } catch (error) {
    // Our own deadline fired (not the caller's signal): say so, with the host.
    if (signal.aborted && !init.signal?.aborted) {
      throw new UrlRefusedError(
        'timeout',
        `Fetching ${host ?? 'the URL'} took longer than ${policy.timeoutMs} ms.`,
        {
          ...(host !== undefined && { host }),
          cause: error,
        },
      );
    }
    throw error;
  } finally {
    deadline.release();
  }
}

function isCheckedUrl(value: CheckedUrl | string | URL): value is CheckedUrl {
  return typeof value === 'object' && !(value instanceof URL);
}

async function checkRedirect(
  check: Check,
  from: CheckedUrl,
  location: string,
  signal: AbortSignal,
): Promise<CheckedUrl> {
  let target: URL;
  try {
    target = new URL(location, from.url);
  } catch (cause) {
    throw new UrlRefusedError('malformed', `${from.hostname} redirected to an invalid URL.`, {
      host: from.hostname,
      cause,
      hint: 'The page cannot be fetched through this tool; tell the user.',
    });
  }
  try {
    return await check(target, signal);
  } catch (error) {
    if (!(error instanceof UrlRefusedError)) throw error;
    // Same reason and code, told as a redirect: the model did not ask for that URL.
    throw new UrlRefusedError(
      error.reason,
      `${from.hostname} redirected to a URL that is refused: ${error.message}`,
      {
        ...(error.host !== undefined && { host: error.host }),
        detail: { ...error.detail, redirectFrom: from.hostname },
        hint: 'The redirect target is not allowed. Do not retry; tell the user the page cannot be fetched here.',
        cause: error,
      },
    );
  }
}

/**
 * The caller's method, headers and body, checked as fetch would check them, so a value it cannot
 * send (often the model's: a CR LF in a header value, a method that is no token) is refused as
 * `invalid_argument` before anything is resolved or sent. Left to fetch, it failed as "could not
 * connect" (`unavailable`), which a circuit breaker counts against the dependency for every caller.
 */
function initialRequest(init: UrlFetchInit): HopRequest {
  const given: unknown = init.method ?? 'GET';
  if (typeof given !== 'string' || !HTTP_TOKEN.test(given)) {
    throw requestRefusal('The request method is not a valid HTTP method.', METHOD_HINT);
  }
  const method = given.toUpperCase();
  if (FORBIDDEN_METHODS.has(method))
    throw requestRefusal(`The ${method} method cannot be used.`, METHOD_HINT);
  if (init.body !== undefined && init.body !== null && (method === 'GET' || method === 'HEAD')) {
    throw requestRefusal(
      `A ${method} request cannot have a body.`,
      'Leave the body out, or send it with POST, PUT or PATCH.',
    );
  }
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(init.headers ?? {})) {
    if (!HTTP_TOKEN.test(name)) {
      throw requestRefusal('A request header name is not a valid HTTP header name.', HEADER_NAME_HINT);
    }
    const lower = name.toLowerCase();
    if (FORBIDDEN_REQUEST_HEADERS.has(lower)) {
      throw requestRefusal(`The ${lower} header cannot be set.`, HOP_HEADER_HINT);
    }
    const text = sendableHeaderValue(typeof value === 'string' ? value : String(value));
    if (text === undefined) {
      throw requestRefusal(
        `The ${lower} header value holds a line break, NUL or a character above U+00FF.`,
        HEADER_VALUE_HINT,
      );
    }
    headers[lower] = text;
  }
  return { method, headers, body: init.body };
}

function requestRefusal(message: string, hint: string): UrlRefusedError {
  return new UrlRefusedError('request', message, { hint });
}

/**
 * A header value as fetch sends it: leading and trailing HTTP whitespace (tab, space, CR, LF)
 * removed, then refused (undefined) if NUL, CR or LF remain or any character is above U+00FF.
 */
function sendableHeaderValue(value: string): string | undefined {
  let start = 0;
  let end = value.length;
  while (start < end && isHttpWhitespace(value.charCodeAt(start))) start += 1;
  while (end > start && isHttpWhitespace(value.charCodeAt(end - 1))) end -= 1;
  for (let index = 0; index < value.length; index += 1) {
    const code = value.charCodeAt(index);
    if (code > 0xff) return undefined;
    if ((code === 0x00 || code === 0x0a || code === 0x0d) && index >= start && index < end) return undefined;
  }
  return start === 0 && end === value.length ? value : value.slice(start, end);
}

function isHttpWhitespace(code: number): boolean {
  return code === 0x09 || code === 0x0a || code === 0x0d || code === 0x20;
}

/**
 * 303 (and 301/302 after a POST) turn into a body-less GET, as browsers do; 307/308 replay.
 * `keep` is set when the hop leaves the origin: then only the caller headers it names survive (and
 * the body's own headers when the body is resent). Once dropped, a header stays dropped for every
 * later hop, even one that comes back to the first origin.
 */
function redirectedRequest(
  request: HopRequest,
  status: number,
  keep: ReadonlySet<string> | undefined,
): HopRequest {
  const toGet =
    (status === 303 && request.method !== 'HEAD') ||
    ((status === 301 || status === 302) && request.method === 'POST');
  const body = toGet ? undefined : request.body;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    const kept = BODY_HEADERS.has(name)
      ? body !== undefined || (!toGet && keep === undefined)
      : keep === undefined || keep.has(name);
    if (kept) headers[name] = value;
  }
  return { method: toGet ? 'GET' : request.method, headers, body };
}

interface Hop {
  result: Omit<UrlFetchResult, 'redirects'>;
  location: string | undefined;
}

async function fetchPinned(
  policy: NormalPolicy,
  checked: CheckedUrl,
  request: HopRequest,
  signal: AbortSignal,
): Promise<Hop> {
  const protocol = checked.url.protocol === 'http:' ? 'http:' : 'https:';
  const agent = new Agent({
    connect: createPinnedConnector(
      { protocol, hostname: checked.hostname, port: checked.port, address: checked.addresses[0]! },
      {
        ca: policy.ca,
        timeoutMs: policy.timeoutMs,
        // maxBodyBytes counts decoded body bytes only; this bounds everything else the server sends
        // (a body that decodes to nothing, chunk extensions, endless 1xx responses): see capReads.
        maxResponseBytes: WIRE_BYTES_PER_BODY_BYTE * policy.maxBodyBytes + RESPONSE_BYTES_ALLOWANCE,
      },
    ),
  });
  try {
    let response: Awaited<ReturnType<typeof undiciFetch>>;
    try {
      response = await undiciFetch(checked.url, {
        method: request.method,
        headers:
          request.headers['accept-encoding'] === undefined
            ? { ...request.headers, 'accept-encoding': DEFAULT_ACCEPT_ENCODING }
            : request.headers,
        ...(request.body !== undefined && { body: request.body }),
        redirect: 'manual',
        signal,
        dispatcher: agent,
      });
    } catch (cause) {
      if (signal.aborted) throw cause;
      policy.logger.warn(
        { host: checked.hostname, address: checked.addresses[0], port: checked.port, err: cause },
        'url-allowlist: connection failed',
      );
      throw new UrlRefusedError('connect', `Could not connect to ${checked.hostname}.`, {
        host: checked.hostname,
        cause,
      });
    }
    const location = REDIRECT_STATUSES.has(response.status) ? response.headers.get('location') : null;
    if (location !== null) {
      await response.body?.cancel();
      return { result: emptyResult(policy, response, checked), location };
    }
    let read: Awaited<ReturnType<typeof readCapped>>;
    try {
      const coding = response.headers.get('content-encoding');
      if (
        coding !== null &&
        response.body !== null &&
        unaskedWindowedCoding(coding, request.headers['accept-encoding'])
      ) {
        // Cancelled at once: its decoder is freed before it decodes more than the first bytes.
        await response.body?.cancel();
        throw new Error(`content-encoding "${coding}" was not asked for`);
      }
      read = await readCapped(response.body, policy.maxBodyBytes);
    } catch (cause) {
      // The server hung up mid-body, or sent bytes its content-encoding does not decode: the
      // raw stream error (`terminated`, socket addresses in its cause) is for the log only.
      if (signal.aborted) throw cause;
      policy.logger.warn(
        { host: checked.hostname, address: checked.addresses[0], port: checked.port, err: cause },
        'url-allowlist: reading the response failed',
      );
      throw new UrlRefusedError('connect', `Could not read the response from ${checked.hostname}.`, {
        host: checked.hostname,
        cause,
      });
    }
    const { body, bytes, truncated } = read;
    return {
      location: undefined,
      result: {
        status: response.status,
        headers: keptHeaders(policy, response.headers),
        body,
        bytes,
        truncated,
        url: checked.url.href,
        ...(truncated && {
          note: `The response body was cut at ${policy.maxBodyBytes} bytes; only its beginning is shown.`,
        }),
      },
    };
  } finally {
    // One agent per hop: it can only ever reach the origin it was pinned for.
    await agent.destroy().catch(() => undefined);
  }
}

/** Whether a response is in br or zstd though the request's accept-encoding did not ask for it. */
function unaskedWindowedCoding(coding: string, accepted: string | undefined): boolean {
  const codings = coding.toLowerCase();
  if (!codings.includes('br') && !codings.includes('zstd')) return false;
  const asked = new Set(
    (accepted ?? DEFAULT_ACCEPT_ENCODING)
      .toLowerCase()
      .split(',')
      .map((item) => item.split(';', 1)[0]!.trim()),
  );
  return codings.split(',').some((name) => WINDOWED_CODINGS.has(name.trim()) && !asked.has(name.trim()));
}

function emptyResult(
  policy: NormalPolicy,
  response: Awaited<ReturnType<typeof undiciFetch>>,
  checked: CheckedUrl,
): Hop['result'] {
  return {
    status: response.status,
    headers: keptHeaders(policy, response.headers),
    body: '',
    bytes: 0,
    truncated: false,
    url: checked.url.href,
  };
}

function keptHeaders(
  policy: NormalPolicy,
  headers: Headers | Iterable<[string, string]>,
): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [name, value] of headers) if (policy.responseHeaders.has(name)) kept[name] = value;
  return kept;
}

/** Reads at most `max` bytes, then cancels the stream (the rest is never downloaded). */
async function readCapped(
  stream: ReadableStream<Uint8Array> | null,
  max: number,
): Promise<{ body: string; bytes: number; truncated: boolean }> {
  if (!stream) return { body: '', bytes: 0, truncated: false };
  const reader = stream.getReader();
  const decoder = new TextDecoder('utf-8');
  let body = '';
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { body: body + decoder.decode(), bytes, truncated: false };
    const room = max - bytes;
    if (value.byteLength > room) {
      body += decoder.decode(value.subarray(0, room));
      await reader.cancel();
      return { body, bytes: max, truncated: true };
    }
    bytes += value.byteLength;
    body += decoder.decode(value, { stream: true });
  }
}
