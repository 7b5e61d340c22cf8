// Passwords of short options and `user:password` values on a command line, each through a real
// tools/call. Node's exec errors print the command line (`Command failed: ...`), and a careless handler
// hands that message to the model.
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect, promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createSilentLogger, defineTool, fail, ok, REDACTED, type ToolResult } from '../src/index.js';
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

/** A real failed execFile: the program is not there, and Node's error lists its arguments. */
async function failedRun(file: string, args: string[]): Promise<Error & { spawnargs?: string[] }> {
  try {
    await run(file, args);
  } catch (error) {
    return error as Error & { spawnargs?: string[] };
  }
  throw new Error(`${file} ran`);
}

describe('a password among a failed command’s arguments, as an array and as the error printed', () => {
  const cases: [string, string[], string[]][] = [
    ['mysql', ['--password', 'hunter2', '-u', 'root'], ['--password', R, '-u', 'root']],
    // Node's `spawnargs` leave the program out: `-u` first is read as curl's.
    ['curl', ['-u', 'admin:hunter2', 'https://example.com/'], ['-u', `admin:${R}`, 'https://example.com/']],
    // Short options only a program's own: its name is the error's `path`, beside the arguments.
    ['mysql', ['-phunter2', '-u', 'root'], [`-p${R}`, '-u', 'root']],
    ['sshpass', ['-p', 'hunter2', 'ssh', '-p', '22', 'host'], ['-p', R, 'ssh', '-p', '22', 'host']],
  ];

  /** A tool that runs the program (which fails) and answers with what `answer` makes of its error. */
  const syncTool = (
    program: string,
    args: string[],
    answer: (error: Error & { spawnargs?: string[] }) => ToolResult,
  ) =>
    defineTool({
      name: 'sync_db',
      description: 'Syncs the database.',
      input: {},
      handler: async () => answer(await failedRun(`/nonexistent/${program}`, args)),
    });

  it.each(cases)('%s: the error’s spawnargs in the failure’s _meta', async (program, args, expected) => {
    const tool = syncTool(program, args, (error) => {
      expect(error.spawnargs).toEqual(args);
      const result = fail('unavailable', 'Sync failed.');
      result._meta = { ...result._meta, spawn: { path: program, spawnargs: error.spawnargs } };
      return result;
    });
    client = await serveTools([tool]);
    const result = await client.callTool('sync_db', {});
    expect(result._meta?.spawn).toEqual({ path: program, spawnargs: expected });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });

  it.each(cases)(
    '%s: the error’s own fields copied into the failure’s _meta',
    async (program, args, expected) => {
      const tool = syncTool(program, args, (error) => {
        const result = fail('unavailable', 'Sync failed.');
        // `{ ...error }`: errno, code, syscall, path (the program) and spawnargs (without it).
        result._meta = { ...result._meta, error: { ...error } };
        return result;
      });
      client = await serveTools([tool]);
      const result = await client.callTool('sync_db', {});
      expect(result._meta?.error).toMatchObject({
        code: 'ENOENT',
        path: `/nonexistent/${program}`,
        spawnargs: expected,
      });
      expect(JSON.stringify(result)).not.toContain('hunter2');
    },
  );

  it.each(cases)('%s: the error as util.inspect and JSON print it, in the message', async (program, args) => {
    const tool = syncTool(program, args, (error) =>
      fail('unavailable', `Sync failed: ${inspect(error)} ${JSON.stringify(error)}`),
    );
    client = await serveTools([tool]);
    const result = await client.callTool('sync_db', {});
    const { message } = expectFailure(result);
    expect(message).toContain('spawnargs: [');
    expect(message).toContain('"spawnargs":[');
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });
});

describe('a program whose name is in capitals (a Windows-style install), failing for real', () => {
  // Real executables named as on Windows or a case-insensitive file system: each exits 3, so Node's
  // error lists the command line, its path and name as given.
  let bin = '';
  beforeAll(() => {
    bin = mkdtempSync(join(tmpdir(), 'toolgate-programs-'));
    for (const name of ['MYSQL', 'SSHPASS.EXE', 'Curl']) {
      writeFileSync(join(bin, name), '#!/bin/sh\nexit 3\n');
      chmodSync(join(bin, name), 0o755);
    }
  });
  afterAll(() => {
    rmSync(bin, { recursive: true, force: true });
  });

  /** Runs the program (which fails) and echoes Node's error in the failure, as careless handlers do. */
  const runTool = defineTool({
    name: 'run_program',
    description: 'Runs a maintenance program.',
    input: { program: z.string(), args: z.array(z.string()) },
    handler: async ({ program, args }) => {
      try {
        await run(join(bin, program), args);
        return ok({ done: true });
      } catch (error) {
        return fail(
          'unavailable',
          `Run failed: ${(error as Error).message} ${inspect(error)} ${JSON.stringify(error)}`,
        );
      }
    },
  });

  it.each([
    ['MYSQL', ['-phunter2', '-u', 'root'], `MYSQL -p${R} -u root`],
    ['SSHPASS.EXE', ['-p', 'hunter2', 'ssh', '-p', '22', 'host'], `SSHPASS.EXE -p ${R} ssh -p 22 host`],
    ['Curl', ['-u', 'admin:hunter2', 'https://example.com/'], `Curl -u admin:${R} https://example.com/`],
  ])(
    '%s: its `Command failed` message, util.inspect and JSON reach the model without the password',
    async (program, args, expected) => {
      client = await serveTools([runTool]);
      const { message } = expectFailure(await client.callTool('run_program', { program, args }));
      expect(message).toContain(`Command failed: ${bin}/${expected}`);
      expect(message).toContain(`cmd: '${bin}/${expected}'`);
      expect(message).not.toContain('hunter2');
    },
  );
});

describe('a failed command’s arguments in a logger’s line, quoted inside a JSON string twice over', () => {
  it('the whole password goes and each level stays JSON', async () => {
    const tool = defineTool({
      name: 'sync_db',
      description: 'Syncs the database.',
      input: {},
      handler: async () => {
        const error = await failedRun('/nonexistent/mysql', ['--password', 'hunter 2', '-u', 'root']);
        // A JSON logger's line whose message is JSON (one level), kept in a JSON field (two levels).
        const line = JSON.stringify({ level: 'error', msg: JSON.stringify({ spawnargs: error.spawnargs }) });
        return fail('unavailable', `Sync failed. ${JSON.stringify({ lastLog: line })}`);
      },
    });
    client = await serveTools([tool]);
    const { message } = expectFailure(await client.callTool('sync_db', {}));
    expect(message).not.toContain('hunter');
    const { lastLog } = JSON.parse(message.slice('Sync failed. '.length)) as { lastLog: string };
    const { msg } = JSON.parse(lastLog) as { msg: string };
    expect(JSON.parse(msg)).toEqual({ spawnargs: ['--password', R, '-u', 'root'] });
  });
});
