import { describe, expect, it } from 'vitest';
import { checkAddress, parseCidr } from '../src/address-ranges.js';
import { createUrlPolicy } from '../src/index.js';
import { stubResolver } from './support/stub-resolver.js';

const PUBLIC = '93.184.216.34';

describe('createUrlPolicy: allowlist entries are normalised at creation', () => {
  it.each([
    ['*', 'is not a host name'],
    ['*.com', 'is too broad'],
    ['a.*.example.org', 'is not a host name'],
    ['*example.org', 'is not a host name'],
    ['https://api.example.com', 'is not a host name'],
    ['api.example.com:443', 'is not a host name'],
    ['api.example.com/path', 'is not a host name'],
    ['user@api.example.com', 'is not a host name'],
    [' api.example.com', 'is not a host name'],
    ['*.127.0.0.1', 'puts a wildcard on an IP address'],
    ['a$b.example.com', 'is not a valid host name'],
    ['api..example.com', 'is not a valid host name'],
    ['api.exa\u00admple.com', 'holds an invisible character that IDNA drops'],
    ['*.exa\u200bmple.com', 'holds an invisible character that IDNA drops'],
    ['api.example\u2060.com', 'holds an invisible character that IDNA drops'],
    ['api.ex\u034fample.com', 'holds an invisible character that IDNA drops'],
    ['api.example.com\ufe0f', 'holds an invisible character that IDNA drops'],
    ['api.exa\u{e0100}mple.com', 'holds an invisible character that IDNA drops'],
    ['api.example.com\\', 'is not a host name'],
  ])('refuses %s', (entry, message) => {
    expect(() => createUrlPolicy({ allow: [entry] })).toThrow(message);
  });

  it('refuses an empty allowlist, unknown schemes, bad ports and bad allowPrivate entries', () => {
    expect(() => createUrlPolicy({ allow: [] })).toThrow('allow must list at least one host');
    expect(() => createUrlPolicy({ allow: ['a.example'], schemes: ['ftp' as 'http'] })).toThrow(
      'schemes may only contain',
    );
    expect(() => createUrlPolicy({ allow: ['a.example'], ports: [0] })).toThrow('port 0 is not an integer');
    expect(() => createUrlPolicy({ allow: ['a.example'], allowPrivate: ['0177.0.0.1'] })).toThrow(
      'is not an IP address or CIDR',
    );
    expect(() => createUrlPolicy({ allow: ['a.example'], allowPrivate: ['10.0.0.0/33'] })).toThrow(
      'invalid prefix length',
    );
    expect(() => createUrlPolicy({ allow: ['a.example'], maxRedirects: -1 })).toThrow('maxRedirects must be');
    expect(() => createUrlPolicy({ allow: ['a.example'], redirectHeaders: ['Authorization'] })).toThrow(
      'redirectHeaders: authorization is never sent to another origin',
    );
    expect(() => createUrlPolicy({ allow: ['a.example'], redirectHeaders: ['x y'] })).toThrow(
      'redirectHeaders: "x y" is not a header name',
    );
  });

  it('normalises case, trailing dots, IDNA and IPv6 brackets in entries', async () => {
    const dns = stubResolver({ 'api.example.com': [PUBLIC], 'xn--bcher-kva.example': [PUBLIC] });
    const policy = createUrlPolicy({
      allow: ['API.Example.COM.', 'Bücher.example', '[2606:4700:0::1]'],
      resolve: dns.resolve,
    });
    expect((await policy.check('https://api.example.com/')).hostname).toBe('api.example.com');
    expect((await policy.check('https://xn--bcher-kva.example/')).hostname).toBe('xn--bcher-kva.example');
    const literal = await policy.check('https://[2606:4700::1]/');
    expect([literal.hostname, literal.addresses, literal.url.href]).toEqual([
      '2606:4700::1',
      ['2606:4700::1'],
      'https://[2606:4700::1]/',
    ]);
  });
});

