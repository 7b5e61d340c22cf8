import { chmodSync, chownSync, lchownSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expectFailure, parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { scrubOutput, secretValuesOf } from '../src/environment.js';
import { execTool } from '../src/index.js';
import { CANNOT_SWITCH_USERS, ECHO, NOBODY, NODE, scratchDir, serve } from './harness.js';

// Red team V: a decoder in the declaration hid the model's words from the open-field rule, a #!
// interpreter was checked at its real path only (and not when itself a script), and three scrubbing
// edges (`sed -n l` wraps, PEM dashes, a value of letters alone matched in any case).
const DASH_FIELD = (path: string) => [{ path, expected: 'a value that does not start with "-"' }];
const common = { command: NODE, cwd: scratchDir() };
const tools = [
  execTool({
    ...common,
    name: 'nfkd',
    description: 'Names, accents stripped (test).',
    input: { names: z.string() },
    args: (input) => [
      ECHO,
      '-u',
      ...input.names.split(',').map((n) =>
        n
          .normalize('NFKD')
          .replace(/[\u0300-\u036f]/g, '')
          .replace(/\s+/g, '-'),
      ),
    ],
  }),
  execTool({
    ...common,
    name: 'nfkc',
    description: 'Names, NFKC (test).',
    input: { names: z.string() },
    args: (input) => [
      ECHO,
      '-u',
      ...input.names.split(',').map((n) => n.normalize('NFKC').replace(/\s+/g, '-')),
    ],
  }),
  execTool({
    ...common,
    name: 'uri',
    description: 'URL-encoded names (test).',
    input: { names: z.string() },
    args: (input) => [
      ECHO,
      '-u',
      ...input.names.split(',').map((n) => decodeURIComponent(n).replace(/\s+/g, '-')),
    ],
  }),
  execTool({
    ...common,
    name: 'spec',
    description: 'A JSON spec (test).',
    input: { spec: z.string() },
    args: (input) => [ECHO, '-u', (JSON.parse(input.spec) as { name: string }).name.replace(/\s+/g, '-')],
  }),
  execTool({
    ...common,
    name: 'json_names',
    description: 'JSON names (test).',
    input: { spec: z.string() },
    args: (input) => [ECHO, '--json', ...(JSON.parse(input.spec) as { names: string[] }).names],
  }),
];

let client: TestClient;
beforeAll(async () => {
  client = await serve(tools, recordingLogger([]));
});
afterAll(async () => client.close());

const argvOf = async (tool: string, args: Record<string, unknown>): Promise<string[]> => {
  const result = await client.callTool(tool, args);
  expect(result.isError).toBeUndefined();
  return (JSON.parse((parseResultText(result) as { stdout: string }).stdout) as { argv: string[] }).argv;
};

describe('an option a decoder in the declaration makes of the model text', () => {
  it.each([
    ['nfkd', { names: 'notes,  ö/tmp/pwn' }, 'names'],
    ['nfkc', { names: 'notes, ｏ/tmp/pwn' }, 'names'],
    ['nfkc', { names: 'notes,\u3000o/tmp/pwn' }, 'names'],
    ['uri', { names: 'notes,%20o%2Ftmp%2Fpwn' }, 'names'],
    ['uri', { names: 'notes,%20%6F/tmp/pwn' }, 'names'],
    ['spec', { spec: '{"name":" \\u006f/tmp/pwn"}' }, 'spec'],
    ['spec', { spec: '{"name":" o/tmp/pwn"}' }, 'spec'],
  ])('%s %j is refused', async (tool, args, path) => {
    const envelope = expectFailure(await client.callTool(tool, args));
    expect(envelope.fields).toEqual(DASH_FIELD(path));
  });

  it('keeps the declarations own flags beside decoded names', async () => {
    expect(await argvOf('nfkd', { names: 'café,todo list' })).toEqual(['-u', 'cafe', 'todo-list']);
    expect(await argvOf('uri', { names: 'a%20b,c' })).toEqual(['-u', 'a-b', 'c']);
    expect(await argvOf('spec', { spec: '{"name":"todo list"}' })).toEqual(['-u', 'todo-list']);
    expect(await argvOf('json_names', { spec: '{"names":["a","b c"]}' })).toEqual(['--json', 'a', 'b c']);
  });
});

describe.skipIf(CANNOT_SWITCH_USERS !== undefined)('runAs: the #! interpreter as the kernel finds it', () => {
  const sandbox = scratchDir();
  chmodSync(sandbox, 0o755);
  const define = (command: string) =>
    execTool({ name: 't', description: 't', input: {}, command, cwd: '/', args: () => [], runAs: NOBODY });

  it('refuses an interpreter named through a symbolic link in a directory the user owns', () => {
    const venv = path.join(sandbox, 'venv');
    mkdirSync(venv);
    symlinkSync('/bin/sh', path.join(venv, 'sh'));
    chownSync(venv, NOBODY.uid, NOBODY.gid);
    const script = path.join(sandbox, 'report.sh');
    writeFileSync(script, `#!${venv}/sh\necho hi\n`);
    chmodSync(script, 0o755);
    expect(() => define(script)).toThrow(`that user can replace files in ${venv}`);
  });

  it('refuses a symbolic link the user owns on the way, and checks interpreters of interpreters', () => {
    const links = path.join(sandbox, 'links');
    mkdirSync(links);
    symlinkSync('/bin/sh', path.join(links, 'sh'));
    lchownSync(path.join(links, 'sh'), NOBODY.uid, NOBODY.gid);
    const viaLink = path.join(sandbox, 'via-link.sh');
    writeFileSync(viaLink, `#!${links}/sh\necho hi\n`);
    chmodSync(viaLink, 0o755);
    expect(() => define(viaLink)).toThrow(`that user owns the symbolic link ${links}/sh`);

    const own = path.join(sandbox, 'own');
    mkdirSync(own);
    writeFileSync(path.join(own, 'sh'), '#!/bin/sh\n');
    chmodSync(path.join(own, 'sh'), 0o755);
    chownSync(own, NOBODY.uid, NOBODY.gid);
    const runner = path.join(sandbox, 'runner');
    writeFileSync(runner, `#!${own}/sh\n`);
    chmodSync(runner, 0o755);
    const job = path.join(sandbox, 'job.sh');
    writeFileSync(job, `#!${runner}\necho hi\n`);
    chmodSync(job, 0o755);
    expect(() => define(job)).toThrow(`that user can replace files in ${own}`);
    // A chain of root's files and links is accepted.
    const fine = path.join(sandbox, 'fine.sh');
    writeFileSync(fine, '#!/bin/sh\necho hi\n');
    chmodSync(fine, 0o755);
    expect(() => define(fine)).not.toThrow();
  });
});

describe('scrubbing edges', () => {
  const SECRET = 'Zq8vLm3pXr7tNw2kQ9';
  it('finds a value `sed -n l` wrapped with a backslash before the line break', () => {
    const values = secretValuesOf({ API_KEY: SECRET });
    const wrapped = `${'x'.repeat(60)}${SECRET.slice(0, 9)}\\\n${SECRET.slice(9)}$\n`;
    expect(scrubOutput(wrapped, values)).toBe(`${'x'.repeat(60)}[REDACTED]$\n`);
    expect(scrubOutput(wrapped.replaceAll('\n', '\r\n'), values)).toContain('[REDACTED]');
  });

  it('leaves dashes at the ends of output alone with a PEM key in the environment', () => {
    const pem = `-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n`;
    const values = secretValuesOf({ KEY: pem });
    for (const text of [
      'name   | qty\n-------+-----\n',
      '-----\nrow 1\n',
      'summary:\n----------',
      'Done. ----',
    ]) {
      expect(scrubOutput(text, values)).toBe(text);
    }
  });

  it('matches a value of letters alone in its own case only', () => {
    const values = secretValuesOf({ POSTGRES_PASSWORD: 'postgres', REDIS_PASSWORD: 'changeme1' });
    expect(scrubOutput('psql (PostgreSQL) 16.4\n', values)).toBe('psql (PostgreSQL) 16.4\n');
    expect(scrubOutput('user postgres\n', values)).toBe('user [REDACTED]\n');
    expect(scrubOutput('CHANGEME1 banner\n', values)).toBe('[REDACTED] banner\n');
  });
});
