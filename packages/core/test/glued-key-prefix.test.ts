// Red team F, finding 1: a provider key glued after `_` (a word character) passed every key-prefix
// pattern, whose `\b` does not start after `_`: `key_sk_live_…`, `user_42_ghp_…`, `x_AKIA…`,
// `key_xoxb-…`, `id_eyJ…` reached the model in failures and results, and spans through otel. The
// patterns now start after any character but a letter or digit.
import { afterEach, describe, expect, it } from 'vitest';
import { defineTool, fail, ok, REDACTED, redactSecretsInText, SECRET_PATTERNS } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';

const R = REDACTED;

const SECRETS = {
  stripe: 'sk_live_51HqLyjWDarjtT1zdp7dcXYZabcd',
  github: 'ghp_abcdefghijklmnopqrstuvwxyz0123456789',
  aws: 'AKIAIOSFODNN7EXAMPLE',
  slack: 'xoxb-1234567890-abcdefghijkl',
  jwt: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk',
  openai: 'sk-proj4b3c2d1e0f9g8h7i6j5',
  twilio: 'SK0123456789abcdef0123456789abcdef',
  digitalocean: `dop_v1_${'a1'.repeat(32)}`,
};

describe('a key glued after `_` or a digit-free name is redacted', () => {
  for (const [provider, secret] of Object.entries(SECRETS)) {
    it.each([
      ['after a name and `_`', `Stripe rejected key_${secret}`, `Stripe rejected key_${R}`],
      ['after a numbered name', `cache key user_42_${secret}`, `cache key user_42_${R}`],
      ['after `_` alone', `x _${secret} y`, `x _${R} y`],
      ['as before, after a space', `got ${secret}.`, `got ${R}.`],
    ])(`${provider} %s`, (_what, text, expected) => {
      expect(redactSecretsInText(text)).toBe(expected);
    });
  }

  it('an AWS key pair glued after `_` goes whole', () => {
    const text = `aws_AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY rest`;
    expect(redactSecretsInText(text)).toBe(`aws_${R} rest`);
  });

  it('a key glued to a letter or digit is still no key (the shapes need their own start)', () => {
    for (const text of [
      'risk_sk-', // too short to be a key
      'task-management-service-production-eu',
      'desk_live_abcdefghijkl', // `sk_live_` glued to a letter
      'XAKIAIOSFODNN7EXAMPLE',
      '9ghp_abcdefghijklmnopqrstuvwxyz0123456789',
      'heyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk',
      'snake_case_identifier_with_many_parts_eyJ',
    ]) {
      expect(redactSecretsInText(text), text).toBe(text);
    }
  });

  it('a run of `eyJ` starts joined by `_` is read in linear time', () => {
    const started = performance.now();
    for (const run of ['eyJxxxx_'.repeat(20_000), 'x_eyJ'.repeat(30_000), '_eyJ'.repeat(40_000)]) {
      expect(redactSecretsInText(run)).toBe(run);
    }
    const run = 'eyJxxxx_'.repeat(20_000);
    expect(redactSecretsInText(`${run}.abcd.`)).toBe(R);
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('the patterns joined into one alternation (a pretest) still match each glued key', () => {
    const joined = new RegExp(
      SECRET_PATTERNS.filter(({ requires }) => requires === undefined)
        .map(({ pattern }) => `(?:${pattern.source})`)
        .join('|'),
    );
    for (const secret of Object.values(SECRETS)) expect(joined.test(`key_${secret}`), secret).toBe(true);
    expect(joined.test('key_value snake_case_name user_42 x_y_z')).toBe(false);
  });
});

describe('through a real call', () => {
  let client: TestClient | undefined;
  afterEach(async () => {
    await client?.close();
    client = undefined;
  });

  it('a failure and a result naming glued keys reach the client without them', async () => {
    const tools = [
      defineTool({
        name: 'charge',
        description: 'Charges a card (test).',
        input: {},
        handler: async () =>
          fail(
            'permission_denied',
            Object.values(SECRETS)
              .map((secret) => `cache key user_42_${secret}`)
              .join('; '),
          ),
      }),
      defineTool({
        name: 'settings',
        description: 'Reads settings (test).',
        input: {},
        handler: async () => ok({ note: `loaded key_${SECRETS.stripe} and id_${SECRETS.jwt}` }),
      }),
    ];
    client = await serveTools(tools);
    const failed = await client.callTool('charge', {});
    expect(expectFailure(failed).error).toBe('permission_denied');
    const seen = JSON.stringify(failed) + JSON.stringify(await client.callTool('settings', {}));
    for (const secret of Object.values(SECRETS)) expect(seen, secret).not.toContain(secret);
    expect(seen).toContain(`user_42_${R}`);
  });
});
