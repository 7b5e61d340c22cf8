// Red-team regression suite: attacks from a model that controls every argument, run against real
// child processes through a real SDK client. Each test states the attack and what must hold.
import { existsSync, linkSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  expectFailure,
  type LogEntry,
  parseResultText,
  recordingLogger,
  type TestClient,
} from '@toolgate/core/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { execTool, option, safeExec, value } from '../src/index.js';
import { ECHO, expectGone, NODE, scratchDir, serve } from './harness.js';

const HEAD = '/usr/bin/head';
const sandbox = scratchDir();
const marker = path.join(sandbox, 'ran');
const DASH_FIELD = (field: string) => [{ path: field, expected: 'a value that does not start with "-"' }];

// Server-side secrets and hostile loader variables in the server's own environment.
process.env.RT_DB_PASSWORD = 'rt-hunter2-db-pw';
process.env.RT_SERVICE_TOKEN = 'rt-opaque-service-token-value';
process.env.NODE_OPTIONS_RT = '--require /nonexistent/evil.js';
process.env.LD_PRELOAD_RT = '/nonexistent/evil.so';

/** Nests `leaf` inside `depth` arrays: [[[...leaf...]]]. */
function nested(leaf: unknown, depth: number): unknown {
  let node: unknown = leaf;
  for (let level = 0; level < depth; level += 1) node = [node];
  return node;
}

// A hurried declaration that flattens a tree of model strings into operands (untagged: the safety net
// must still catch a leading "-" however deep the model hid it).
const flatten = execTool({
  name: 'flatten',
  description: 'Passes every leaf of a nested list as an operand (test).',
  input: { tree: z.array(z.unknown()) },
  command: NODE,
  cwd: sandbox,
  env: { RAN_MARKER: marker },
  args: (input) => [ECHO, ...(input.tree.flat(Number.POSITIVE_INFINITY) as string[])],
});

// A record the model fills, flattened: keys and values deep inside.
const deepRecord = execTool({
  name: 'deep_record',
  description: 'Walks a nested object and passes every key (test).',
  input: { spec: z.record(z.string(), z.unknown()) },
  command: NODE,
  cwd: sandbox,
  env: { RAN_MARKER: marker },
  args: (input) => {
    const keys: string[] = [];
    const walk = (node: unknown): void => {
      if (typeof node !== 'object' || node === null) return;
      for (const [key, child] of Object.entries(node)) {
        keys.push(key);
        walk(child);
      }
    };
    walk(input.spec);
    return [ECHO, ...keys];
  },
});

// A real getopt program reading a model-chosen file: what the program itself makes of hostile operands.
const readFile = execTool({
  name: 'read_file',
  description: 'First lines of one file (test).',
  input: { file: z.string(), lines: z.number().int().min(1).max(50).default(5) },
  command: HEAD,
  cwd: sandbox,
  args: (input) => [option('-n', input.lines), value(input.file)],
});

// The same without "--" protection but with a declaration that writes the value inline.
const inlineLong = execTool({
  name: 'inline_long',
  description: 'A long option whose value is inline (test).',
  input: { name: z.string() },
  command: NODE,
  cwd: sandbox,
  env: { RAN_MARKER: marker },
  args: (input) => [ECHO, option('--name', input.name, { inline: true })],
});

const echoValues = execTool({
  name: 'echo_values',
  description: 'Echoes tagged values (test).',
  input: { values: z.array(z.string()) },
  command: NODE,
  cwd: sandbox,
  env: { PATH: '/usr/bin:/bin', RAN_MARKER: marker },
  args: (input) => [ECHO, ...input.values.map((text) => value(text))],
});

