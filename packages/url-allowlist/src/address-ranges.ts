import { isIPv4, isIPv6 } from 'node:net';
import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** A parsed CIDR (a single address is a /32 or /128). */
export type Cidr = readonly [Address, number];

/**
 * The verdict on one address: allowed (with its canonical text, what the connection dials), or the
 * name of the range that refuses it (for the log).
 */
export type AddressVerdict =
  | { readonly ok: true; readonly address: string }
  | { readonly ok: false; readonly range: string };

// Cloud metadata endpoints are refused even when `allowPrivate` names a range that holds them:
// AWS/GCP/Azure/OpenStack, AWS ECS task and EKS pod identity, AWS, GCP and OpenStack IPv6, Alibaba Cloud, Tencent
// Cloud, Oracle Cloud (legacy), and Azure's WireServer, which sits in public address space where
// no range check would catch it.
const METADATA_ADDRESSES: readonly string[] = [
  '169.254.169.254',
  '169.254.170.2',
  '169.254.170.23',
  'fd00:ec2::254',
  'fd00:ec2::23',
  // GCP's metadata server over IPv6, and OpenStack's (Neutron) IPv6 metadata service.
  'fd20:ce::254',
  'fe80::a9fe:a9fe',
  '100.100.100.200',
  '169.254.0.23',
  '192.0.0.192',
  '168.63.129.16',
];
const METADATA = new Set(METADATA_ADDRESSES.map((address) => ipaddr.parse(address).toNormalizedString()));

const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3');
const NAT64_WELL_KNOWN = ipaddr.parseCIDR('64:ff9b::/96');
const NAT64_LOCAL_USE = ipaddr.parseCIDR('64:ff9b:1::/48');
// Where RFC 6052 puts the IPv4 address (byte offsets) for a /48, /56, /64 and /96 prefix; byte 8 is skipped.
const NAT64_IPV4_BYTES: readonly (readonly number[])[] = [
  [6, 7, 9, 10],
  [7, 9, 10, 11],
  [9, 10, 11, 12],
  [12, 13, 14, 15],
];
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16');
// IPv4 in the last 32 bits: IPv4-compatible (`::a.b.c.d`, automatic tunnels) and IPv4-translated
// (`::ffff:0:a.b.c.d`, RFC 6145 stateless translators).
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');
const IPV4_TRANSLATED = ipaddr.parseCIDR('::ffff:0:0:0/96');
const TEREDO = ipaddr.parseCIDR('2001::/32');

/**
 * Parses an address strictly. ipaddr.js alone is too lenient for a security check: it reads
 * `0177.0.0.1` as octal and `::8.8.8.8` (IPv4-compatible) as IPv4-mapped. So IPv4 must be plain
 * dotted decimal (`net.isIPv4`), and IPv6 is first canonicalised by the WHATWG URL parser, the same
 * parser that produced the URL's host, so the address checked is the address connected to.
 * Returns undefined for anything else (callers refuse it).
 */
export function parseAddress(text: string): Address | undefined {
  if (isIPv4(text)) return ipaddr.IPv4.parse(text);
  if (!isIPv6(text) || text.includes('%')) return undefined;
  let canonical: string;
  try {
    canonical = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return undefined;
  }
  return ipaddr.IPv6.parse(canonical);
}

/** The canonical text of an address (what the pinned connection dials). */
export function canonicalAddress(address: Address): string {
  return address.toString();
}

/** Parses an `allowPrivate` entry: an address or a CIDR. Throws on anything malformed. */
export function parseCidr(entry: string): Cidr {
  const slash = entry.indexOf('/');
  const address = parseAddress(slash === -1 ? entry : entry.slice(0, slash));
  if (!address) throw new TypeError(`allowPrivate: "${entry}" is not an IP address or CIDR`);
  const bits = address.kind() === 'ipv4' ? 32 : 128;
  const prefixText = slash === -1 ? String(bits) : entry.slice(slash + 1);
  const prefix = Number(prefixText);
  if (!/^\d{1,3}$/.test(prefixText) || prefix > bits) {
    throw new TypeError(`allowPrivate: "${entry}" has an invalid prefix length`);
  }
  return [address, prefix];
}

