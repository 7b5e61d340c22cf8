import { connect, createServer as createTcpServer } from 'node:net';
import { defineTool, ok } from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';
import { closeAll, INCIDENT_ID, seenEnvelope, serve } from './helpers.js';

let port: number;
beforeAll(async () => {
  // A loopback port that was just closed: every connect is a real ECONNREFUSED.
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

afterEach(closeAll);

const outage = defineTool({
  name: 'outage',
  description: 'Connects to a dependency that is down, or hits a bug.',
  input: { bug: z.boolean().optional() },
  handler: async ({ bug }) => {
    if (bug) throw new TypeError('Cannot read properties of undefined (reading "id")');
    await new Promise<void>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.destroy();
        resolve();
      });
      socket.on('error', reject);
    });
    return ok({});
  },
});

async function callMany(c: Awaited<ReturnType<typeof serve>>, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1) {
    const envelope = seenEnvelope(await c.callTool('outage', {}));
    expect(envelope.error).toBe('unavailable');
    ids.push(envelope.incidentId!);
  }
  return ids;
}

describe('log throttling: an outage does not write one line per call', () => {
  it('500 calls failing with the same ECONNREFUSED: 4 lines, the first with the stack, every incident id findable, the summary with the count', async () => {
    const entries: LogEntry[] = [];
    const redact = createRedactErrors();
    const c = await serve([outage], [redact], recordingLogger(entries));
    const ids = await callMany(c, 500);
    expect(new Set(ids).size).toBe(500);
    for (const id of ids) expect(id).toMatch(INCIDENT_ID);
    redact.close(); // the app's shutdown: pending summaries are written now
    expect(entries.map((entry) => entry.message)).toEqual([
      'tool call failed: known failure',
      'tool call failed: known failure (repeated: incident ids)',
      'tool call failed: known failure (repeated: incident ids)',
      'tool call failed: known failure (repeated)',
    ]);
    const [first, chunk1, chunk2, summary] = entries as [LogEntry, LogEntry, LogEntry, LogEntry];
    const failure = 'outage:unavailable:ECONNREFUSED';
    expect(first.level).toBe('warn');
    expect(first.fields).toMatchObject({
      tool: 'outage',
      incidentId: ids[0],
      outcome: 'unavailable',
      reason: 'ECONNREFUSED',
      failure,
      error: {
        message: `connect ECONNREFUSED 127.0.0.1:${port}`,
        stack: expect.stringContaining('ECONNREFUSED'),
        fields: { code: 'ECONNREFUSED', port },
      },
    });
    for (const chunk of [chunk1, chunk2]) {
      expect(chunk.level).toBe('warn');
      expect(chunk.fields).toMatchObject({ failure, firstIncidentId: ids[0] });
      expect(chunk.fields).not.toHaveProperty('error');
    }
    expect(chunk1.fields.incidentIds).toEqual(ids.slice(1, 201));
    expect(chunk2.fields.incidentIds).toEqual(ids.slice(201, 401));
    expect(summary.level).toBe('warn');
    expect(summary.fields).toEqual({
      tool: 'outage',
      outcome: 'unavailable',
      reason: 'ECONNREFUSED',
      failure,
      repeated: 499,
      intervalMs: 60_000,
      firstIncidentId: ids[0],
      incidentIds: ids.slice(401),
    });
  });

  it('each interval ends with a summary on its own (no close needed); every call is either a full line or counted', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([outage], [createRedactErrors({ logIntervalMs: 40 })], recordingLogger(entries));
    const ids = await callMany(c, 12);
    const full = () => entries.filter((entry) => entry.fields.error !== undefined);
    const summaries = () =>
      entries.filter((entry) => entry.message === 'tool call failed: known failure (repeated)');
    const counted = () => summaries().reduce((sum, entry) => sum + (entry.fields.repeated as number), 0);
    // However the 12 calls fell into 40 ms windows on this machine, each is logged whole or counted once.
    await vi.waitFor(() => expect(full().length + counted()).toBe(12), { timeout: 5_000, interval: 20 });
    const listed = [
      ...full().map((entry) => entry.fields.incidentId),
      ...summaries().flatMap((entry) => entry.fields.incidentIds as string[]),
    ];
    expect(listed.sort()).toEqual([...ids].sort());
  });

  it('two failure classes (a dependency down, a bug) each get their own first line with a stack', async () => {
    const entries: LogEntry[] = [];
    const redact = createRedactErrors();
    const c = await serve([outage], [redact], recordingLogger(entries));
    for (let i = 0; i < 5; i += 1) {
      await c.callTool('outage', {});
      await c.callTool('outage', { bug: true });
    }
    redact.close();
    const firsts = entries.filter((entry) => entry.fields.error !== undefined);
    expect(firsts.map((entry) => [entry.level, entry.message])).toEqual([
      ['warn', 'tool call failed: known failure'],
      ['error', 'tool call failed'],
    ]);
    expect(firsts[1]!.fields.failure).toMatch(/^outage:internal:TypeError at /);
    const summaries = entries.filter((entry) => entry.fields.repeated !== undefined);
    expect(summaries.map((entry) => [entry.fields.failure, entry.fields.repeated])).toEqual([
      ['outage:unavailable:ECONNREFUSED', 4],
      [firsts[1]!.fields.failure, 4],
    ]);
    expect(entries).toHaveLength(4);
  });
});
