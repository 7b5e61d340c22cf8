import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { PolicyDecision, ToolMiddleware } from '@toolgate/core';
import {
  expectFailure,
  type LogEntry,
  parseResultText,
  recordingLogger,
  type TestClient,
} from '@toolgate/core/testing';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { execTool, option, value } from '../src/index.js';
import { ECHO, NODE, scratchDir, serve } from './harness.js';

interface Echoed {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
}

const sandbox = scratchDir();
const canary = path.join(sandbox, 'canary');
const victim = path.join(sandbox, 'victim');
const marker = path.join(sandbox, 'ran');
mkdirSync(victim);
writeFileSync(path.join(victim, 'keep.txt'), 'keep');

// Every string a shell would act on. Each must reach the program as one argv element, verbatim.
const HOSTILE = [
  `; touch ${canary}`,
  `; rm -rf ${victim}`,
  `$(touch ${canary})`,
  `\`touch ${canary}\``,
  `| touch ${canary}`,
  '| cat /etc/passwd',
  `&& touch ${canary}`,
  `|| touch ${canary}`,
  `> ${canary}`,
  `>> ${canary}`,
  '< /etc/passwd',
  `& touch ${canary} &`,
  '*',
  '/etc/*',
  '?',
  '[a-z]*',
  '{a,b}',
  "'single quoted'",
  '"double quoted"',
  '"unterminated',
  "it's",
  '$HOME',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the literal shell expansion is the point
  '${HOME}',
  '$((1+1))',
  '~',
  '~root',
  '%PATH%',
  '!!',
  '#comment',
  'a\\b',
  'two words',
  '  padded  ',
  'tab\there',
  'héllo wörld 日本語 🙂',
  '\u202Eevil',
  '',
];

const echoTool = execTool({
  name: 'echo_args',
  description: 'Echoes its arguments (test).',
  input: { values: z.array(z.string()), rest: z.array(z.string()).default([]) },
  command: NODE,
  cwd: sandbox,
  env: { PATH: '/usr/bin:/bin', RAN_MARKER: marker },
  args: (input) => [
    ECHO,
    ...input.values.flatMap((text) => [
      value(text),
      option('--named', text),
      option('--inline', text, { inline: true }),
    ]),
    '--',
    ...input.rest.map((text) => value(text)),
  ],
});

const positional = execTool({
  name: 'positional',
  description: 'One positional value (test).',
  input: { file: z.string(), filter: z.object({ name: z.string() }).optional() },
  command: NODE,
  cwd: sandbox,
  env: { RAN_MARKER: marker },
  args: (input) => [ECHO, value(input.file), input.filter && value(input.filter.name)],
});

const untagged = execTool({
  name: 'untagged',
  description: 'Model values as plain strings, the form a hurried declaration writes (test).',
  input: { file: z.string(), operand: z.string().optional(), note: z.string().optional() },
  command: NODE,
  cwd: sandbox,
  env: { RAN_MARKER: marker },
  args: (input) => [
    ECHO,
    '--format',
    'text',
    input.file,
    `--note=${input.note ?? ''}`,
    '--',
    input.operand ?? 'none',
  ],
});

const numbers = execTool({
  name: 'numbers',
  description: 'Options with numbers (test).',
  input: { limit: z.number().int(), offset: z.number().int() },
  command: NODE,
  cwd: sandbox,
  env: { RAN_MARKER: marker },
  args: (input) => [
    ECHO,
    option('--limit', input.limit),
    option('-o', input.offset, { allowDash: true, inline: true }),
    value(input.offset, { allowDash: true }),
  ],
});

const inlineShort = execTool({
  name: 'inline_short',
  description: 'A short option with its value inline, then operands (test).',
  input: { pattern: z.string(), file: z.string() },
  command: NODE,
  cwd: sandbox,
  env: { RAN_MARKER: marker },
  args: (input) => [ECHO, option('-e', input.pattern, { inline: true }), '--', value(input.file)],
});

const forged = execTool({
  name: 'forged',
  description: 'Passes a raw input object where a tagged value belongs (a declaration bug).',
  input: { spec: z.object({ flag: z.string(), text: z.string(), allowDash: z.boolean() }) },
  command: NODE,
  cwd: sandbox,
  env: { RAN_MARKER: marker },
  args: (input) => [ECHO, input.spec as never],
});