describe('wildcards over a public suffix or a wildcard DNS service', () => {
  // Each would let in hosts anyone can register, get for free, or point at any address.
  it.each([
    ['*.co.uk', 'co.uk is a public suffix (on the Public Suffix List'],
    ['*.com.au', 'com.au is a public suffix (on the Public Suffix List'],
    ['*.k12.ca.us', 'k12.ca.us is a public suffix (on the Public Suffix List'],
    ['*.foo.ck', 'foo.ck is a public suffix (on the Public Suffix List'], // the list's `*.ck` rule
    ['*.公司.香港', 'xn--55qx5d.xn--j6w193g is a public suffix (on the Public Suffix List'],
    ['*.xn--55qx5d.xn--j6w193g', 'xn--55qx5d.xn--j6w193g is a public suffix (on the Public Suffix List'],
    ['*.CO.UK.', 'co.uk is a public suffix (on the Public Suffix List'],
    ['*.github.io', 'github.io is a public suffix (in the private section of the Public Suffix List'],
    ['*.herokuapp.com', 'herokuapp.com is a public suffix (in the private section'],
    ['*.s3.amazonaws.com', 's3.amazonaws.com is a public suffix (in the private section'],
    ['*.blogspot.com', 'blogspot.com is a public suffix (in the private section'],
    ['*.pages.dev', 'pages.dev is a public suffix (in the private section'],
    ['*.azurewebsites.net', 'azurewebsites.net is a public suffix (in the private section'],
    ['*.ngrok-free.app', 'ngrok-free.app is a public suffix (in the private section'],
    ['*.nip.io', 'nip.io is a wildcard DNS service'],
    ['*.sslip.io', 'sslip.io is a wildcard DNS service'],
    ['*.traefik.me', 'traefik.me is a wildcard DNS service'],
    ['*.xip.io', 'xip.io is a wildcard DNS service'],
    ['*.10.0.0.1.nip.io', 'nip.io is a wildcard DNS service'],
    ['*.app-203-0-113-7.SSLIP.IO', 'sslip.io is a wildcard DNS service'],
  ])('refuses %s, naming the entry and the suffix', (entry, reason) => {
    expect(() => createUrlPolicy({ allow: [entry] })).toThrow(`allow: "${entry}" is too broad: ${reason}`);
  });

  it('says what to write instead', () => {
    expect(() => createUrlPolicy({ allow: ['api.example.com', '*.github.io'] })).toThrow(
      'allow: "*.github.io" is too broad: github.io is a public suffix (in the private section of the ' +
        'Public Suffix List: anyone can get a name under it). List the exact hosts instead ' +
        '("api.yourname.github.io"), or a wildcard under a name you control ("*.yourname.github.io")',
    );
    expect(() => createUrlPolicy({ allow: ['*.nip.io'] })).toThrow(
      'allow: "*.nip.io" is too broad: nip.io is a wildcard DNS service (its names resolve to whatever IP ' +
        'address is written in them). List the exact hosts instead ("app.203.0.113.7.nip.io")',
    );
  });

  // Must stay accepted, and match what they matched before: exact hosts on or under a suffix, and
  // wildcards under a registrable name (including the list's exception rules and unlisted TLDs).
  it.each([
    ['example.co.uk', 'https://example.co.uk/'],
    ['myapp.herokuapp.com', 'https://myapp.herokuapp.com/'],
    ['toolgate.github.io', 'https://toolgate.github.io/docs/'],
    ['my-bucket.s3.amazonaws.com', 'https://my-bucket.s3.amazonaws.com/key'],
    ['app.203.0.113.7.nip.io', 'https://app.203.0.113.7.nip.io/'],
    ['github.io', 'https://github.io/'],
    ['*.example.co.uk', 'https://api.example.co.uk/'],
    ['*.myapp.herokuapp.com', 'https://eu.myapp.herokuapp.com/'],
    ['*.example.org', 'https://a.b.example.org/'],
    ['*.github.com', 'https://api.github.com/'],
    ['*.tracking.carrier.example', 'https://eu.tracking.carrier.example/'],
    ['*.corp.internal', 'https://wiki.corp.internal/'],
    ['*.city.kawasaki.jp', 'https://www.city.kawasaki.jp/'], // `!city.kawasaki.jp` beats `*.kawasaki.jp`
    ['*.mynip.io', 'https://a.mynip.io/'],
    ['*.nip.io.example.com', 'https://a.nip.io.example.com/'],
    ['*.bücher.example', 'https://shop.xn--bcher-kva.example/'],
  ])('accepts %s', async (entry, url) => {
    const hostname = new URL(url).hostname;
    const policy = createUrlPolicy({
      allow: [entry],
      resolve: stubResolver({ [hostname]: [PUBLIC] }).resolve,
    });
    expect((await policy.check(url)).hostname).toBe(hostname);
  });
});

