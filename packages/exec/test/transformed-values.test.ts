import { expectFailure, parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { execTool } from '../src/index.js';
import { ECHO, NODE, scratchDir, serve } from './harness.js';

const sandbox = scratchDir();
const DASH_FIELD = (path: string) => [{ path, expected: 'a value that does not start with "-"' }];

// Hurried declarations that transform a model value before it becomes an argv element: the safety
// net must judge the element the program parses, not the text the model sent.
const trimmed = execTool({
  name: 'trimmed',
  description: 'Trims the file name before passing it (test).',
  input: { file: z.string() },
  command: NODE,
  cwd: sandbox,
  args: (input) => [ECHO, '--format', 'text', input.file.trim()],
});

const templated = execTool({
  name: 'templated',
  description: 'Builds the operand from a template and a concatenation (test).',
  input: { name: z.string(), dir: z.string().default('docs'), note: z.string().default('') },
  command: NODE,
  cwd: sandbox,
  args: (input) => [ECHO, `${input.name}.txt`, `${input.dir}/${input.name}`, `--note=${input.note}`],
});

const joined = execTool({
  name: 'joined',
  description: 'Concatenates two model values into one element (test).',
  input: { head: z.string(), tail: z.string() },
  command: NODE,
  cwd: sandbox,
  args: (input) => [ECHO, input.head + input.tail],
});

const branching = execTool({
  name: 'branching',
  description: 'Builds a different number of elements depending on a value, then trims (test).',
  input: { sort: z.string(), file: z.string() },
  command: NODE,
  cwd: sandbox,
  args: (input) => [ECHO, ...(input.sort === 'desc' ? ['--reverse'] : []), input.file.trim()],
});

const shortTemplate = execTool({
  name: 'short_template',
  description: 'Writes a model value behind a short flag of its own, then operands (test).',
  input: { pattern: z.string(), file: z.string() },
  command: NODE,
  cwd: sandbox,
  args: (input) => [ECHO, `-e${input.pattern}`, '--', input.file],
});

const keyed = execTool({
  name: 'keyed',
  description: 'Passes the keys of a record, alone and in a template (test).',
  input: { files: z.record(z.string(), z.string()) },
  command: NODE,
  cwd: sandbox,
  args: (input) => [
    ECHO,
    ...Object.entries(input.files).flatMap(([name, label]) => [name, `${name}:${label}`]),
  ],
});

const modal = execTool({
  name: 'modal',
  description: 'Puts a fixed flag or a model value at the same position, by an enum (test).',
  input: { mode: z.enum(['raw', 'cooked']), query: z.string() },
  command: NODE,
  cwd: sandbox,
  args: (input) => [ECHO, input.mode === 'raw' ? input.query.trim() : '--cooked'],
});

// Declarations that decode a model value (a query parameter of a link, a field of a JSON text) before
// passing part of it: `x` is neither a URL nor JSON, so only the dashless probe can run on them.
const decoded = execTool({
  name: 'decoded',
  description: 'Prints the file a shared link names, with the mode of a JSON filter (test).',
  input: { link: z.string(), filter: z.string().default('{"mode":"all"}') },
  command: NODE,
  cwd: sandbox,
  args: (input) => [
    ECHO,
    '--format',
    'text',
    new URL(input.link).searchParams.get('file') ?? 'orders.txt',
    (JSON.parse(input.filter) as { mode: string }).mode.normalize('NFKC'),
  ],
});

let client: TestClient;
beforeAll(async () => {
  client = await serve(
    [trimmed, templated, joined, branching, shortTemplate, keyed, modal, decoded],
    recordingLogger([]),
  );
});
afterAll(async () => client.close());

function argvOf(result: Awaited<ReturnType<TestClient['callTool']>>): string[] {
  expect(result.isError).toBeUndefined();
  return (JSON.parse((parseResultText(result) as { stdout: string }).stdout) as { argv: string[] }).argv;
}

describe('untagged values a declaration transformed', () => {
  it('refuses a value whose leading "-" appears only after .trim()', async () => {
    const envelope = expectFailure(await client.callTool('trimmed', { file: '  --output=/etc/passwd' }));
    expect(envelope.error).toBe('invalid_argument');
    expect(envelope.message).toBe('Argument file may not start with "-".');
    expect(envelope.fields).toEqual(DASH_FIELD('file'));
    expect(expectFailure(await client.callTool('trimmed', { file: '\t-rf\n' })).fields).toEqual(
      DASH_FIELD('file'),
    );
    expect(argvOf(await client.callTool('trimmed', { file: ' report.txt ' }))).toEqual([
      '--format',
      'text',
      'report.txt',
    ]);
  });

  it('refuses a value that leads a template or a concatenation', async () => {
    expect(expectFailure(await client.callTool('templated', { name: '--exec=sh' })).fields).toEqual(
      DASH_FIELD('name'),
    );
    expect(expectFailure(await client.callTool('templated', { name: 'a', dir: '-rf' })).fields).toEqual(
      DASH_FIELD('dir'),
    );
    // The declaration's own prefix keeps its dash; the value behind it stays data.
    expect(argvOf(await client.callTool('templated', { name: 'a', note: '-' }))).toEqual([
      'a.txt',
      'docs/a',
      '--note=-',
    ]);
  });

  it('refuses an element whose dash comes from one value and whose option name comes from another', async () => {
    const envelope = expectFailure(
      await client.callTool('joined', { head: '-', tail: '-output=/etc/passwd' }),
    );
    expect(envelope.error).toBe('invalid_argument');
    expect(envelope.fields).toEqual(DASH_FIELD('head'));
    expect(argvOf(await client.callTool('joined', { head: 'a', tail: '-b' }))).toEqual(['a-b']);
  });

  it('falls back to the content rule when the declaration branches on a value', async () => {
    expect(expectFailure(await client.callTool('branching', { sort: 'desc', file: ' -rf' })).fields).toEqual(
      DASH_FIELD('file'),
    );
    expect(argvOf(await client.callTool('branching', { sort: 'desc', file: 'a' }))).toEqual([
      '--reverse',
      'a',
    ]);
  });

  it('refuses a value whose dash leads the element when the probe took the other branch at that position', async () => {
    const envelope = expectFailure(await client.callTool('modal', { mode: 'raw', query: ' --exec=sh' }));
    expect(envelope.error).toBe('invalid_argument');
    expect(envelope.fields).toEqual(DASH_FIELD('query'));
    expect(argvOf(await client.callTool('modal', { mode: 'raw', query: ' report ' }))).toEqual(['report']);
    expect(argvOf(await client.callTool('modal', { mode: 'cooked', query: '-x' }))).toEqual(['--cooked']);
  });

  it('refuses an empty value a declaration wrote behind a short flag (the flag would take the next element)', async () => {
    expect(expectFailure(await client.callTool('short_template', { pattern: '', file: '-V' }))).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'Argument pattern may not be empty.',
      hint: 'This option needs a value: pass a non-empty one.',
      retryable: false,
      fields: [{ path: 'pattern', expected: 'a non-empty value' }],
    });
    expect(argvOf(await client.callTool('short_template', { pattern: 'a', file: '-V' }))).toEqual([
      '-ea',
      '--',
      '-V',
    ]);
  });
});