let client: TestClient | undefined;
let logs: LogEntry[] = [];
beforeEach(() => rmSync(marker, { force: true }));
afterEach(async () => {
  await client?.close();
  client = undefined;
  logs = [];
});

async function connect(): Promise<TestClient> {
  client = await serve([echoTool, positional, untagged, numbers, inlineShort, forged], recordingLogger(logs));
  return client;
}

function echoed(result: Awaited<ReturnType<TestClient['callTool']>>): Echoed {
  expect(result.isError).toBeUndefined();
  const body = parseResultText(result) as { ok: true; stdout: string; exitCode: number };
  expect(body.exitCode).toBe(0);
  return JSON.parse(body.stdout) as Echoed;
}

describe('shell metacharacters', () => {
  it('reach the program verbatim, one argv element each, in every position, and run nothing', async () => {
    const { callTool } = await connect();
    const { argv } = echoed(await callTool('echo_args', { values: HOSTILE, rest: HOSTILE }));
    expect(argv).toEqual([
      ...HOSTILE.flatMap((hostile) => [hostile, '--named', hostile, `--inline=${hostile}`]),
      '--',
      ...HOSTILE,
    ]);
    expect(existsSync(canary)).toBe(false);
    expect(existsSync(path.join(victim, 'keep.txt'))).toBe(true);
  });

  it('answers with the exact success envelope', async () => {
    const { callTool } = await connect();
    const result = await callTool('positional', { file: '$(id)' });
    expect(result.structuredContent).toEqual({
      ok: true,
      exitCode: 0,
      stdout: JSON.stringify({ argv: ['$(id)'], env: { RAN_MARKER: marker }, cwd: sandbox }),
      stderr: '',
      truncated: false,
    });
  });
});

