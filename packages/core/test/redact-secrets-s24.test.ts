// Round 24 of the secret patterns, each through a real tools/call: a model that chooses every argument
// makes a careless handler echo it in a failure, and the boundary's redaction runs over it.
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { cutFailureText } from '../src/boundary.js';
import { defineTool, fail, REDACTED, redactSecretsInText } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';

const R = REDACTED;
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

/** A lookup that echoes the model's `note` in its not_found message, as careless handlers do. */
const lookup = defineTool({
  name: 'find_order',
  description: 'Finds an order by a note.',
  input: { note: z.string() },
  handler: ({ note }) => fail('not_found', `No order matches ${note}.`),
});

describe('secret patterns on hostile repeats (each run scanned once, not once per repeat)', () => {
  // A JWT could start after every `-` of a run of base64url characters and a `__Host-` cookie after
  // every `$`, `~`, `'` or `!`, each start scanning to the end of the run: 200 KB stalled the event loop
  // for about a minute on the boundary (and in audit, which redacts every call's arguments).
  it.each([
    ['a JWT prefix after each dash', 'eyJsk-'],
    ['a JWT prefix alone', 'eyJ-'],
    ['a prefixed cookie name after each dollar', '__Host-$'],
    ['a prefixed cookie name after each quote', "'__Secure-"],
  ])(
    '%s: 200 KB come back unchanged (the model sees them cut to the limit), in one scan',
    async (_name, unit) => {
      const note = unit.repeat(Math.ceil(200_000 / unit.length));
      // The patterns scan the whole text (before the boundary's cut) and leave it as it is.
      expect(redactSecretsInText(note)).toBe(note);
      client = await serveTools([lookup]);
      const envelope = expectFailure(await client.callTool('find_order', { note }));
      expect(envelope.message).toBe(cutFailureText(`No order matches ${note}.`));
    },
  );

  it.each([
    ['a JWT', 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm4ifQ.c2lnbmF0dXJl', R],
    ['a JWT after a word and a dash', 'jwt-eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm4ifQ.c2lnbmF0dXJl', `jwt-${R}`],
    ['a JWT after a dash', 'id -eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm4ifQ.c2ln', `id -${R}`],
    ['a JWT after two dashes', 'a-b-eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm4ifQ.c2ln', `a-b-${R}`],
    [
      'a JWT after a dashed word that starts like one',
      'eyJx-eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbm4ifQ.c2ln',
      R,
    ],
    [
      'a prefixed cookie',
      'Cookie jar: __Host-sid=8f7e6d5c4b3a; theme=dark',
      `Cookie jar: __Host-sid=${R}; theme=dark`,
    ],
    ['a prefixed cookie after a dollar', '$__Secure-id=8f7e6d5c4b3a; x', `$__Secure-id=${R}; x`],
  ])('still finds %s', async (_name, secret, expected) => {
    expect(redactSecretsInText(secret)).toBe(expected);
    client = await serveTools([lookup]);
    const envelope = expectFailure(await client.callTool('find_order', { note: secret }));
    expect(envelope.message).toBe(`No order matches ${expected}.`);
  });
});

describe('a secret-named key split by a character nothing draws', () => {
  // Format characters were ignored in key names already; these are Unicode's other default-ignorable
  // code points: a combining grapheme joiner, a variation selector, Hangul fillers, a Mongolian
  // variation selector. A model reads `pass\u034fword` as `password`.
  it.each(['pass\u034fword', 'api\ufe0f_key', 'to\u3164ken', 'db_pass\uffa0word', 'se\u180bcret'])(
    '%j: its value never reaches the model (a failure’s _meta, core alone)',
    async (key) => {
      const tool = defineTool({
        name: 'load_config',
        description: 'Loads a config.',
        input: {},
        handler: () => {
          const result = fail('unavailable', 'The config store is down.');
          result._meta = { ...result._meta, 'acme/config': { [key]: 'opaque-vault-value', region: 'eu' } };
          return result;
        },
      });
      client = await serveTools([tool]);
      const result = await client.callTool('load_config', {});
      expect(result._meta?.['acme/config']).toEqual({ [key]: R, region: 'eu' });
    },
  );
});
