// Cost of authz per call, against a core chain without it: an allowed call through a real client, and
// the middleware alone (canSee, as core asks before dispatch, plus the middleware itself).
// Run: npx -y pnpm@12.4.2 --filter @toolgate/authz bench
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { compareCalls, formatBenchTable } from '@toolgate/bench-harness';
import {
  compose,
  createSilentLogger,
  defineTool,
  ok,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import { createTestContext, serveTools } from '@toolgate/core/testing';
import * as z from 'zod';
import { createAuthz } from '../src/index.js';

const tool = defineTool({
  name: 'search_orders',
  description: 'Search orders by status.',
  input: { status: z.enum(['open', 'shipped']), page: z.number().int().min(0) },
  handler: async ({ status, page }) => ok({ items: [{ id: `${status}-${page}` }] }),
}) as ToolDefinition;

const authInfo: AuthInfo = {
  token: 'bench',
  clientId: 'desk',
  scopes: ['profile', 'orders:read', 'support'],
  expiresAt: Math.floor(Date.now() / 1000) + 3600,
  extra: { sub: 'user-1', iss: 'https://auth.example.test', tenant: 'acme' },
};

const scopesOnly = () => createAuthz({ require: { scopes: ['orders:read'] } });
const fullRule = () =>
  createAuthz({
    require: { scopes: ['orders:write'] },
    tools: {
      search_orders: {
        require: {
          scopes: ['profile'],
          anyOf: [['admin'], ['orders:read']],
          claims: { tenant: (v) => v === 'acme' },
        },
      },
    },
  });

const clientWith = (middleware: ToolMiddleware[]) =>
  serveTools([tool], { middleware, logger: createSilentLogger(), authInfo });

const bare = await clientWith([]);
const scoped = await clientWith([scopesOnly()]);
const full = await clientWith([fullRule()]);

console.log('## Through a real client (tools/call round trip), sequential\n');
console.log(
  formatBenchTable(
    await compareCalls(
      [
        { name: 'bare core chain', call: (i) => bare.callTool('search_orders', { status: 'open', page: i }) },
        {
          name: 'authz, scopes only (allowed)',
          call: (i) => scoped.callTool('search_orders', { status: 'open', page: i }),
        },
        {
          name: 'authz, scopes + anyOf + claim (allowed)',
          call: (i) => full.callTool('search_orders', { status: 'open', page: i }),
        },
      ],
      { rounds: 9, callsPerRound: 1000, warmup: 300 },
    ),
  ),
);

// The middleware alone: what core runs per call for authz (canSee before dispatch, then the middleware).
// One context per case, reused (decisions cleared), so building contexts does not drown the difference.
const handler = async () => ok({ items: [{ id: 'open-1' }] });
const runner = (middleware: ReturnType<typeof createAuthz> | undefined) => {
  const ctx = createTestContext({ tool, args: { status: 'open', page: 1 }, request: { authInfo } });
  const chain = compose(middleware ? [middleware] : []);
  return () => {
    ctx.decisions.length = 0;
    if (middleware && !middleware.canSee(tool, ctx.caller, ctx.request))
      throw new Error('bench tool must be visible');
    return chain(ctx, handler);
  };
};
const bareRun = runner(undefined);
const scopedRun = runner(scopesOnly());
const fullRun = runner(fullRule());

console.log('\n## The middleware alone (canSee + compose, one reused context), sequential\n');
console.log(
  formatBenchTable(
    await compareCalls(
      [
        { name: 'bare compose([])', call: bareRun },
        { name: 'authz, scopes only (allowed)', call: scopedRun },
        { name: 'authz, scopes + anyOf + claim (allowed)', call: fullRun },
      ],
      { rounds: 21, callsPerRound: 20000, warmup: 5000 },
    ),
  ),
);

await Promise.all([bare.close(), scoped.close(), full.close()]);
