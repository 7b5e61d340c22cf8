// Over real Streamable HTTP on 127.0.0.1: the session id and the negotiated protocol version header.
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { context, SpanKind, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { createSilentLogger, registerTools } from '@toolgate/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOtel } from '../src/index.js';
import {
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_JSONRPC_REQUEST_ID,
  ATTR_MCP_METHOD_NAME,
  ATTR_MCP_PROTOCOL_VERSION,
  ATTR_MCP_SESSION_ID,
  ATTR_NETWORK_TRANSPORT,
  ATTR_TOOLGATE_CALLER_KIND,
} from '../src/semconv.js';
import { createTelemetry, getOrder } from './harness.js';

const telemetry = createTelemetry();
let http: Server;
let client: Client;

beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const mcp = new McpServer({ name: 'otel-http-test', version: '1.0.0' });
  registerTools(mcp, [getOrder], {
    middleware: [
      createOtel({
        tracerProvider: telemetry.tracerProvider,
        meterProvider: telemetry.meterProvider,
        propagator: new W3CTraceContextPropagator(),
        transport: 'tcp',
        protocolVersion: '1999-01-01',
      }),
    ],
    logger: createSilentLogger(),
  });
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => 'sess-http-1' });
  await mcp.connect(transport);
  http = createServer((req, res) => void transport.handleRequest(req, res));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  client = new Client({ name: 'otel-http-client', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`)));
});

afterAll(async () => {
  await client.close();
  await new Promise((resolve) => http.close(resolve));
  await telemetry.shutdown();
  trace.disable();
  context.disable();
});

describe('otel over Streamable HTTP', () => {
  it('records the session id, the protocol version header over the option, tcp and the session caller kind', async () => {
    const result = await client.callTool({
      name: 'get_order',
      arguments: { id: 'A-1' },
      _meta: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
    });
    expect(result.isError).toBeUndefined();
    const spans = telemetry.exporter.getFinishedSpans();
    expect(spans).toHaveLength(1);
    expect(spans[0]!.kind).toBe(SpanKind.SERVER);
    expect(spans[0]!.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(spans[0]!.attributes).toEqual({
      [ATTR_MCP_METHOD_NAME]: 'tools/call',
      [ATTR_GEN_AI_OPERATION_NAME]: 'execute_tool',
      [ATTR_GEN_AI_TOOL_NAME]: 'get_order',
      [ATTR_JSONRPC_REQUEST_ID]: expect.stringMatching(/^\d+$/),
      [ATTR_MCP_SESSION_ID]: createHash('sha256').update('sess-http-1').digest('base64url').slice(0, 22),
      [ATTR_MCP_PROTOCOL_VERSION]: LATEST_PROTOCOL_VERSION,
      [ATTR_NETWORK_TRANSPORT]: 'tcp',
      [ATTR_TOOLGATE_CALLER_KIND]: 'session',
    });
  });
});
