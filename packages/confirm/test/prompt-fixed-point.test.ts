// The prompt is a fixed point of what core does to it before a person reads it. Core redacts the whole
// message again (the form and URL elicitation's message, the page's copy, the two-step answer's message
// and `_meta` prompt); a secret found only in the JOINED prompt with its escapes decoded (`ALTER USER` in
// one value, `PASSWORD '...'` in another) made that pass return the whole prompt decoded: every escape
// confirm wrote undone, so an HTML comment hid the amount and a fake amount stood in its place. And
// redaction growth (`pin=1,` shown as `pin=[REDACTED],`) pushed the amount out of a prompt whose room
// had been shared before redaction.
import { defineTool, ok, redactSecretsInText, type ToolDefinition } from '@toolgate/core';
import { serveTools } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { type ConfirmToolOptions, confirmationArgument } from '../src/index.js';
import { promptsShown, TWO_STEP } from './fixtures.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});
async function serve(...args: Parameters<typeof serveTools>) {
  const client = await serveTools(...args);
  closers.push(() => client.close());
  return client;
}

/** A payment tool whose arguments come in `order` (the prompt lists them so), counting its runs. */
function payTool(order: 'amount-first' | 'amount-last') {
  const runs = { count: 0 };
  const money = { amount: z.number().positive(), currency: z.string() };
  const text = { payee: z.string(), iban: z.string().optional(), reference: z.string().optional() };
  const tool = defineTool({
    name: 'pay',
    title: 'Pay an invoice',
    description: 'Pay an amount to a payee.',
    input:
      order === 'amount-first'
        ? { payee: text.payee, ...money, reference: text.reference, confirmation: confirmationArgument }
        : { ...text, ...money, confirmation: confirmationArgument },
    handler: async () => {
      runs.count += 1;
      return ok({ paid: true });
    },
  }) as ToolDefinition;
  return { tool, runs };
}

/** Every way the prompt reaches a person: by form, in two steps (message and _meta), by URL (message and page). */
async function shownEverywhere(
  tool: ToolDefinition,
  args: Record<string, unknown>,
  options: Partial<ConfirmToolOptions> = {},
) {
  const shown = await promptsShown(serve, tool, args, options);
  // One prompt, whichever way it came, and nothing core would still change in it.
  for (const prompt of Object.values(shown)) {
    expect(prompt).toBe(shown.form);
    expect(redactSecretsInText(prompt)).toBe(prompt);
    expect(redactSecretsInText(TWO_STEP + prompt)).toBe(TWO_STEP + prompt);
  }
  return shown;
}

/** What a markdown/HTML renderer acts on, outside the `[REDACTED]` markers: none may be left live. */
const LIVE = /[[\]<>&`~]/;
const live = (prompt: string): boolean => LIVE.test(prompt.replaceAll('[REDACTED]', ''));

/** The prompt as an HTML/markdown renderer would show its text: comments gone, `<br>` a line, tags gone. */
const rendered = (prompt: string): string =>
  prompt
    .replace(/<!--[\s\S]*?(?:-->|$)/g, '')
    .replace(/<br\s*\/?>/gi, '\n')
    .replace(/<[^>]*>/g, '')
    .replace(/~~[\s\S]*?~~/g, '');

describe('the prompt is a fixed point of core: no escape it wrote comes back live', () => {
  it('an HTML comment opened in one value and closed in another, with a secret found only across them decoded, cannot hide the amount', async () => {
    const { tool, runs } = payTool('amount-first');
    const shown = await shownEverywhere(tool, {
      payee: 'ACME Ltd <!-- ALTER \\u0055SER x',
      amount: 125000,
      currency: 'EUR',
      reference: "PASSWORD 'x' --><br>amount: 12.50 EUR",
    });
    // The secret core finds across the lines is redacted; core keeps every escape outside it as confirm
    // wrote it (until session 36 it returned the whole prompt decoded, and confirm made it inert again).
    expect(shown.form).toBe(
      [
        'Run "Pay an invoice"?',
        'Tool: pay',
        'Arguments:',
        '  payee: "ACME Ltd \\u003c!-- ALTER \\\\u0055SER x"',
        '  amount: 125000',
        '  currency: "EUR"',
        `  reference: "PASSWORD '[REDACTED]' --\\u003e\\u003cbr\\u003eamount: 12.50 EUR"`,
      ].join('\n'),
    );
    expect(live(shown.form)).toBe(false);
    expect(rendered(shown.form)).toContain('  amount: 125000\n');
    expect(rendered(shown.form).split('\n')).not.toContain('amount: 12.50 EUR');
    expect(runs.count).toBe(0);
  });

  it.each([
    ['strikethrough', 'ACME Ltd ~~ ALTER \\u0055SER x', "PASSWORD 'x' ~~"],
    ['a code span', 'ACME Ltd ` ALTER \\u0055SER x', "PASSWORD 'x' `"],
    ['a link over the lines', 'ACME Ltd [ ALTER \\u0055SER x', "PASSWORD 'x' ](https://evil.test) amount: 1"],
    ['a bidi override entity', 'ACME Ltd &#x202E; ALTER \\u0055SER x', "PASSWORD 'x' &#x202D;"],
    ['an unclosed comment', 'ACME Ltd <!-- ALTER \\u0055SER x', "PASSWORD 'x'"],
  ])('%s across the values stays inert, and the amount is shown', async (_what, payee, reference) => {
    const { tool, runs } = payTool('amount-first');
    const shown = await shownEverywhere(tool, { payee, amount: 125000, currency: 'EUR', reference });
    const lines = shown.form.split('\n');
    expect(lines.slice(0, 3)).toEqual(['Run "Pay an invoice"?', 'Tool: pay', 'Arguments:']);
    expect(lines.map((line) => line.split(':')[0])).toEqual([
      'Run "Pay an invoice"?',
      'Tool',
      'Arguments',
      '  payee',
      '  amount',
      '  currency',
      '  reference',
    ]);
    expect(lines[4]).toBe('  amount: 125000');
    expect(lines[6]).toContain("PASSWORD '[REDACTED]'");
    expect(live(shown.form)).toBe(false);
    expect(rendered(shown.form)).toContain('  amount: 125000');
    expect(runs.count).toBe(0);
  });

  it('a describe() sentence beside a secret core finds only decoded stays as written (inert); the arguments stay inert and complete', async () => {
    const { tool } = payTool('amount-first');
    const shown = await shownEverywhere(
      tool,
      {
        payee: 'ACME Ltd <!-- ALTER \\u0055SER x',
        amount: 125000,
        currency: 'EUR',
        reference: "PASSWORD 'x' --><br>amount: 12.50 EUR",
      },
      { describe: (args) => `Pay ${args.amount} ${args.currency} to ${args.payee}` },
    );
    const lines = shown.form.split('\n');
    // Core keeps the sentence's escapes (until session 36 it decoded them, and the title took its place).
    expect(lines[0]).toBe('Pay 125000 EUR to ACME Ltd \\u003c!-- ALTER \\u0055SER x');
    expect(lines[4]).toBe('  amount: 125000');
    expect(live(shown.form)).toBe(false);
  });

  it('a sentence whose last word makes core take the next line (`... bob password` / `Tool: pay`) gives way to the title', async () => {
    const { tool } = payTool('amount-first');
    const shown = await shownEverywhere(
      tool,
      { payee: 'default login bob password', amount: 125000, currency: 'EUR' },
      { describe: (args) => `Pay ${args.amount} ${args.currency} to ${args.payee}` },
    );
    expect(shown.form).toBe(
      [
        'Run "Pay an invoice"?',
        'Tool: pay',
        'Arguments:',
        '  payee: "default login bob password"',
        '  amount: 125000',
        '  currency: "EUR"',
      ].join('\n'),
    );
  });

  it('a sentence whose own escapes are all core decodes in it stays, inert, beside a value core redacts across lines', async () => {
    const { tool } = payTool('amount-first');
    const shown = await shownEverywhere(
      tool,
      {
        payee: 'ACME Ltd <!-- ALTER \\u0055SER x',
        amount: 125000,
        currency: 'EUR',
        reference: "PASSWORD 'x' -->",
      },
      { describe: (args) => `Pay ${args.amount} ${args.currency} <by Friday>` },
    );
    const lines = shown.form.split('\n');
    expect(lines[0]).toBe('Pay 125000 EUR \\u003cby Friday\\u003e');
    expect(lines[4]).toBe('  amount: 125000');
    expect(lines[6]).toBe(`  reference: "PASSWORD '[REDACTED]' --\\u003e"`);
    expect(live(shown.form)).toBe(false);
  });
});

