// Secrets whose characters are written as escapes: JSON's `\u0070assword` (also Go's and Rails' escapes
// of `<`, `>` and `&`, and the escape escaped again one level down), and an HTML or XML error body's
// character references (`password&#61;x`, `&lt;password&gt;x&lt;/password&gt;`). No pattern sees
// through them, and a model reads them at a glance.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { defineTool, fail, REDACTED, redactSecretsInText } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';

const R = REDACTED;
const json = JSON.stringify;

// Each text, and exactly what the model reads instead: the secret gone, and only the secret: the key,
// the quotes and every other escape stay as the text wrote them (decoded, it is the decoded text
// redacted).
const ESCAPED_SECRETS: readonly (readonly [string, string])[] = [
  // JSON's `\uXXXX` escapes of ASCII characters, in a key, in a key and its value, in a longer name.
  ['{"\\u0070assword":"hunter2","user":"ann"}', `{"\\u0070assword":"${R}","user":"ann"}`],
  ['{"\\u0070assword":"\\u0068unter2"}', `{"\\u0070assword":"${R}"}`],
  ['{"api\\u005fkey":"k-123"}', `{"api\\u005fkey":"${R}"}`],
  ['password\\u003dhunter2 next', `password\\u003d${R} next`],
  // Go's and Rails' JSON escapes of `<`, `>` and `&` (hex digits in either case).
  [
    '{"error":"\\u003cpassword\\u003ehunter2\\u003c/password\\u003e"}',
    `{"error":"\\u003cpassword\\u003e${R}\\u003c/password\\u003e"}`,
  ],
  [
    '\\u003CclientSecret\\u003Ehunter2\\u003C/clientSecret\\u003E',
    `\\u003CclientSecret\\u003E${R}\\u003C/clientSecret\\u003E`,
  ],
  [
    '{"next":"/cb?id=7\\u0026pwd=hunter2\\u0026sig=abc123"}',
    `{"next":"/cb?id=7\\u0026pwd=${R}\\u0026sig=${R}"}`,
  ],
  // A quote escaped as `\u0022` (read as JSON's `\"`) stays as written.
  [
    '{"msg":"\\u0022password\\u0022:\\u0022hunter2\\u0022"}',
    `{"msg":"\\u0022password\\u0022:\\u0022${R}\\u0022"}`,
  ],
  // The escape's backslash escaped one and two levels down (JSON inside a JSON string, inside another);
  // a backslash of the text before an escape stays.
  [json({ msg: '{"\\u0070assword":"hunter2"}' }), json({ msg: `{"\\u0070assword":"${R}"}` })],
  [
    json({ msg: json({ msg: '{"\\u0070assword":"hunter2"}' }) }),
    json({ msg: json({ msg: `{"\\u0070assword":"${R}"}` }) }),
  ],
  [
    '{"dir":"C:\\\\\\u0070rofile","\\u0070assword":"hunter2"}',
    `{"dir":"C:\\\\\\u0070rofile","\\u0070assword":"${R}"}`,
  ],
  // HTML numeric references (decimal, hex, without `;` as browsers read them) and named ones.
  ['password&#61;hunter2', `password&#61;${R}`],
  ['password&#x3D;hunter2', `password&#x3D;${R}`],
  ['password&#61hunter2 sent', `password&#61${R} sent`],
  ['password&equals;hunter2', `password&equals;${R}`],
  ['&lt;password&gt;hunter2&lt;/password&gt;', `&lt;password&gt;${R}&lt;/password&gt;`],
  ['&quot;password&quot;:&quot;hunter2&quot;', `&quot;password&quot;:&quot;${R}&quot;`],
  ['password=&#39;hunter 2&#39; rejected', `password=&#39;${R}&#39; rejected`],
  // The `@` after a URL's credentials is the pattern's own: written as it is.
  [
    '<p>Bad request: &lt;apiKey&gt;k-123&lt;/apiKey&gt; at postgres&#x3A;&#x2F;&#x2F;app&#x3A;s3cret&#x40;db&#x2F;orders</p>',
    `<p>Bad request: &lt;apiKey&gt;${R}&lt;/apiKey&gt; at postgres&#x3A;&#x2F;&#x2F;${R}@db&#x2F;orders</p>`,
  ],
  ['DB_PASSWORD&#61;hunter2 &amp; more', `DB_PASSWORD&#61;${R} &amp; more`],
  // An HTML body inside a JSON string: its quotes stay references, so the JSON stays JSON.
  ['{"body":"&quot;password&quot;:&quot;hunter2&quot;"}', `{"body":"&quot;password&quot;:&quot;${R}&quot;"}`],
];

// Text with escapes but no secret: it comes back byte for byte.
const ESCAPED_ORDINARY: readonly string[] = [
  'caf\\u00e9 na\\u00efve',
  'a &amp; b',
  'C:\\\\users\\\\u0070rofile',
  'C:\\users\\u0070rofile',
  '{"msg":"\\u003cb\\u003ebold\\u003c/b\\u003e \\u0026 more","q":"a\\u003db"}',
  '{"msg":"say \\u0022hi\\u0022 \\u005c \\u000a"}',
  'Fish &amp; chips &lt;b&gt;bold&lt;/b&gt; &#169; 2026&nbsp;&mdash; &#10; &#92;',
  'The password&#39;s length must be &gt;= 8; &lt;password&gt; is required.',
  'token_count\\u003d3 max_tokens\\u003d1500 passwordless\\u003dtrue',
  '&amp;lt;password&amp;gt;hunter2&amp;lt;/password&amp;gt;',
];

