import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expectFailure, type LogEntry, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { createExecSlots, type ExecSlots, execTool, value } from '../src/index.js';
import { whenGroupGone } from '../src/process-tree.js';
import { BEHAVE, ECHO, NODE, scratchDir, serve, until } from './harness.js';

// A model (or many callers) sending many calls at once made the server spawn that many programs, and
// their children: memory, pids and descriptors ran out for the whole host. Programs now run in a pool of
// slots; a call that finds every slot taken waits, first come first served, then is refused.

const sandbox = scratchDir();
let fifoCount = 0;

/** A FIFO a `block` program waits on until the test writes it. */
function fifo(): string {
  fifoCount += 1;
  const file = path.join(sandbox, `fifo-${fifoCount}`);
  execFileSync('mkfifo', [file]);
  return file;
}
const started = (file: string): boolean => existsSync(`${file}.started`);
const release = (file: string, text = 'go'): Promise<void> => writeFile(file, text);

const BUSY_HINT =
  'Too many programs are running at once. Wait for retryAfterMs, then call again; send such calls one after another, not all at once.';

function blockTool(name: string, slots: ExecSlots, timeoutMs = 30_000) {
  return execTool({
    name,
    description: 'Waits until its FIFO is written (test).',
    input: { fifo: z.string() },
    command: NODE,
    cwd: sandbox,
    timeoutMs,
    killGraceMs: 300,
    slots,
    args: (input) => [BEHAVE, 'block', value(input.fifo)],
  });
}

const okJson = (text: string) => ({ exitCode: 0, stdout: text, stderr: '', truncated: false });

let client: TestClient | undefined;
let logs: LogEntry[] = [];
afterEach(async () => {
  await client?.close();
  client = undefined;
  logs = [];
});

describe('bounded concurrency', () => {
  it('the (N+1)th call waits for a slot and runs when one finishes, in the order the calls came', async () => {
    const slots = createExecSlots({ maxConcurrent: 2, maxQueued: 4 });
    client = await serve([blockTool('block', slots)], recordingLogger(logs));
    const [a, b, c, d] = [fifo(), fifo(), fifo(), fifo()];
    const first = client.callToolJson('block', { fifo: a });
    const second = client.callToolJson('block', { fifo: b });
    await until(() => started(a) && started(b), 'two programs to start');
    const third = client.callToolJson('block', { fifo: c });
    await until(() => slots.waiting === 1, 'the third call to wait');
    const fourth = client.callToolJson('block', { fifo: d });
    await until(() => slots.waiting === 2, 'the fourth call to wait');
    expect([slots.running, started(c), started(d)]).toEqual([2, false, false]);

    await release(b, 'b');
    expect(await second).toEqual({ ok: true, ...okJson('released b') });
    // The slot went to the first waiter, not the second.
    await until(() => started(c), 'the third program to start');
    expect([slots.running, slots.waiting, started(d)]).toEqual([2, 1, false]);

    await release(a, 'a');
    expect(await first).toEqual({ ok: true, ...okJson('released a') });
    await until(() => started(d), 'the fourth program to start');
    await release(c, 'c');
    await release(d, 'd');
    expect(await third).toEqual({ ok: true, ...okJson('released c') });
    expect(await fourth).toEqual({ ok: true, ...okJson('released d') });
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });

  it('refuses a call at once with rate_limited when the queue is full; the program never starts', async () => {
    const slots = createExecSlots({ maxConcurrent: 1, maxQueued: 1 });
    client = await serve([blockTool('block', slots, 7000)], recordingLogger(logs));
    const [a, b, c] = [fifo(), fifo(), fifo()];
    const first = client.callToolJson('block', { fifo: a });
    await until(() => started(a), 'the first program to start');
    const second = client.callToolJson('block', { fifo: b });
    await until(() => slots.waiting === 1, 'the second call to wait');

    expect(expectFailure(await client.callTool('block', { fifo: c }))).toEqual({
      ok: false,
      error: 'rate_limited',
      message: 'Too many programs are running (1 at once, 1 waiting); the call was not started.',
      hint: BUSY_HINT,
      retryable: true,
      retryAfterMs: 7000,
    });
    expect(started(c)).toBe(false);

    await release(a);
    await until(() => started(b), 'the waiting program to start');
    await release(b);
    expect([await first, await second]).toEqual([
      { ok: true, ...okJson('released go') },
      { ok: true, ...okJson('released go') },
    ]);
  });

  it('a call that waits its whole timeout for a slot is refused with rate_limited, never unavailable', async () => {
    const slots = createExecSlots({ maxConcurrent: 1, maxQueued: 4 });
    client = await serve([blockTool('block', slots), blockTool('quick', slots, 300)], recordingLogger(logs));
    const [a, b] = [fifo(), fifo()];
    const first = client.callToolJson('block', { fifo: a });
    await until(() => started(a), 'the first program to start');

    expect(expectFailure(await client.callTool('quick', { fifo: b }))).toEqual({
      ok: false,
      error: 'rate_limited',
      message: 'No program slot came free within 300 ms; the call was not started.',
      hint: BUSY_HINT,
      retryable: true,
      retryAfterMs: 300,
    });
    expect([started(b), slots.running, slots.waiting]).toEqual([false, 1, 0]);
    await release(a);
    expect(await first).toEqual({ ok: true, ...okJson('released go') });
  });

  it('a waiting call whose caller aborts leaves the queue and never runs', async () => {
    const slots = createExecSlots({ maxConcurrent: 1, maxQueued: 1 });
    client = await serve([blockTool('block', slots)], recordingLogger(logs));
    const [a, b, c] = [fifo(), fifo(), fifo()];
    const first = client.callToolJson('block', { fifo: a });
    await until(() => started(a), 'the first program to start');
    const controller = new AbortController();
    const aborted = client.callTool('block', { fifo: b }, { signal: controller.signal });
    await until(() => slots.waiting === 1, 'the second call to wait');
    controller.abort(new Error('the user gave up'));
    await expect(aborted).rejects.toThrow('the user gave up');
    await until(() => slots.waiting === 0, 'the cancelled call to leave the queue');

    // Its place is free: with one queue position, this call waits instead of being refused.
    const third = client.callToolJson('block', { fifo: c });
    await until(() => slots.waiting === 1, 'the third call to wait');
    await release(a);
    await until(() => started(c), 'the third program to start');
    await release(c);
    expect([await first, await third]).toEqual([
      { ok: true, ...okJson('released go') },
      { ok: true, ...okJson('released go') },
    ]);
    expect(started(b)).toBe(false);
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
  });
});

