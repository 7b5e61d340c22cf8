import type { PGlite } from '@electric-sql/pglite';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createSilentLogger, registerTools } from '@toolgate/core';
import { connectTestClient, expectFailure } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgliteQueryable, sqlTool } from '../src/index.js';
import { createPGlite } from './pglite.js';

describe('equals filter with a pattern', () => {
  let pglite: PGlite;
  beforeAll(async () => {
    pglite = await createPGlite();
    await pglite.exec(`CREATE TABLE orders (order_id text PRIMARY KEY, status text NOT NULL);
      INSERT INTO orders VALUES ('4000000000007919', 'paid');`);
  });
  afterAll(() => pglite.close());

  const tool = () =>
    sqlTool({
      name: 'get_order_status',
      description: 'One order by its 16-digit id.',
      db: pgliteQueryable(pglite),
      from: 'orders',
      columns: ['order_id', 'status'],
      filters: {
        order_id: {
          kind: 'equals',
          type: 'string',
          pattern: /^\d{16}$/,
          required: true,
          description: 'The id',
        },
      },
      limit: { default: 1, max: 1 },
    });

  it('accepts a matching value and refuses any other before SQL runs', async () => {
    const server = new McpServer({ name: 't', version: '1' });
    registerTools(server, [tool()], { logger: createSilentLogger() });
    const client = await connectTestClient(server);
    try {
      const found = await client.callTool('get_order_status', { order_id: '4000000000007919' });
      expect(found.structuredContent).toMatchObject({
        ok: true,
        items: [{ order_id: '4000000000007919', status: 'paid' }],
      });
      const refused = expectFailure(await client.callTool('get_order_status', { order_id: "1' OR '1'='1" }));
      expect(refused.error).toBe('invalid_argument');
      expect(refused.fields?.[0]?.path).toBe('order_id');
    } finally {
      await client.close();
    }
  });
});
