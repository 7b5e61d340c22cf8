import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type AuditHead, createAudit, createFileSink, verifyAuditFile } from '../src/index.js';
import { cli, closeConnections, serve } from './helpers.js';

// Two replicas (pod-a, pod-b) share a key and each writes its own file. Someone who can write pod-a's
// file moves pod-b's genuine records into it: every record hashes right under the key and links to
// the one before it in its own chain, so only where the records stand gives them away. The file sink
// appends one process's records at a time and names the file's last record (`after`) whenever it
// starts a chain in a file that has one, so in a file every record follows the record right before it.

const KEY = 'k'.repeat(40);

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-splice-'));
});
afterEach(async () => {
  await closeConnections();
  await rm(dir, { recursive: true, force: true });
});

/** One process's run on `path`: `calls` calls through a real client; its stored head. */
async function run(
  path: string,
  chainId: string,
  calls: number,
  key: string | undefined,
): Promise<AuditHead> {
  const audit = createAudit({ sink: createFileSink(path), chainId, ...(key === undefined ? {} : { key }) });
  const client = await serve([audit]);
  for (let index = 1; index <= calls; index += 1) {
    const answer = await client.callTool('get_order', { id: `${chainId}-${index}` });
    expect(answer.isError).toBeUndefined();
  }
  await audit.flush();
  const head = audit.head()!;
  await audit.close();
  await closeConnections();
  return head;
}

async function linesOf(path: string): Promise<string[]> {
  return (await readFile(path, 'utf8')).split('\n').filter((line) => line !== '');
}

async function fileOf(name: string, lines: readonly string[]): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, `${lines.join('\n')}\n`);
  return path;
}

const unanchored = (line: number, chain: string): string =>
  `record ${line} (seq 1) starts chain ${chain} mid-file without naming the record before it (after), which the file sink always does: it was written to another file and moved here (a file written before chains were linked verifies with allowUnanchored)`;

describe.each([
  { keyed: true, key: KEY as string | undefined },
  { keyed: false, key: undefined as string | undefined },
])('another replica’s records spliced into a file (keyed: $keyed)', ({ key }) => {
  it('in the middle, interleaved, first or last: reported at the first moved record; the files as written verify', async () => {
    const aPath = join(dir, 'pod-a.jsonl');
    const bPath = join(dir, 'pod-b.jsonl');
    const headA = await run(aPath, 'pod-a', 3, key);
    const headB = await run(bPath, 'pod-b', 2, key);
    const a = await linesOf(aPath);
    const b = await linesOf(bPath);
    const options = { ...(key === undefined ? {} : { keys: [key] }), expect: headA };
    await expect(verifyAuditFile(aPath, options)).resolves.toMatchObject({ intact: true, records: 3 });
    await expect(verifyAuditFile(bPath, { ...options, expect: headB })).resolves.toMatchObject({
      intact: true,
      records: 2,
    });

    const cases: [string, string[], number, string][] = [
      ['in the middle', [a[0]!, b[0]!, b[1]!, a[1]!, a[2]!], 2, unanchored(2, 'pod-b')],
      ['interleaved', [a[0]!, b[0]!, a[1]!, b[1]!, a[2]!], 2, unanchored(2, 'pod-b')],
      ['first', [...b, ...a], 3, unanchored(3, 'pod-a')],
      ['last', [...a, ...b], 4, unanchored(4, 'pod-b')],
      ['its first record only, last', [...a, b[0]!], 4, unanchored(4, 'pod-b')],
    ];
    for (const [name, lines, brokenAt, reason] of cases) {
      const path = await fileOf(`${name.replaceAll(' ', '-')}.jsonl`, lines);
      const result = await verifyAuditFile(path, options);
      expect({ name, result }).toMatchObject({ name, result: { intact: false, brokenAt, reason } });
      // The chain the break is in is named, with the records of it checked before.
      const chain = result.intact ? undefined : result.chains.find((entry) => !entry.intact);
      expect(chain).toMatchObject({ intact: false, brokenAt, reason });
    }
  });
});