// Runs a fixed script; the model picks only data. Used for output and process-tree attacks.
const SCRIPT = `
const [mode, arg] = process.argv.slice(2);
const { spawn } = require('node:child_process');
const fs = require('node:fs');
if (mode === 'stderr-flood') { const b = 'e'.repeat(65536); const pump = () => { while (process.stderr.write(b)) {} process.stderr.once('drain', pump); }; pump(); }
else if (mode === 'tiny-chunks') { for (let n = 0; n < 3000; n += 1) process.stdout.write('y'); }
else if (mode === 'escape') {
  const g = spawn(process.execPath, ['-e', 'setInterval(() => {}, 60000)'], { detached: true, stdio: ['ignore', 'inherit', 'inherit'] });
  fs.writeFileSync(arg, String(g.pid)); g.unref(); process.stdout.write('left');
}
else if (mode === 'env') { process.stdout.write(JSON.stringify(process.env)); }
else if (mode === 'secret-at-cut') { process.stdout.write('x'.repeat(Number(arg)) + 'password=hunter2-at-the-cut'); }
else if (mode === 'invalid-utf8') { process.stdout.write(Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0x41])); }
else if (mode === 'stack') { throw new Error('boom at ' + process.cwd()); }
`;
const SCRIPT_FILE = path.join(sandbox, 'script.cjs');
writeFileSync(SCRIPT_FILE, SCRIPT);
const script = execTool({
  name: 'script',
  description: 'Runs a fixed script in a mode (test).',
  input: {
    mode: z.enum(['stderr-flood', 'tiny-chunks', 'escape', 'env', 'secret-at-cut', 'invalid-utf8', 'stack']),
    arg: z.string().default('0'),
  },
  command: NODE,
  cwd: sandbox,
  env: { PATH: '/usr/bin:/bin', CHILD_API_TOKEN: 'child-opaque-token-abcdef' },
  timeoutMs: 5000,
  killGraceMs: 200,
  maxOutputBytes: 1000,
  killAfterOutputBytes: 50_000,
  args: (input) => [SCRIPT_FILE, value(input.mode), value(input.arg)],
});

let client: TestClient;
const logs: LogEntry[] = [];
beforeAll(async () => {
  client = await serve(
    [flatten, deepRecord, readFile, inlineLong, echoValues, script],
    recordingLogger(logs),
  );
});
afterAll(async () => client.close());
beforeEach(() => rmSync(marker, { force: true }));

function stdoutOf(result: Awaited<ReturnType<TestClient['callTool']>>): string {
  expect(result.isError).toBeUndefined();
  return (parseResultText(result) as { stdout: string }).stdout;
}

describe('option injection hidden deep in the input', () => {
  it('refuses a "-" value nested deeper than the walk used to look (33+ levels)', async () => {
    // Before the fix, depth 33 and more passed: the value was neither indexed nor probed.
    for (const depth of [1, 31, 33, 40, 200]) {
      const result = await client.callTool('flatten', { tree: [nested('--output=/etc/passwd', depth)] });
      const envelope = expectFailure(result);
      expect(envelope.error).toBe('invalid_argument');
      expect(existsSync(marker)).toBe(false);
    }
    // Shallow harmless input still runs; input deeper than the checks reach is refused as such.
    const argv = JSON.parse(stdoutOf(await client.callTool('flatten', { tree: [nested('ok', 20)] }))).argv;
    expect(argv).toEqual(['ok']);
    rmSync(marker, { force: true });
    const deep = expectFailure(await client.callTool('flatten', { tree: [nested('ok', 40)] }));
    expect(deep.error).toBe('invalid_argument');
    expect(deep.message).toMatch(/^Argument tree(\.0)+ is nested too deeply\.$/);
    expect(deep.fields).toEqual([
      { path: expect.stringMatching(/^tree/), expected: 'at most 32 levels of nesting' },
    ]);
    expect(existsSync(marker)).toBe(false);
  });

  it('refuses a "-" key nested deep inside a record the model fills', async () => {
    let deep: Record<string, unknown> = { '--exec=sh': 'x' };
    for (let level = 0; level < 40; level += 1) deep = { [`k${level}`]: deep };
    const envelope = expectFailure(await client.callTool('deep_record', { spec: deep }));
    expect(envelope.error).toBe('invalid_argument');
    expect(existsSync(marker)).toBe(false);
  });
});

