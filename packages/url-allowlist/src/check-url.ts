import { isAbortError, withDeadline } from '@toolgate/core';
import { checkAddress } from './address-ranges.js';
import { hasIdnaIgnored, matchesHost, type NormalHost, normaliseHost } from './host-pattern.js';
import { LookupQueueFullError } from './lookup-resolver.js';
import { defaultPort, type NormalPolicy } from './options.js';
import { UrlRefusedError } from './refusal.js';
import type { CheckedUrl } from './types.js';

// Names of cloud metadata services, refused by name whatever the allowlist says.
const METADATA_NAMES: ReadonlySet<string> = new Set([
  'metadata.google.internal',
  'metadata.goog',
  'metadata',
  'instance-data',
  'instance-data.ec2.internal',
]);

// Whitespace and control characters: the WHATWG parser silently strips or drops them, so the URL
// the model wrote would not be the URL checked. Refuse instead of guessing.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_OR_SPACE = /[\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200f\u2028-\u202f\u205f\u3000\ufeff]/;

const BAD_URL_HINT = 'Give an absolute URL such as https://host.example/path, without spaces.';

/**
 * Parses and checks a URL against the policy, resolving its host once. Rejects with a
 * `UrlRefusedError` naming the URL's host; resolved addresses go to `detail` (the log) only.
 */
export async function checkUrl(
  policy: NormalPolicy,
  input: string | URL,
  signal: AbortSignal | undefined,
): Promise<CheckedUrl> {
  const { url, host } = parseTarget(policy, input);
  const scheme = url.protocol.slice(0, -1);
  const port = url.port === '' ? defaultPort(scheme) : Number(url.port);
  // Without hints a literal off the allowlist reads as any host off it: judged by its address first, a
  // private one would be refused as such, and an allowPrivate entry (the one a service talks to) told
  // apart from the rest of its range by the answer.
  if (!policy.hintAllowedHosts && !matchesHost(host, policy.patterns)) throw hostRefusal(host.name, policy);
  if (host.kind !== 'domain') {
    // A literal is judged by its address first, so the table of numeric forms is refused as such.
    const verdict = checkAddress(host.name, policy.allowPrivate);
    if (!verdict.ok) throw addressRefusal(host.name, verdict.range, { addresses: [host.name] });
  }
  if (!matchesHost(host, policy.patterns)) throw hostRefusal(host.name, policy);
  if (!policy.ports[scheme as 'https' | 'http'].has(port)) {
    // Without hints the allowlist stays unsaid: a wrong port reads as a wrong host (the model could
    // otherwise confirm a guessed host by its answer, and read the allowed ports off the hint).
    if (!policy.hintAllowedHosts) throw hostRefusal(host.name, policy, 'port', { port });
    throw new UrlRefusedError('port', `Port ${port} is not allowed for ${host.name}.`, {
      host: host.name,
      hint: `Use the ${scheme} URL without a port, or one of the allowed ports: ${[...policy.ports[scheme as 'https' | 'http']].join(', ')}.`,
    });
  }
  const addresses = host.kind === 'domain' ? await resolveChecked(policy, host.name, signal) : [host.name];
  url.hostname = host.kind === 'ipv6' ? `[${host.name}]` : host.name;
  return { url, hostname: host.name, port, addresses: Object.freeze(addresses) };
}