describe('keys of a record the model fills', () => {
  it('refuses a key that starts with "-", as an element of its own or leading a template', async () => {
    const envelope = expectFailure(await client.callTool('keyed', { files: { ok: 'a', '-rf': 'b' } }));
    expect(envelope.error).toBe('invalid_argument');
    expect(envelope.message).toBe('Argument files.-rf may not start with "-".');
    expect(envelope.fields).toEqual(DASH_FIELD('files.-rf'));
    expect(argvOf(await client.callTool('keyed', { files: { 'a-b': 'c' } }))).toEqual(['a-b', 'a-b:c']);
  });
});

describe('values a declaration decodes (URL, JSON, NFKC) before passing them', () => {
  it('refuses a dash spelled %2D, \\u002d or as a full-width or small hyphen-minus that the decoder turns into "-"; one inside passes', async () => {
    const spelled = [
      { link: 'https://shop.example/share?file=%2D%2Dexec%3Devil' },
      { link: 'https://shop.example/share?file=%2d-config' },
      { link: 'https://shop.example/share', filter: '{"mode":"\\u002d\\u002dinspect"}' },
      { link: 'https://shop.example/share', filter: '{"mode":"\\u002D-inspect"}' },
      { link: 'https://shop.example/share', filter: '{"mode":"\uff0d\ufe63inspect"}' },
    ];
    for (const args of spelled) {
      const envelope = expectFailure(await client.callTool('decoded', args));
      expect(envelope.error, JSON.stringify(args)).toBe('invalid_argument');
      expect(envelope.message).toMatch(/may not start with "-"/);
    }
    // A dash inside a decoded value, however spelled, and the declaration's own flags still pass.
    const argv = argvOf(
      await client.callTool('decoded', {
        link: 'https://my-shop.example/share?file=q3-report%2Dfinal.txt',
        filter: '{"mode":"last\\u002d30-days"}',
      }),
    );
    expect(argv).toEqual(['--format', 'text', 'q3-report-final.txt', 'last-30-days']);
  });
});
