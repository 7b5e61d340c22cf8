import {
  defineTool,
  ERROR_CODE_DEFAULTS,
  fail,
  ok,
  type ToolContext,
  ToolError,
  type ToolMiddleware,
  type ToolResult,
} from '@toolgate/core';
import { type LogEntry, recordingLogger } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createRedactErrors } from '../src/index.js';
import { closeAll, INCIDENT_ID, seenEnvelope, serve } from './helpers.js';

const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U';
const SECRETS = [
  '/srv/app/src/db.js',
  'SELECT',
  'customers',
  'hunter2',
  'postgres://',
  'db.internal',
  '10.0.0.5',
  '5432',
  JWT,
  'eyJ',
];
const INTERNAL = { ok: false, error: 'internal', hint: ERROR_CODE_DEFAULTS.internal.hint, retryable: false };

let thrown: Error | undefined;
const leaky = defineTool({
  name: 'leaky',
  description: 'Throws, returns or succeeds with internals in its text.',
  input: { mode: z.enum(['throw', 'cause', 'fail', 'raw', 'internal', 'ok', 'tool-error']) },
  handler: ({ mode }) => {
    if (mode === 'throw' || mode === 'cause') {
      const message =
        'query SELECT id, email FROM customers WHERE id = $1 failed at /srv/app/src/db.js:42:7 on ' +
        `postgres://app:hunter2@db.internal:5432/orders via 10.0.0.5:5432 as ${JWT}`;
      thrown =
        mode === 'throw' ? new Error(message) : new Error('lookup failed', { cause: new Error(message) });
      throw thrown;
    }
    if (mode === 'fail')
      return fail('not_found', 'No file /srv/data/orders/42.json.', { hint: 'Check the id.' });
    if (mode === 'internal') return fail('internal', 'db exploded at /srv/app/db.js:1:2');
    if (mode === 'tool-error') throw new ToolError('unavailable', 'carrier at 10.0.0.9:443 is down');
    if (mode === 'raw') {
      return {
        isError: true,
        content: [{ type: 'text', text: 'failed at /srv/app/x.js:1:2 with password=hunter2' }],
        structuredContent: {
          detail: {
            query: 'SELECT * FROM users WHERE id = 1',
            password: 'hunter2',
            hosts: ['10.0.0.5:5432', 'Order shipped. Call again.'],
            '/srv/app/keys.json': 1,
          },
        },
      } satisfies ToolResult;
    }
    return ok({ file: '/srv/data/orders/42.json', host: 'db.internal' });
  },
});

afterEach(async () => {
  thrown = undefined;
  await closeAll();
});

