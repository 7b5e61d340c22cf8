import { parse } from 'tldts';

/**
 * Wildcard DNS services: every name under them resolves to the IP address written in the name
 * (`203.0.113.7.nip.io`, `app-203-0-113-7.sslip.io`), so whoever writes the URL picks the address.
 * The Public Suffix List does not list them. A wildcard over one, or over any name under one, is
 * refused; an exact host under one stays allowed (it names one address, which is still checked).
 * - nip.io, sslip.io: any IPv4 (sslip.io: IPv6 too), dotted or dashed (`www.10.0.0.1.sslip.io`).
 * - traefik.me: any IPv4, dotted or dashed.
 * - xip.io: the original service, discontinued; its names still appear in old configurations.
 * Services that map every name to loopback only (localtest.me, lvh.me) are left to the address
 * checks, which refuse loopback unless `allowPrivate` opens it for a local test server.
 */
export const WILDCARD_DNS_SERVICES: readonly string[] = ['nip.io', 'sslip.io', 'traefik.me', 'xip.io'];

// The host is already normalised (ASCII, lowercase, no trailing dot, not an IP): no extraction,
// validation or IP detection. The private section holds github.io, herokuapp.com and the like.
const PSL_OPTIONS = {
  allowPrivateDomains: true,
  detectIp: false,
  extractHostname: false,
  validateHostname: false,
} as const;

/**
 * Why a `*.host` wildcard would let anyone in, or undefined when it would not: `host` is a public
 * suffix (ICANN or private section of the Public Suffix List), or is or lies under a wildcard DNS
 * service.
 */
export function openWildcardReason(host: string): string | undefined {
  const service = WILDCARD_DNS_SERVICES.find((name) => host === name || host.endsWith(`.${name}`));
  if (service !== undefined) {
    return `${service} is a wildcard DNS service (its names resolve to whatever IP address is written in them). List the exact hosts instead ("app.203.0.113.7.${service}")`;
  }
  const { publicSuffix, isPrivate } = parse(host, PSL_OPTIONS);
  if (publicSuffix !== host) return undefined;
  const section = isPrivate
    ? 'in the private section of the Public Suffix List: anyone can get a name under it'
    : 'on the Public Suffix List: anyone can register a name under it';
  return `${host} is a public suffix (${section}). List the exact hosts instead ("api.yourname.${host}"), or a wildcard under a name you control ("*.yourname.${host}")`;
}