describe('room for values is reckoned from what is shown: redaction cannot push an argument out', () => {
  it('values that grow when redacted (`pin=1,` shown as `pin=[REDACTED],`) keep the amount and currency in sight', async () => {
    const { tool, runs } = payTool('amount-last');
    const filler = 'pin=1,'.repeat(45);
    const shown = await shownEverywhere(tool, {
      payee: `ACME Ltd ${filler}`,
      iban: `DE89370400440532013000 ${filler}`,
      reference: `INV-7 ${filler}`,
      amount: 125000,
      currency: 'EUR',
    });
    const lines = shown.form.split('\n');
    expect(shown.form.length).toBeLessThanOrEqual(1500);
    expect(lines.map((line) => line.split(':')[0]).slice(3)).toEqual([
      '  payee',
      '  iban',
      '  reference',
      '  amount',
      '  currency',
    ]);
    expect(lines.slice(-2)).toEqual(['  amount: 125000', '  currency: "EUR"']);
    for (const line of lines.slice(3, 6)) {
      expect(line).toContain('pin=[REDACTED],');
      // The cut says how much, and leaves nothing for a later pass to take (`pin=` before ` … (`).
      expect(line).toMatch(/[^=] … \(\d+ more characters not shown\)$/);
    }
    expect(runs.count).toBe(0);
  });

  it('in the shortest prompt, many growing values still leave every argument its name and a count', async () => {
    const { tool } = payTool('amount-last');
    const grows = 'pin=1,'.repeat(30);
    const shown = await shownEverywhere(
      tool,
      { payee: grows, iban: grows, reference: grows, amount: 125000, currency: 'EUR' },
      { maxPromptChars: 200 },
    );
    const lines = shown.form.split('\n');
    expect(lines.map((line) => line.split(':')[0]).slice(3)).toEqual([
      '  payee',
      '  iban',
      '  reference',
      '  amount',
      '  currency',
    ]);
    expect(lines.slice(-2)).toEqual(['  amount: 125000', '  currency: "EUR"']);
    for (const line of lines.slice(3, 6)) expect(line).toMatch(/ … \(\d+ more characters not shown\)$/);
  });

  it('a value that redaction shrinks is given its room as shown: the words after a long secret stay in sight', async () => {
    const { tool } = payTool('amount-last');
    const shown = await shownEverywhere(tool, {
      payee: 'ACME Ltd',
      reference: `INV-7 token=${'a1'.repeat(500)} then to account MALLORY-1`,
      amount: 125000,
      currency: 'EUR',
    });
    expect(shown.form.split('\n').slice(3)).toEqual([
      '  payee: "ACME Ltd"',
      '  reference: "INV-7 token=[REDACTED] then to account MALLORY-1"',
      '  amount: 125000',
      '  currency: "EUR"',
    ]);
  });
});