function parseTarget(policy: NormalPolicy, input: string | URL): { url: URL; host: NormalHost } {
  const text = input instanceof URL ? input.href : input;
  if (typeof text !== 'string' || text.length === 0 || text.length > policy.maxUrlLength) {
    throw new UrlRefusedError('malformed', `Not a URL, or longer than ${policy.maxUrlLength} characters.`, {
      hint: BAD_URL_HINT,
    });
  }
  if (CONTROL_OR_SPACE.test(text)) {
    throw new UrlRefusedError('malformed', 'The URL contains spaces or control characters.', {
      hint: 'Percent-encode spaces and special characters in the path and query.',
    });
  }
  const { slashes, authority } = writtenAuthority(text);
  if (slashes.includes('\\') || authority.includes('\\')) {
    // WHATWG reads `\` as `/` in http(s): `https://evil.example\@allowed.example/` goes to evil.example.
    throw new UrlRefusedError('malformed', 'The URL contains a backslash before its path.', {
      hint: 'Write the URL with forward slashes only: https://host.example/path.',
    });
  }
  if (hasIdnaIgnored(authority)) {
    throw new UrlRefusedError('malformed', 'The host name contains an invisible character.', {
      hint: 'Retype the host name without soft hyphens, zero-width characters or variation selectors.',
    });
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UrlRefusedError('malformed', 'Not a valid absolute URL.', { hint: BAD_URL_HINT });
  }
  const scheme = url.protocol.slice(0, -1);
  if (!policy.schemes.has(scheme)) {
    throw new UrlRefusedError('scheme', `The URL scheme "${scheme}:" is not allowed.`, {
      hint: `Only ${[...policy.schemes].join(' and ')} URLs can be fetched.`,
    });
  }
  if (url.username !== '' || url.password !== '' || authorityOf(text).includes('@')) {
    throw new UrlRefusedError('userinfo', 'URLs with a user name or password (user@host) are not accepted.', {
      hint: 'Remove the part before "@" and give the host directly; credentials are never sent in URLs.',
    });
  }
  const host = normaliseHost(url.hostname);
  if (!host) {
    throw new UrlRefusedError('malformed', 'The URL has an invalid host name.', { hint: BAD_URL_HINT });
  }
  if (METADATA_NAMES.has(host.name)) {
    throw new UrlRefusedError(
      'metadata',
      `Host ${host.name} is a cloud metadata service and cannot be fetched.`,
      {
        host: host.name,
        hint: 'Do not retry; this address is never reachable from tools.',
      },
    );
  }
  return { url, host };
}

