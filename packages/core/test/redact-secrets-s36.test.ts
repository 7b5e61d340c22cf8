// Round 36 of the secret patterns (a helper's note and a red team's round on the escaped-text change):
// - a bare value holding `&` was cut there (`password=Tr0ub4dor&3` left `&3`, an HTML page's
//   `password: ab&amp;cd` left `&amp;cd`): `&` now ends a value only where a query's next parameter
//   starts (`&user=`, `&amp;user=`) or as a quote or angle bracket written as a reference;
// - HTML references with leading zeros (`&#00000119;`, `&#x0000070;`) and the legacy names browsers read
//   without `;` (`&ltpassword&gt`) were read as written, the secret behind them unrecognised;
// - a caller's global `requires` carried its `lastIndex` from the first pass into the decoded one.
import { afterEach, describe, expect, it } from 'vitest';
import { defineTool, REDACTED, redactSecretsInText, type SecretPattern, ToolError } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';

const R = REDACTED;

describe('a bare value holding `&` is removed whole', () => {
  it.each([
    ['an env line', 'DB_PASSWORD=Tr0ub4dor&3 next', `DB_PASSWORD=${R} next`],
    ['a key: value line', 'client_secret: abc&def rest', `client_secret: ${R} rest`],
    ['an HTML page', '<p>password: ab&amp;cd</p>', `<p>password: ${R}</p>`],
    ['a numeric reference inside it', 'client_secret: SvLATQvGVn&#71;vdkTc9', `client_secret: ${R}`],
    ['a value opened by `&`', 'password=&abc', `password=${R}`],
    [
      'the last parameter of a query',
      'https://x.test/cb?code=1&password=s3cr&et',
      `https://x.test/cb?code=1&password=${R}`,
    ],
  ])('%s', (_what, text, expected) => {
    const out = redactSecretsInText(text);
    expect(out).toBe(expected);
    expect(redactSecretsInText(out)).toBe(out);
  });

  it.each([
    ['the next parameter', 'a?password=x&user=bob', `a?password=${R}&user=bob`],
    ['the next parameter, HTML-escaped', 'a?password=x&amp;user=bob', `a?password=${R}&amp;user=bob`],
    ['an empty value before the next parameter', 'password=&user=x', 'password=&user=x'],
    ['a shell list', 'password=x && echo hi', `password=${R} && echo hi`],
    [
      'a quote written as a reference',
      'password=&#39;hunter 2&#39; rejected',
      `password=&#39;${R}&#39; rejected`,
    ],
  ])('and stops where %s starts', (_what, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
  });

  it('stays linear on a long run of `&`', () => {
    const out = redactSecretsInText(`password=${'&a'.repeat(50_000)} end`);
    expect(out).toBe(`password=${R} end`);
  });
});

describe('HTML references as browsers read them', () => {
  it.each([
    ['leading zeros, decimal', 'pass&#00000119;ord=hunter2', `pass&#00000119;ord=${R}`],
    ['leading zeros, hex', '&#x0000070;assword=hunter2', `&#x0000070;assword=${R}`],
    ['leading zeros in the separator', 'password&#x000003D;hunter2', `password&#x000003D;${R}`],
    ['legacy names without `;`', '&ltpassword&gthunter2&lt/password&gt', `&ltpassword&gt${R}&lt/password&gt`],
    [
      'legacy quotes without `;`',
      '&quotpassword&quot:&quothunter2&quot',
      `&quotpassword&quot:&quot${R}&quot`,
    ],
  ])('%s', (_what, text, expected) => {
    const out = redactSecretsInText(text);
    expect(out).toBe(expected);
    expect(out).not.toContain('hunter2');
  });
});

it("a caller's global `requires` is read from the text's start in both passes", () => {
  const pin: SecretPattern = {
    name: 'custom-pin',
    pattern: /\bpin=\d+/g,
    replace: `pin=${R}`,
    requires: /pin/g,
  };
  // The replacement's own `pin=` is written as it is; the first pin was left whole before.
  expect(redactSecretsInText('p&#105;n=1234 then pin=9', [pin])).toBe(`pin=${R} then pin=${R}`);
});

describe('through a real client', () => {
  let client: TestClient | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  it("a failure's message holding `&` in a password, a zero-padded reference and a legacy name shows none of them", async () => {
    const tool = defineTool({
      name: 'login',
      description: 'Logs in upstream.',
      input: {},
      handler: () => {
        throw new ToolError(
          'unavailable',
          'Upstream refused DB_PASSWORD=Tr0ub4dor&3 and pass&#00000119;ord=hunter2 and &ltpassword&gtswordfish&lt/password&gt',
        );
      },
    });
    client = await serveTools([tool]);
    const result = await client.callTool('login', {});
    const envelope = expectFailure(result);
    expect(envelope.error).toBe('unavailable');
    const seen = JSON.stringify(result);
    for (const leak of ['&3', 'hunter2', 'swordfish']) expect(seen, leak).not.toContain(leak);
  });
});