describe('option and path smuggling into a real getopt program (head)', () => {
  it('refuses option forms in the operand and in the numeric option', async () => {
    for (const file of ['-c1000000', '--bytes=100', '--', '-', '-n99']) {
      const envelope = expectFailure(await client.callTool('read_file', { file }));
      expect(envelope.fields).toEqual(DASH_FIELD('file'));
    }
    // zod refuses a negative number before exec sees it; a fractional too.
    expect(expectFailure(await client.callTool('read_file', { file: 'a', lines: -1 })).error).toBe(
      'invalid_argument',
    );
  });

  it('passes Unicode look-alike dashes as a file name, never as an option', async () => {
    for (const lookalike of ['\u2010n1', '\u2212n1', '\uFF0Dn1', '\u2013-help', '\u00ADx']) {
      const result = await client.callTool('read_file', { file: lookalike });
      const envelope = expectFailure(result);
      // head could not open a file of that name: it read it as an operand.
      expect(envelope.error).toBe('unavailable');
      expect(envelope.message).toContain('cannot open');
      expect(envelope.message).toContain(lookalike);
    }
  });

  it('refuses a leading space-then-dash only if the program would see a dash: " -n1" is a file name', async () => {
    const envelope = expectFailure(await client.callTool('read_file', { file: ' -n1' }));
    expect(envelope.message).toContain("cannot open ' -n1'");
  });

  it('NUL, CR, LF, and NUL percent- or JSON-escaped reach nothing; escapes stay literal text', async () => {
    for (const bad of ['a\0--help', 'x\n-n1', 'x\r--version']) {
      expect(expectFailure(await client.callTool('read_file', { file: bad })).error).toBe('invalid_argument');
    }
    const literal = ['%00', '\\0', '\\x00', '%2D-help'];
    const argv = JSON.parse(stdoutOf(await client.callTool('echo_values', { values: literal }))).argv;
    expect(argv).toEqual(literal);
  });

  it('an inline long option keeps a "-"-led value from the model refused, and "=" inside stays one element', async () => {
    expect(expectFailure(await client.callTool('inline_long', { name: '-x' })).fields).toEqual(
      DASH_FIELD('name'),
    );
    const argv = JSON.parse(stdoutOf(await client.callTool('inline_long', { name: 'a=--b --c' }))).argv;
    expect(argv).toEqual(['--name=a=--b --c']);
  });

  it('args that become paths: traversal, /proc and symlinks are data, read only with the program’s own access', async () => {
    // Not exec's to refuse (the README says so); what must hold is that they stay one operand each.
    const victims = ['../../../../etc/hostname', '/proc/self/environ', '....//....//etc', 'a/%2e%2e/b'];
    const argv = JSON.parse(stdoutOf(await client.callTool('echo_values', { values: victims }))).argv;
    expect(argv).toEqual(victims);
  });
});

describe('command pinning: a swapped symlink or hard link changes nothing after definition', () => {
  it('spawns the real file checked at definition, even when the declared link is re-pointed later', async () => {
    const dir = scratchDir();
    const link = path.join(dir, 'prog');
    symlinkSync(NODE, link);
    const tool = execTool({
      name: 'linked',
      description: 'Runs node through a link (test).',
      input: {},
      command: link,
      allow: [link, NODE],
      cwd: dir,
      args: () => ['-e', 'process.stdout.write("node")'],
    });
    // The attacker (or anything else) swaps the link to a shell script after the check.
    rmSync(link);
    const evil = path.join(dir, 'evil.sh');
    writeFileSync(evil, '#!/bin/sh\necho pwned\n', { mode: 0o755 });
    symlinkSync(evil, link);
    const local = await serve([tool], recordingLogger([]));
    try {
      expect(stdoutOf(await local.callTool('linked', {}))).toBe('node');
    } finally {
      await local.close();
    }
  });

  it('refuses at definition a hard link or symlink to a program that is not on the allowlist', () => {
    const dir = scratchDir();
    const soft = path.join(dir, 'soft');
    symlinkSync(HEAD, soft);
    expect(() =>
      execTool({ name: 's', description: 'x', input: {}, command: soft, allow: [soft], args: () => [] }),
    ).toThrow(/not on the allowlist/);
    // A hard link is its own real path: allowlisting it allowlists that file, which is the operator's
    // choice. Only it runs; a different file placed beside it does not.
    const hard = path.join(dir, 'hard');
    try {
      linkSync(HEAD, hard);
    } catch {
      return; // different file system: nothing to test
    }
    expect(() =>
      execTool({ name: 'h', description: 'x', input: {}, command: hard, allow: [HEAD], args: () => [] }),
    ).toThrow(/not on the allowlist/);
  });

  it('refuses a command given as a path with .. or a trailing slash, and a relative allow entry', () => {
    for (const command of ['/usr/bin/../bin/head', '/usr/bin//head', '/usr/bin/head/']) {
      expect(() =>
        execTool({ name: 'p', description: 'x', input: {}, command, allow: [command], args: () => [] }),
      ).toThrow(TypeError);
    }
  });
});

