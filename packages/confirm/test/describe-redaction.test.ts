// The describe() sentence interpolates values the MODEL chose. Redacted as one line, a value that looks
// like the start of a secret (`password:`, `Bearer`) made core's rules take the words after it: the
// amount or the account the person approves. Now describe() sees each value redacted on its own, and a
// sentence redaction would still change is not shown: the prompt opens with the tool's title, and the
// argument lines show every value. Every test reads the prompt through real round trips: by form, in
// two steps (the message and _meta) and on the confirmation page.
import { defineTool, ok, type ToolDefinition } from '@toolgate/core';
import { serveTools } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { CONFIRM_META, type ConfirmToolOptions, confirmationArgument, createConfirm } from '../src/index.js';
import { authAs, promptsShown, SECRET } from './fixtures.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});
async function serve(...args: Parameters<typeof serveTools>) {
  const client = await serveTools(...args);
  closers.push(() => client.close());
  return client;
}

/** A payment tool that counts its runs and keeps the arguments it ran with. */
function payTool() {
  const runs = { count: 0, args: [] as unknown[] };
  const tool = defineTool({
    name: 'pay',
    title: 'Pay an invoice',
    description: 'Pay an amount to a payee.',
    input: {
      payee: z.string(),
      amount: z.number().positive(),
      currency: z.string(),
      iban: z.string().optional(),
      reference: z.string().optional(),
      api_token: z.string().optional(),
      confirmation: confirmationArgument,
    },
    handler: async (args) => {
      runs.count += 1;
      runs.args.push(args);
      return ok({ paid: true });
    },
  }) as ToolDefinition;
  return { tool, runs };
}

type Describe = NonNullable<ConfirmToolOptions['describe']>;

/** What the person is shown for `args`: by form, in two steps (message and _meta) and on the page. */
async function shownEverywhere(tool: ToolDefinition, args: Record<string, unknown>, describe: Describe) {
  const shown = await promptsShown(serve, tool, args, { describe });
  // Every way of showing it shows the same prompt.
  for (const prompt of Object.values(shown)) expect(prompt).toBe(shown.form);
  return shown.form;
}

const sentenceOf = (prompt: string): string => prompt.split('\n')[0]!;

