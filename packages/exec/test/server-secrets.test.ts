// The program runs as the server's own user, so it can read the server's process files under /proc:
// /proc/<server pid>/environ holds every credential the server was started with. A model that names
// that file to a tool printing files must not read the server's secrets in the answer.
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { parseResultText } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const SERVER = fileURLToPath(new URL('./fixtures/read-file-server.ts', import.meta.url));
// Opaque values no secret pattern knows: only their names say what they are.
const CARRIER_KEY = 'opaque-carrier-7f3k9q2mzx';
const DB_PASS = 'hunter2;not&a=pattern';

let client: Client;
let serverPid: number;
beforeAll(async () => {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: ['--import', 'tsx', SERVER],
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
