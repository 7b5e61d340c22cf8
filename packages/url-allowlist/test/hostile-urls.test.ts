import { describe, expect, it } from 'vitest';
import { createUrlPolicy, type UrlRefusalReason, UrlRefusedError } from '../src/index.js';
import { stubResolver } from './support/stub-resolver.js';

// Names under *.example.org answer with the addresses below; nothing here touches real DNS, and
// the checks never connect (the loopback guard would record any attempt and fail the test).
const PUBLIC_V4 = '93.184.216.34';
const PUBLIC_V6 = '2606:2800:220:1:248:1893:25c8:1946';
const dns = stubResolver({
  'public.example.org': [PUBLIC_V4, PUBLIC_V6],
  'loopback.example.org': ['127.0.0.1'],
  'localhost6.example.org': ['::1'],
  'private.example.org': ['10.0.0.5'],
  'mixed.example.org': [PUBLIC_V4, '192.168.1.10'],
  'mixed6.example.org': [PUBLIC_V6, 'fd12:3456::1'],
  'metadata.example.org': ['169.254.169.254'],
  'ecs.example.org': ['169.254.170.2'],
  'ec2v6.example.org': ['fd00:ec2::254'],
  'alibaba.example.org': ['100.100.100.200'],
  'wireserver.example.org': ['168.63.129.16'],
  'cgnat.example.org': ['100.64.0.1'],
  'linklocal.example.org': ['169.254.1.1'],
  'linklocal6.example.org': ['fe80::1'],
  'zone.example.org': ['fe80::1%eth0'],
  'sitelocal.example.org': ['fec0::1'],
  'mapped.example.org': ['::ffff:127.0.0.1'],
  'mapped-meta.example.org': ['::ffff:a9fe:a9fe'],
  'compat.example.org': ['::127.0.0.1'],
  'nat64.example.org': ['64:ff9b::a00:1'],
  'nat64-local.example.org': ['64:ff9b:1::a00:1'],
  'sixtofour.example.org': ['2002:7f00:1::1'],
  'teredo.example.org': ['2001:0:4136:e378:8000:63bf:3fff:fdd2'],
  'multicast.example.org': ['224.0.0.1'],
  'broadcast.example.org': ['255.255.255.255'],
  'zero.example.org': ['0.1.2.3'],
  'doc.example.org': ['192.0.2.10'],
  'doc6.example.org': ['2001:db8::1'],
  'bench.example.org': ['198.18.0.1'],
  'classe.example.org': ['240.0.0.1'],
  'octal-answer.example.org': ['0177.0.0.1'],
  'garbage.example.org': ['not-an-address'],
  'empty.example.org': [],
});

const policy = createUrlPolicy({
  allow: ['allowed.example', '*.example.org', 'metadata.google.internal'],
  schemes: ['https', 'http'],
  resolve: dns.resolve,
});

type Row = readonly [url: string, reason: UrlRefusalReason];

const numericIpForms: Row[] = [
  ['http://127.0.0.1/', 'address'],
  ['http://2130706433/', 'address'],
  ['http://0177.0.0.1/', 'address'],
  ['http://0x7f.1/', 'address'],
  ['http://0x7f000001/', 'address'],
  ['http://0x7f.0x0.0x0.0x1/', 'address'],
  ['http://017700000001/', 'address'],
  ['http://127.1/', 'address'],
  ['http://%31%32%37.0.0.1/', 'address'],
  ['http://１２７．０．０．１/', 'address'],
  ['http://0/', 'address'],
  ['http://10.0.0.1/', 'address'],
  ['http://172.16.0.1/', 'address'],
  ['http://192.168.0.1/', 'address'],
  ['http://100.64.0.1/', 'address'],
  ['http://255.255.255.255/', 'address'],
  ['http://224.0.0.251/', 'address'],
];

