// Passwords of short options and `user:password` values on a command line, each through a real
// tools/call. Node's exec errors print the command line (`Command failed: ...`), and a careless handler
// hands that message to the model.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createSilentLogger, defineTool, fail, ok, REDACTED } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';

const R = REDACTED;
const run = promisify(execFile);
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

/** Runs a command that fails and echoes Node's error in its failure, as careless handlers do. */
const backup = defineTool({
  name: 'backup_db',
  description: 'Backs the database up.',
  input: { words: z.array(z.string()) },
  handler: async ({ words }) => {
    try {
      // A real child that exits 2 with the words as its arguments: Node's error message lists them.
      await run(process.execPath, ['-e', 'process.exit(2)', '--', ...words]);
      return ok({ done: true });
    } catch (error) {
      return fail('unavailable', `Backup failed: ${(error as Error).message}`);
    }
  },
});

describe('a short option’s password in a failed command’s message', () => {
  it.each([
    ['mysql -phunter2 -u root', `mysql -p${R} -u root`],
    ['sshpass -p hunter2 ssh host', `sshpass -p ${R} ssh host`],
    ['curl -u admin:hunter2 https://example.com', `curl -u admin:${R} https://example.com`],
  ])('%s: Node’s `Command failed` message reaches the model without it', async (line, expected) => {
    client = await serveTools([backup]);
    const envelope = expectFailure(await client.callTool('backup_db', { words: line.split(' ') }));
    expect(envelope.message).toContain(`Command failed: `);
    expect(envelope.message).toContain(` -- ${expected}`);
    expect(envelope.message).not.toContain('hunter2');
  });

  it('a tool that throws such an error: the model-facing text never holds the password', async () => {
    const tool = defineTool({
      name: 'restore_db',
      description: 'Restores the database.',
      input: {},
      handler: () => {
        throw new Error('Command failed: mysql -phunter2 -u root');
      },
    });
    // Silent: the server's own log keeps the error as thrown, under the incident id.
    client = await serveTools([tool], { logger: createSilentLogger() });
    const result = await client.callTool('restore_db', {});
    expect(expectFailure(result).error).toBe('internal');
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });
});
