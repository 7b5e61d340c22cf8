import { execFileSync } from 'node:child_process';
import { expectFailure, parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { scrubOutput, secretValuesOf } from '../src/environment.js';
import { execTool } from '../src/index.js';
import { OutputCapture } from '../src/output-capture.js';
import { ECHO, NODE, scratchDir, serve } from './harness.js';

// Red team N: a dash a declaration makes of the model's white space or punctuation, in a field whose
// `x` probe cannot line up (split into entries, parsed as JSON), and secrets a program reshapes or cuts.
const DASH_FIELD = (path: string) => [{ path, expected: 'a value that does not start with "-"' }];

const sortNotes = execTool({
  name: 'sort_notes',
  description: 'Sorts the named notes, each name slugged (test).',
  input: { names: z.string().max(200) },
  command: NODE,
  cwd: scratchDir(),
  args: (input) => [ECHO, '-u', ...input.names.split(',').map((name) => name.replace(/\s+/g, '-'))],
});

const sortSpec = execTool({
  name: 'sort_spec',
  description: 'Sorts a note named in a JSON spec, slugged (test).',
  input: { spec: z.string().max(200) },
  command: NODE,
  cwd: scratchDir(),
  args: (input) => [ECHO, '-u', (JSON.parse(input.spec) as { name: string }).name.replace(/\s+/g, '-')],
});

const punctuated = execTool({
  name: 'punctuated',
  description: 'Sorts the named notes, their punctuation written "-" (test).',
  input: { names: z.string().max(200) },
  command: NODE,
  cwd: scratchDir(),
  args: (input) => [
    ECHO,
    '--unique',
    ...input.names.split(',').map((name) => name.trim().replace(/[./+=:]/g, '-')),
  ],
});

const SECRET = 'Zq8vLm3pXr7tNw2kQ9';
const carrier = { PATH: '/usr/bin:/bin', CARRIER_KEY: SECRET };
// A program that cuts its own output at a length the model picks, as `head -c` and `tail -c` do.
const cutKey = execTool({
  name: 'cut_key',
  description: 'Prints the start or the end of a file holding the key (test).',
  input: { n: z.number().int().min(1).max(64), end: z.enum(['head', 'tail']) },
  command: NODE,
  cwd: scratchDir(),
  env: carrier,
  args: (input) => [
    '-e',
    'const t = "key=" + process.env.CARRIER_KEY + "\\n", n = Number(process.argv[1]); process.stdout.write(process.argv[2] === "head" ? t.slice(0, n) : t.slice(-n))',
    String(input.n),
    input.end,
  ],
});

let client: TestClient;
beforeAll(async () => {
  client = await serve([sortNotes, sortSpec, punctuated, cutKey], recordingLogger([]));
});
afterAll(async () => client.close());

function argvOf(result: Awaited<ReturnType<TestClient['callTool']>>): string[] {
  expect(result.isError).toBeUndefined();
  return (JSON.parse((parseResultText(result) as { stdout: string }).stdout) as { argv: string[] }).argv;
}

describe('a dash a declaration makes of white space or punctuation no probe replaced', () => {
  it.each([
    ['sort_notes', { names: 'notes, o/tmp/pwned1' }, 'names'],
    ['sort_notes', { names: 'notes,  output=/tmp/pwned2' }, 'names'],
    ['sort_notes', { names: 'notes,\tO/TMP/x' }, 'names'],
    ['sort_spec', { spec: '{"name":" o/tmp/pwned3"}' }, 'spec'],
    ['punctuated', { names: 'a, .o/tmp/x' }, 'names'],
    ['punctuated', { names: 'a, :output=x' }, 'names'],
    ['punctuated', { names: 'a,/etc' }, 'names'],
  ])('%s %j is refused', async (tool, args, path) => {
    const envelope = expectFailure(await client.callTool(tool, args));
    expect(envelope.error).toBe('invalid_argument');
    expect(envelope.fields).toEqual(DASH_FIELD(path));
  });

  it('keeps the declarations own flags and slugged names', async () => {
    expect(argvOf(await client.callTool('sort_notes', { names: 'notes,todo list,urgent' }))).toEqual([
      '-u',
      'notes',
      'todo-list',
      'urgent',
    ]);
    expect(argvOf(await client.callTool('sort_spec', { spec: '{"name":"todo list"}' }))).toEqual([
      '-u',
      'todo-list',
    ]);
    expect(argvOf(await client.callTool('punctuated', { names: 'a.txt, b/c' }))).toEqual([
      '--unique',
      'a-txt',
      'b-c',
    ]);
  });
});

describe('a known value the program cuts, reshapes or encodes', () => {
  const values = secretValuesOf(carrier);
  const redacted = (text: string) => {
    const scrubbed = scrubOutput(text, values);
    for (let at = 0; at + 4 <= SECRET.length; at += 1) {
      expect(scrubbed).not.toContain(SECRET.slice(at, at + 4));
      expect(scrubbed.toLowerCase()).not.toContain(SECRET.slice(at, at + 4).toLowerCase());
    }
    return scrubbed;
  };

  it('replaces a beginning of 4 characters or more at the end, an end at the start', async () => {
    for (let n = 4; n < SECRET.length; n += 1) {
      const head = parseResultText(await client.callTool('cut_key', { n: 4 + n, end: 'head' })) as {
        stdout: string;
      };
      expect(head.stdout).toBe('key=[REDACTED]');
      const tail = parseResultText(await client.callTool('cut_key', { n: n + 1, end: 'tail' })) as {
        stdout: string;
      };
      expect(tail.stdout).toBe('[REDACTED]\n');
    }
    const three = parseResultText(await client.callTool('cut_key', { n: 7, end: 'head' })) as {
      stdout: string;
    };
    expect(three.stdout).toBe('key=Zq8');
    expect(scrubOutput(`A=${SECRET.slice(0, 9)}\0`, values)).toBe('A=[REDACTED]\0');
    // In UTF-16 and UTF-32, either byte order.
    for (const encode of [
      (text: string) => Buffer.from(text, 'utf16le'),
      (text: string) => Buffer.from(text, 'utf16le').swap16(),
      (text: string) =>
        Buffer.from(
          text.replace(/./g, (c) => `${c}\0\0\0`),
          'latin1',
        ),
    ]) {
      redacted(encode(`key=${SECRET.slice(0, 6)}`).toString('utf8'));
      redacted(encode(`${SECRET.slice(-6)}\n`).toString('utf8'));
    }
    // A dump of a cut file (`xxd -l`).
    const dump = execFileSync('xxd', ['-l', '12'], { input: `key=${SECRET}` }).toString();
    expect(scrubOutput(dump, values)).toBe('[REDACTED]\n');
  });

  it('finds a value folded over lines, in UTF-32, base32, base64, reversed and in another case', () => {
    const folded = `key ${SECRET}\nend\n`.replace(/(.{5})/g, '$1\n');
    expect(redacted(folded)).toContain('[REDACTED]');
    expect(redacted(folded.replaceAll('\n', '\r\n'))).toContain('[REDACTED]');
    for (const wide of [
      Buffer.from(
        `key ${SECRET} end`.replace(/./g, (c) => `${c}\0\0\0`),
        'latin1',
      ),
      Buffer.from(
        `key ${SECRET} end`.replace(/./g, (c) => `\0\0\0${c}`),
        'latin1',
      ),
    ]) {
      expect(redacted(wide.toString('utf8'))).toContain('[REDACTED]');
    }
    for (let pad = 0; pad < 5; pad += 1) {
      const input = `${'k'.repeat(pad)}${SECRET}!`;
      for (const program of [['base32'], ['basenc', '--base32hex'], ['base64', '-w', '8']]) {
        const encoded = execFileSync(program[0]!, program.slice(1), { input }).toString();
        const decoded = scrubOutput(encoded, values);
        expect(decoded).toContain('[REDACTED]');
      }
    }
    expect(redacted([...`key ${SECRET}`].reverse().join(''))).toBe('[REDACTED] yek');
    expect(redacted(`KEY ${SECRET.toUpperCase()}`)).toBe('KEY [REDACTED]');
    expect(redacted(`key ${SECRET.toLowerCase()}`)).toBe('key [REDACTED]');
    // Output holding none of them is left as it is.
    const plain = 'Zq8 is not a key\nNw2k either\n'.repeat(100);
    expect(scrubOutput(plain, values)).toBe(plain);
  });

  it('never cuts a value in UTF-32 in two at maxOutputBytes', () => {
    const wide = Buffer.from(
      `ab${SECRET}`.replace(/./g, (c) => `${c}\0\0\0`),
      'latin1',
    );
    const capture = new OutputCapture(20, 0, [SECRET]);
    capture.push(wide);
    // Cut before the value (its big-endian form starts at b's NULs).
    expect(capture.text()).toMatch(/^a\0\0\0b\0{0,3}$/);
  });
});
