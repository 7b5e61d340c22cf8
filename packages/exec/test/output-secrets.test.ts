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