describe('environment leakage', () => {
  it('the child sees only its declared variables, none of the server’s secrets or loader variables', async () => {
    const env = JSON.parse(stdoutOf(await client.callTool('script', { mode: 'env' }))) as Record<
      string,
      string
    >;
    expect(Object.keys(env).sort()).toEqual(['CHILD_API_TOKEN', 'PATH']);
    const text = JSON.stringify(env);
    for (const secret of ['rt-hunter2-db-pw', 'rt-opaque-service-token-value', 'evil.js', 'evil.so']) {
      expect(text).not.toContain(secret);
    }
  });

  it('a declared secret the program prints under its variable name is scrubbed from what the model sees', async () => {
    const stdout = stdoutOf(await client.callTool('script', { mode: 'env' }));
    expect(stdout).not.toContain('child-opaque-token-abcdef');
  });

  it('reading /proc/self/environ through the program shows only the child’s own declared variables', async () => {
    const tool = execTool({
      name: 'cat_file',
      description: 'Prints one file (test).',
      input: { file: z.string() },
      command: '/usr/bin/cat',
      cwd: sandbox,
      env: { PATH: '/usr/bin:/bin', CHILD_DB_PASSWORD: 'child-pw-value-123' },
      args: (input) => ['--', value(input.file)],
    });
    const local = await serve([tool], recordingLogger([]));
    try {
      const stdout = stdoutOf(await local.callTool('cat_file', { file: '/proc/self/environ' }));
      const names = stdout
        .split('\0')
        .filter(Boolean)
        .map((entry) => entry.split('=')[0]);
      expect(names.sort()).toEqual(['CHILD_DB_PASSWORD', 'PATH']);
      expect(stdout).not.toContain('child-pw-value-123');
      expect(stdout).not.toContain('rt-hunter2-db-pw');
    } finally {
      await local.close();
    }
  });
});