const ipv6Forms: Row[] = [
  ['http://[::1]/', 'address'],
  ['http://[::]/', 'address'],
  ['http://[0:0:0:0:0:0:0:1]/', 'address'],
  ['http://[::ffff:127.0.0.1]/', 'address'],
  ['http://[::ffff:7f00:1]/', 'address'],
  ['http://[0:0:0:0:0:ffff:10.0.0.1]/', 'address'],
  ['http://[::127.0.0.1]/', 'address'],
  ['http://[64:ff9b::7f00:1]/', 'address'],
  ['http://[2002:7f00:1::]/', 'address'],
  ['http://[fe80::1]/', 'address'],
  ['http://[fe80::1%25eth0]/', 'malformed'],
  ['http://[fc00::1]/', 'address'],
  ['http://[fec0::1]/', 'address'],
  ['http://[ff02::1]/', 'address'],
];

const metadataEndpoints: Row[] = [
  ['http://169.254.169.254/latest/meta-data/', 'metadata'],
  ['http://[::ffff:169.254.169.254]/', 'metadata'],
  ['http://2852039166/', 'metadata'],
  ['http://[fd00:ec2::254]/', 'metadata'],
  ['http://100.100.100.200/latest/meta-data/', 'metadata'],
  ['http://169.254.170.2/v2/credentials', 'metadata'],
  ['http://168.63.129.16/?comp=versions', 'metadata'],
  ['http://[::ffff:168.63.129.16]/', 'metadata'],
  ['http://metadata.google.internal/computeMetadata/v1/', 'metadata'],
  ['http://METADATA.GOOGLE.INTERNAL./', 'metadata'],
];

const namesResolvingInside: Row[] = [
  ['https://loopback.example.org/', 'address'],
  ['https://localhost6.example.org/', 'address'],
  ['https://private.example.org/', 'address'],
  ['https://mixed.example.org/', 'address'],
  ['https://mixed6.example.org/', 'address'],
  ['https://metadata.example.org/', 'metadata'],
  ['https://ecs.example.org/', 'metadata'],
  ['https://ec2v6.example.org/', 'metadata'],
  ['https://mapped-meta.example.org/', 'metadata'],
  ['https://alibaba.example.org/', 'metadata'],
  ['https://wireserver.example.org/', 'metadata'],
  ['https://cgnat.example.org/', 'address'],
  ['https://linklocal.example.org/', 'address'],
  ['https://linklocal6.example.org/', 'address'],
  ['https://zone.example.org/', 'address'],
  ['https://sitelocal.example.org/', 'address'],
  ['https://mapped.example.org/', 'address'],
  ['https://compat.example.org/', 'address'],
  ['https://nat64.example.org/', 'address'],
  ['https://nat64-local.example.org/', 'address'],
  ['https://sixtofour.example.org/', 'address'],
  ['https://teredo.example.org/', 'address'],
  ['https://multicast.example.org/', 'address'],
  ['https://broadcast.example.org/', 'address'],
  ['https://zero.example.org/', 'address'],
  ['https://doc.example.org/', 'address'],
  ['https://doc6.example.org/', 'address'],
  ['https://bench.example.org/', 'address'],
  ['https://classe.example.org/', 'address'],
  ['https://octal-answer.example.org/', 'address'],
  ['https://garbage.example.org/', 'address'],
  ['https://empty.example.org/', 'nonexistent'],
  ['https://unknown.example.org/', 'nonexistent'],
];

