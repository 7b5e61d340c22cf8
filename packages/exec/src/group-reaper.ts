import { type ChildProcess, spawn } from 'node:child_process';
import type { Logger } from '@toolgate/core';

/**
 * The reaper's whole program. It reads `+<pgid> <graceMs>` and `-<pgid>` lines from the server and,
 * when its stdin ends (the server is gone, however it died: kill -9, a crash, an exit without
 * draining), sends SIGTERM to every process group still listed and SIGKILL after the longest grace.
 * It ignores SIGINT, SIGTERM and SIGHUP: the server's own shutdown decides when programs stop, and a
 * pgid of 0 or 1 (kill(-1) signals every process) is never accepted.
 */
const REAPER_SOURCE = `
for (const name of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(name, () => {});
const groups = new Map();
let pending = '';
process.stdin.setEncoding('latin1');
process.stdin.on('data', (chunk) => {
  const lines = (pending + chunk).split('\\n');
  pending = lines.pop();
  for (const line of lines) {
    const [pid, grace] = line.slice(1).split(' ').map(Number);
    if (!Number.isSafeInteger(pid) || pid <= 1) continue;
    if (line[0] === '+') groups.set(pid, Number.isSafeInteger(grace) && grace > 0 ? grace : 0);
    else groups.delete(pid);
  }
});
const signalAll = (signal) => {
  for (const pid of groups.keys()) { try { process.kill(-pid, signal); } catch {} }
};
let reaping = false;
const reap = () => {
  if (reaping) return;
  reaping = true;
  if (groups.size === 0) process.exit(0);
  signalAll('SIGTERM');
  setTimeout(() => { signalAll('SIGKILL'); process.exit(0); }, Math.max(0, ...groups.values()));
};
process.stdin.on('end', reap);
process.stdin.on('error', reap);
`;

// The groups of the programs this server runs now (pgid → kill grace), replayed to a new reaper.
const groups = new Map<number, number>();
let reaper: ChildProcess | undefined;

// One per process: Node's own binary, with no shell, no inherited options (NODE_OPTIONS stays out) and
// nothing to reap unless a program runs. Single executable applications and Electron run the app itself
// for `process.execPath -e`, so they get no reaper (only the server's own timers stop programs there).
const canReap = process.platform !== 'win32' && process.release.name === 'node' && !isPackagedApp();

function isPackagedApp(): boolean {
  if (process.versions.electron !== undefined) return true;
  // node:sea exists from Node 20.12; a packaged app is a single executable application.
  const sea = process.getBuiltinModule?.('node:sea') as { isSea?: () => boolean } | undefined;
  return sea?.isSea?.() === true;
}

/**
 * Lists a program's process group with this process's reaper, a small Node process that outlives the
 * server only to stop the groups still listed when the server is gone. Without it a program's time limit
 * dies with the server, and a server killed under load leaves every running program (and its children)
 * running for good. Never throws; a reaper that cannot start is logged, and the server's timers still
 * stop its programs while it lives.
 */
export function watchGroup(pid: number, graceMs: number, logger: Logger): void {
  if (!canReap) return;
  groups.set(pid, graceMs);
  if (reaper !== undefined) {
    reaper.stdin?.write(`+${pid} ${graceMs}\n`);
    return;
  }
  startReaper(logger);
}

/** Takes a group off the reaper's list once the server has stopped it itself. */
export function releaseGroup(pid: number): void {
  if (!groups.delete(pid)) return;
  reaper?.stdin?.write(`-${pid}\n`);
}

function startReaper(logger: Logger): void {
  let started: ChildProcess;
  try {
    started = spawn(process.execPath, ['-e', REAPER_SOURCE], {
      shell: false,
      cwd: '/',
      env: {},
      stdio: ['pipe', 'ignore', 'ignore'],
      // A group of its own: a signal to the server's group (a terminal's Ctrl-C) or to a program's
      // group does not reach it; it leaves when the server's end of its stdin closes.
      detached: true,
      windowsHide: true,
    });
  } catch (error) {
    logger.warn({ err: error }, 'exec: the reaper could not be started; programs outlive a killed server');
    return;
  }
  reaper = started;
  const forget = (): void => {
    if (reaper === started) reaper = undefined;
  };
  started.on('error', (error) => {
    forget();
    logger.warn({ err: error }, 'exec: the reaper could not be started; programs outlive a killed server');
  });
  // A reaper that died (killed, out of memory) is started again, with the current list, at the next run.
  started.on('exit', forget);
  started.stdin?.on('error', forget);
  // Neither keeps the server alive: the reaper is there for when the server is gone.
  started.unref();
  (started.stdin as (NodeJS.WritableStream & { unref?: () => void }) | null)?.unref?.();
  let list = '';
  for (const [pid, graceMs] of groups) list += `+${pid} ${graceMs}\n`;
  started.stdin?.write(list);
}