describe('createRedactErrors: a thrown error', () => {
  it('the model sees internal with an incident id and none of the internals; the log has the id and the full stack', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([leaky], [createRedactErrors()], recordingLogger(entries));
    const result = await c.callTool('leaky', { mode: 'throw' });
    const envelope = seenEnvelope(result);
    expect(envelope).toEqual({
      ...INTERNAL,
      message: 'Internal error.',
      incidentId: expect.stringMatching(INCIDENT_ID),
    });
    expect(result.structuredContent).toBeUndefined();
    const seen = JSON.stringify(result);
    for (const secret of SECRETS) expect(seen).not.toContain(secret);

    const errors = entries.filter((entry) => entry.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toBe('tool call failed');
    expect(errors[0]!.fields).toEqual({
      tool: 'leaky',
      requestId: expect.any(Number),
      sessionId: undefined,
      incidentId: envelope.incidentId,
      outcome: 'internal',
      error: { name: 'Error', message: thrown!.message, stack: thrown!.stack },
      // The failure class repeats are counted under: tool, code, and (without an error code) name and throw site.
      failure: `leaky:internal:Error ${/\n\s*(at [^\n]*)/.exec(thrown!.stack!)![1]}`,
    });
    expect(thrown!.stack).toContain('hunter2');
    expect(thrown!.stack).toMatch(/\n {4}at .*redact-errors\.test\.ts:\d+:\d+/);
  });

  it('logs the whole cause chain, each with its stack', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([leaky], [createRedactErrors()], recordingLogger(entries));
    const envelope = seenEnvelope(await c.callTool('leaky', { mode: 'cause' }));
    const cause = thrown!.cause as Error;
    expect(entries.find((entry) => entry.level === 'error')!.fields.error).toEqual({
      name: 'Error',
      message: 'lookup failed',
      stack: thrown!.stack,
      cause: { name: 'Error', message: cause.message, stack: cause.stack },
    });
    expect(entries.find((entry) => entry.level === 'error')!.fields.incidentId).toBe(envelope.incidentId);
  });

  it('the incident id the model sees is ctx.incidentId, so an outer middleware (audit) records the same one', async () => {
    let outer: { incidentId: string | undefined; result: ToolResult } | undefined;
    const audit: ToolMiddleware = async (ctx, next) => {
      const result = await next();
      outer = { incidentId: ctx.incidentId, result };
      return result;
    };
    const c = await serve([leaky], [audit, createRedactErrors()], recordingLogger([]));
    const result = await c.callTool('leaky', { mode: 'throw' });
    expect(outer!.incidentId).toBe(seenEnvelope(result).incidentId);
    expect(outer!.result).toEqual(result);
  });

  it('keeps an incident id set earlier in the chain', async () => {
    const early: ToolMiddleware = (ctx, next) => {
      ctx.incidentId = 'inc_set_by_outer';
      return next();
    };
    const c = await serve([leaky], [early, createRedactErrors()], recordingLogger([]));
    expect(seenEnvelope(await c.callTool('leaky', { mode: 'throw' })).incidentId).toBe('inc_set_by_outer');
  });

  it('records its decision for audit and tracing', async () => {
    let decisions: ToolContext['decisions'] = [];
    const audit: ToolMiddleware = async (ctx, next) => {
      const result = await next();
      decisions = ctx.decisions;
      return result;
    };
    const c = await serve([leaky], [audit, createRedactErrors()], recordingLogger([]));
    await c.callTool('leaky', { mode: 'throw' });
    expect(decisions).toEqual([{ by: 'redact-errors', action: 'internal', detail: { code: 'internal' } }]);
  });

  it('a ToolError thrown by a middleware below keeps its code, hint and retry, with its message scrubbed', async () => {
    const breaker: ToolMiddleware = () => {
      throw new ToolError('unavailable', 'breaker open for postgres://u:p@db.internal:5432/x', {
        hint: 'Try again in a minute.',
        retryAfterMs: 60_000,
      });
    };
    const entries: LogEntry[] = [];
    const c = await serve([leaky], [createRedactErrors(), breaker], recordingLogger(entries));
    expect(seenEnvelope(await c.callTool('leaky', { mode: 'ok' }))).toEqual({
      ok: false,
      error: 'unavailable',
      message: 'breaker open for [connection]',
      hint: 'Try again in a minute.',
      retryable: true,
      retryAfterMs: 60_000,
    });
    expect(entries).toEqual([
      {
        level: 'debug',
        message: 'redact-errors: scrubbed an error result',
        fields: expect.objectContaining({
          origin: 'thrown',
          removed: { 'url-credentials': 1, 'connection-url': 1 },
        }),
      },
    ]);
  });

  it('a ToolError with a cause gets an incident id, and its cause goes to the log', async () => {
    const root = Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), { code: 'ECONNREFUSED' });
    const breaker: ToolMiddleware = () => {
      throw new ToolError('unavailable', 'Orders are unavailable.', { cause: root });
    };
    const entries: LogEntry[] = [];
    const c = await serve([leaky], [createRedactErrors(), breaker], recordingLogger(entries));
    const envelope = seenEnvelope(await c.callTool('leaky', { mode: 'ok' }));
    expect(envelope).toEqual({
      ok: false,
      error: 'unavailable',
      message: 'Orders are unavailable.',
      hint: ERROR_CODE_DEFAULTS.unavailable.hint,
      retryable: true,
      incidentId: expect.stringMatching(INCIDENT_ID),
    });
    expect(entries).toHaveLength(1);
    expect(entries[0]!.level).toBe('warn');
    expect(entries[0]!.fields.incidentId).toBe(envelope.incidentId);
    expect(entries[0]!.fields.error).toMatchObject({
      name: 'ToolError',
      cause: { message: root.message, stack: root.stack, fields: { code: 'ECONNREFUSED' } },
    });
  });

  it('a handler throwing a ToolError (answered by core) is scrubbed the same way', async () => {
    const c = await serve([leaky], [createRedactErrors()], recordingLogger([]));
    expect(seenEnvelope(await c.callTool('leaky', { mode: 'tool-error' }))).toEqual({
      ok: false,
      error: 'unavailable',
      message: 'carrier at [host] is down',
      hint: ERROR_CODE_DEFAULTS.unavailable.hint,
      retryable: true,
    });
  });
});

