/** Headers every Streamable HTTP POST carries. */
export const MCP_POST_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-06-18',
};

/** The JSON text of one `tools/call` request. */
export function toolsCallBody(id: number, name: string, args: Record<string, unknown>): string {
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
}

/** A JSON-RPC response as the client received it. */
let echoCounter = 0;

/**
 * An autocannon request that calls the trivial `echo` tool with new arguments every time (one counter
 * for the process: repeat-guard never answers one of them).
 */
export function distinctEchoRequest(): {
  setupRequest: (request: { body?: unknown }) => { body: string };
} {
  return {
    setupRequest: (request) => {
      echoCounter += 1;
      return { ...request, body: toolsCallBody(echoCounter, 'echo', { q: `v${echoCounter}` }) };
    },
  };
}

export interface JsonRpcResponse {
  jsonrpc: '2.0';
  id: number | string | null;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
}

/**
 * The JSON-RPC response in a Streamable HTTP answer: the body itself (JSON mode) or the `data:` of the
 * SSE `message` event (the default, which the order-service uses).
 */
export function parseMcpHttpBody(contentType: string, body: string): JsonRpcResponse {
  if (contentType.includes('text/event-stream')) {
    const data = body
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).trim())
      .find((line) => line !== '');
    if (data === undefined) throw new Error(`no data event in the SSE body: ${body.slice(0, 200)}`);
    return JSON.parse(data) as JsonRpcResponse;
  }
  return JSON.parse(body) as JsonRpcResponse;
}

/** POSTs one `tools/call` with fetch and returns the status and the JSON-RPC response. */
export async function postToolsCall(
  url: string,
  id: number,
  name: string,
  args: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ status: number; response: JsonRpcResponse | undefined; body: string }> {
  const answer = await fetch(url, {
    method: 'POST',
    headers: { ...MCP_POST_HEADERS, ...headers },
    body: toolsCallBody(id, name, args),
  });
  const body = await answer.text();
  const response =
    answer.status === 200 ? parseMcpHttpBody(answer.headers.get('content-type') ?? '', body) : undefined;
  return { status: answer.status, response, body };
}
