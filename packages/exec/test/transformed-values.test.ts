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

let client: TestClient;
beforeAll(async () => {
  client = await serve([trimmed, templated, joined, branching], recordingLogger([]));
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
});