/**
 * Decides whether a connection to `text` may be made. Everything that is not ordinary public
 * unicast is refused, unless it is named in `allowPrivate`; metadata endpoints are refused always.
 * IPv4 embedded in IPv6 (mapped, NAT64 well-known prefix) is unwrapped and judged as IPv4.
 */
export function checkAddress(text: string, allowPrivate: readonly Cidr[]): AddressVerdict {
  const parsed = parseAddress(text);
  if (!parsed) return { ok: false, range: text.includes('%') ? 'scoped' : 'unparseable' };
  const address = unwrapEmbeddedIPv4(parsed);
  if (
    METADATA.has(address.toNormalizedString()) ||
    (address !== parsed && METADATA.has(parsed.toNormalizedString())) ||
    tunnelledIPv4(parsed).some((inner) => METADATA.has(inner.toNormalizedString()))
  ) {
    return { ok: false, range: 'metadata' };
  }
  const allowed = { ok: true, address: parsed.toString() } as const;
  if (allowPrivate.some((cidr) => matches(address, cidr) || matches(parsed, cidr))) return allowed;
  const range = rangeOf(address);
  return range === 'unicast' ? allowed : { ok: false, range };
}

function rangeOf(address: Address): string {
  const range = address.range();
  if (range !== 'unicast') return range;
  // ipaddr.js calls everything outside its special list "unicast"; on IPv6 only 2000::/3 is
  // globally routed (this also refuses IPv4-compatible ::a.b.c.d and other unassigned space).
  if (address.kind() === 'ipv6' && !address.match(GLOBAL_UNICAST_V6)) return 'reserved';
  return 'unicast';
}

function unwrapEmbeddedIPv4(address: Address): Address {
  if (address.kind() !== 'ipv6') return address;
  const v6 = address as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  if (v6.match(NAT64_WELL_KNOWN)) {
    const [high = 0, low = 0] = v6.parts.slice(6);
    return new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  }
  return address;
}

/**
 * The IPv4 addresses a 6to4 (2002:AABB:CCDD::/48), Teredo (server in bits 32-63, client inverted in
 * the last 32), local-use NAT64 (64:ff9b:1::/48, at each place RFC 6052 allows: the prefix length is
 * the operator's), IPv4-compatible (::AABB:CCDD), IPv4-translated (::ffff:0:AABB:CCDD) or ISATAP
 * (interface identifier `0:5efe:AABB:CCDD` or `200:5efe:AABB:CCDD`, under any prefix, global ones
 * included) address carries. All but ISATAP under a global prefix are refused unless `allowPrivate`
 * opens them; metadata any of them carries stays refused even then.
 */
function tunnelledIPv4(address: Address): ipaddr.IPv4[] {
  if (address.kind() !== 'ipv6') return [];
  const v6 = address as ipaddr.IPv6;
  const v4 = (high: number, low: number): ipaddr.IPv4 =>
    new ipaddr.IPv4([(high >> 8) & 0xff, high & 0xff, (low >> 8) & 0xff, low & 0xff]);
  const parts = v6.parts;
  if (v6.match(SIX_TO_FOUR)) return [v4(parts[1]!, parts[2]!)];
  if (v6.match(IPV4_COMPATIBLE) || v6.match(IPV4_TRANSLATED)) return [v4(parts[6]!, parts[7]!)];
  if (v6.match(TEREDO)) return [v4(parts[2]!, parts[3]!), v4(~parts[6]!, ~parts[7]!)];
  if (v6.match(NAT64_LOCAL_USE)) {
    const bytes = v6.toByteArray();
    return NAT64_IPV4_BYTES.map((at) => new ipaddr.IPv4(at.map((index) => bytes[index]!)));
  }
  if (parts[5] === 0x5efe && (parts[4] === 0 || parts[4] === 0x200)) return [v4(parts[6]!, parts[7]!)];
  return [];
}

function matches(address: Address, [network, prefix]: Cidr): boolean {
  return address.kind() === network.kind() && address.match(network, prefix);
}
