// The server dies (kill -9, or SIGTERM with no handler: an orchestrator, the OOM killer, a crash)
// while a program it started still runs. Its time limit lived in the dead server, so nothing would
// ever stop the program or its children: each death under load left their process groups running.
import { readdirSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterEach, describe, expect, it } from 'vitest';
import { compiledFixture, expectGone, handles, readPids, scratchDir, until } from './harness.js';

const SERVER = compiledFixture('tree-server.ts');
const sandbox = scratchDir();

const started: Client[] = [];
afterEach(async () => {
  for (const client of started.splice(0)) await client.close().catch(() => {});
});

async function startServer(): Promise<{ client: Client; pid: number }> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [SERVER],
    env: { PATH: '/usr/bin:/bin' },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'server-death-test', version: '1.0.0' });
  await client.connect(transport);
  started.push(client);
  if (transport.pid === null) throw new Error('the server did not start');
  return { client, pid: transport.pid };
}

/** The reapers among the children of `parent` (from /proc): the shell (`-c`) or Node (`-e`) running an inline script. */
function reapersOf(parent: number): number[] {
  const reapers: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== parent) continue;
      const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (argv[1] === '-c' || argv[1] === '-e') reapers.push(Number(entry));
    } catch {
      // gone since readdir
    }
  }
  return reapers;
}

/**
 * The reapers of `parent` once there is one: read from /proc as soon as a program's pids are written,
 * a loaded machine may not list it yet, and a missing reaper must fail as that, not as `/proc/undefined`.
 */
async function reapersOnceStarted(parent: number): Promise<number[]> {
  await until(() => reapersOf(parent).length > 0, `a reaper of server ${parent}`);
  return reapersOf(parent);
}

describe('a server that dies while its programs run', () => {
  // kill -9 of a tree that ignores SIGTERM: SIGTERM first, SIGKILL after killGraceMs, as at a timeout.
  for (const [signal, mode] of [
    ['SIGKILL', 'ignore-term'],
    ['SIGTERM', ''],
  ] as const) {
    it(`takes the program and its grandchild with it (${signal}${mode && `, tree ${mode}`})`, async () => {
      const { client, pid } = await startServer();
      const pidFile = path.join(sandbox, `${signal}.pids`);
      const args = mode === '' ? [pidFile] : [pidFile, mode];
      const call = client.callTool({ name: 'behave', arguments: { mode: 'tree', args } });
      call.catch(() => {});
      const pids = await readPids(pidFile);
      // The reaper that outlives the server to stop what it left running: one per server.
      const [reaper, ...others] = await reapersOnceStarted(pid);
      expect(reaper).toBeDefined();
      expect(others).toEqual([]);
      process.kill(pid, signal);
      await expectGone(pid);
      await expectGone(pids.child);
      await expectGone(pids.grandchild);
      await expectGone(reaper!);
    });
  }

  it('a reaper that was killed is started again at once, with every group still running', async () => {
    const { client, pid } = await startServer();
    const first = path.join(sandbox, 'first.pids');
    client.callTool({ name: 'behave', arguments: { mode: 'tree', args: [first] } }).catch(() => {});
    const firstPids = await readPids(first);
    const [reaper] = await reapersOnceStarted(pid);
    process.kill(reaper!, 'SIGKILL');
    await expectGone(reaper!);
    // Replaced before any new run, as the first tree still runs: a group listed meanwhile is not lost.
    await until(() => reapersOf(pid).length === 1, 'a replacement reaper');
    const second = path.join(sandbox, 'second.pids');
    client.callTool({ name: 'behave', arguments: { mode: 'tree', args: [second] } }).catch(() => {});
    const secondPids = await readPids(second);
    const [replacement, ...others] = reapersOf(pid);
    expect(replacement).toBeDefined();
    expect(others).toEqual([]);
    process.kill(pid, 'SIGKILL');
    for (const gone of [
      pid,
      firstPids.child,
      firstPids.grandchild,
      secondPids.child,
      secondPids.grandchild,
    ]) {
      await expectGone(gone);
    }
    await expectGone(replacement!);
  });

  it('a server that ends normally leaves no reaper behind', async () => {
    const { client, pid } = await startServer();
    const result = await client.callTool({ name: 'behave', arguments: { mode: 'exit', args: ['0', 'bye'] } });
    expect(result.structuredContent).toEqual({
      ok: true,
      exitCode: 0,
      stdout: '',
      stderr: 'bye',
      truncated: false,
    });
    const reapers = reapersOf(pid);
    expect(reapers).toHaveLength(1);
    await client.close();
    await expectGone(pid);
    await expectGone(reapers[0]!);
  });

  it('the reaper is the system shell, a few MB where a second Node took about 40', async () => {
    const { client, pid } = await startServer();
    const pidFile = path.join(sandbox, 'shell.pids');
    client.callTool({ name: 'behave', arguments: { mode: 'tree', args: [pidFile] } }).catch(() => {});
    const pids = await readPids(pidFile);
    const [reaper] = await reapersOnceStarted(pid);
    expect(readlinkSync(`/proc/${reaper}/exe`)).toBe(realpathSync('/bin/sh'));
    // Loose on purpose: dash holds under 2 MB and bash as sh about 3; Node never starts below 30.
    const rssKb = Number(/^VmRSS:\s*(\d+) kB$/m.exec(readFileSync(`/proc/${reaper}/status`, 'utf8'))?.[1]);
    expect(rssKb).toBeLessThan(16 * 1024);
    process.kill(pid, 'SIGKILL');
    await expectGone(pids.child);
    await expectGone(pids.grandchild);
    await expectGone(reaper!);
  });

  it('signals a supervisor or a terminal sends the reaper do not stop it before the server dies', async () => {
    const { client, pid } = await startServer();
    const pidFile = path.join(sandbox, 'signalled.pids');
    client.callTool({ name: 'behave', arguments: { mode: 'tree', args: [pidFile] } }).catch(() => {});
    const pids = await readPids(pidFile);
    const [reaper] = await reapersOnceStarted(pid);
    const signals: NodeJS.Signals[] = [
      'SIGINT',
      'SIGTERM',
      'SIGHUP',
      'SIGQUIT',
      'SIGTSTP',
      'SIGTTIN',
      'SIGTTOU',
      'SIGUSR1',
      'SIGUSR2',
    ];
    await until(() => signals.every((name) => handles(reaper!, name)), 'the reaper to be ready');
    // To its whole process group, as a supervisor that stops every group of the app, or a reload.
    for (const name of signals) process.kill(-reaper!, name);
    process.kill(pid, 'SIGKILL');
    await expectGone(pid);
    await expectGone(pids.child);
    await expectGone(pids.grandchild);
    await expectGone(reaper!);
  });
});
