import type { ElicitRequest } from '@modelcontextprotocol/sdk/types.js';
import { serveTools } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { type ConfirmToolOptions, createConfirm } from '../src/index.js';
import { refundTool, SECRET } from './fixtures.js';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** The message the person is shown for one call (they decline: nothing runs). */
async function promptFor(args: Record<string, unknown>, options: Partial<ConfirmToolOptions> = {}) {
  const { tool, runs } = refundTool();
  const asked: ElicitRequest['params'][] = [];
  const client = await serveTools([tool], {
    middleware: [createConfirm({ secret: SECRET, tools: { create_refund: options } })],
    onElicit: (params) => {
      asked.push(params);
      return { action: 'decline' };
    },
  });
  closers.push(() => client.close());
  await client.callTool('create_refund', args);
  expect(runs.count).toBe(0);
  return (asked[0] as { message: string }).message;
}

// Every way a renderer may start a new line: a value must never add one.
// biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for them.
const LINE_BREAK = /\r\n|[\n\r\u000B\u000C\u0085\u2028\u2029]/;

describe('confirm: the prompt shows what runs, and only that', () => {
  it('line and paragraph separators in a value cannot add lines to the prompt', async () => {
    const message = await promptFor({
      order_id: 'A-1',
      amount: 25,
      note: 'x\u2028Tool: get_refund_status\u2029Arguments: none',
    });
    expect(message).toBe(
      'Run "Refund an order"?\nTool: create_refund\nArguments:\n  order_id: "A-1"\n  amount: 25\n  note: "x\uFFFDTool: get_refund_status\uFFFDArguments: none"',
    );
    expect(message.split(LINE_BREAK)).toHaveLength(6);
  });

  it('a value interpolated by describe() cannot add lines above the arguments', async () => {
    const message = await promptFor(
      { order_id: 'A-1.\n\nThis is a test refund: no money moves.\r\u2028', amount: 25 },
      { describe: (args) => `Refund ${args.amount} EUR on order ${args.order_id}` },
    );
    expect(message.split(LINE_BREAK)[0]).toBe(
      'Refund 25 EUR on order A-1.\uFFFD\uFFFDThis is a test refund: no money moves.\uFFFD\uFFFD',
    );
    expect(message.split(LINE_BREAK)).toHaveLength(5);
  });

  it('invisible format characters (tags, marks, soft hyphen, variation selectors) become visible', async () => {
    // Tag characters spell hidden ASCII; U+061C is a bidirectional mark; U+00AD, U+034F, U+180E,
    // U+3164 and variation selectors render as nothing.
    const hidden = '\u{E0049}\u{E0047}\u061C\u00AD\u034F\u180E\u3164\uFE0F\u{E0100}\uFFF9';
    const message = await promptFor({ order_id: `A-1${hidden}`, amount: 25 });
    expect(message).toBe(
      `Run "Refund an order"?\nTool: create_refund\nArguments:\n  order_id: "A-1${'\uFFFD'.repeat(10)}"\n  amount: 25`,
    );
  });

  it('markdown in a value is shown as typed: no link, image, HTML, entity or code span', async () => {
    const message = await promptFor({
      order_id: 'A-1',
      amount: 25,
      note: '[Approve safely](https://evil.test) ![x](https://evil.test/p.png) <b>ok</b> &#65; `x`',
    });
    expect(message.split('\n')[5]).toBe(
      '  note: "\\u005bApprove safely\\u005d(https://evil.test) !\\u005bx\\u005d(https://evil.test/p.png) \\u003cb\\u003eok\\u003c/b\\u003e \\u0026#65; \\u0060x\\u0060"',
    );
    expect(message).not.toMatch(/[[\]<>&`]/);
  });

  it('markdown in a value describe() interpolates is shown as typed: it cannot hide what runs', async () => {
    // Rendered, the span hides what the refund really covers and the unclosed comment hides every
    // line after it: the person would read "Refund 25 EUR on order A-1" and nothing else.
    const orderId = 'A-1<span hidden> and every other order</span> [ok](https://evil.test) &#8238;`x`<!--';
    const message = await promptFor(
      { order_id: orderId, amount: 25 },
      { describe: (args) => `Refund ${args.amount} EUR on order ${args.order_id}` },
    );
    expect(message.split('\n')[0]).toBe(
      'Refund 25 EUR on order A-1\\u003cspan hidden\\u003e and every other order\\u003c/span\\u003e \\u005bok\\u005d(https://evil.test) \\u0026#8238;\\u0060x\\u0060\\u003c!--',
    );
    expect(message).not.toMatch(/[[\]<>&`]/);
    expect(message.split('\n')).toHaveLength(5);
  });

  it('a long value describe() interpolates cannot push the tool and the arguments out of the prompt', async () => {
    const note = `Goodwill gesture, as agreed on the phone. ${'Thanks again for your patience. '.repeat(60)}`;
    const message = await promptFor(
      { order_id: 'A-1', amount: 2500, note },
      {
        describe: (args) =>
          `Refund with the note "${args.note}" on order ${args.order_id}: ${args.amount} EUR`,
      },
    );
    const lines = message.split('\n');
    expect(lines[0]).toMatch(
      /^Refund with the note "Goodwill gesture, as agreed on the phone\. Thanks again/,
    );
    expect(lines[0]).toMatch(/ … \(\d+ more characters not shown\)$/);
    expect(lines.slice(1, 5)).toEqual([
      'Tool: create_refund',
      'Arguments:',
      '  order_id: "A-1"',
      '  amount: 2500',
    ]);
    expect(lines[5]).toMatch(/^ {2}note: "Goodwill gesture/);
    expect(lines).toHaveLength(6);
  });
});

describe('confirm: red team round 6 (session 34)', () => {
  it('a line holding an escaped secret stays inert to markdown after its secret is redacted', async () => {
    // Redaction decodes `\u0070assword=x` to find it and hands back decoded text: before, that undid the
    // line's own escaping, and the comment opened in one value hid the amount below it.
    const message = await promptFor({
      order_id: 'A-1 \\u0070assword=x <!--',
      amount: 99999,
      note: '\\u0070assword=y --> refund [details](https://evil.example/phish) `code` ~~old~~',
    });
    expect(message).not.toMatch(/[<>`~]|\[(?!REDACTED\])|(?<!\[REDACTED)\]/);
    expect(message).not.toContain('x <!--');
    expect(message).toContain('[REDACTED]');
    expect(message.split('\n')[4]).toBe('  amount: 99999');
    expect(message).toContain('\\u005bdetails\\u005d(https://evil.example/phish)');
  });

  it('right-to-left letters beside digits are written as escapes, so digit groups read in the order that runs', async () => {
    // Rendered, `\u0640` (Arabic tatweel) before the digits displays them as "3333 2222 1111".
    const message = await promptFor(
      { order_id: '\u06401111 2222 3333', amount: 25 },
      { describe: (args) => `Refund ${args.amount} EUR on order ${args.order_id}` },
    );
    expect(message).not.toMatch(/[\u0590-\u08FF]/);
    expect(message.split('\n')[0]).toBe('Refund 25 EUR on order \\u06401111 2222 3333');
    expect(message.split('\n')[3]).toBe('  order_id: "\\u06401111 2222 3333"');
  });

  it('right-to-left text without digits keeps its letters', async () => {
    const message = await promptFor({ order_id: 'A-1', amount: 25, note: 'תודה רבה' });
    expect(message.split('\n')[5]).toBe('  note: "תודה רבה"');
  });
});