describe('a chain start that names a record, but not the one before it', () => {
  it('two copies of one file, each continued by another replica, spliced: reported where the second chain starts', async () => {
    const base = join(dir, 'base.jsonl');
    await run(base, 'pod-a', 2, KEY);
    const one = join(dir, 'one.jsonl');
    const two = join(dir, 'two.jsonl');
    await copyFile(base, one);
    await copyFile(base, two);
    await run(one, 'pod-b', 2, KEY);
    await run(two, 'pod-c', 2, KEY);
    const first = await linesOf(one);
    const second = await linesOf(two);
    // pod-c's first record names pod-a's last (it is there, with that hash) but follows pod-b's.
    const path = await fileOf('spliced.jsonl', [...first, ...second.slice(2)]);
    await expect(verifyAuditFile(one, { keys: [KEY] })).resolves.toMatchObject({ intact: true, records: 4 });
    await expect(verifyAuditFile(path, { keys: [KEY] })).resolves.toMatchObject({
      intact: false,
      brokenAt: 5,
      reason:
        'record 5 (seq 1) starts after record 2 of chain pod-a, but follows record 2 of chain pod-b (record 4): the file sink starts a chain right after the record it names, so records were moved, inserted or deleted between them',
    });

    // What the sink writes stays intact: several runs, a stable chain id coming back, a line torn by a crash.
    const runsPath = join(dir, 'runs.jsonl');
    await run(runsPath, 'pod-a', 2, KEY);
    await run(runsPath, 'pod-b', 2, KEY);
    const headA = await run(runsPath, 'pod-a', 2, KEY);
    // A crash mid-write: the start of a record, no newline. The next writer closes it off and chains on.
    const lines = await linesOf(runsPath);
    await writeFile(runsPath, `${lines.join('\n')}\n${lines[0]!.slice(0, 50)}`);
    const headC = await run(runsPath, 'pod-c', 2, KEY);
    const runs = await verifyAuditFile(runsPath, { keys: [KEY], expect: [headA, headC] });
    // The torn line is reported once nothing after it breaks; every record around it is placed right.
    expect(runs).toMatchObject({
      intact: false,
      brokenAt: 7,
      reason: 'record 7 is not an audit record (not JSON, or no seq, hash and prevHash)',
      records: 8,
    });
    const whole = (await linesOf(runsPath)).filter((_, index) => index !== 6);
    await expect(verifyAuditFile(await fileOf('whole.jsonl', whole), { keys: [KEY] })).resolves.toMatchObject(
      {
        intact: true,
        records: 8,
      },
    );
  });

  it('a record of a chain moved past another chain’s records: reported at it', async () => {
    // pod-a wrote three records; an earlier copy of its file (two records) was continued by pod-b.
    const full = join(dir, 'full.jsonl');
    await run(full, 'pod-a', 2, KEY);
    const early = join(dir, 'early.jsonl');
    await copyFile(full, early);
    await run(full, 'pod-a', 1, KEY);
    await run(early, 'pod-b', 2, KEY);
    const a = await linesOf(full);
    const e = await linesOf(early);
    expect(a).toHaveLength(3);
    // pod-a's third record links to its second by prevHash, but pod-b's records stand between them.
    const runsPath = await fileOf('moved.jsonl', [...e, a[2]!]);
    await expect(verifyAuditFile(runsPath, { keys: [KEY] })).resolves.toMatchObject({
      intact: false,
      brokenAt: 5,
      reason:
        "record 5 (seq 3) follows record 2 of chain pod-b (record 4), not record 2 of its own chain pod-a (record 2): the file sink writes a chain's records one after another, so records were moved or inserted between them",
    });
  });
});

describe('allowUnanchored: files written before chains were linked', () => {
  it('accepts chains begun mid-file without after up to the first record that has one, and nothing after it', async () => {
    // What such a file looks like: each writer's chain begun after the last line, naming nothing.
    const aPath = join(dir, 'a.jsonl');
    const bPath = join(dir, 'b.jsonl');
    await run(aPath, 'pod-a', 2, undefined);
    await run(bPath, 'pod-b', 2, undefined);
    const old = [...(await linesOf(aPath)), ...(await linesOf(bPath))];
    const path = await fileOf('old.jsonl', old);
    await expect(verifyAuditFile(path)).resolves.toMatchObject({
      intact: false,
      brokenAt: 3,
      reason: unanchored(3, 'pod-b'),
    });
    await expect(verifyAuditFile(path, { allowUnanchored: true })).resolves.toMatchObject({
      intact: true,
      records: 4,
    });
    // This version goes on in that file: its chain names pod-b's last record. Past it the rule holds.
    await run(path, 'pod-c', 2, undefined);
    const continued = await linesOf(path);
    expect(JSON.parse(continued[4]!).after).toMatchObject({ chainId: 'pod-b', seq: 2 });
    await expect(verifyAuditFile(path, { allowUnanchored: true })).resolves.toMatchObject({
      intact: true,
      records: 6,
    });
    // Another replica's file moved in after it: reported, option or not.
    const dPath = join(dir, 'd.jsonl');
    await run(dPath, 'pod-d', 2, undefined);
    const spliced = await fileOf('spliced.jsonl', [...continued, ...(await linesOf(dPath))]);
    await expect(verifyAuditFile(spliced, { allowUnanchored: true })).resolves.toMatchObject({
      intact: false,
      brokenAt: 7,
      reason: unanchored(7, 'pod-d'),
    });
  });
});

describe('toolgate-audit verify', () => {
  it('exits 1 on a spliced file, naming the line; 0 on the file as written; --allow-unanchored for older files', async () => {
    const keyFile = join(dir, 'audit.key');
    await writeFile(keyFile, KEY);
    const aPath = join(dir, 'pod-a.jsonl');
    const bPath = join(dir, 'pod-b.jsonl');
    const headA = await run(aPath, 'pod-a', 3, KEY);
    await run(bPath, 'pod-b', 2, KEY);
    const a = await linesOf(aPath);
    const b = await linesOf(bPath);
    const spliced = await fileOf('spliced.jsonl', [a[0]!, ...b, a[1]!, a[2]!]);
    const head = `pod-a:${headA.seq}:${headA.hash}`;

    const intact = await cli('verify', aPath, '--key-file', keyFile, '--expect-head', head);
    expect(intact.code).toBe(0);
    const broken = await cli('verify', spliced, '--key-file', keyFile, '--expect-head', head);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toContain(`broken at record 2: ${unanchored(2, 'pod-b')}`);

    // A file as an older version wrote it (chains begun mid-file naming nothing).
    const old = await fileOf('old.jsonl', [...a, ...b]);
    expect((await cli('verify', old, '--key-file', keyFile)).code).toBe(1);
    const accepted = await cli('verify', old, '--key-file', keyFile, '--allow-unanchored');
    expect(accepted).toMatchObject({ code: 0 });
    expect(accepted.stdout).toContain('intact: 5 records in 2 chains');
    const misused = await cli('verify', '--table', 'toolgate_audit', '--allow-unanchored');
    expect(misused.code).toBe(2);
    expect(misused.stderr).toContain('--allow-unanchored applies to a FILE only');
  });
});