describe('option injection', () => {
  const refusals: Array<[string, Record<string, unknown>, string]> = [
    ['a short option', { file: '-x' }, 'file'],
    ['a long option with a value', { file: '--output=/etc/passwd' }, 'file'],
    ['a bare dash (stdin/stdout to many programs)', { file: '-' }, 'file'],
    ['a double dash', { file: '--' }, 'file'],
    ['an option in a nested field', { file: 'ok', filter: { name: '--exec=sh' } }, 'filter.name'],
  ];
  for (const [what, args, field] of refusals) {
    it(`refuses ${what} before the program runs`, async () => {
      const { callTool } = await connect();
      const envelope = expectFailure(await callTool('positional', args));
      expect(envelope).toEqual({
        ok: false,
        error: 'invalid_argument',
        message: `Argument ${field} may not start with "-".`,
        hint: 'Values are passed to the program as data and may not start with "-" (that would read as an option). Remove the leading "-".',
        retryable: false,
        fields: [{ path: field, expected: 'a value that does not start with "-"' }],
      });
      expect(existsSync(marker)).toBe(false);
    });
  }

  it('records the refusal as a policy decision for audit and tracing', async () => {
    const decisions: PolicyDecision[][] = [];
    const record: ToolMiddleware = async (ctx, next) => {
      const result = await next();
      decisions.push([...ctx.decisions]);
      return result;
    };
    client = await serve([positional], recordingLogger(logs), [record]);
    await client.callTool('positional', { file: '-rf' });
    expect(decisions).toEqual([
      [
        {
          by: 'exec',
          action: 'refuse',
          reason: 'Argument file may not start with "-".',
          detail: { fields: [{ path: 'file', expected: 'a value that does not start with "-"' }] },
        },
      ],
    ]);
  });

  it('refuses a dash value given to an option that was not declared to take one', async () => {
    const { callTool } = await connect();
    const envelope = expectFailure(await callTool('echo_args', { values: ['-rf'] }));
    expect(envelope.message).toBe('Argument values.0 may not start with "-".');
    expect(envelope.fields).toEqual([{ path: 'values.0', expected: 'a value that does not start with "-"' }]);
    expect(existsSync(marker)).toBe(false);
  });

  it('lets values after the declaration\'s "--" start with "-", but not the bare "-"', async () => {
    const { callTool } = await connect();
    const rest = ['-x', '--output=/etc/passwd', '---'];
    const { argv } = echoed(await callTool('echo_args', { values: ['b'], rest }));
    expect(argv).toEqual(['b', '--named', 'b', '--inline=b', '--', ...rest]);
    const envelope = expectFailure(await callTool('echo_args', { values: [], rest: ['-'] }));
    expect(envelope.fields).toEqual([{ path: 'rest.0', expected: 'a value that does not start with "-"' }]);
  });

  it("refuses a value spelled like one of the declaration's own dash elements (they cannot be told apart)", async () => {
    const { callTool } = await connect();
    const envelope = expectFailure(await callTool('echo_args', { values: [], rest: ['--'] }));
    expect(envelope.fields).toEqual([{ path: 'rest.0', expected: 'a value that does not start with "-"' }]);
    expect(existsSync(marker)).toBe(false);
  });

  it('refuses an empty value for an inline short option, which would take the next element as its value', async () => {
    const { callTool } = await connect();
    // `-e` alone would read the declaration's "--" as its pattern, and "-V" after it as an option.
    expect(expectFailure(await callTool('inline_short', { pattern: '', file: '-V' }))).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'Argument pattern may not be empty.',
      hint: 'This option needs a value: pass a non-empty one.',
      retryable: false,
      fields: [{ path: 'pattern', expected: 'a non-empty value' }],
    });
    expect(existsSync(marker)).toBe(false);
    expect(echoed(await callTool('inline_short', { pattern: 'a', file: '-V' })).argv).toEqual([
      '-ea',
      '--',
      '-V',
    ]);
  });

  it('lets a position declared with allowDash take a negative number', async () => {
    const { callTool } = await connect();
    expect(echoed(await callTool('numbers', { limit: 5, offset: -3 })).argv).toEqual([
      '--limit',
      '5',
      '-o-3',
      '-3',
    ]);
    const envelope = expectFailure(await callTool('numbers', { limit: -1, offset: 0 }));
    expect(envelope.fields).toEqual([{ path: 'limit', expected: 'a value that does not start with "-"' }]);
  });

  it('checks plain strings that carry an input value as if they were value()', async () => {
    const { callTool } = await connect();
    expect(echoed(await callTool('untagged', { file: 'report.txt' })).argv).toEqual([
      '--format',
      'text',
      'report.txt',
      '--note=',
      '--',
      'none',
    ]);
    const envelope = expectFailure(await callTool('untagged', { file: '--output=/etc/passwd' }));
    expect(envelope.fields).toEqual([{ path: 'file', expected: 'a value that does not start with "-"' }]);
    // After the declaration's own "--", the same value is an operand.
    expect(echoed(await callTool('untagged', { file: 'a', operand: '-x' })).argv.at(-1)).toBe('-x');
    // Inside an element the declaration built, a value cannot add an element of its own.
    expect(echoed(await callTool('untagged', { file: 'a', note: '-x --y' })).argv[3]).toBe('--note=-x --y');
    expect(existsSync(marker)).toBe(true);
  });

  it('does not accept a tag forged from input data: the call fails as internal, the program never runs', async () => {
    const { callTool } = await connect();
    const envelope = expectFailure(
      await callTool('forged', { spec: { flag: '--exec', text: 'sh', allowDash: true } }),
    );
    expect(envelope.error).toBe('internal');
    expect(envelope.message).toBe('Internal error.');
    expect(logs[0]?.fields.err).toBeInstanceOf(TypeError);
    expect((logs[0]!.fields.err as Error).message).toBe(
      'args[1] must be a string, value() or option(); got object',
    );
    expect(existsSync(marker)).toBe(false);
  });
});

describe('NUL bytes and line breaks', () => {
  for (const [what, bad] of [
    ['a NUL byte', 'a\0b'],
    ['a newline', 'a\nb'],
    ['a carriage return', 'a\rb'],
  ] as const) {
    it(`refuses ${what} in a value, an option value and a declaration-built element`, async () => {
      const { callTool } = await connect();
      const expected = {
        ok: false,
        error: 'invalid_argument',
        hint: 'Remove NUL bytes and line breaks from the value and call again.',
        retryable: false,
      };
      expect(expectFailure(await callTool('positional', { file: bad }))).toEqual({
        ...expected,
        message: 'Argument file contains a NUL byte or a line break.',
        fields: [{ path: 'file', expected: 'text without NUL bytes or line breaks' }],
      });
      expect(expectFailure(await callTool('echo_args', { values: ['ok', bad] })).fields).toEqual([
        { path: 'values.1', expected: 'text without NUL bytes or line breaks' },
      ]);
      expect(expectFailure(await callTool('untagged', { file: 'a', note: bad })).fields).toEqual([
        { path: 'note', expected: 'text without NUL bytes or line breaks' },
      ]);
      expect(existsSync(marker)).toBe(false);
    });
  }
});
