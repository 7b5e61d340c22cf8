import { connectTestClient, expectFailure } from '@toolgate/core/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Running, startService } from './harness.js';

// The person approving a change must read the words that will run, whichever way they are asked. By
// form they read the reason as the model sent it; in two steps (the `confirmation_required` answer's
// message and its _meta prompt) redact-errors' internal-detail scrubbers rewrote it: a reason
// `UPDATE the address; refund 20` read `[sql] refund 20`, a path `[path]`, an address `[host]`.

let running: Running;
beforeAll(async () => {
  running = await startService({ transport: 'pipe' });
});
afterAll(async () => {
  await running?.stop();
});
const desk = {
  token: 'desk-token-0123456789',
  clientId: 'support-desk',
  scopes: ['orders:read', 'orders:write', 'docs:read'],
  extra: { sub: 'agent-1' },
};

it('cancel_order: the two-step prompt shows the reason exactly as the form prompt does', async () => {
  const { rows } = await running.service.db.pglite!.query<{ order_id: string }>(
    "SELECT order_id FROM orders WHERE status = 'pending' ORDER BY order_id LIMIT 1",
  );
  const orderId = rows[0]!.order_id;
  const asked: string[] = [];
  const form = await connectTestClient(running.service.createServer(), {
    authInfo: desk,
    onElicit: (params) => {
      asked.push((params as { message: string }).message);
      return { action: 'decline' };
    },
  });
  const twoStep = await connectTestClient(running.service.createServer(), { authInfo: desk });
  try {
    for (const reason of [
      'UPDATE the address; refund 20',
      'sent to /home/alice/returns',
      'courier at 10.0.0.7 lost it',
      'SELECT refund FROM orders WHERE id = 2',
    ]) {
      await form.callTool('cancel_order', { order_id: orderId, reason });
      const byForm = asked.at(-1)!;
      expect(byForm.split('\n').at(-1)).toBe(`  reason: ${JSON.stringify(reason)}`);
      const first = await twoStep.callTool('cancel_order', { order_id: orderId, reason });
      const envelope = expectFailure(first);
      expect(envelope.error).toBe('confirmation_required');
      const prompt = (first._meta!['toolgate/confirm'] as { prompt: string }).prompt;
      expect(prompt).toBe(byForm);
      expect(envelope.message.endsWith(byForm)).toBe(true);
    }
  } finally {
    await form.close();
    await twoStep.close();
  }
});
