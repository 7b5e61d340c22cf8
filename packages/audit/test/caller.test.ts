import { createSilentLogger, defineTool, ok, type ToolDefinition, ToolError } from '@toolgate/core';
import { serveTools, type TestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { type AuditRecord, createAudit } from '../src/index.js';
import { memorySink } from './helpers.js';

// A tool that takes the customer id from the token's claims, never from the model.
const myOrders = defineTool({
  name: 'my_orders',
  description: 'The caller’s own orders.',
  input: { status: z.string() },
  bind: (request) => {
    const customerId = request.authInfo?.extra?.customerId;
    if (typeof customerId !== 'number') throw new ToolError('permission_denied', 'No customer.');
    return { customerId, apiToken: 'sk_live_0123456789abcdef' };
  },
  handler: async ({ status }, ctx) => ok({ status, customerId: ctx.bindings.customerId }),
});

const open: TestClient[] = [];
afterEach(async () => {
  for (const client of open.splice(0)) await client.close();
});

async function callAs(customerId: number, records: AuditRecord[], audit: ReturnType<typeof createAudit>) {
  const client = await serveTools([myOrders as ToolDefinition], {
    middleware: [audit],
    logger: createSilentLogger(),
    authInfo: { token: `token-${customerId}`, clientId: 'portal', scopes: [], extra: { customerId } },
  });
  open.push(client);
  await client.callTool('my_orders', { status: 'paid' });
  await audit.flush();
  return records.at(-1)!;
}

describe('caller identity and bindings in records (issue 19)', () => {
  it('two tokens of one client with different claims get two different caller ids; bindings recorded, secrets redacted', async () => {
    const memory = memorySink();
    const audit = createAudit({ sink: memory.sink, logger: createSilentLogger() });
    const first = await callAs(42, memory.records, audit);
    const second = await callAs(43, memory.records, audit);
    const again = await callAs(42, memory.records, audit);
    await audit.close();

    expect(memory.records).toHaveLength(3);
    // Same client id, no subject: principal alone cannot tell them apart, caller can.
    expect([first.principal, second.principal]).toEqual(['portal', 'portal']);
    expect([first.clientId, second.clientId]).toEqual(['portal', 'portal']);
    expect(first.caller).toMatch(/^client:portal#[A-Za-z0-9_-]{22}$/);
    expect(second.caller).toMatch(/^client:portal#[A-Za-z0-9_-]{22}$/);
    expect(second.caller).not.toBe(first.caller);
    // The same claims again: the same identity.
    expect(again.caller).toBe(first.caller);
    expect(first.bindings).toEqual({ customerId: 42, apiToken: '[REDACTED]' });
    expect(second.bindings).toEqual({ customerId: 43, apiToken: '[REDACTED]' });
    expect(first.outcome).toBe('ok');
  });

  it('stdio-like calls without auth record caller "local" and no bindings field', async () => {
    const memory = memorySink();
    const audit = createAudit({ sink: memory.sink, logger: createSilentLogger() });
    const plain = defineTool({
      name: 'plain',
      description: 'No bindings.',
      input: {},
      handler: async () => ok({}),
    });
    const client = await serveTools([plain as ToolDefinition], {
      middleware: [audit],
      logger: createSilentLogger(),
    });
    open.push(client);
    await client.callTool('plain', {});
    await audit.close();
    expect(memory.records).toHaveLength(1);
    expect(memory.records[0]!.caller).toBe('local');
    expect('bindings' in memory.records[0]!).toBe(false);
  });
});
