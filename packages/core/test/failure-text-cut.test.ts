// Every string of a failure the model sees is cut to 4096 characters at the boundary, after core's
// secret patterns saw the whole text and the scrub hooks saw it up to a margin past the limit (16 KB,
// see seams-s34-cut.test.ts): a tool that echoes a huge argument into its failure must not hold the
// event loop in the hooks' patterns, and the cut must never show part of a token that straddles it. A confirmation request is never cut: the person sees all of it.
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { SCRUB_MARGIN } from '../src/boundary.js';
import { defineTool, fail, type ToolMiddleware } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';

let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

/** A tool that fails with the text it is given as its message (and hint), as an echoing tool would. */
const echoFailure = defineTool({
  name: 'find_order',
  description: 'Find an order by its reference.',
  input: { reference: z.string(), code: z.enum(['not_found', 'confirmation_required']).optional() },
  handler: async ({ reference, code }) =>
    fail(code ?? 'not_found', `No order matches ${reference}`, { hint: `Searched for ${reference}` }),
});

/** A global middleware whose scrub hook records the length of every string it is given. */
function measuringHook(seen: number[]): ToolMiddleware {
  const middleware: ToolMiddleware = (_ctx, next) => next();
  middleware.scrubText = (text) => {
    seen.push(text.length);
    return text;
  };
  return middleware;
}

describe('the failure text the model sees is cut at 4096 characters', () => {
  it('a 600 KB echo: the model sees at most 4096 characters and the marker, the hooks at most the margin more', async () => {
    const seen: number[] = [];
    client = await serveTools([echoFailure], { middleware: [measuringHook(seen)] });
    const reference = 'word '.repeat(120_000);
    const failure = expectFailure(await client.callTool('find_order', { reference }));
    expect(failure.error).toBe('not_found');
    expect(failure.message.endsWith(' …[cut]')).toBe(true);
    expect(failure.message.length).toBeLessThanOrEqual(4096 + ' …[cut]'.length);
    expect(failure.message.length).toBeGreaterThan(4096 - 256);
    expect(failure.hint.endsWith(' …[cut]')).toBe(true);
    expect(seen.length).toBeGreaterThan(0);
    expect(Math.max(...seen)).toBeLessThanOrEqual(4096 + SCRUB_MARGIN);
  });

  it('a token straddling the limit is dropped whole, never shown in part', async () => {
    client = await serveTools([echoFailure]);
    // "No order matches " is 17 characters: the token starts before 4096 and ends after it.
    const before = 'x '.repeat((4040 - 17) / 2 - 0.5);
    const token = `zq9${'Q7'.repeat(150)}`;
    const reference = `${before}${token} after`;
    const { message } = expectFailure(await client.callTool('find_order', { reference }));
    expect(message.indexOf(token.slice(0, 12))).toBe(-1);
    expect(message).toMatch(/x …\[cut\]$/);
  });

  it('a secret core knows, straddling the limit, is redacted and no piece of it shows', async () => {
    client = await serveTools([echoFailure]);
    const secret = `ghp_${'A1b2C3d4E5'.repeat(4).slice(0, 36)}`;
    const reference = `${'y '.repeat(2030)}${secret}`;
    const { message } = expectFailure(await client.callTool('find_order', { reference }));
    expect(message).not.toContain('ghp_');
    expect(message).not.toContain(secret.slice(4, 14));
  });

  it('text with no boundary in its last 256 characters is cut 256 characters before the limit', async () => {
    client = await serveTools([echoFailure]);
    const blob = 'QUJD'.repeat(5000);
    const { message } = expectFailure(await client.callTool('find_order', { reference: blob }));
    expect(message).toBe(`No order matches ${blob.slice(0, 4096 - 256 - 17)} …[cut]`);
  });

  it('a short failure is untouched, and a confirmation request is never cut (the person sees all of it)', async () => {
    client = await serveTools([echoFailure]);
    const short = expectFailure(await client.callTool('find_order', { reference: 'A-1' }));
    expect(short.message).toBe('No order matches A-1');
    const long = 'refund line '.repeat(1000);
    const confirm = expectFailure(
      await client.callTool('find_order', { reference: long, code: 'confirmation_required' }),
    );
    expect(confirm.message).toBe(`No order matches ${long}`);
  });
});
