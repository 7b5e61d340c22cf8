import { Resolver as DnsClient } from 'node:dns/promises';
import type { Resolver } from './types.js';

/** Options of `createDnsResolver`. */
export interface DnsResolverOptions {
  /** DNS servers to ask (`'10.0.0.2'`, `'[2001:db8::53]:5353'`). @default the system's, from /etc/resolv.conf */
  servers?: readonly string[];
  /** Time c-ares gives a server on the first try of a query, in ms (later tries wait longer). @default 2000 */
  timeoutMs?: number;
  /** Tries per server before a query fails (`unavailable`). @default 2 */
  tries?: number;
}

/**
 * A resolver that asks DNS servers directly (c-ares: A and AAAA queries over its own sockets), not
 * the OS resolver: it never takes a libuv thread, and gives up after `timeoutMs`/`tries`. It does not
 * read /etc/hosts, nsswitch or mDNS, and applies no search domains: allowlist fully qualified names.
 * Every answer is checked and the connection pinned exactly as with the default resolver.
 */
export function createDnsResolver(options: DnsResolverOptions = {}): Resolver {
  const timeout = options.timeoutMs ?? 2000;
  const tries = options.tries ?? 2;
  if (!Number.isInteger(timeout) || timeout < 1) {
    throw new TypeError('createDnsResolver: timeoutMs must be an integer >= 1');
  }
  if (!Number.isInteger(tries) || tries < 1)
    throw new TypeError('createDnsResolver: tries must be an integer >= 1');
  const client = new DnsClient({ timeout, tries });
  // Throws here, at creation, on a malformed server address.
  if (options.servers !== undefined) client.setServers([...options.servers]);
  return async (hostname) => {
    const [v4, v6] = await Promise.allSettled([client.resolve4(hostname), client.resolve6(hostname)]);
    const addresses = [
      ...(v4.status === 'fulfilled' ? v4.value : []),
      ...(v6.status === 'fulfilled' ? v6.value : []),
    ];
    const failures = [v4, v6].flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason] : []));
    if (addresses.length > 0 || failures.length === 0) return addresses;
    // Neither family answered: report a server failure (ETIMEOUT, ESERVFAIL) over "no such records".
    throw (
      failures.find((error) => !NO_RECORDS.has((error as { code?: unknown }).code as string)) ?? failures[0]
    );
  };
}

const NO_RECORDS: ReadonlySet<string> = new Set(['ENODATA', 'ENOTFOUND']);
