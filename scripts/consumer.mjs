// Runs inside a scratch ESM project where the packed tarballs were installed from npm, as a server
// author would: every package imports, and a tool registered with core answers a real tools/call
// through core/testing's connectTestClient.
import { readFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { defineTool, ok, registerTools } from '@toolgate/core';
import { connectTestClient, parseResultText } from '@toolgate/core/testing';
import * as z from 'zod';

const { dependencies } = JSON.parse(readFileSync('package.json', 'utf8'));
for (const name of Object.keys(dependencies).filter((dep) => dep.startsWith('@toolgate/'))) {
  const module = await import(name);
  const exported = Object.keys(module);
  if (exported.length === 0) throw new Error(`${name} exports nothing`);
  console.log(`import ${name}: ${exported.length} exports`);
}

const echo = defineTool({
  name: 'echo',
  description: 'Echoes the given text back. Use it to check that an installed toolgate works end to end.',
  input: { text: z.string().max(100).describe('The text to echo') },
  handler: async ({ text }) => ok({ echoed: text }),
});
const server = new McpServer({ name: 'consumer', version: '1.0.0' });
registerTools(server, [echo]);
const client = await connectTestClient(server);
const seen = parseResultText(await client.callTool('echo', { text: 'hello' }));
const refused = await client.callTool('echo', { text: 42 });
await client.close();
if (JSON.stringify(seen) !== JSON.stringify({ ok: true, echoed: 'hello' }))
  throw new Error(`echo answered ${JSON.stringify(seen)}`);
if (refused.isError !== true) throw new Error('a wrong argument type was not refused');
console.log(`tools/call echo: ${JSON.stringify(seen)}; a number for text is refused`);
