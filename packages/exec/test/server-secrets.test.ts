// The program runs as the server's own user, so it can read the server's process files under /proc:
// /proc/<server pid>/environ holds every credential the server was started with. A model that names
// that file to a tool printing files must not read the server's secrets in the answer.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { parseResultText } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compiledFixture, scratchDir } from './harness.js';

const SERVER = compiledFixture('read-file-server.ts');
// Opaque values no secret pattern knows: only their names say what they are.
const CARRIER_KEY = 'opaque-carrier-7f3k9q2mzx';
const DB_PASS = 'hunter2;not&a=pattern';

let client: Client;
let serverPid: number;
beforeAll(async () => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [SERVER],
    env: { PATH: '/usr/bin:/bin', SERVER_CARRIER_KEY: CARRIER_KEY, PGPASSWORD: DB_PASS },
    stderr: 'ignore',
  });
  client = new Client({ name: 'server-secrets-test', version: '1.0.0' });
  await client.connect(transport);
  if (transport.pid === null) throw new Error('the server did not start');
  serverPid = transport.pid;
});
afterAll(async () => client?.close());

async function readFile(file: string): Promise<string> {
  const result = (await client.callTool({ name: 'read_file', arguments: { file } })) as CallToolResult;
  expect(result.isError).toBeUndefined();
  return (parseResultText(result) as { stdout: string }).stdout;
}

describe("the server's own environment, read through the program", () => {
  it('/proc/<server pid>/environ (the pid from /proc/self/stat) shows the names, never the credential values', async () => {
    // Step 1 of the attack: the program's parent is the server.
    const stat = await readFile('/proc/self/stat');
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    expect(parent).toBe(serverPid);
    // Step 2: the server's environment.
    const environ = await readFile(`/proc/${parent}/environ`);
    expect(environ).toContain('SERVER_CARRIER_KEY=[REDACTED]');
    expect(environ).not.toContain(CARRIER_KEY);
    expect(environ).not.toContain('hunter2');
    expect(environ).toContain('PATH=/usr/bin:/bin');
  });
});

describe('credentials the server no longer holds in process.env, or holds under a *_PWD name', () => {
  // Read at start-up, then deleted so that children do not inherit it: /proc/<pid>/environ still
  // holds the environment the server was started with, and process.env no longer says it was a secret.
  const DELETED_KEY = 'opaque-deleted-4hw8q1zr7c';
  // MySQL's client reads its password from MYSQL_PWD: a credential, whatever its name lacks.
  const MYSQL_PWD = 'opaque-mysql-9xk2v7pq3t';
  const WORKDIR = '/var/lib/toolgate-orders';
  let dropClient: Client;
  beforeAll(async () => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [SERVER],
      env: {
        PATH: '/usr/bin:/bin',
        // Names no secret pattern of core knows (core's `key=value` rule would take the rest of the
        // NUL-separated file with it): only the exact values can hide them.
        SERVER_CARRIER_KEY: DELETED_KEY,
        MYSQL_PWD,
        DROP_ENV: 'SERVER_CARRIER_KEY',
        // The shell's working directories: paths, not credentials, whatever their names end in.
        PWD: WORKDIR,
        OLDPWD: `${WORKDIR}-before`,
      },
      stderr: 'ignore',
    });
    dropClient = new Client({ name: 'server-secrets-drop-test', version: '1.0.0' });
    await dropClient.connect(transport);
  });
  afterAll(async () => dropClient?.close());

  async function read(file: string): Promise<string> {
    const result = (await dropClient.callTool({ name: 'read_file', arguments: { file } })) as CallToolResult;
    expect(result.isError).toBeUndefined();
    return (parseResultText(result) as { stdout: string }).stdout;
  }

  it('/proc/<server pid>/environ shows a credential deleted from process.env as [REDACTED]', async () => {
    const stat = await read('/proc/self/stat');
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const environ = await read(`/proc/${parent}/environ`);
    expect(environ).toContain('SERVER_CARRIER_KEY=[REDACTED]');
    expect(environ).not.toContain(DELETED_KEY);
    expect(environ).toContain('DROP_ENV=SERVER_CARRIER_KEY');
  });

  it('/proc/<server pid>/environ shows a *_PWD credential as [REDACTED]; the paths of PWD and OLDPWD stay', async () => {
    const stat = await read('/proc/self/stat');
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const environ = await read(`/proc/${parent}/environ`);
    expect(environ).toContain('MYSQL_PWD=[REDACTED]');
    expect(environ).not.toContain(MYSQL_PWD);
    // A file naming the server's working directories reads as it is: their paths are not hidden.
    const notes = path.join(scratchDir(), 'notes.txt');
    writeFileSync(notes, `orders live in ${WORKDIR}, they were in ${WORKDIR}-before\n`);
    expect(await read(notes)).toBe(`orders live in ${WORKDIR}, they were in ${WORKDIR}-before\n`);
  });
});