describe('confirm: a value describe() interpolates cannot make redaction hide what it did not write', () => {
  it('a payee ending in "password:" cannot hide the amount: that sentence is not shown; the confirmation covers the real payee', async () => {
    const { tool, runs } = payTool();
    const seen: unknown[] = [];
    const describe: Describe = (args) => {
      seen.push(args);
      return `Pay ${args.payee} ${args.amount} ${args.currency}, from the operating account.`;
    };
    const args = { payee: 'ACME Ltd password:', amount: 1250, currency: 'EUR' };
    const prompt = await shownEverywhere(tool, args, describe);
    // Before: `Pay ACME Ltd password: [REDACTED] EUR, from the operating account.` A sentence that says
    // less than it was written to is not shown; the arguments below show the amount.
    expect(sentenceOf(prompt)).toBe('Run "Pay an invoice"?');
    expect(prompt.split('\n').slice(1)).toEqual([
      'Tool: pay',
      'Arguments:',
      '  payee: "ACME Ltd password:"',
      '  amount: 1250',
      '  currency: "EUR"',
    ]);
    // describe() got the values as the author expects them: the amount a number.
    expect(seen[0]).toEqual(args);
    expect(typeof (seen[0] as { amount: unknown }).amount).toBe('number');

    // The confirmation the two steps hand out covers the real arguments, not describe's view of them.
    const client = await serve([tool], {
      middleware: [createConfirm({ secret: SECRET, tools: { pay: { describe } } })],
      authInfo: authAs('alice'),
    });
    const first = await client.callTool('pay', args);
    const confirmation = (first._meta?.[CONFIRM_META] as { confirmation?: string } | undefined)?.confirmation;
    expect(confirmation).toMatch(/^\S+$/);
    const done = await client.callTool('pay', { ...args, confirmation });
    expect(done.isError).toBeFalsy();
    expect(runs.count).toBe(1);
    expect(runs.args[0]).toMatchObject({ payee: 'ACME Ltd password:', amount: 1250, currency: 'EUR' });
  });

  it('a secret in an argument is shown nowhere in the prompt, the sentence included', async () => {
    const { tool, runs } = payTool();
    const stripeKey = 'sk_live_4eC39HqLyjWDarjtT1zdp7dc';
    const prompt = await shownEverywhere(
      tool,
      { payee: 'ACME Ltd', amount: 1250, currency: 'EUR', reference: stripeKey, api_token: 'hunter2hunter2' },
      (args) =>
        `Pay ${args.amount} ${args.currency} to ${args.payee} (reference ${args.reference}, token ${args.api_token})`,
    );
    // Before: the token under a secret-named key was shown in the sentence (no pattern knows it alone).
    expect(prompt).not.toContain('hunter2');
    expect(prompt).not.toContain('sk_live');
    expect(sentenceOf(prompt)).toBe('Pay 1250 EUR to ACME Ltd (reference [REDACTED], token [REDACTED])');
    expect(prompt).toContain('  api_token: "[REDACTED]"');
    expect(runs.count).toBe(0);
  });

  it('a secret describe() adds itself is never shown, and a value beside it cannot hide the amount', async () => {
    const { tool, runs } = payTool();
    // What describe() looks up itself: a vendor record holding the portal's password.
    const vendors: Record<string, string> = { 'ACME Ltd': 'vendor portal password is Xy7pq91z' };
    const prompt = await shownEverywhere(
      tool,
      { payee: 'ACME Ltd', amount: 1250, currency: 'EUR', reference: 'INV-7 token:' },
      (args) =>
        `Pay ${args.payee} (${vendors[String(args.payee)]}), reference ${args.reference} ${args.amount} ${args.currency}`,
    );
    expect(prompt).not.toContain('Xy7pq91z');
    // Before: `... password is [REDACTED]), reference INV-7 token: [REDACTED] EUR`, the amount taken.
    expect(sentenceOf(prompt)).toBe('Run "Pay an invoice"?');
    expect(prompt).toContain('  reference: "INV-7 token:"');
    expect(prompt).toContain('  amount: 1250');
    expect(runs.count).toBe(0);
  });

  it('a value built to take the account after it (`Bearer`) takes nothing; one that hides only itself leaves the sentence', async () => {
    const { tool, runs } = payTool();
    const describe: Describe = (args) =>
      `Pay ${args.amount} ${args.currency} to ${args.payee} ${args.iban} today`;
    // A payee ending in `Bearer` made the account number after it a bearer token: the person approved
    // a payment without seeing where the money goes.
    const bearer = await shownEverywhere(
      tool,
      { payee: 'Utility Co Bearer', amount: 1250, currency: 'EUR', iban: 'DE89370400440532013000' },
      describe,
    );
    // Before: `Pay 1250 EUR to Utility Co Bearer [REDACTED] today`.
    expect(sentenceOf(bearer)).toBe('Run "Pay an invoice"?');
    expect(bearer).toContain('  iban: "DE89370400440532013000"');
    // A payee that closes a quote itself, then opens `password:` before the account.
    const closing = await shownEverywhere(
      tool,
      { payee: 'Utility Co” password:', amount: 1250, currency: 'EUR', iban: 'DE89370400440532013000' },
      describe,
    );
    // Before: `Pay 1250 EUR to Utility Co” password: [REDACTED] today`.
    expect(sentenceOf(closing)).toBe('Run "Pay an invoice"?');
    expect(closing).toContain('  iban: "DE89370400440532013000"');
    expect(closing).toContain('  payee: "Utility Co” password:"');
    // A value shaped like a private key's first line hides itself, not the amount after it.
    const key = await shownEverywhere(
      tool,
      { payee: '-----BEGIN PRIVATE KEY-----', amount: 1250, currency: 'EUR' },
      (args) => `Pay ${args.payee} now: ${args.amount} ${args.currency}`,
    );
    // Before: `Pay [REDACTED]`.
    expect(sentenceOf(key)).toBe('Pay [REDACTED] now: 1250 EUR');
    // At the sentence's start, `[REDACTED]:` would be a markdown link definition that hides the line.
    const first = await shownEverywhere(
      tool,
      { payee: '-----BEGIN PRIVATE KEY-----', amount: 1250, currency: 'EUR' },
      (args) => `${args.payee}: ${args.amount} ${args.currency} to pay`,
    );
    expect(sentenceOf(first)).toBe('\\u005bREDACTED\\u005d: 1250 EUR to pay');
    expect(runs.count).toBe(0);
  });
});
