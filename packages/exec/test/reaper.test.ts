// The reaper itself, both kinds: the shell one (the default) and the Node one (where /bin/sh is
// missing). Each is started as the server starts it and told of real process groups on its stdin; the
// test plays the server, whose death is the end of that stdin.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type ReaperKind, spawnReaper } from '../src/group-reaper.js';
import { handles, NODE, scratchDir, until } from './harness.js';

const sandbox = scratchDir();
const running: ChildProcess[] = [];
afterEach(() => {
  for (const child of running.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

/** A program's process group as the server makes one: a detached child that runs until signalled. */
function startGroup(): ChildProcess & { pid: number } {
  const child = spawn(NODE, ['-e', 'setInterval(() => {}, 60_000)'], { detached: true, stdio: 'ignore' });
  running.push(child);
  if (child.pid === undefined) throw new Error('the group did not start');
  return child as ChildProcess & { pid: number };
}

function startReaper(kind: ReaperKind): ChildProcess & { pid: number } {
  const reaper = spawnReaper(kind);
  running.push(reaper);
  if (reaper.pid === undefined) throw new Error('the reaper did not start');
  return reaper as ChildProcess & { pid: number };
}

/** How a child ended: [exit code, signal]. */
async function endOf(child: ChildProcess): Promise<[number | null, string | null]> {
  if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
  return [child.exitCode, child.signalCode];
}

// What a terminal (Ctrl-C, Ctrl-\, Ctrl-Z, hang-up), a supervisor (stop, reload) or a tool restarting
// the app (nodemon's SIGUSR2) sends. SIGUSR1 opens Node's inspector and stops nothing: only the shell
// is asked to ignore it.
const SUPERVISOR_SIGNALS: NodeJS.Signals[] = [
  'SIGINT',
  'SIGTERM',
  'SIGHUP',
  'SIGQUIT',
  'SIGTSTP',
  'SIGTTIN',
  'SIGTTOU',
  'SIGUSR2',
];
const SURVIVES: Record<ReaperKind, NodeJS.Signals[]> = {
  sh: [...SUPERVISOR_SIGNALS, 'SIGUSR1'],
  node: SUPERVISOR_SIGNALS,
};

describe.each(['sh', 'node'] as const)('the %s reaper', (kind) => {
  it('stops the groups still listed when its stdin ends, and never one taken off the list', async () => {
    const [kept, released, alsoKept] = [startGroup(), startGroup(), startGroup()];
    const reaper = startReaper(kind);
    // Graces under a second and of whole seconds: the reaper waits the longest (the shell one runs
    // `sleep 1.000`) before its SIGKILL, then leaves. 2000 here took the same path a second later.
    reaper.stdin?.end(`+${kept.pid} 100\n+${released.pid} 100\n+${alsoKept.pid} 1000\n-${released.pid}\n`);
    // SIGTERM first (a Node program without a handler ends by it), then the reaper leaves on its own.
    expect(await endOf(kept)).toEqual([null, 'SIGTERM']);
    expect(await endOf(alsoKept)).toEqual([null, 'SIGTERM']);
    expect(await endOf(reaper)).toEqual([0, null]);
    // The group taken off the list was never signalled: it still runs, and ends by the test's own SIGKILL.
    expect([released.exitCode, released.signalCode]).toEqual([null, null]);
    released.kill('SIGKILL');
    expect(await endOf(released)).toEqual([null, 'SIGKILL']);
  });

  it('skips every line that is not a group it may signal, and never runs what a line says', async () => {
    const listed = startGroup();
    const torn = startGroup();
    const marker = path.join(sandbox, `${kind}-ran`);
    const reaper = startReaper(kind);
    // 0 is the reaper's own group, and 4294967296 wraps to it in a 32-bit pid_t: the reaper would
    // SIGKILL itself. (1 is never tried here: kill(-1) would signal every process of the user.)
    const lines = [
      '+0 100',
      '+00 100',
      `+0${listed.pid} 100`,
      '+4294967296 100',
      '+2147483648 100',
      '+-5 100',
      `+${listed.pid}x 100`,
      `+$(touch ${marker}) 100`,
      `+\`touch ${marker}\` 100`,
      `+${listed.pid};touch ${marker}`,
      `+ ${listed.pid} 100`,
      `+${listed.pid} 100`,
    ];
    // A torn last line (the server killed mid-write) is never read.
    reaper.stdin?.end(`${lines.join('\n')}\n+${torn.pid} 100`);
    expect(await endOf(reaper)).toEqual([0, null]);
    expect(await endOf(listed)).toEqual([null, 'SIGTERM']);
    expect(existsSync(marker)).toBe(false);
    expect([torn.exitCode, torn.signalCode]).toEqual([null, null]);
  });

  it('ignores the signals a terminal or a supervisor sends, and still stops the listed groups', async () => {
    const listed = startGroup();
    const reaper = startReaper(kind);
    reaper.stdin?.write(`+${listed.pid} 100\n`);
    // Ready once it has set every disposition (the shell ignores them; Node catches them with a no-op).
    await until(() => SURVIVES[kind].every((name) => handles(reaper.pid, name)), 'the reaper to be ready');
    // Sent to its whole process group, as a supervisor that stops every group of the app would.
    for (const name of SURVIVES[kind]) process.kill(-reaper.pid, name);
    reaper.stdin?.end();
    expect(await endOf(reaper)).toEqual([0, null]);
    expect(await endOf(listed)).toEqual([null, 'SIGTERM']);
  });
});
