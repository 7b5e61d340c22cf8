import { canonicalJson } from '@toolgate/core';
import { describe, expect, it } from 'vitest';
import { sealRecord, type UnsealedRecord } from '../src/chain.js';
import { GENESIS_HASH } from '../src/index.js';

const full: UnsealedRecord = {
  time: '2026-01-02T03:04:05.006Z',
  requestId: 'req-1',
  sessionId: 's',
  principal: 'p',
  clientId: 'c',
  tool: 'ünïcode "tool"',
  unknownTool: true,
  args: { z: [1, { b: 2, a: null }], a: 'x\u2028y', n: 1e21 },
  outcome: 'internal',
  incidentId: 'inc_x',
  aborted: true,
  durationMs: 1.234,
  resultBytes: 0,
  traceId: 't',
  spanId: 'sp',
  decisions: [{ by: 'x', action: 'y', detail: { k: 1, a: 2 } }],
};

describe('sealRecord', () => {
  it('hashes exactly core canonicalJson of the record without its hash, every field present', () => {
    const { record, line } = sealRecord({ ...full }, { seq: 41, hash: 'f'.repeat(64) });
    const { hash, ...rest } = record;
    expect(rest).toEqual({ ...full, seq: 42, prevHash: 'f'.repeat(64) });
    expect(line).toBe(`${canonicalJson(rest).slice(0, -1)},"hash":"${hash}"}`);
    const parsed = JSON.parse(line) as Record<string, unknown>;
    delete parsed.hash;
    expect(canonicalJson(parsed)).toBe(canonicalJson(rest));
  });

  it('starts a chain at seq 1 after the genesis hash, and cuts oversized args', () => {
    const { record } = sealRecord({ ...full, args: { big: 'x'.repeat(100) } }, undefined, 50);
    expect(record).toMatchObject({ seq: 1, prevHash: GENESIS_HASH, args: '[Truncated: 110 characters]' });
  });
});
