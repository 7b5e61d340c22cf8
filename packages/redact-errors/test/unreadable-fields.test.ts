// A thrown error whose `code`, `name` or `stack` getter throws (an upstream library's lazy fields, a
// Proxy): the failure is still logged as itself under the incident id the model gets, and decided.
import {
  defineTool,
  type NextFn,
  type PolicyDecision,
  type ToolContext,
  type ToolDefinition,
  type ToolMiddleware,
} from '@toolgate/core';
import {
  expectFailure,
  type LogEntry,
  recordingLogger,
  serveTools,
  type TestClient,
} from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { failureClass } from '../src/failure-log.js';
import { createRedactErrors } from '../src/index.js';
import { INCIDENT_ID } from './helpers.js';

const open: TestClient[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((client) => client.close()));
});

const trap = (): never => {
  throw new Error('getter trap');
};

/** An upstream driver's error: its message readable, `code`, `name` and `stack` behind throwing getters. */
function lazyFieldsError(): Error {
  const error = new Error('connect ECONNREFUSED 10.0.0.5:5432 (upstream pool)');
  for (const key of ['stack', 'name', 'code'])
    Object.defineProperty(error, key, { get: trap, configurable: true });
  return error;
}

async function serve(make: () => unknown) {
  const entries: LogEntry[] = [];
  const decisions: PolicyDecision[][] = [];
  // Outside redact-errors: sees the decisions the call ended with.
  const recorder: ToolMiddleware = async (ctx: ToolContext, next: NextFn) => {
    const result = await next();
    decisions.push([...ctx.decisions]);
    return result;
  };
  const tool = defineTool({
    name: 'pool_query',
    description: 'Queries through an upstream pool (test).',
    input: {},
    handler: async () => {
      throw make();
    },
  }) as ToolDefinition;
  const client = await serveTools([tool], {
    middleware: [recorder, createRedactErrors({ logger: recordingLogger(entries) })],
    logger: recordingLogger(entries),
  });
  open.push(client);
  return { client, entries, decisions };
}

describe('an error whose code, name or stack getter throws', () => {
  it('is logged as itself under the incident id the model sees, and its decision is recorded', async () => {
    const { client, entries, decisions } = await serve(lazyFieldsError);
    const result = await client.callTool('pool_query', {});
    const envelope = expectFailure(result);
    expect(envelope).toMatchObject({ error: 'internal', message: 'Internal error.' });
    expect(envelope.incidentId).toMatch(INCIDENT_ID);
    expect(JSON.stringify(result)).not.toContain('10.0.0.5');
    const lines = entries.filter((entry) => entry.fields.incidentId === envelope.incidentId);
    expect(lines).toHaveLength(1);
    const [line] = lines;
    expect(line?.message).toBe('tool call failed');
    expect(line?.level).toBe('error');
    // The real error (what could be read of it), not the getter's exception.
    expect(line?.fields.error).toMatchObject({
      message: 'connect ECONNREFUSED 10.0.0.5:5432 (upstream pool)',
    });
    expect(JSON.stringify(line?.fields)).not.toContain('getter trap');
    expect(line?.fields.failure).toBe('pool_query:internal:Error');
    expect(decisions).toEqual([[{ by: 'redact-errors', action: 'internal', detail: { code: 'internal' } }]]);
  });

  it('a Proxy whose get trap throws for code, name and stack is still logged and decided', async () => {
    const lazy = new Set<PropertyKey>(['code', 'name', 'stack']);
    const { client, entries, decisions } = await serve(
      () =>
        new Proxy(new Error('proxied upstream failure'), {
          get: (target, key) => (lazy.has(key) ? trap() : Reflect.get(target, key)),
        }),
    );
    const envelope = expectFailure(await client.callTool('pool_query', {}));
    expect(envelope).toMatchObject({ error: 'internal', message: 'Internal error.' });
    const line = entries.find((entry) => entry.fields.incidentId === envelope.incidentId);
    expect(line?.message).toBe('tool call failed');
    expect(line?.fields.error).toMatchObject({ message: 'proxied upstream failure' });
    expect(JSON.stringify(line?.fields)).not.toContain('getter trap');
    expect(decisions[0]).toContainEqual({
      by: 'redact-errors',
      action: 'internal',
      detail: { code: 'internal' },
    });
  });

  it('failureClass reads each field on its own: a readable code still names the class', () => {
    const withCode = Object.defineProperty(lazyFieldsError(), 'code', { value: 'ECONNREFUSED' });
    expect(failureClass(withCode)).toBe('ECONNREFUSED');
    expect(failureClass(lazyFieldsError())).toBe('Error');
    const named = Object.defineProperty(lazyFieldsError(), 'name', { value: 'PoolError' });
    expect(failureClass(named)).toBe('PoolError');
  });
});