const userinfoAndParserTricks: Row[] = [
  ['https://allowed.example@evil.com/', 'userinfo'],
  ['https://user:pass@allowed.example/', 'userinfo'],
  ['https://@allowed.example/', 'userinfo'],
  ['https://allowed.example%40evil.com/', 'malformed'],
  ['https://evil.com#@allowed.example', 'host'],
  ['https://evil.com\\@allowed.example', 'malformed'],
  ['https://evil.com?@allowed.example', 'host'],
  ['https://allowed.example.evil.com/', 'host'],
  ['https://allowed.example．evil.com/', 'host'],
  ['https://evil-example.org/', 'host'],
  ['https://example.org.evil.com/', 'host'],
  ['https://example.org/', 'host'],
  ['https://%65vil.com/', 'host'],
  ['https://allowed.example%2f.evil.com/', 'malformed'],
  ['https://evil.com%23.allowed.example/', 'malformed'],
  ['https://allowed.example../', 'malformed'],
  ['https://a$b.example.org/', 'malformed'],
  ['https://exa\u200bmple.org/', 'malformed'],
  // IDNA drops these without a trace: the host parsed would not be the host written.
  ['https://allowed.exa\u00admple/', 'malformed'],
  ['https://allowed.exa%C2%ADmple/', 'malformed'],
  ['https://allowed.ex\u034fample/', 'malformed'],
  ['https://allowed.exa\u200cmple/', 'malformed'],
  ['https://allowed.exa\u200dmple/', 'malformed'],
  ['https://allowed.exa\u2060mple/', 'malformed'],
  ['https://allowed.exa\ufe0fmple/', 'malformed'],
  ['https://allowed.exa\ufeffmple/', 'malformed'],
  ['https://allowed.exa\u{e0101}mple/', 'malformed'],
  ['https://allowed.exa\u180bmple/', 'malformed'],
  ['https://allowed.exa\u{1bca0}mple/', 'malformed'],
  // WHATWG reads `\` as `/` in http(s), which moves where the host ends.
  ['https://allowed.example\\@evil.com/', 'malformed'],
  ['https://evil.com\\allowed.example/', 'malformed'],
  ['https:\\\\allowed.example/', 'malformed'],
  ['https:/\\allowed.example/', 'malformed'],
  ['https://allowed.example/\n', 'malformed'],
  ['https://allo\twed.example/', 'malformed'],
  [' https://allowed.example/', 'malformed'],
  ['//allowed.example/path', 'malformed'],
  ['not a url', 'malformed'],
  ['', 'malformed'],
  [`https://allowed.example/${'a'.repeat(9000)}`, 'malformed'],
  ['https://allowed.example:8443/', 'port'],
  ['https://allowed.example:0/', 'port'],
  ['http://allowed.example:443/', 'port'],
];

const otherSchemes: Row[] = [
  ['file:///etc/passwd', 'scheme'],
  ['file://allowed.example/etc/passwd', 'scheme'],
  ['gopher://allowed.example:70/_GET%20/', 'scheme'],
  ['data:text/plain,hello', 'scheme'],
  ['javascript:alert(1)', 'scheme'],
  ['ftp://allowed.example/', 'scheme'],
  ['ws://allowed.example/', 'scheme'],
  ['dict://allowed.example:11211/stat', 'scheme'],
  ['jar:https://allowed.example/x.jar!/', 'scheme'],
];

// The code the model sees: it can fix a malformed URL, it may not fetch a refused one.
function expectedCode(reason: UrlRefusalReason): string {
  if (reason === 'malformed' || reason === 'userinfo') return 'invalid_argument';
  if (reason === 'nonexistent') return 'not_found';
  return reason === 'unresolvable' ? 'unavailable' : 'permission_denied';
}

const ANY_ADDRESS = /\d+\.\d+\.\d+\.\d+|[0-9a-f]*:[0-9a-f]*:[0-9a-f:]*/i;

describe.each([
  ['numeric IPv4 forms', numericIpForms],
  ['IPv6 forms', ipv6Forms],
  ['cloud metadata endpoints', metadataEndpoints],
  ['names resolving to non-public addresses', namesResolvingInside],
  ['userinfo, parser and host tricks', userinfoAndParserTricks],
  ['other schemes', otherSchemes],
])('check() refuses %s', (_group, rows) => {
  it.each(rows)('%s → %s', async (url, reason) => {
    const refusal = await policy.check(url).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refusal).toBeInstanceOf(UrlRefusedError);
    const error = refusal as UrlRefusedError;
    expect({ reason: error.reason, code: error.code }).toEqual({ reason, code: expectedCode(reason) });
    expect(error.hint.length).toBeGreaterThan(10);
    if (error.host !== undefined && !ANY_ADDRESS.test(error.host)) {
      // A refused name is named; what it resolved to never appears in what the model sees.
      expect(error.message).toContain(error.host);
      expect(`${error.message} ${error.hint}`).not.toMatch(ANY_ADDRESS);
    }
  });
});

