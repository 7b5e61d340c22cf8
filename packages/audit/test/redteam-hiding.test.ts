// Red-team tests (session 27): a client that shapes its arguments so the record hides part of the call
// (shape-mode keys that collide once redacted, one padded argument that used to replace every other
// argument by a size), and an insider who rewrites the file's line ends. Real round trips through a
// real client into a real file, verified as the CLI verifies it.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createAudit, createFileSink, verifyAuditFile } from '../src/index.js';
import { cli, closeConnections, serve } from './helpers.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-hiding-'));
});
afterEach(async () => {
  await closeConnections();
  await rm(dir, { recursive: true, force: true });
});

async function records(path: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(path, 'utf8');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const LIVE_A = `sk_live_${'A'.repeat(24)}`;
const LIVE_B = `sk_live_${'B'.repeat(24)}`;

describe('shape mode: keys that collide once redacted', () => {
  it('two secret-shaped keys and a key spelled [REDACTED] are three keys in the record, each with its own shape', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), args: 'shape', chainId: 'shape' });
    const client = await serve([audit]);
    await client.callTool('echo', {
      value: { [LIVE_A]: { rows: [1, 2] }, [LIVE_B]: 'drop', '[REDACTED]': true },
    });
    // Thousands of keys that all redact to one name: each kept, numbered, without a count from 2 per key.
    const many = Object.fromEntries(
      Array.from({ length: 1500 }, (_, i) => [`sk_live_${String(i).padStart(24, '0')}`, i]),
    );
    await client.callTool('echo', { value: many });
    await audit.close();
    const [first, second] = await records(path);
    const keys = Object.keys((first!.args as { value: Record<string, unknown> }).value);
    expect(keys).toHaveLength(3);
    const shapes = Object.values((first!.args as { value: Record<string, unknown> }).value);
    expect(shapes.map((shape) => JSON.stringify(shape)).sort()).toEqual(
      ['"boolean"', '"string"', '{"rows":["number","number"]}'].sort(),
    );
    const text = await readFile(path, 'utf8');
    expect(text).not.toContain(LIVE_A);
    expect(text).not.toContain(LIVE_B);
    expect(Object.keys((second!.args as { value: Record<string, unknown> }).value)).toHaveLength(1500);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 2 });
  });
});

describe('oversized arguments: one padded argument cannot hide the others', () => {
  it('the record keeps the size marker and adds a bounded preview: every argument named, each value cut short, secrets still redacted', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'padded' });
    const client = await serve([audit]);
    const token = `Bearer ${'t'.repeat(40)}`;
    // The call that matters sits beside 70 KB of padding (under the 64 KiB bound it would be whole).
    await client.callTool('echo', {
      value: { sql: 'DELETE FROM orders', note: `${token} ${'x'.repeat(70_000)}`, password: 'hunter2' },
    });
    // A megabyte key name, a 100,000-item array, 5,000 keys, two long keys that share a prefix, and a
    // string whose cut falls inside a surrogate pair.
    await client.callTool('echo', {
      value: {
        ['k'.repeat(1_000_000)]: 'hidden behind a huge key',
        list: Array.from({ length: 100_000 }, (_, i) => i),
        wide: Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`key${i}`, i])),
        [`${'p'.repeat(3000)}a`]: 'first',
        [`${'p'.repeat(3000)}b`]: 'second',
        emoji: `a${'😀'.repeat(40_000)}`,
        target: 'orders',
      },
    });
    await audit.close();
    const [padded, shaped] = await records(path);

    expect(padded!.args).toMatch(/^\[Truncated: \d+ characters\]$/);
    const preview = padded!.argsPreview as { value: Record<string, string> };
    expect(preview.value.sql).toBe('DELETE FROM orders');
    expect(preview.value.password).toBe('[REDACTED]');
    expect(preview.value.note).toMatch(/^Bearer \[REDACTED\] x+…\[\+\d+ characters\]$/);
    expect(JSON.stringify(padded).length).toBeLessThan(4_000);

    expect(shaped!.args).toMatch(/^\[Truncated: \d+ characters\]$/);
    const value = (shaped!.argsPreview as { value: Record<string, unknown> }).value;
    expect(value.target).toBe('orders');
    const names = Object.keys(value);
    // Both long keys are kept, as two keys, though cut to one prefix.
    expect(names.filter((name) => name.startsWith('ppp'))).toHaveLength(2);
    expect(names.some((name) => name.startsWith('kkk') && /…\[\+\d+ characters\]/.test(name))).toBe(true);
    expect(value.list).toEqual(expect.arrayContaining([0, expect.stringMatching(/^\[\+\d+ more items\]$/)]));
    expect(Object.keys(value.wide as object).some((name) => /^\[\+\d+ more keys\]$/.test(name))).toBe(true);
    expect((value.emoji as string).isWellFormed()).toBe(true);
    expect(JSON.stringify(shaped).length).toBeLessThan(4_000);

    // The preview is canonical JSON inside the hashed record: the file verifies as written.
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 2 });
  });

  it('in shape mode too, the preview names the arguments an oversized shape would have hidden', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), args: 'shape', chainId: 'shape-big' });
    const client = await serve([audit]);
    await client.callTool('echo', {
      value: {
        target: 'orders',
        filler: Object.fromEntries(Array.from({ length: 8000 }, (_, i) => [`f${i}`, i])),
      },
    });
    await audit.close();
    const [record] = await records(path);
    expect(record!.args).toMatch(/^\[Truncated: \d+ characters\]$/);
    expect((record!.argsPreview as { value: Record<string, unknown> }).value.target).toBe('string');
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 1 });
  });
});

describe('an insider who rewrites line ends', () => {
  it('CRLF, a lone CR between records, or a CR after one record: broken, named as not the exact text; the file as written is intact', async () => {
    const path = join(dir, 'audit.jsonl');
    const audit = createAudit({ sink: createFileSink(path), chainId: 'crlf' });
    const client = await serve([audit]);
    for (let i = 0; i < 3; i += 1) await client.callTool('echo', { value: i });
    await audit.close();
    const text = await readFile(path, 'utf8');
    await expect(verifyAuditFile(path)).resolves.toMatchObject({ intact: true, records: 3 });

    const crlf = join(dir, 'crlf.jsonl');
    await writeFile(crlf, text.replaceAll('\n', '\r\n'));
    await expect(verifyAuditFile(crlf)).resolves.toMatchObject({
      intact: false,
      brokenAt: 1,
      reason: expect.stringMatching(/record 1 \(seq 1\) was altered: its text is not the exact text/),
    });

    // A reader that splits at \n (jq, a log shipper) sees one line holding two records, and parses none.
    const cr = join(dir, 'cr.jsonl');
    await writeFile(cr, text.replace('\n', '\r'));
    await expect(verifyAuditFile(cr)).resolves.toMatchObject({ intact: false });

    const one = join(dir, 'one.jsonl');
    const [first, ...rest] = text.split('\n');
    await writeFile(one, [first, `${rest[0]}\r`, ...rest.slice(1)].join('\n'));
    await expect(verifyAuditFile(one)).resolves.toMatchObject({
      intact: false,
      brokenAt: 2,
      reason: expect.stringMatching(/record 2 \(seq 2\) was altered: its text is not the exact text/),
    });

    // The CLI reads the file the same way: exit 1, broken.
    const run = await cli('verify', crlf);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/broken at record 1/);
  });
});
