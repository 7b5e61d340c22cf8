import { chmodSync, mkdirSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { registerTools } from '@toolgate/core';
import { connectTestClient } from '@toolgate/core/testing';
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { type ExecToolOptions, execTool, option } from '../src/index.js';
import { ECHO, NODE, scratchDir } from './harness.js';

const sandbox = scratchDir();
const escapingLink = path.join(sandbox, 'innocent-tool');
symlinkSync('/bin/sh', escapingLink);
const plainFile = path.join(sandbox, 'not-executable');
writeFileSync(plainFile, 'data');
chmodSync(plainFile, 0o644);
const directory = path.join(sandbox, 'dir');
mkdirSync(directory);

function define(overrides: Partial<ExecToolOptions<{ q: z.ZodString }>>) {
  return execTool({
    name: 'tool',
    description: 'A tool (test).',
    input: { q: z.string() },
    command: NODE,
    args: () => [ECHO],
    ...overrides,
  });
}

describe('the command is checked at definition time', () => {
  it('refuses a relative command', () => {
    expect(() => define({ command: 'node' })).toThrow('exec: command must be an absolute path, got "node"');
    expect(() => define({ command: './bin/node' })).toThrow('exec: command must be an absolute path');
  });

  it('refuses a command that is not normalised', () => {
    const sneaky = `${path.dirname(NODE)}/../${path.basename(path.dirname(NODE))}/${path.basename(NODE)}`;
    expect(() => define({ command: sneaky, allow: [sneaky] })).toThrow(
      `exec: command ${sneaky} is not normalised; write ${NODE}`,
    );
  });

  it('refuses a command that is not on the allowlist', () => {
    expect(() => define({ allow: ['/usr/bin/true'] })).toThrow(
      `exec: command ${NODE} is not on the allowlist`,
    );
  });

  it('refuses an allowlisted symlink whose real file is not on the allowlist', () => {
    expect(() => define({ command: escapingLink })).toThrow(
      `exec: command ${escapingLink} resolves to ${realpathSync('/bin/sh')}, which is not on the allowlist; add it to allow if that is intended`,
    );
  });

  it('refuses a missing file, a directory and a file that is not executable', () => {
    const missing = path.join(sandbox, 'missing');
    expect(() => define({ command: missing })).toThrow(`exec: command ${missing} does not exist`);
    expect(() => define({ command: directory })).toThrow(`exec: command ${directory} is not a regular file`);
    expect(() => define({ command: plainFile })).toThrow(`exec: command ${plainFile} is not executable`);
  });

  it('refuses an allowlist entry that is not absolute', () => {
    expect(() => define({ allow: [NODE, 'sh'] })).toThrow(
      'exec: allow[1] must be an absolute path, got "sh"',
    );
  });
});

describe('the rest of the declaration is checked at definition time', () => {
  it('refuses a relative, missing or non-directory cwd', () => {
    expect(() => define({ cwd: 'tmp' })).toThrow('exec: cwd must be an absolute path, got "tmp"');
    expect(() => define({ cwd: path.join(sandbox, 'nope') })).toThrow('does not exist');
    expect(() => define({ cwd: plainFile })).toThrow(`exec: cwd ${plainFile} is not a directory`);
  });

  it('refuses bad environment names and values', () => {
    expect(() => define({ env: { 'A=B': 'x' } })).toThrow(
      'exec: "A=B" is not a valid environment variable name',
    );
    expect(() => define({ env: { A: 'x\ny' } })).toThrow(
      'exec: env.A must be a string without NUL bytes or line breaks',
    );
    expect(() => define({ env: { A: 'x\0y' } })).toThrow('exec: env.A must be a string without NUL bytes');
    expect(() => define({ inheritEnv: ['LD_PRELOAD='] })).toThrow('is not a valid environment variable name');
  });

  it('refuses a PATH with an empty or relative entry: programs would look up their helpers in the working directory', () => {
    for (const [path, at, entry] of [
      ['/usr/bin::/bin', 2, ''],
      ['/usr/bin:/bin:', 3, ''],
      [':/usr/bin', 1, ''],
      ['/usr/bin:.', 2, '.'],
      ['bin:/usr/bin', 1, 'bin'],
    ] as const) {
      expect(() => define({ env: { PATH: path } })).toThrow(
        `exec: env.PATH entry ${at} (${JSON.stringify(entry)}) is not an absolute directory`,
      );
    }
    expect(() => define({ env: { PATH: '/usr/local/bin:/usr/bin:/bin' } })).not.toThrow();
    const saved = process.env.PATH;
    process.env.PATH = `${saved}:`;
    try {
      expect(() => define({ env: {}, inheritEnv: ['PATH'] })).toThrow('exec: the inherited PATH entry');
    } finally {
      process.env.PATH = saved;
    }
  });

  it('refuses bad limits and exit code maps', () => {
    expect(() => define({ timeoutMs: 0 })).toThrow('exec: timeoutMs must be a positive integer, got 0');
    expect(() => define({ maxOutputBytes: 100, killAfterOutputBytes: 50 })).toThrow(
      'exec: killAfterOutputBytes must be at least maxOutputBytes',
    );
    expect(() => define({ exitCodes: { 0: 'not_found' } })).toThrow(
      'execTool(tool): exitCodes key 0 is not an exit code from 1 to 255',
    );
    expect(() => define({ exitCodes: { 1: 'internal' } })).toThrow('not internal');
    expect(() => define({ exitCodes: { 1: 'oops' as never } })).toThrow('exitCodes[1] is not an error code');
  });

  it('refuses an option name that is not a fixed flag', () => {
    expect(() => option('--out put', 'x')).toThrow('option(): "--out put" is not an option name');
    expect(() => option('--out=x', 'x')).toThrow('is not an option name');
    expect(() => option('out', 'x')).toThrow('is not an option name');
  });

  it('publishes the input and the output schema in tools/list', async () => {
    const server = new McpServer({ name: 'exec-test', version: '1.0.0' });
    registerTools(server, [define({ annotations: { readOnlyHint: true } })]);
    const client = await connectTestClient(server);
    const { tools } = await client.client.listTools();
    expect(tools[0]?.annotations).toEqual({ readOnlyHint: true });
    expect(tools[0]?.outputSchema?.properties).toEqual({
      exitCode: {
        anyOf: [{ type: 'integer', minimum: -9007199254740991, maximum: 9007199254740991 }, { type: 'null' }],
      },
      stdout: { type: 'string' },
      stderr: { type: 'string' },
      truncated: { type: 'boolean' },
      ok: { type: 'boolean', const: true },
      total: { type: 'integer', minimum: 0, maximum: 9007199254740991 },
      note: { type: 'string' },
    });
    await client.close();
  });
});