describe('a slot comes back on every path', () => {
  // One slot and no queue: a slot kept by any path refuses every later call.
  const slots = createExecSlots({ maxConcurrent: 1, maxQueued: 0 });
  const brokenDir = scratchDir();
  const broken = path.join(brokenDir, 'prog');
  writeFileSync(broken, '#!/nonexistent/interpreter\n', { mode: 0o755 });
  const tools = [
    execTool({
      name: 'behave',
      description: 'Runs the misbehaving fixture (test).',
      input: { mode: z.string(), args: z.array(z.string()).default([]) },
      command: NODE,
      cwd: sandbox,
      timeoutMs: 1000,
      killGraceMs: 200,
      slots,
      args: (input) => [BEHAVE, value(input.mode), ...input.args.map((text) => value(text))],
    }),
    execTool({
      name: 'broken',
      description: 'A program whose interpreter is missing (test).',
      input: {},
      command: broken,
      cwd: brokenDir,
      slots,
      args: () => [],
    }),
    execTool({
      name: 'long_values',
      description: 'Echoes tagged values, long ones allowed (test).',
      input: { values: z.array(z.string()) },
      command: NODE,
      cwd: sandbox,
      maxArgvBytes: 16 * 1024 * 1024,
      slots,
      args: (input) => [ECHO, ...input.values.map((text) => value(text))],
    }),
    blockTool('block', slots),
  ];

  async function expectSlotFree(callTool: TestClient['callTool']): Promise<void> {
    expect([slots.running, slots.waiting]).toEqual([0, 0]);
    const next = await callTool('behave', { mode: 'write', args: ['1', 'next'] });
    expect(next.structuredContent).toEqual({ ok: true, ...okJson('next') });
  }

  it('success, failure, timeout, cancel, spawn error and E2BIG each give the slot back', async () => {
    client = await serve(tools, recordingLogger(logs));
    const { callTool } = client;

    const leftBehind = await callTool('behave', { mode: 'leave-behind', args: [path.join(sandbox, 'pids')] });
    expect(leftBehind.structuredContent).toEqual({ ok: true, ...okJson('done') });
    await expectSlotFree(callTool);

    expect(expectFailure(await callTool('behave', { mode: 'exit', args: ['3', 'bad'] })).error).toBe(
      'unavailable',
    );
    await expectSlotFree(callTool);

    expect(
      expectFailure(
        await callTool('behave', { mode: 'tree', args: [path.join(sandbox, 'tree'), 'ignore-term'] }),
      ),
    ).toMatchObject({ error: 'timeout', message: 'The program ran past its 1000 ms limit and was stopped.' });
    await expectSlotFree(callTool);

    const a = fifo();
    const controller = new AbortController();
    const cancelled = callTool('block', { fifo: a }, { signal: controller.signal });
    await until(() => started(a), 'the program to start');
    controller.abort(new Error('cancelled'));
    await expect(cancelled).rejects.toThrow('cancelled');
    await until(() => slots.running === 0, 'the cancelled program’s slot to come back');
    await expectSlotFree(callTool);

    expect(expectFailure(await callTool('broken', {}))).toMatchObject({
      error: 'unavailable',
      message: 'The program could not be started.',
    });
    await expectSlotFree(callTool);

    const values = Array.from({ length: 64 }, (_, index) => `${index}`.padEnd(130_000, 'c'));
    expect(expectFailure(await callTool('long_values', { values }))).toMatchObject({
      error: 'invalid_argument',
      message: 'The arguments are too long for the system.',
    });
    await expectSlotFree(callTool);
  });
});