describe('check(): the table is wide enough and never connects', () => {
  it('holds at least 40 hostile URLs', () => {
    const rows = [
      ...numericIpForms,
      ...ipv6Forms,
      ...metadataEndpoints,
      ...namesResolvingInside,
      ...userinfoAndParserTricks,
      ...otherSchemes,
    ];
    expect(rows.length).toBeGreaterThanOrEqual(40);
  });

  it('resolves a name only after scheme, host and port passed, and checks every answer', async () => {
    const before = dns.calls.length;
    await expect(policy.check('https://evil.com/')).rejects.toThrow('Host evil.com is not on this tool');
    await expect(policy.check('https://public.example.org:444/')).rejects.toThrow('Port 444 is not allowed');
    expect(dns.calls.length).toBe(before);
    await expect(policy.check('https://mixed.example.org/x')).rejects.toThrow(
      'Host mixed.example.org is not allowed: it is or resolves to a private, loopback, link-local or reserved address.',
    );
    expect(dns.calls.slice(before)).toEqual(['mixed.example.org']);
  });

  it('a public name passes with every answer checked, normalised, and nothing connected', async () => {
    const checked = await policy.check('HTTPS://Public.Example.Org./a?b=1#frag');
    expect(checked.url.href).toBe('https://public.example.org/a?b=1#frag');
    expect(checked.hostname).toBe('public.example.org');
    expect(checked.port).toBe(443);
    expect(checked.addresses).toEqual([PUBLIC_V4, '2606:2800:220:1:248:1893:25c8:1946']);
  });

  it('reads fullwidth dots and %2e the way the connection will: as the allowed host', async () => {
    const dnsAllowed = stubResolver({ 'allowed.example': [PUBLIC_V4] });
    const strict = createUrlPolicy({ allow: ['allowed.example'], resolve: dnsAllowed.resolve });
    for (const url of [
      'https://ａｌｌｏｗｅｄ．example/',
      'https://allowed%2eexample/',
      'https://ALLOWED.example./',
    ]) {
      const checked = await strict.check(url);
      expect(checked.hostname).toBe('allowed.example');
      expect(checked.url.hostname).toBe('allowed.example');
    }
  });

  it('refuses invisible characters and backslashes in the authority with their own message, before resolving', async () => {
    const before = dns.calls.length;
    await expect(policy.check('https://public.exa\u00admple.org/')).rejects.toMatchObject({
      reason: 'malformed',
      code: 'invalid_argument',
      message: 'The host name contains an invisible character.',
    });
    await expect(policy.check('https://public.example.org\\@evil.com/')).rejects.toMatchObject({
      reason: 'malformed',
      message: 'The URL contains a backslash before its path.',
    });
    expect(dns.calls.length).toBe(before);
    // In the path, query or fragment neither changes the host: both are left to the parser.
    const checked = await policy.check('https://public.example.org/a\\b?q=\u00ad#\u2060');
    expect(checked.hostname).toBe('public.example.org');
  });

  it('compares IDNA names in their ASCII form', async () => {
    const idn = stubResolver({ 'xn--bcher-kva.example': [PUBLIC_V4] });
    const shop = createUrlPolicy({ allow: ['bücher.example'], resolve: idn.resolve });
    expect((await shop.check('https://BÜCHER.example/')).hostname).toBe('xn--bcher-kva.example');
    expect((await shop.check('https://xn--bcher-kva.example/')).hostname).toBe('xn--bcher-kva.example');
    await expect(shop.check('https://bucher.example/')).rejects.toThrow('Host bucher.example is not on');
  });

  it('refuses a metadata name even when the allowlist names it', async () => {
    await expect(policy.check('https://metadata.google.internal/')).rejects.toThrow(
      'Host metadata.google.internal is a cloud metadata service and cannot be fetched.',
    );
  });

  it('uses the OS resolver by default: localhost is refused for resolving to loopback', async () => {
    const osResolver = createUrlPolicy({ allow: ['localhost'], schemes: ['http'], ports: [8080] });
    await expect(osResolver.check('http://localhost:8080/')).rejects.toMatchObject({
      reason: 'address',
      code: 'permission_denied',
      message:
        'Host localhost is not allowed: it is or resolves to a private, loopback, link-local or reserved address.',
    });
  });
});
