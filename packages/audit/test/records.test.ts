import { createHash } from 'node:crypto';
import { canonicalJson, createSilentLogger, ToolError, type ToolMiddleware } from '@toolgate/core';
import { expectFailure, type LogEntry, parseResultText, recordingLogger } from '@toolgate/core/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  type AuditBatch,
  type AuditRecord,
  type AuditSink,
  type ChainAnchor,
  createAudit,
  GENESIS_HASH,
  verifyAuditLines,
} from '../src/index.js';
import { closeConnections, memorySink, serve } from './helpers.js';

afterEach(closeConnections);

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const HEX64 = /^[0-9a-f]{64}$/;
const AUTH = { token: 't', clientId: 'client-7', scopes: ['orders:read'], extra: { sub: 'user-42' } };

/** The fields no test can predict, checked for form; the hash is checked by recomputing it. */
function varying(record: AuditRecord): Record<string, unknown> {
  const { hash, ...rest } = record;
  expect(hash).toBe(createHash('sha256').update(canonicalJson(rest)).digest('hex'));
  return {
    time: expect.stringMatching(ISO),
    durationMs: expect.any(Number),
    hash: expect.stringMatching(HEX64),
  };
}

/** The exact first record of a chain for a call by the test client: the given fields, and no others. */
function firstRecord(record: AuditRecord, fields: Record<string, unknown>): Record<string, unknown> {
  return {
    chainId: expect.stringMatching(/^[\x21-\x7e]+-\d+-[0-9a-f]{8}$/),
    seq: 1,
    prevHash: GENESIS_HASH,
    requestId: expect.any(Number),
    sessionId: 'sess-1',
    principal: 'user-42',
    clientId: 'client-7',
    caller: 'sub:|user-42',
    decisions: [],
    ...varying(record),
    ...fields,
  };
}

/** What resultBytes counts: the text of each text part, other parts as JSON. */
function bytesOf(result: { content: unknown }): number {
  let bytes = 0;
  for (const part of result.content as { type: string; text?: string }[]) {
    bytes += Buffer.byteLength(part.type === 'text' ? part.text! : JSON.stringify(part), 'utf8');
  }
  return bytes;
}

async function audited(
  middleware: ToolMiddleware[] = [],
  auditOptions: Parameters<typeof createAudit>[0] = {},
) {
  const memory = memorySink();
  const audit = createAudit({
    sink: memory.sink,
    logger: createSilentLogger(),
    ...auditOptions,
  });
  const log: LogEntry[] = [];
  const client = await serve(
    [audit, ...middleware],
    undefined,
    { sessionId: 'sess-1', authInfo: AUTH },
    recordingLogger(log),
  );
  return { audit, client, records: memory.records, log };
}