describe('createRedactErrors: a returned error result', () => {
  it('a returned fail() with a path is scrubbed in content and _meta alike; the debug log says what was removed', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([leaky], [createRedactErrors()], recordingLogger(entries));
    const result = await c.callTool('leaky', { mode: 'fail' });
    expect(result).toEqual({
      isError: true,
      content: [
        {
          type: 'text',
          text: '{"ok":false,"error":"not_found","message":"No file [path].","hint":"Check the id.","retryable":false}',
        },
      ],
      _meta: {
        'toolgate/error': {
          ok: false,
          error: 'not_found',
          message: 'No file [path].',
          hint: 'Check the id.',
          retryable: false,
        },
      },
    });
    expect(entries).toEqual([
      {
        level: 'debug',
        message: 'redact-errors: scrubbed an error result',
        fields: {
          tool: 'leaky',
          requestId: expect.any(Number),
          sessionId: undefined,
          incidentId: undefined,
          origin: 'returned',
          removed: { 'posix-path': 1 },
          original: {
            ok: false,
            error: 'not_found',
            message: 'No file /srv/data/orders/42.json.',
            hint: 'Check the id.',
            retryable: false,
          },
        },
      },
    ]);
  });

  it('a returned internal failure without an incident id gets one, logged with the original', async () => {
    const entries: LogEntry[] = [];
    const c = await serve([leaky], [createRedactErrors()], recordingLogger(entries));
    const envelope = seenEnvelope(await c.callTool('leaky', { mode: 'internal' }));
    expect(envelope).toEqual({
      ...INTERNAL,
      message: 'db exploded at [path]',
      incidentId: expect.stringMatching(INCIDENT_ID),
    });
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      level: 'warn',
      message: 'tool returned an internal failure',
      fields: { incidentId: envelope.incidentId, original: { message: 'db exploded at /srv/app/db.js:1:2' } },
    });
  });

  it('a raw isError result: the model sees none of its path, SQL, host or secret', async () => {
    // Exact scrubbing of a raw result is in model-facing.test.ts (scrubErrorResult); core's boundary
    // may also turn a raw result into `internal`, so through a client only what leaks is asserted.
    const c = await serve([leaky], [createRedactErrors()], recordingLogger([]));
    const result = await c.callTool('leaky', { mode: 'raw' });
    expect(result.isError).toBe(true);
    const seen = JSON.stringify(result);
    for (const leak of ['/srv/app', 'hunter2', 'SELECT', '10.0.0.5', 'keys.json'])
      expect(seen).not.toContain(leak);
  });

  it('core’s own invalid_argument answer passes unchanged', async () => {
    const bare = await serve([leaky], [], recordingLogger([]));
    const expected = await bare.callTool('leaky', { mode: 'nope', extra: 1 });
    const c = await serve([leaky], [createRedactErrors()], recordingLogger([]));
    const result = await c.callTool('leaky', { mode: 'nope', extra: 1 });
    expect(seenEnvelope(result).error).toBe('invalid_argument');
    expect(result).toEqual(expected);
  });

  it('an unknown tool is still the JSON-RPC error -32602', async () => {
    const c = await serve([leaky], [createRedactErrors()], recordingLogger([]));
    await expect(c.callTool('no_such_tool', {})).rejects.toThrow(/-32602.*Unknown tool: no_such_tool/);
  });
});

describe('createRedactErrors: success results', () => {
  it('pass untouched, paths and hosts included (scrubbing successes is not this package’s job)', async () => {
    const c = await serve([leaky], [createRedactErrors()], recordingLogger([]));
    expect(await c.callTool('leaky', { mode: 'ok' })).toEqual({
      content: [{ type: 'text', text: '{"ok":true,"file":"/srv/data/orders/42.json","host":"db.internal"}' }],
      structuredContent: { ok: true, file: '/srv/data/orders/42.json', host: 'db.internal' },
    });
  });
});

