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