describe('secrets whose characters are written as escapes', () => {
  it.each(ESCAPED_SECRETS)('redacts %j', (text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecretsInText(text)).not.toContain('hunter2');
    // Redacting again changes nothing.
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it.each(ESCAPED_ORDINARY)('leaves text with escapes but no secret byte for byte: %j', (text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });

  it('keeps each level JSON: escapes decoded one and two levels down parse back to the redacted value', () => {
    const inner = { dir: 'C:\\profile', password: 'hunter2', note: 'a "quoted" \\ word' };
    // The inner JSON as a Go or Rails encoder writes it: `p`, `<` and `&` escaped.
    const goJson = json(inner).replace(/p/g, '\\u0070').replace(/"a /, '"\\u003ca ');
    const expected = { ...inner, password: R, note: '<a "quoted" \\ word' };
    expect(JSON.parse(redactSecretsInText(goJson))).toEqual(expected);
    const once = redactSecretsInText(json({ msg: goJson }));
    expect(JSON.parse((JSON.parse(once) as { msg: string }).msg)).toEqual(expected);
    const twice = redactSecretsInText(json({ msg: json({ msg: goJson }) }));
    const outer = JSON.parse(twice) as { msg: string };
    expect(JSON.parse((JSON.parse(outer.msg) as { msg: string }).msg)).toEqual(expected);
  });

  it('decodes 300 KB of escapes in one pass (no retry from every position)', () => {
    // No time bound: a scan that read the rest of a 300 KB text again from each escape or backslash
    // would outlast the test's timeout; a linear one takes milliseconds.
    const texts = [
      '\\u0070'.repeat(50_000),
      `${'\\'.repeat(300_000)}u0070`,
      `${'\\'.repeat(300_000)}x`,
      '\\\\u0070'.repeat(40_000),
      '&#61;'.repeat(60_000),
      '&#x3D'.repeat(60_000),
      '&lt;'.repeat(75_000),
      '&'.repeat(300_000),
      '&a'.repeat(150_000),
      `&${'a'.repeat(300_000)}`,
      '&#'.repeat(150_000),
      '&#1234567'.repeat(33_000),
      '\\u003cpassword\\u003e'.repeat(15_000),
    ];
    for (const text of texts) expect(redactSecretsInText(text)).toBe(text);
    // Decoded, a run of keys each quoting the next one as its value: each value goes, in one scan.
    expect(redactSecretsInText('&quot;password&quot;:&quot;'.repeat(10_000))).toBe(
      `${`&quot;password&quot;:&quot;${R}`.repeat(9_999)}&quot;password&quot;:&quot;`,
    );
    expect(redactSecretsInText(`${'\\u003cpassword\\u003e'.repeat(15_000)}x\\u003c/password\\u003e`)).toBe(
      `${'\\u003cpassword\\u003e'.repeat(15_000)}${R}\\u003c/password\\u003e`,
    );
    const many = redactSecretsInText('\\u0070assword\\u003dhunter2 '.repeat(12_000));
    expect(many).toBe(`\\u0070assword\\u003d${R} `.repeat(12_000));
  });
});

describe('an upstream error body with escaped secrets, through a real tools/call', () => {
  let client: TestClient | undefined;
  let upstream: Server | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
    await new Promise((resolve) => upstream?.close(resolve) ?? resolve(undefined));
    upstream = undefined;
  });

  // What a Go service's JSON error writes (`<`, `>` and `&` escaped), and an HTML error page.
  const GO_BODY =
    '{"error":"invalid request","echo":"\\u003cpassword\\u003ehunter2\\u003c/password\\u003e","next":"/login?user=ann\\u0026pwd=hunter2"}';
  const HTML_BODY =
    '<html><body><h1>400</h1><p>&lt;client_secret&gt;hunter2&lt;/client_secret&gt; &quot;password&quot;:&quot;hunter2&quot; token&#61;hunter2</p></body></html>';

  it.each([
    ['application/json', GO_BODY, `\\u003cpassword\\u003e${R}\\u003c/password\\u003e`],
    ['text/html', HTML_BODY, `&lt;client_secret&gt;${R}&lt;/client_secret&gt;`],
  ])(
    'an upstream %s body in the message and _meta: hunter2 never reaches the model',
    async (type, body, shown) => {
      upstream = createServer((_request, response) => {
        response.writeHead(400, { 'content-type': type });
        response.end(body);
      });
      await new Promise<void>((resolve) => upstream?.listen(0, '127.0.0.1', resolve));
      const { port } = upstream.address() as AddressInfo;
      const tool = defineTool({
        name: 'fetch_order',
        description: 'Fetches an order from the upstream service.',
        input: {},
        handler: async () => {
          const response = await fetch(`http://127.0.0.1:${port}/orders/7`);
          const text = await response.text();
          // A careless handler: the upstream's body in the message and in _meta.
          const result = fail('unavailable', `Upstream ${response.status}: ${text}`);
          result._meta = { ...result._meta, upstream: { status: response.status, body: text } };
          return result;
        },
      });
      client = await serveTools([tool]);
      const result = await client.callTool('fetch_order', {});
      const envelope = expectFailure(result);
      expect(envelope.message).toContain('Upstream 400: ');
      expect(envelope.message).toContain(shown);
      expect((result._meta?.upstream as { body?: string } | undefined)?.body).toContain(shown);
      expect(JSON.stringify(result)).not.toContain('hunter2');
    },
  );
});
