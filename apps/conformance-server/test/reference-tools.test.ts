import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  type ElicitRequest,
  ElicitRequestSchema,
  type LoggingMessageNotification,
  LoggingMessageNotificationSchema,
  type Progress,
} from '@modelcontextprotocol/sdk/types.js';
import { createSilentLogger } from '@toolgate/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningSessionHttp, startSessionHttp } from '../src/http.js';
import { createReferenceServer } from '../src/reference-server.js';
import { createStack, type Stack } from '../src/stack.js';
import { referenceTools } from '../src/tools.js';

let dir: string;
let stack: Stack;
let http: RunningSessionHttp;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'conformance-server-'));
  const logger = createSilentLogger();
  stack = createStack({ auditFile: join(dir, 'audit.jsonl'), logger });
  const tools = referenceTools();
  http = await startSessionHttp({
    port: 0,
    logger,
    createServer: () => createReferenceServer({ tools, middleware: stack.middleware, logger }),
  });
});

afterAll(async () => {
  await http?.close();
  await stack?.close();
  await rm(dir, { recursive: true, force: true });
});

interface Session {
  client: Client;
  logs: LoggingMessageNotification['params'][];
  elicitations: ElicitRequest['params'][];
}

/** A real SDK client over Streamable HTTP on loopback, answering elicitation and sampling. */
async function connect(): Promise<Session> {
  const client = new Client(
    { name: 'conformance-server-test', version: '0.0.0' },
    { capabilities: { elicitation: {}, sampling: {} } },
  );
  const session: Session = { client, logs: [], elicitations: [] };
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    session.logs.push(notification.params);
  });
  client.setRequestHandler(ElicitRequestSchema, (request) => {
    session.elicitations.push(request.params);
    return { action: 'accept', content: { username: 'ada', email: 'ada@example.test' } };
  });
  client.setRequestHandler(CreateMessageRequestSchema, () => ({
    role: 'assistant',
    content: { type: 'text', text: 'forty-two' },
    model: 'test-model',
    stopReason: 'endTurn',
  }));
  await client.connect(new StreamableHTTPClientTransport(new URL(http.url)));
  return session;
}