/** The authority as written (after `scheme:` and any slashes, before the path): finds a bare `@`. */
function authorityOf(text: string): string {
  const rest = text.slice(text.indexOf(':') + 1).replace(/^[/\\]+/, '');
  return rest.split(/[/\\?#]/, 1)[0] ?? '';
}

/**
 * The slashes after `scheme:` and the authority up to the first `/`, `?` or `#`, as written: a `\`
 * there would be read as `/` by the parser and move the host boundary.
 */
function writtenAuthority(text: string): { slashes: string; authority: string } {
  const rest = text.slice(text.indexOf(':') + 1);
  const slashes = /^[/\\]*/.exec(rest)?.[0] ?? '';
  return { slashes, authority: rest.slice(slashes.length).split(/[/?#]/, 1)[0] ?? '' };
}

async function resolveChecked(
  policy: NormalPolicy,
  hostname: string,
  signal: AbortSignal | undefined,
): Promise<string[]> {
  let answers: readonly string[];
  try {
    // A check on its own (the guard's) is bounded too: a name whose DNS never answers must not hold
    // the call, also while it waits for a lookup slot. Inside fetch, fetch's own deadline (same
    // length, started earlier) fires first.
    answers = await withDeadline(
      (deadline) =>
        policy.resolveSignalled === undefined
          ? policy.resolve(hostname)
          : policy.resolveSignalled(hostname, deadline),
      {
        signal,
        timeoutMs: policy.timeoutMs,
        what: 'resolution',
      },
    );
  } catch (error) {
    if (signal?.aborted) throw error;
    if (isAbortError(error)) throw resolutionTimeout(policy, hostname, error);
    if (error instanceof LookupQueueFullError) throw resolverBusy(hostname, error);
    if (NO_SUCH_NAME.has((error as { code?: unknown } | null)?.code as string))
      throw nonexistent(hostname, error);
    throw unresolvable(hostname, error);
  }
  if (!Array.isArray(answers)) throw unresolvable(hostname, undefined);
  if (answers.length === 0) throw nonexistent(hostname, undefined);
  const addresses: string[] = [];
  for (const answer of answers) {
    const verdict = typeof answer === 'string' ? checkAddress(answer, policy.allowPrivate) : undefined;
    if (!verdict?.ok) {
      throw addressRefusal(hostname, verdict?.range ?? 'unparseable', { addresses: answers });
    }
    addresses.push(verdict.address);
  }
  return addresses;
}

function addressRefusal(host: string, range: string, detail: Record<string, unknown>): UrlRefusedError {
  if (range === 'metadata') {
    return new UrlRefusedError(
      'metadata',
      `Host ${host} is a cloud metadata service and cannot be fetched.`,
      {
        host,
        detail: { ...detail, range },
        hint: 'Do not retry; this address is never reachable from tools.',
      },
    );
  }
  return new UrlRefusedError(
    'address',
    `Host ${host} is not allowed: it is or resolves to a private, loopback, link-local or reserved address.`,
    {
      host,
      detail: { ...detail, range },
      hint: 'Only public hosts on the allowlist can be fetched. Do not retry with another spelling of the host.',
    },
  );
}

function resolutionTimeout(policy: NormalPolicy, host: string, cause: unknown): UrlRefusedError {
  return new UrlRefusedError('timeout', `Resolving ${host} took longer than ${policy.timeoutMs} ms.`, {
    host,
    cause,
    hint: 'The host name did not resolve in time; try again later, and if it keeps failing, tell the user.',
  });
}

function resolverBusy(host: string, cause: LookupQueueFullError): UrlRefusedError {
  return new UrlRefusedError(
    'unresolvable',
    `Host ${host} could not be resolved now: too many lookups are waiting.`,
    {
      host,
      cause,
      detail: { waiting: cause.waiting },
      retryable: true,
      hint: 'Try again in a few seconds, with fewer URLs at once; if it keeps failing, tell the user.',
    },
  );
}

/**
 * What resolvers answer for a name DNS says has no addresses (NXDOMAIN, or no A/AAAA records): the
 * system resolver's getaddrinfo (`ENOTFOUND`) and c-ares' (`ENOTFOUND`, `ENODATA`). A server failure or
 * a timeout (`ESERVFAIL`, `ETIMEOUT`, `EAI_AGAIN`, `ECONNREFUSED`) is the resolver failing: `unresolvable`.
 */
const NO_SUCH_NAME: ReadonlySet<string> = new Set(['ENOTFOUND', 'ENODATA']);

function nonexistent(host: string, cause: unknown): UrlRefusedError {
  return new UrlRefusedError('nonexistent', `Host ${host} does not exist.`, {
    host,
    cause,
    retryable: false,
    hint: 'Check the host name for typos. Do not retry the same name.',
  });
}

function unresolvable(host: string, cause: unknown): UrlRefusedError {
  return new UrlRefusedError('unresolvable', `Host ${host} could not be resolved.`, {
    host,
    cause,
    hint: 'Check the host name for typos; if it is right, the service may be down: tell the user.',
  });
}

/** The refusal of a host off the allowlist; without hints a wrong port reads the same (`detail` tells the log). */
function hostRefusal(
  host: string,
  policy: NormalPolicy,
  reason: 'host' | 'port' = 'host',
  detail?: Record<string, unknown>,
): UrlRefusedError {
  return new UrlRefusedError(reason, `Host ${host} is not on this tool's allowlist.`, {
    host,
    hint: hostHint(policy),
    ...(detail === undefined ? {} : { detail }),
  });
}

function hostHint(policy: NormalPolicy): string {
  if (!policy.hintAllowedHosts)
    return 'Only hosts on the allowlist can be fetched. Do not retry with another host.';
  return `Only these hosts can be fetched: ${policy.patterns.map((pattern) => pattern.source).join(', ')}.`;
}