describe('wildcard entries', () => {
  const dns = stubResolver({
    'a.example.org': [PUBLIC],
    'a.b.example.org': [PUBLIC],
    'example.org': [PUBLIC],
  });
  const policy = createUrlPolicy({ allow: ['*.example.org'], resolve: dns.resolve });

  it('match one or more labels before the suffix', async () => {
    expect((await policy.check('https://a.example.org/')).hostname).toBe('a.example.org');
    expect((await policy.check('https://a.b.example.org/')).hostname).toBe('a.b.example.org');
  });

  it.each([
    'https://example.org/',
    'https://evil-example.org/',
    'https://example.org.evil.com/',
    'https://xexample.org/',
  ])('do not match %s', async (url) => {
    await expect(policy.check(url)).rejects.toMatchObject({ reason: 'host', code: 'permission_denied' });
  });

  it('the hint lists the allowlist, or not when hintAllowedHosts is false', async () => {
    await expect(policy.check('https://evil.com/')).rejects.toMatchObject({
      hint: 'Only these hosts can be fetched: *.example.org.',
    });
    const quiet = createUrlPolicy({
      allow: ['*.example.org'],
      resolve: dns.resolve,
      hintAllowedHosts: false,
    });
    await expect(quiet.check('https://evil.com/')).rejects.toMatchObject({
      hint: 'Only hosts on the allowlist can be fetched. Do not retry with another host.',
    });
  });

  // Red team Y (session 38): with the hosts unsaid, a wrong port still listed the allowed ports (the
  // order service's carrier port) and its own message confirmed that a guessed host was on the list.
  it('without hints, a wrong port on an allowed host reads exactly as a host off the list', async () => {
    const quiet = createUrlPolicy({
      allow: ['*.example.org'],
      ports: [8443],
      resolve: dns.resolve,
      hintAllowedHosts: false,
    });
    const wrongPort = await quiet.check('https://api.example.org:9443/').catch((error: unknown) => error);
    const wrongHost = await quiet.check('https://api.example.com:9443/').catch((error: unknown) => error);
    const seen = (error: unknown) => {
      const { code, message, hint } = error as { code: string; message: string; hint: string };
      return { code, message: message.replace(/api\.example\.(org|com)/, 'HOST'), hint };
    };
    expect(seen(wrongPort)).toEqual(seen(wrongHost));
    expect(JSON.stringify(seen(wrongPort))).not.toContain('8443');
    // The log still knows which it was.
    expect(wrongPort).toMatchObject({ reason: 'port', detail: { port: 9443 } });
    // Red team AA: nor does a private literal tell the allowPrivate entry apart from the rest of its range.
    const loopback = createUrlPolicy({
      allow: ['127.0.0.1'],
      allowPrivate: ['127.0.0.1'],
      ports: [47811],
      resolve: dns.resolve,
      hintAllowedHosts: false,
      schemes: ['http'],
    });
    const answers = await Promise.all(
      ['http://127.0.0.2:47811/', 'http://[::1]:47811/', 'http://127.0.0.1:1/', 'http://10.0.0.1:47811/'].map(
        (url) => loopback.check(url).catch((error: unknown) => error),
      ),
    );
    const shown = answers.map((error) => {
      const { code, message, hint } = error as { code: string; message: string; hint: string };
      return { code, message: message.replace(/^Host \S+ /, 'Host HOST '), hint };
    });
    expect(new Set(shown.map((answer) => JSON.stringify(answer))).size).toBe(1);
    // With hints (the default) the allowed ports are named, as before.
    const told = createUrlPolicy({ allow: ['*.example.org'], ports: [8443], resolve: dns.resolve });
    await expect(told.check('https://api.example.org:9443/')).rejects.toMatchObject({
      reason: 'port',
      hint: 'Use the https URL without a port, or one of the allowed ports: 8443.',
    });
  });
});