describe('reference tools over Streamable HTTP with sessions, through the full stack', () => {
  it('test_tool_with_progress reports 0, 50 and 100 of 100 on the call', async () => {
    const { client } = await connect();
    const progress: Progress[] = [];
    const result = await client.request(
      { method: 'tools/call', params: { name: 'test_tool_with_progress', arguments: {} } },
      CallToolResultSchema,
      { onprogress: (update) => progress.push(update) },
    );
    expect(progress).toEqual([
      { progress: 0, total: 100 },
      { progress: 50, total: 100 },
      { progress: 100, total: 100 },
    ]);
    expect(result.structuredContent).toEqual({ ok: true, progress: 100, outOf: 100, notified: true });
    await client.close();
  });

  it('test_tool_with_logging sends three info messages, filtered by the session level, on every call', async () => {
    const session = await connect();
    await session.client.setLoggingLevel('info');
    const first = await session.client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    expect(first.structuredContent).toEqual({ ok: true, messages: 3 });
    expect(session.logs).toEqual([
      { level: 'info', data: 'Tool execution started' },
      { level: 'info', data: 'Tool processing data' },
      { level: 'info', data: 'Tool execution completed' },
    ]);
    // The identical call runs again (opted out of repeat-guard) and the raised level silences it.
    await session.client.setLoggingLevel('warning');
    const second = await session.client.callTool({ name: 'test_tool_with_logging', arguments: {} });
    expect(second.structuredContent).toEqual({ ok: true, messages: 3 });
    expect(session.logs).toHaveLength(3);
    await session.client.close();
  });

  it('test_elicitation asks the person through the client and reports the answer', async () => {
    const session = await connect();
    const result = await session.client.callTool({
      name: 'test_elicitation',
      arguments: { message: 'Who are you?' },
    });
    expect(session.elicitations).toEqual([
      {
        mode: 'form',
        message: 'Who are you?',
        requestedSchema: {
          type: 'object',
          properties: {
            username: { type: 'string', description: "User's response" },
            email: { type: 'string', description: "User's email address" },
          },
          required: ['username', 'email'],
        },
      },
    ]);
    expect(result.structuredContent).toEqual({
      ok: true,
      action: 'accept',
      answer: { username: 'ada', email: 'ada@example.test' },
    });
    expect(result.content).toEqual([
      { type: 'text', text: JSON.stringify(result.structuredContent) },
      {
        type: 'text',
        text: 'User response: action=accept, content={"username":"ada","email":"ada@example.test"}',
      },
    ]);
    await session.client.close();
  });

  it('test_elicitation answers unavailable at once when the client cannot elicit', async () => {
    const client = new Client({ name: 'no-elicitation', version: '0.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(http.url)));
    const result = await client.callTool({ name: 'test_elicitation', arguments: { message: 'Who?' } });
    expect(result.isError).toBe(true);
    expect(JSON.parse((result.content as [{ text: string }])[0].text)).toEqual({
      ok: false,
      error: 'unavailable',
      message:
        'The server cannot ask the user a question (form elicitation): this client does not support it.',
      hint: 'Do not retry this call in the same way; tell the user this needs a client that supports it.',
      retryable: false,
    });
    await client.close();
  });

  it('test_sampling returns the answer of the client model', async () => {
    const { client } = await connect();
    const result = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'What is 6 x 7?' } });
    expect(result.structuredContent).toEqual({ ok: true, model: 'test-model', response: 'forty-two' });
    expect(result.content).toEqual([
      { type: 'text', text: JSON.stringify(result.structuredContent) },
      { type: 'text', text: 'LLM response: forty-two' },
    ]);
    await client.close();
  });

  it('test_error_handling: the model sees internal and an incident id, not the thrown message', async () => {
    const { client } = await connect();
    const result = await client.callTool({ name: 'test_error_handling', arguments: {} });
    expect(result.isError).toBe(true);
    const envelope = JSON.parse((result.content as [{ text: string }])[0].text) as { incidentId: string };
    expect(envelope).toEqual({
      ok: false,
      error: 'internal',
      message: 'Internal error.',
      hint: 'An unexpected error occurred. Do not retry; tell the user and quote the incident id.',
      retryable: false,
      incidentId: expect.stringMatching(/^inc_/),
    });
    expect(JSON.stringify(result)).not.toContain('intentionally');
    await client.close();
  });

  it('an identical static call in the same session is answered by repeat-guard', async () => {
    const { client } = await connect();
    const first = await client.callTool({ name: 'test_simple_text', arguments: {} });
    const second = await client.callTool({ name: 'test_simple_text', arguments: {} });
    expect(first.structuredContent).toEqual({
      ok: true,
      text: 'This is a simple text response for testing.',
    });
    expect(second.structuredContent).toEqual({
      ok: true,
      text: 'This is a simple text response for testing.',
      note: expect.stringMatching(
        /^Repeated call: this is the unchanged result of the identical call made .+\. Calling again with the same arguments will not change it; change the arguments or answer the user\.$/,
      ),
    });
    await client.close();
  });

  it('refuses a Host that is not 127.0.0.1:<port> or localhost:<port> (DNS rebinding)', async () => {
    const evil = await post({ host: 'evil.example.com', origin: 'http://evil.example.com' });
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.body)).toEqual({
      jsonrpc: '2.0',
      error: { code: -32000, message: 'Forbidden: Host header not allowed' },
      id: null,
    });
    const otherOrigin = await post({ host: `localhost:${http.port}`, origin: 'http://evil.example.com' });
    expect(otherOrigin.status).toBe(403);
    const local = await post({ host: `localhost:${http.port}`, origin: `http://localhost:${http.port}` });
    expect(local.status).toBe(200);
  });

  it('answers 404 for an unknown session', async () => {
    const reply = await post({ host: `127.0.0.1:${http.port}`, session: 'no-such-session' });
    expect(reply.status).toBe(404);
  });

  it('audit recorded every call of this file with its outcome', async () => {
    await stack.close();
    const records = (await readFile(join(dir, 'audit.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map(
        (line) =>
          JSON.parse(line) as { tool: string; outcome: string; decisions: { by: string; action: string }[] },
      );
    expect(
      records.map((record) => [
        record.tool,
        record.outcome,
        record.decisions.map((d) => `${d.by}:${d.action}`),
      ]),
    ).toEqual([
      ['test_tool_with_progress', 'ok', []],
      ['test_tool_with_logging', 'ok', []],
      ['test_tool_with_logging', 'ok', []],
      ['test_elicitation', 'ok', []],
      ['test_elicitation', 'unavailable', []],
      ['test_sampling', 'ok', []],
      ['test_error_handling', 'internal', ['redact-errors:internal']],
      ['test_simple_text', 'ok', []],
      ['test_simple_text', 'ok', ['repeat-guard:short-circuit']],
    ]);
  });
});

/** A raw initialize POST with chosen Host and Origin headers (fetch may not set Host). */
function post(headers: { host: string; origin?: string; session?: string }): Promise<{
  status: number;
  body: string;
}> {
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port: http.port,
        path: '/mcp',
        method: 'POST',
        headers: {
          host: headers.host,
          ...(headers.origin ? { origin: headers.origin } : {}),
          ...(headers.session ? { 'mcp-session-id': headers.session } : {}),
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