describe('output limits', () => {
  it('stops a program that floods stderr only, keeps the cap and says so', async () => {
    const result = await client.callTool('script', { mode: 'stderr-flood' });
    expect(result.isError).toBeUndefined();
    const body = parseResultText(result) as {
      stderr: string;
      truncated: boolean;
      exitCode: number | null;
      note: string;
    };
    expect(body.stderr.length).toBe(1000);
    expect(body.truncated).toBe(true);
    expect(body.exitCode).toBeNull();
    expect(body.note).toContain('was stopped');
  });

  it('many tiny writes are counted byte by byte', async () => {
    const body = parseResultText(await client.callTool('script', { mode: 'tiny-chunks' })) as {
      stdout: string;
      truncated: boolean;
    };
    expect(body.stdout).toBe('y'.repeat(1000));
    expect(body.truncated).toBe(true);
  });

  it('invalid UTF-8 becomes U+FFFD, never raw bytes', async () => {
    const stdout = stdoutOf(await client.callTool('script', { mode: 'invalid-utf8' }));
    expect(stdout).toBe('\uFFFD\uFFFD\uFFFD(A');
  });

  it('a secret whose key survives the cut has its visible value scrubbed', async () => {
    // The key and part of the value fall before the 1000-byte cut.
    const stdout = stdoutOf(await client.callTool('script', { mode: 'secret-at-cut', arg: '985' }));
    expect(stdout).not.toContain('hunter');
    expect(stdout).toBe(`${'x'.repeat(985)}password=[REDACTED]`);
  });

  it('answers when the program exits, not at its time limit, though a setsid-escaped descendant keeps the pipes open', async () => {
    const pidFile = path.join(scratchDir(), 'escaped.pid');
    const body = parseResultText(await client.callTool('script', { mode: 'escape', arg: pidFile })) as {
      stdout: string;
      exitCode: number | null;
      note?: string;
    };
    expect(body.stdout).toBe('left');
    // Answered when the program exited, not at its 5 s time limit (which would stop it: no exit code,
    // a note saying so), while the descendant still holds the pipes: it is alive after the answer.
    expect(body.exitCode).toBe(0);
    expect(body.note ?? '').not.toContain('was stopped');
    const pid = Number(readFileSync(pidFile, 'utf8'));
    expect(() => process.kill(pid, 0)).not.toThrow();
    // Clean up the escaped process this test made (it left the group on purpose).
    process.kill(pid, 'SIGKILL');
    await expectGone(pid);
  });

  it('caps the argv size before spawning', async () => {
    const envelope = expectFailure(await client.callTool('echo_values', { values: ['a'.repeat(140_000)] }));
    expect(envelope.error).toBe('invalid_argument');
    expect(envelope.message).toMatch(/^The arguments are too long/);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('what the model sees on failure', () => {
  it('a spawn failure names no path, cwd or errno', async () => {
    const dir = scratchDir();
    const prog = path.join(dir, 'prog');
    writeFileSync(prog, '#!/nonexistent/interpreter\n', { mode: 0o755 });
    const tool = execTool({
      name: 'broken',
      description: 'x',
      input: {},
      command: prog,
      cwd: dir,
      args: () => [],
    });
    const local = await serve([tool], recordingLogger([]));
    try {
      const result = await local.callTool('broken', {});
      const envelope = expectFailure(result);
      expect(envelope).toEqual({
        ok: false,
        error: 'unavailable',
        message: 'The program could not be started.',
        hint: expect.any(String),
        retryable: expect.any(Boolean),
      });
      const everything = JSON.stringify(result);
      expect(everything).not.toContain(dir);
      expect(everything).not.toContain('ENOENT');
    } finally {
      await local.close();
    }
  });

  it('a timeout message and _meta carry no pid, path or signal internals', async () => {
    const tool = execTool({
      name: 'slow',
      description: 'x',
      input: {},
      command: NODE,
      cwd: sandbox,
      timeoutMs: 300,
      killGraceMs: 100,
      args: () => ['-e', 'setInterval(() => {}, 1000)'],
    });
    const local = await serve([tool], recordingLogger([]));
    try {
      const result = await local.callTool('slow', {});
      expect(expectFailure(result).message).toBe('The program ran past its 300 ms limit and was stopped.');
      const everything = JSON.stringify(result);
      expect(everything).not.toContain(sandbox);
      expect(everything).not.toContain(NODE);
    } finally {
      await local.close();
    }
  });

  it('safeExec throws a refusal for a "-" value before spawning, whatever the nesting of the call', async () => {
    await expect(
      safeExec(NODE, [ECHO, value('--inspect=0.0.0.0:9229')], { cwd: sandbox }),
    ).rejects.toMatchObject({
      code: 'invalid_argument',
    });
  });
});

describe('arguments too long for the system (a declaration that raised maxArgvBytes)', () => {
  // Linux refuses one argument past 128 KiB and all of argv and env past ARG_MAX, whatever
  // maxArgvBytes allows; the spawn failed with E2BIG and the model got unavailable ("try later"),
  // which a circuit breaker counts: one long value opened the breaker for every caller.
  const longValues = execTool({
    name: 'long_values',
    description: 'Echoes tagged values, long ones allowed (test).',
    input: { values: z.array(z.string()) },
    command: NODE,
    cwd: sandbox,
    env: { PATH: '/usr/bin:/bin', RAN_MARKER: marker },
    maxArgvBytes: 16 * 1024 * 1024,
    args: (input) => [ECHO, ...input.values.map((text) => value(text))],
  });
  let longClient: TestClient;
  const longLogs: LogEntry[] = [];
  beforeAll(async () => {
    longClient = await serve([longValues], recordingLogger(longLogs));
  });
  afterAll(async () => longClient.close());

  it('refuses one value past the system limit for one argument, naming it, before spawning', async () => {
    const result = await longClient.callTool('long_values', { values: ['ok', 'a'.repeat(200_000)] });
    expect(expectFailure(result)).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'Argument values.1 is too long (200000 bytes; at most 131071 in one argument).',
      hint: 'Pass a shorter value.',
      retryable: false,
      fields: [{ path: 'values.1', expected: 'at most 131071 bytes' }],
    });
    expect(existsSync(marker)).toBe(false);
    // The longest one argument the system takes still runs.
    const fits = await longClient.callTool('long_values', { values: ['b'.repeat(131_071)] });
    expect((JSON.parse(stdoutOf(fits)) as { argv: string[] }).argv).toEqual(['b'.repeat(131_071)]);
  });

  it('answers invalid_argument, not unavailable, when argv and env together pass ARG_MAX', async () => {
    // 64 values of 130 000 bytes: each fits, all of them pass ARG_MAX (at most 6 MiB on Linux).
    const values = Array.from({ length: 64 }, (_, index) => `${index}`.padEnd(130_000, 'c'));
    longLogs.length = 0;
    expect(expectFailure(await longClient.callTool('long_values', { values }))).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'The arguments are too long for the system.',
      hint: 'Pass shorter values.',
      retryable: false,
      fields: [{ path: '(arguments)', expected: 'shorter arguments' }],
    });
    expect(existsSync(marker)).toBe(false);
    expect(longLogs.map((entry) => [entry.level, entry.message])).toEqual([
      ['warn', 'exec: the arguments and environment are too long for the system'],
    ]);
  });
});