describe('address checks', () => {
  it('allowPrivate opens exactly the named addresses and CIDRs, in mapped form too', () => {
    const allow = [parseCidr('127.0.0.1'), parseCidr('10.20.0.0/16'), parseCidr('fd12::/16')];
    expect(checkAddress('127.0.0.1', allow)).toEqual({ ok: true, address: '127.0.0.1' });
    expect(checkAddress('::ffff:127.0.0.1', allow)).toEqual({ ok: true, address: '::ffff:7f00:1' });
    expect(checkAddress('10.20.255.1', allow)).toEqual({ ok: true, address: '10.20.255.1' });
    expect(checkAddress('fd12:0:0::5', allow)).toEqual({ ok: true, address: 'fd12::5' });
    expect(checkAddress('127.0.0.2', allow)).toEqual({ ok: false, range: 'loopback' });
    expect(checkAddress('10.21.0.1', allow)).toEqual({ ok: false, range: 'private' });
    expect(checkAddress('::1', allow)).toEqual({ ok: false, range: 'loopback' });
  });

  it('metadata addresses stay refused even inside an allowPrivate range', () => {
    const allow = [parseCidr('169.254.0.0/16'), parseCidr('fd00::/8'), parseCidr('100.64.0.0/10')];
    expect(checkAddress('169.254.1.1', allow)).toEqual({ ok: true, address: '169.254.1.1' });
    const allowAll = [parseCidr('0.0.0.0/0'), parseCidr('::/0')];
    for (const address of ['169.254.169.254', '::ffff:169.254.169.254', 'fd00:ec2::254', '100.100.100.200']) {
      expect(checkAddress(address, allow)).toEqual({ ok: false, range: 'metadata' });
    }
    // Azure's WireServer (public space), Tencent's and Oracle's metadata: refused whatever allowPrivate says.
    for (const address of ['168.63.129.16', '64:ff9b::a83f:8110', '169.254.0.23', '192.0.0.192']) {
      expect(checkAddress(address, allowAll)).toEqual({ ok: false, range: 'metadata' });
    }
  });

  it('judges embedded IPv4 as IPv4: public NAT64 and mapped pass, private ones do not', () => {
    expect(checkAddress('64:ff9b::5db8:d822', [])).toEqual({ ok: true, address: '64:ff9b::5db8:d822' });
    expect(checkAddress('::ffff:93.184.216.34', [])).toEqual({ ok: true, address: '::ffff:5db8:d822' });
    expect(checkAddress('64:ff9b::c0a8:101', [])).toEqual({ ok: false, range: 'private' });
    expect(checkAddress('::ffff:10.0.0.1', [])).toEqual({ ok: false, range: 'private' });
  });

  it('reads ::a.b.c.d as IPv4-compatible (not mapped) and refuses it, public or not', () => {
    expect(checkAddress('::8.8.8.8', [])).toEqual({ ok: false, range: 'reserved' });
    expect(checkAddress('::127.0.0.1', [])).toEqual({ ok: false, range: 'reserved' });
  });

  it('passes ordinary public unicast, IPv4 and IPv6', () => {
    expect(checkAddress(PUBLIC, [])).toEqual({ ok: true, address: PUBLIC });
    expect(checkAddress('2606:2800:0220:0001:248:1893:25C8:1946', [])).toEqual({
      ok: true,
      address: '2606:2800:220:1:248:1893:25c8:1946',
    });
  });
});