describe('one record per tools/call, with the exact fields', () => {
  it('a success: identity, redacted args, outcome ok, result size, first link of the chain', async () => {
    const { audit, client, records } = await audited();
    const args = {
      id: 'A-1',
      password: 'hunter2',
      note: 'use Bearer abc.def-ghi please',
      nested: { items: [{ apiKey: 'k-123', sku: 'postgres://app:s3cret@db.internal:5432/orders' }] },
    };
    const result = await client.callTool('get_order', args);
    await audit.flush();
    expect(records).toEqual([
      firstRecord(records[0]!, {
        tool: 'get_order',
        args: {
          id: 'A-1',
          password: '[REDACTED]',
          note: 'use Bearer [REDACTED] please',
          nested: { items: [{ apiKey: '[REDACTED]', sku: 'postgres://[REDACTED]@db.internal:5432/orders' }] },
        },
        outcome: 'ok',
        resultBytes: bytesOf(result),
      }),
    ]);
    expect(records[0]!.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('a fail result: its error code, no incident id', async () => {
    const { audit, client, records } = await audited();
    const result = await client.callTool('get_order', { id: 'missing' });
    await audit.flush();
    expect(records).toEqual([
      firstRecord(records[0]!, {
        tool: 'get_order',
        args: { id: 'missing' },
        outcome: 'not_found',
        resultBytes: bytesOf(result),
      }),
    ]);
  });

  it('a thrown error: outcome internal under the incident id the model sees and the log holds', async () => {
    const { audit, client, records, log } = await audited();
    const result = await client.callTool('get_order', { id: 'crash' });
    await audit.flush();
    const envelope = expectFailure(result);
    expect(envelope).toMatchObject({ error: 'internal', message: 'Internal error.' });
    expect(envelope.incidentId).toMatch(/^inc_/);
    expect(records).toEqual([
      firstRecord(records[0]!, {
        tool: 'get_order',
        args: { id: 'crash' },
        outcome: 'internal',
        incidentId: envelope.incidentId,
        resultBytes: bytesOf(result),
      }),
    ]);
    expect(log.filter((entry) => entry.level === 'error')).toEqual([
      {
        level: 'error',
        message: 'tool call failed',
        fields: expect.objectContaining({
          incidentId: envelope.incidentId,
          tool: 'get_order',
          err: expect.objectContaining({ message: 'connect ECONNREFUSED 10.0.0.5:5432' }),
        }),
      },
    ]);
  });

  it('a ToolError thrown by a middleware: its own code, as core answers it, and no incident id', async () => {
    const limiter: ToolMiddleware = async () => {
      throw new ToolError('rate_limited', 'Slow down.', { retryAfterMs: 500 });
    };
    const { audit, client, records } = await audited([limiter]);
    const result = await client.callTool('get_order', { id: 'A-1' });
    await audit.flush();
    expect(expectFailure(result)).toMatchObject({ error: 'rate_limited', retryAfterMs: 500 });
    expect(records[0]).toMatchObject({ outcome: 'rate_limited', resultBytes: bytesOf(result) });
    expect(records[0]).not.toHaveProperty('incidentId');
  });

  it('a ToolError with a cause thrown by a middleware: the incident id the model sees and the log holds', async () => {
    const store: ToolMiddleware = async () => {
      throw new ToolError('unavailable', 'The store is down.', {
        cause: new Error('connect ECONNREFUSED 10.0.0.7:6379'),
      });
    };
    const { audit, client, records, log } = await audited([store]);
    const result = await client.callTool('get_order', { id: 'A-1' });
    await audit.flush();
    const envelope = expectFailure(result);
    expect(envelope).toMatchObject({ error: 'unavailable', incidentId: expect.stringMatching(/^inc_/) });
    expect(records[0]).toMatchObject({
      outcome: 'unavailable',
      incidentId: envelope.incidentId,
      resultBytes: bytesOf(result),
    });
    expect(log.find((entry) => entry.fields.incidentId === envelope.incidentId)).toBeDefined();
  });

  it('a short-circuit by an inner middleware: its result and its decision', async () => {
    const guard: ToolMiddleware = async (ctx) => {
      ctx.decisions.push({
        by: 'repeat-guard',
        action: 'short-circuit',
        reason: 'same call',
        detail: { token: 'x' },
      });
      return { isError: false, content: [{ type: 'text', text: '{"ok":true,"cached":true}' }] };
    };
    const { audit, client, records } = await audited([guard]);
    const result = await client.callTool('get_order', { id: 'A-1' });
    await audit.flush();
    expect(parseResultText(result)).toEqual({ ok: true, cached: true });
    expect(records).toEqual([
      firstRecord(records[0]!, {
        tool: 'get_order',
        args: { id: 'A-1' },
        outcome: 'ok',
        resultBytes: bytesOf(result),
        decisions: [
          {
            by: 'repeat-guard',
            action: 'short-circuit',
            reason: 'same call',
            detail: { token: '[REDACTED]' },
          },
        ],
      }),
    ]);
  });

  it('an aborted call: one record, marked aborted, with the outcome the chain produced', async () => {
    const { audit, client, records } = await audited();
    const controller = new AbortController();
    const call = client.callTool('get_order', { id: 'slow' }, { signal: controller.signal });
    setTimeout(() => controller.abort('user cancelled'), 20);
    await expect(call).rejects.toThrow();
    await vi.waitFor(() => expect(records).toHaveLength(1));
    await audit.flush();
    expect(records).toEqual([
      firstRecord(records[0]!, {
        tool: 'get_order',
        args: { id: 'slow' },
        outcome: 'timeout',
        aborted: true,
        resultBytes: expect.any(Number),
      }),
    ]);
  });

  it('refused arguments: outcome invalid_argument, the raw arguments redacted', async () => {
    const { audit, client, records } = await audited();
    const result = await client.callTool('get_order', {
      id: 'x'.repeat(30),
      secret: 'sk_live_abcdefghijklmn',
    });
    await audit.flush();
    expect(expectFailure(result).error).toBe('invalid_argument');
    expect(records).toEqual([
      firstRecord(records[0]!, {
        tool: 'get_order',
        args: { id: 'x'.repeat(30), secret: '[REDACTED]' },
        outcome: 'invalid_argument',
        // Core completes the refusal's result after the chain returns (outside audit); the record holds
        // the size of the result as it passed audit.
        resultBytes: expect.any(Number),
      }),
    ]);
  });

  it('two argument keys that redact to one name are both recorded: a key cannot hide another value', async () => {
    const { audit, client, records } = await audited();
    // A model that wants an argument left out of the record names it like a secret, next to another
    // secret-shaped key: redacted, both keys read `[REDACTED]`, and one value used to replace the other.
    const value = {
      sk_live_aaaaaaaaaaaaaaaa: 'refund 5000 to acct 991',
      sk_live_bbbbbbbbbbbbbbbb: 'routine lookup',
      '[REDACTED]': 'a key spelled as the marker',
    };
    await client.callTool('echo', { value });
    await audit.flush();
    const recorded = (records[0]!.args as { value: Record<string, string> }).value;
    expect(Object.values(recorded).sort()).toEqual(
      ['a key spelled as the marker', 'refund 5000 to acct 991', 'routine lookup'].sort(),
    );
    expect(Object.keys(recorded).sort()).toEqual(['[REDACTED]', '[REDACTED] (2)', '[REDACTED] (3)']);
    expect(JSON.stringify(records[0])).not.toContain('sk_live_');
  });

  it('an unknown tool: the client gets JSON-RPC -32602; the record says not_found, unknownTool, 0 bytes', async () => {
    const { audit, client, records } = await audited();
    await expect(client.callTool('drop_tables', { token: 'abc' })).rejects.toThrow(
      /Unknown tool: drop_tables/,
    );
    await audit.flush();
    expect(records).toEqual([
      firstRecord(records[0]!, {
        tool: 'drop_tables',
        unknownTool: true,
        args: { token: '[REDACTED]' },
        outcome: 'not_found',
        resultBytes: 0,
      }),
    ]);
  });

  it('trace and span ids from an active span set outside audit', async () => {
    const memory = memorySink();
    const audit = createAudit({ sink: memory.sink });
    const tracing: ToolMiddleware = async (ctx, next) => {
      ctx.state.trace = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' };
      return next();
    };
    const client = await serve([tracing, audit]);
    await client.callTool('get_order', { id: 'A-1' });
    await audit.close();
    expect(memory.records[0]).toMatchObject({
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
      spanId: '00f067aa0ba902b7',
    });
    expect(memory.records[0]).not.toHaveProperty('sessionId');
    expect(memory.records[0]).not.toHaveProperty('principal');
  });

  it('numbers the records 1, 2, 3 and links each to the one before', async () => {
    const { audit, client, records } = await audited();
    await client.callTool('get_order', { id: 'A-1' });
    await client.callTool('get_order', { id: 'missing' });
    await expect(client.callTool('nope')).rejects.toThrow(/Unknown tool/);
    await audit.flush();
    expect(records.map((record) => record.seq)).toEqual([1, 2, 3]);
    expect(records[1]!.prevHash).toBe(records[0]!.hash);
    expect(records[2]!.prevHash).toBe(records[1]!.hash);
    await expect(verifyAuditLines(records.map((record) => JSON.stringify(record)))).resolves.toMatchObject({
      intact: true,
      records: 3,
      head: records[2]!.hash,
    });
  });
});

describe('args options and per-tool overrides', () => {
  it('extra secret keys, shape-only args for one tool, and a tool opted out', async () => {
    const { audit, client, records } = await audited([], {
      secretKeys: ['ssn'],
      tools: { get_order: { args: 'shape' }, echo: false },
    });
    await client.callTool('get_order', { id: 'A-1', nested: { items: [{ apiKey: 'k', sku: 's' }] } });
    await client.callTool('echo', { value: 'not recorded' });
    await expect(client.callTool('unknown', { ssn: '078-05-1120', n: 1 })).rejects.toThrow();
    await audit.flush();
    expect(records.map((record) => [record.tool, record.args])).toEqual([
      ['get_order', { id: 'string', nested: { items: [{ apiKey: 'string', sku: 'string' }] } }],
      ['unknown', { ssn: '[REDACTED]', n: 1 }],
    ]);
  });

  it('a per-tool secretKeys list replaces the global one for that tool', async () => {
    const { audit, client, records } = await audited([], {
      secretKeys: ['ssn'],
      tools: { echo: { secretKeys: ['value'] } },
    });
    await client.callTool('echo', { value: { ssn: 'kept: only value is secret here' } });
    await expect(client.callTool('other', { value: 'v', ssn: 's' })).rejects.toThrow();
    await audit.flush();
    expect(records.map((record) => record.args)).toEqual([
      { value: '[REDACTED]' },
      { value: 'v', ssn: '[REDACTED]' },
    ]);
  });
});

describe('hostile input', () => {
  it('tool names that are Object.prototype members are audited as unknown tools', async () => {
    const { audit, client, records } = await audited([], { tools: { get_order: { args: 'shape' } } });
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      await expect(client.callTool(name, { a: 1 })).rejects.toThrow(/Unknown tool/);
    }
    await audit.flush();
    expect(records.map((record) => [record.tool, record.unknownTool, record.args])).toEqual([
      ['constructor', true, { a: 1 }],
      ['__proto__', true, { a: 1 }],
      ['toString', true, { a: 1 }],
      ['hasOwnProperty', true, { a: 1 }],
    ]);
  });

  it('a huge argument is cut from the record, a long tool name is cut, NUL bytes survive, the chain holds', async () => {
    const { audit, client, records } = await audited();
    await client.callTool('echo', { value: 'A'.repeat(200_000) });
    await expect(client.callTool(`t${'x'.repeat(1000)}`, {})).rejects.toThrow(/Unknown tool/);
    await client.callTool('echo', { value: 'nul\u0000byte', deep: [[[[{ password: 'p' }]]]] });
    await audit.flush();
    expect(records[0]!.args).toBe('[Truncated: 200012 characters]');
    expect(records[0]!.outcome).toBe('ok');
    expect(records[1]!.tool).toBe(`t${'x'.repeat(255)}...`);
    expect(records[2]!.args).toEqual({ value: 'nul\u0000byte', deep: [[[[{ password: '[REDACTED]' }]]]] });
    expect(records[2]!.outcome).toBe('invalid_argument');
    const lines = records.map((record) => JSON.stringify(record));
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({ intact: true, records: 3 });
  });

  it('secrets in an unknown tool name are redacted before the name is cut, so no half of one is left', async () => {
    const { audit, client, records } = await audited();
    const names = [
      'get_order Bearer abcdefghijklmnopqrstuvwxyz012345',
      `${'x'.repeat(240)} postgres://app:s3cret-passw0rd@db.internal/orders`,
      `lookup ${'y'.repeat(236)} sk-abcdefghijklmnopqrstuvwxyz0123456789`,
    ];
    for (const name of names) await expect(client.callTool(name, {})).rejects.toThrow(/Unknown tool/);
    await audit.flush();
    expect(records.map((record) => [record.tool, record.unknownTool])).toEqual([
      ['get_order Bearer [REDACTED]', true],
      [`${'x'.repeat(240)} postgres://[RED...`, true],
      [`lookup ${'y'.repeat(236)} [REDACTED]`, true],
    ]);
    await expect(verifyAuditLines(records.map((record) => JSON.stringify(record)))).resolves.toMatchObject({
      intact: true,
      records: 3,
    });
  });

  it('arguments nested thousands deep are recorded to depth 32, in both modes, and the chain holds', async () => {
    let deep: unknown = 'bottom';
    for (let level = 0; level < 5000; level += 1) deep = { d: deep };
    const { audit, client, records } = await audited([], { tools: { nope_shape: { args: 'shape' } } });
    await expect(client.callTool('nope', { deep })).rejects.toThrow(/Unknown tool/);
    await expect(client.callTool('nope_shape', { deep })).rejects.toThrow(/Unknown tool/);
    await audit.flush();
    const depthOf = (value: unknown): [number, unknown] => {
      let depth = 0;
      let at = value;
      while (typeof at === 'object' && at !== null) {
        at = Object.values(at)[0];
        depth += 1;
      }
      return [depth, at];
    };
    expect(depthOf(records[0]!.args)).toEqual([32, '[Truncated]']);
    expect(depthOf(records[1]!.args)).toEqual([32, 'object']);
    await expect(verifyAuditLines(records.map((record) => JSON.stringify(record)))).resolves.toMatchObject({
      intact: true,
      records: 2,
    });
  });

  it('a `__proto__` argument cannot change what is recorded in shape mode or pollute objects', async () => {
    const { audit, client, records } = await audited([], { args: 'shape' });
    const args = JSON.parse('{"value":{"__proto__":{"polluted":true},"a":"b"}}') as Record<string, unknown>;
    await client.callTool('echo', args);
    await audit.flush();
    expect(JSON.parse(JSON.stringify(records[0]!.args))).toEqual(
      JSON.parse('{"value":{"__proto__":{"polluted":"boolean"},"a":"string"}}'),
    );
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    await expect(verifyAuditLines([JSON.stringify(records[0])])).resolves.toMatchObject({ intact: true });
  });
});

describe('linked chains through a custom sink', () => {
  const hash = 'a'.repeat(64);
  const sinkWith = (anchor: unknown) => {
    const lines: string[] = [];
    const sink: AuditSink = {
      head: async () => undefined,
      anchor: async () => anchor as ChainAnchor,
      write: async (batch) => void lines.push(...batch.lines),
    };
    return { lines, sink };
  };

  it('a new chain’s first record names the anchor the sink gives, inside its hash; later records do not', async () => {
    const { lines, sink } = sinkWith({ chainId: 'earlier', seq: 7, hash });
    const audit = createAudit({ sink, chainId: 'now' });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'A-1' });
    await client.callTool('get_order', { id: 'A-2' });
    await audit.close();
    const records = lines.map((line) => JSON.parse(line) as AuditRecord);
    expect(records.map((record) => record.after)).toEqual([{ chainId: 'earlier', seq: 7, hash }, undefined]);
    // The named record is not in these lines: verifying them alone reports it missing.
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({
      intact: false,
      brokenAt: 1,
      reason:
        'record 1 (seq 1) starts after record 7 of chain earlier, which is missing: a chain or its last records were deleted',
    });
  });

  it('a malformed anchor from a custom sink links nothing', async () => {
    for (const anchor of [{ chainId: 'x', seq: 0, hash }, { chainId: 'x', seq: 1, hash: 'zz' }, 'x', null]) {
      const { lines, sink } = sinkWith(anchor);
      const audit = createAudit({ sink, chainId: 'now' });
      await (await serve([audit])).callTool('get_order', { id: 'A-1' });
      await audit.close();
      await closeConnections();
      expect([anchor, (JSON.parse(lines[0]!) as AuditRecord).after]).toEqual([anchor, undefined]);
      await expect(verifyAuditLines(lines)).resolves.toMatchObject({ intact: true, records: 1 });
    }
  });
});