describe('the process group', () => {
  /** Runs a shell script in a group of its own; resolves with the group and the first line it printed. */
  function shell(script: string): Promise<{ pgid: number; line: string }> {
    return new Promise((resolve) => {
      const child = spawn('/bin/sh', ['-c', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('\n')) resolve({ pgid: child.pid!, line: out.split('\n')[0]! });
      });
    });
  }
  const stateOf = (pid: number): string => {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0]!;
  };

  it('counts a group that holds only a zombie as gone: an init that never reaps would hold its slot for good', async () => {
    // The zombie leads a group of its own; its parent (the shell, now `sleep`) never waits for it, as
    // an init that does not reap orphans (Node as PID 1 in a container) never does. kill(-pgid, 0)
    // still finds it.
    // The child ends only once its parent has become `sleep`: ended earlier, the shell could reap it
    // before its exec, and there would be no zombie to count.
    const helper = await shell(
      'setsid sh -c \'until [ "$(cat /proc/$PPID/comm)" = sleep ]; do sleep 0.02; done\' & echo $!; exec sleep 300',
    );
    const zombie = Number(helper.line);
    try {
      await until(() => stateOf(zombie) === 'Z', 'the zombie');
      expect(await whenGroupGone(zombie, 300)).toBe(true);
    } finally {
      process.kill(-helper.pgid, 'SIGKILL');
    }
  });

  it('does not count a group with a live member as gone, and gives up after its bound', async () => {
    const live = await shell('echo up; exec sleep 300');
    try {
      expect(await whenGroupGone(live.pgid, 200)).toBe(false);
    } finally {
      process.kill(-live.pgid, 'SIGKILL');
    }
    expect(await whenGroupGone(live.pgid, 5000)).toBe(true);
  });
});

describe('pool options', () => {
  it('refuses a pool size that is not a positive integer, a negative queue, and a pool made by hand', () => {
    expect(() => createExecSlots({ maxConcurrent: 0 })).toThrow(
      new TypeError('exec: maxConcurrent must be a positive integer, got 0'),
    );
    expect(() => createExecSlots({ maxConcurrent: 1.5 })).toThrow(
      new TypeError('exec: maxConcurrent must be a positive integer, got 1.5'),
    );
    expect(() => createExecSlots({ maxQueued: -1 })).toThrow(
      new TypeError('exec: maxQueued must be a non-negative integer, got -1'),
    );
    const forged = { maxConcurrent: 1_000_000, maxQueued: 0, running: 0, waiting: 0 };
    expect(() =>
      execTool({
        name: 'forged',
        description: 'x',
        input: {},
        command: NODE,
        slots: forged,
        args: () => [ECHO],
      }),
    ).toThrow(new TypeError('exec: slots must come from createExecSlots()'));
  });

  it('defaults to 2 × the CPUs at once and 4 × that waiting', async () => {
    const { availableParallelism } = await import('node:os');
    const slots = createExecSlots();
    expect([slots.maxConcurrent, slots.maxQueued, slots.running, slots.waiting]).toEqual([
      2 * availableParallelism(),
      8 * availableParallelism(),
      0,
      0,
    ]);
  });
});
