// The red team's callers: a real SDK client over Streamable HTTP with one bearer token, and the
// answers read as the model reads them. Shared by the standalone and the services red-team files.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type CallToolResult, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

/** A real SDK client over HTTP with one bearer token; it keeps every log notification the server sends. */
export interface Caller {
  call(name: string, args: Record<string, unknown>, meta?: Record<string, unknown>): Promise<CallToolResult>;
  readonly logs: unknown[];
  close(): Promise<void>;
}

export async function connect(url: string, token: string): Promise<Caller> {
  const client = new Client({ name: 'redteam', version: '0.0.0' });
  const logs: unknown[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    logs.push(notification.params);
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return {
    logs,
    async call(name, args, meta) {
      return (await client.callTool({
        name,
        arguments: args,
        ...(meta ? { _meta: meta } : {}),
      })) as CallToolResult;
    },
    close: () => client.close(),
  };
}

export interface Envelope {
  ok?: boolean;
  error?: string;
  message?: string;
}
export const envelope = (result: CallToolResult): Envelope =>
  JSON.parse((result.content[0] as { text: string }).text) as Envelope;
export const confirmationOf = (result: CallToolResult): string => {
  const confirm = result._meta?.['toolgate/confirm'] as { confirmation?: string } | undefined;
  if (confirm?.confirmation === undefined) throw new Error(`no confirmation in ${JSON.stringify(result)}`);
  return confirm.confirmation;
};

/** A write as the model makes it without elicitation: ask, show the person, call again with the confirmation. */
export async function confirmedWrite(
  caller: Caller,
  tool: string,
  args: Record<string, unknown>,
  meta?: Record<string, unknown>,
): Promise<CallToolResult> {
  const first = await caller.call(tool, args, meta);
  if (envelope(first).error !== 'confirmation_required') return first;
  return caller.call(tool, { ...args, confirmation: confirmationOf(first) }, meta);
}
