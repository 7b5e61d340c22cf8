#!/usr/bin/env node
// Smoke test for any running order-service: `smoke --url http://127.0.0.1:3000/mcp [--token T]` or
// `smoke -- node dist/main.js` (a stdio command). Runs initialize, tools/list and one tools/call per
// tool, and checks each tool's schema and each result's contract. Every call must succeed (an error
// result, however well-formed, fails the check). Exit 0 when everything holds, 1 otherwise.
import { parseArgs } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { ERROR_CODES } from '@toolgate/core';

const SAMPLE_ARGS: Record<string, Record<string, unknown>> = {
  search_orders: { status: 'shipped', days: 30, limit: 3 },
  get_order_status: { order_id: '4000000000007919' },
  track_shipment: { tracking_number: 'TRK00000004' },
  search_docs: { query: 'refund' },
  render_invoice: { order_id: '4000000000007919' },
  // Write tools are called without a confirmation: a working server must ask first and change nothing.
  request_refund: { order_id: '4000000000007919', amount_cents: 100, reason: 'smoke check' },
  cancel_order: { order_id: '4000000000047514', reason: 'smoke check' },
};

export interface SmokeRow {
  check: string;
  passed: boolean;
  detail: string;
}

/** Problems with a tool's published schema, as a model-facing reviewer would flag them. */
export function schemaProblems(tool: Tool): string[] {
  const problems: string[] = [];
  if (!tool.description || tool.description.length < 40) problems.push('description too short to choose by');
  if (tool.inputSchema.type !== 'object') problems.push('input is not an object');
  if (tool.inputSchema.additionalProperties !== false) problems.push('input accepts unknown arguments');
  for (const [name, property] of Object.entries(tool.inputSchema.properties ?? {})) {
    const described = property as { description?: string; type?: string };
    if (!described.description) problems.push(`argument ${name} has no description`);
    if (described.type === 'object') problems.push(`argument ${name} is nested (inputs should be flat)`);
  }
  if (
    tool.outputSchema &&
    (tool.outputSchema.properties as Record<string, unknown> | undefined)?.ok === undefined
  ) {
    problems.push('output schema lacks the envelope field ok');
  }
  return problems;
}

/** Problems with a result against the toolgate result contract. */
export function contractProblems(result: CallToolResult): string[] {
  const text = result.content.find((part) => part.type === 'text');
  if (text?.type !== 'text') return ['no text content'];
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text.text) as Record<string, unknown>;
  } catch {
    return ['text content is not JSON'];
  }
  if (result.isError === true) {
    const problems: string[] = [];
    if (parsed.ok !== false) problems.push('error without ok:false');
    if (!(ERROR_CODES as readonly string[]).includes(String(parsed.error)))
      problems.push(`unknown code ${String(parsed.error)}`);
    if (typeof parsed.message !== 'string' || typeof parsed.hint !== 'string')
      problems.push('error without message and hint');
    if (result.structuredContent !== undefined) problems.push('error carries structuredContent');
    return problems;
  }
  if (parsed.ok !== true) return ['success without ok:true'];
  if (JSON.stringify(result.structuredContent) !== text.text)
    return ['content text does not mirror structuredContent'];
  return [];
}

function firstJson(result: CallToolResult): Record<string, unknown> | undefined {
  const text = result.content.find((part) => part.type === 'text');
  try {
    return text?.type === 'text' ? (JSON.parse(text.text) as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export async function runSmoke(transport: Transport): Promise<SmokeRow[]> {
  const rows: SmokeRow[] = [];
  const client = new Client({ name: 'toolgate-smoke', version: '1.0.0' });
  try {
    await client.connect(transport, { timeout: 120_000 });
    const version = client.getServerVersion();
    rows.push({
      check: 'initialize',
      passed: version !== undefined,
      detail: `${version?.name} ${version?.version}`,
    });
    const { tools } = await client.listTools();
    rows.push({
      check: 'tools/list',
      passed: tools.length > 0,
      detail: tools.map((tool) => tool.name).join(', '),
    });
    for (const tool of tools) {
      const problems = schemaProblems(tool);
      rows.push({
        check: `schema ${tool.name}`,
        passed: problems.length === 0,
        detail: problems.join('; ') || 'ok',
      });
      const result = (await client.callTool({
        name: tool.name,
        arguments: SAMPLE_ARGS[tool.name] ?? {},
      })) as CallToolResult;
      const broken = contractProblems(result);
      const first = result.content[0];
      const seen = first?.type === 'text' ? first.text.slice(0, 160) : '';
      // A well-formed error is still a failed call: every sample call must succeed on a working server,
      // except that a tool that changes things must ask for confirmation (this client cannot answer).
      const destructive = tool.annotations?.destructiveHint === true;
      const code = result.isError === true ? firstJson(result)?.error : undefined;
      if (destructive && code !== 'confirmation_required') {
        broken.push(`a write ran or failed without asking for confirmation (${String(code ?? 'success')})`);
      } else if (!destructive && result.isError === true) broken.push('the call failed');
      rows.push({
        check: `call ${tool.name}`,
        passed: broken.length === 0,
        detail: broken.length > 0 ? `${broken.join('; ')}: ${seen}` : seen,
      });
    }
  } catch (error) {
    rows.push({
      check: 'session',
      passed: false,
      detail: error instanceof Error ? error.message : String(error),
    });
  } finally {
    await client.close();
  }
  return rows;
}

function transportFromArgs(argv: string[]): Transport {
  const split = argv.indexOf('--');
  const own = split === -1 ? argv : argv.slice(0, split);
  const command = split === -1 ? [] : argv.slice(split + 1);
  const { values } = parseArgs({
    args: own,
    options: { url: { type: 'string' }, token: { type: 'string' } },
  });
  if (values.url) {
    const headers: Record<string, string> = values.token ? { authorization: `Bearer ${values.token}` } : {};
    return new StreamableHTTPClientTransport(new URL(values.url), { requestInit: { headers } });
  }
  if (command.length > 0) {
    // The server inherits this environment (DATABASE_URL, CARRIER_URL, ...), as a desktop client's env would pass it.
    const env = Object.fromEntries(
      Object.entries(process.env).filter((entry): entry is [string, string] => entry[1] !== undefined),
    );
    return new StdioClientTransport({ command: command[0]!, args: command.slice(1), env, stderr: 'ignore' });
  }
  throw new Error('usage: smoke --url URL [--token TOKEN] | smoke -- COMMAND [ARGS...]');
}

const invokedDirectly = process.argv[1]?.endsWith('smoke.js') === true;
if (invokedDirectly) {
  const rows = await runSmoke(transportFromArgs(process.argv.slice(2)));
  for (const row of rows)
    console.log(`${row.passed ? 'PASS' : 'FAIL'}  ${row.check.padEnd(26)} ${row.detail}`);
  const failed = rows.filter((row) => !row.passed).length;
  console.log(
    failed === 0
      ? `\nsmoke: all ${rows.length} checks passed`
      : `\nsmoke: ${failed} of ${rows.length} checks failed`,
  );
  process.exit(failed === 0 ? 0 : 1);
}