describe('what a custom sink reads from a batch', () => {
  it('bytes are the lines as UTF-8 JSON lines; rows, records and lines agree while write() runs; rows are refused once it settled', async () => {
    const kept: AuditBatch[] = [];
    const seen: { bytes: string; lines: readonly string[]; rows: number; seqs: number[] }[] = [];
    const sink: AuditSink = {
      write: async (batch) => {
        kept.push(batch);
        seen.push({
          bytes: Buffer.from(batch.bytes).toString('utf8'),
          lines: batch.lines,
          rows: batch.rows.length,
          seqs: batch.records.map((record) => record.seq),
        });
      },
    };
    const audit = createAudit({ sink, chainId: 'bytes' });
    const client = await serve([audit]);
    await client.callTool('get_order', { id: 'ünï "quoted" \\ \u2028' });
    await client.callTool('get_order', { id: 'A-2' });
    await audit.close();
    const lines = seen.flatMap((batch) => batch.lines);
    expect(seen.map((batch) => batch.bytes).join('')).toBe(`${lines.join('\n')}\n`);
    expect(seen.flatMap((batch) => batch.seqs)).toEqual([1, 2]);
    expect(seen.reduce((sum, batch) => sum + batch.rows, 0)).toBe(2);
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({ intact: true, records: 2 });
    // A sink that kept a batch past its write: the lines and bytes still read, rows say why not.
    expect(kept[0]!.lines.length).toBeGreaterThan(0);
    expect(Buffer.from(kept[0]!.bytes).toString('utf8').endsWith('\n')).toBe(true);
    const fresh: AuditSink = { write: async (batch) => void kept.push(batch) };
    const later = createAudit({ sink: fresh, chainId: 'later' });
    await (await serve([later])).callTool('get_order', { id: 'A-3' });
    await later.close();
    expect(() => kept.at(-1)!.rows).toThrow('audit batch: rows can be read only while write() runs');
  });
});