describe('createRedactErrors: options', () => {
  it('extra patterns apply after the defaults; a tool may override them or opt out', async () => {
    const refs = defineTool({
      name: 'refs',
      description: 'Fails naming internal refs.',
      input: {},
      handler: () => fail('not_found', 'Ticket JIRA-1234 and ORD-77 at /srv/x/y.'),
    });
    const legacy = defineTool({
      name: 'legacy',
      description: 'Opted out.',
      input: { boom: z.boolean() },
      handler: ({ boom }) => {
        if (boom) throw new Error('at /srv/legacy/x.js');
        return fail('not_found', 'Ticket JIRA-1234 at /srv/x/y.');
      },
    });
    const middleware = createRedactErrors({
      patterns: [{ name: 'ticket', pattern: /\bJIRA-\d+/, replace: '[ticket]' }],
      tools: {
        legacy: false,
        other: { patterns: [{ name: 'order', pattern: /\bORD-\d+/g, replace: '[order]' }] },
      },
    });
    const entries: LogEntry[] = [];
    const c = await serve([refs, legacy], [middleware], recordingLogger(entries));
    expect(seenEnvelope(await c.callTool('refs', {})).message).toBe('Ticket [ticket] and ORD-77 at [path].');
    expect(seenEnvelope(await c.callTool('legacy', { boom: false })).message).toBe(
      'Ticket JIRA-1234 at /srv/x/y.',
    );
    // Opted out: the throw reaches core's last-resort guard, which answers internal and logs it.
    const envelope = seenEnvelope(await c.callTool('legacy', { boom: true }));
    expect(envelope).toEqual({
      ...INTERNAL,
      message: 'Internal error.',
      incidentId: expect.stringMatching(INCIDENT_ID),
    });
    expect(entries.at(-1)).toMatchObject({
      level: 'error',
      message: 'tool call failed',
      fields: { incidentId: envelope.incidentId },
    });
  });

  it('a per-tool override replaces that field only', async () => {
    const refs = defineTool({
      name: 'refs',
      description: 'Fails naming internal refs.',
      input: {},
      handler: () => fail('not_found', 'Ticket JIRA-1234 and ORD-77.'),
    });
    const middleware = createRedactErrors({
      patterns: [{ name: 'ticket', pattern: /\bJIRA-\d+/, replace: '[ticket]' }],
      internalMessage: 'Something broke.',
      tools: { refs: { patterns: [{ name: 'order', pattern: /\bORD-\d+/g, replace: '[order]' }] } },
    });
    const c = await serve([refs, leaky], [middleware], recordingLogger([]));
    expect(seenEnvelope(await c.callTool('refs', {})).message).toBe('Ticket JIRA-1234 and [order].');
    expect(seenEnvelope(await c.callTool('leaky', { mode: 'throw' })).message).toBe('Something broke.');
  });

  it('a classify hook maps errors of its own; its message is scrubbed like any other', async () => {
    const quota = defineTool({
      name: 'quota',
      description: 'Hits a quota.',
      input: {},
      handler: () => {
        throw Object.assign(new Error('quota'), { name: 'QuotaError' });
      },
    });
    const middleware = createRedactErrors({
      classify: (error) =>
        (error as Error).name === 'QuotaError'
          ? {
              code: 'rate_limited',
              message: 'Quota of api.vendor.com used up.',
              retryAfterMs: 1000,
              reason: 'vendor quota',
            }
          : undefined,
    });
    const entries: LogEntry[] = [];
    const c = await serve([quota], [middleware], recordingLogger(entries));
    const envelope = seenEnvelope(await c.callTool('quota', {}));
    expect(envelope).toEqual({
      ok: false,
      error: 'rate_limited',
      message: 'Quota of [host] used up.',
      hint: ERROR_CODE_DEFAULTS.rate_limited.hint,
      retryable: true,
      retryAfterMs: 1000,
      incidentId: expect.stringMatching(INCIDENT_ID),
    });
    expect(entries[0]).toMatchObject({
      level: 'warn',
      message: 'tool call failed: known failure',
      fields: { incidentId: envelope.incidentId, outcome: 'rate_limited', reason: 'vendor quota' },
    });
  });

  it('a classify hook that throws cannot break the call: it is logged and the built-in mapping answers', async () => {
    const refused = defineTool({
      name: 'refused',
      description: 'Connection refused.',
      input: {},
      handler: () => {
        throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.5:5432'), { code: 'ECONNREFUSED' });
      },
    });
    const middleware = createRedactErrors({
      classify: () => {
        throw new Error('hook bug');
      },
    });
    const entries: LogEntry[] = [];
    const c = await serve([refused], [middleware], recordingLogger(entries));
    expect(seenEnvelope(await c.callTool('refused', {}))).toMatchObject({
      error: 'unavailable',
      message: 'A service this tool depends on is unavailable.',
    });
    expect(entries.map((entry) => [entry.level, entry.message])).toEqual([
      ['warn', 'redact-errors: classify hook threw'],
      ['warn', 'tool call failed: known failure'],
    ]);
  });

  it('logs to options.logger instead of ctx.logger when given', async () => {
    const own: LogEntry[] = [];
    const server: LogEntry[] = [];
    const c = await serve(
      [leaky],
      [createRedactErrors({ logger: recordingLogger(own) })],
      recordingLogger(server),
    );
    const envelope = seenEnvelope(await c.callTool('leaky', { mode: 'throw' }));
    expect(own.map((entry) => entry.fields.incidentId)).toEqual([envelope.incidentId]);
    expect(server).toEqual([]);
  });
});
