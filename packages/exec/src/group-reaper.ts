import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import type { Logger } from '@toolgate/core';

/** Which program a reaper is: the system shell (about 2 MB of memory) or Node itself (about 40 MB). */
export type ReaperKind = 'sh' | 'node';

/** The shell the reaper runs in, by absolute path: no PATH lookup. */
const SHELL = '/bin/sh';

// Both reapers keep one protocol and one behaviour. They read `+<pgid> <graceMs>` and `-<pgid>` lines
// from the server and, when their stdin ends or fails (the server is gone, however it died: kill -9, a
// crash, an exit without draining), send SIGTERM to every process group still listed and SIGKILL after
// the longest grace. A line that is not exactly that (a pgid of 0 or 1, where kill(-1) signals every
// process; leading zeros; past 2^31-1, where a shell's kill wraps to another pid) is skipped, and a
// torn last line is never read. They ignore the signals a terminal, a supervisor or a reload sends
// (INT, TERM, HUP, QUIT, TSTP, TTIN, TTOU, USR1, USR2): the server's own shutdown decides when
// programs stop, and a reaper that left early would leave them to outlive a server killed next.

/**
 * The shell reaper: fixed text, nothing interpolated, run as `/bin/sh -c`; the pgids arrive on stdin
 * and are checked to be plain decimal numbers before they reach `kill`. The groups are a string of
 * ` <pgid>:<grace>` entries. `sleep` takes a fraction on Linux, macOS and the BSDs; a strictly POSIX one
 * gets the grace rounded up to whole seconds.
 */
const REAPER_SCRIPT = `trap '' INT TERM HUP QUIT TSTP TTIN TTOU USR1 USR2
set -f
groups=' '
while IFS= read -r line; do
  case $line in [+-][1-9]*) ;; *) continue ;; esac
  pgid=\${line#?}; grace=0
  case $pgid in *' '*) grace=\${pgid#* }; pgid=\${pgid%% *} ;; esac
  case $pgid in *[!0-9]*|???????????*) continue ;; esac
  [ "$pgid" -gt 1 ] && [ "$pgid" -le 2147483647 ] || continue
  case $groups in *" $pgid:"*) rest=\${groups#*" $pgid:"}; groups="\${groups%%" $pgid:"*} \${rest#* }" ;; esac
  case $grace in ''|0?*|*[!0-9]*|???????????*) grace=0 ;; esac
  case $line in +*) groups="$groups$pgid:$grace " ;; esac
done
[ "$groups" = ' ' ] && exit 0
longest=0
for group in $groups; do
  kill -s TERM -- "-\${group%%:*}"
  [ "\${group#*:}" -gt "$longest" ] && longest=\${group#*:}
done
ms=$((longest % 1000 + 1000))
sleep "$((longest / 1000)).\${ms#1}" || sleep "$(((longest + 999) / 1000))"
for group in $groups; do kill -s KILL -- "-\${group%%:*}"; done
exit 0
`;

/**
 * The Node reaper, for a system without `/bin/sh`. SIGUSR1 is Node's own (it opens the inspector and
 * does not stop the process), so it is left alone.
 */
const REAPER_SOURCE = `
for (const name of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGUSR2']) {
  process.on(name, () => {});
}
const groups = new Map();
let pending = '';
process.stdin.setEncoding('latin1');
process.stdin.on('data', (chunk) => {
  const lines = (pending + chunk).split('\\n');
  pending = lines.pop();
  for (const line of lines) {
    const match = /^([+-])([1-9][0-9]{0,9})(?: (.*))?$/.exec(line);
    const pid = Number(match?.[2]);
    if (match === null || pid <= 1 || pid > 2147483647) continue;
    const grace = /^[1-9][0-9]{0,9}$/.test(match[3] ?? '') ? Math.min(Number(match[3]), 2147483647) : 0;
    if (match[1] === '+') groups.set(pid, grace);
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

// What the reaper is told is held to what both reapers accept (a pid_t; setTimeout's longest delay).
const MAX_PGID = 2 ** 31 - 1;
const MAX_GRACE_MS = 2 ** 31 - 1;

// The groups of the programs this server runs now (pgid → kill grace), replayed to a new reaper.
const groups = new Map<number, number>();
let reaper: ChildProcess | undefined;
// Decided at the first start; the shell falls back to Node for good once it fails to run the script.
let shellUsable: boolean | undefined;

// Single executable applications and Electron run the app itself for `process.execPath -e`: no Node
// reaper there (the shell one still runs).
const nodeReaperUsable = process.platform !== 'win32' && process.release.name === 'node' && !isPackagedApp();

function isPackagedApp(): boolean {
  if (process.versions.electron !== undefined) return true;
  // node:sea exists from Node 20.12; a packaged app is a single executable application.
  const sea = process.getBuiltinModule?.('node:sea') as { isSea?: () => boolean } | undefined;
  return sea?.isSea?.() === true;
}

/** The reaper this process starts: the shell where it can run, else Node, else none (Windows). */
function reaperKind(): ReaperKind | undefined {
  if (process.platform === 'win32') return undefined;
  shellUsable ??= isExecutable(SHELL);
  if (shellUsable) return 'sh';
  return nodeReaperUsable ? 'node' : undefined;
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Lists a program's process group with this process's reaper, a small process that outlives the server
 * only to stop the groups still listed when the server is gone. Without it a program's time limit dies
 * with the server, and a server killed under load leaves every running program (and its children)
 * running for good. Never throws; a reaper that cannot start is logged, and the server's timers still
 * stop its programs while it lives.
 */
export function watchGroup(pid: number, graceMs: number, logger: Logger): void {
  if (!Number.isSafeInteger(pid) || pid <= 1 || pid > MAX_PGID) return;
  const grace = Number.isSafeInteger(graceMs) && graceMs > 0 ? Math.min(graceMs, MAX_GRACE_MS) : 0;
  groups.set(pid, grace);
  if (reaper !== undefined) {
    reaper.stdin?.write(`+${pid} ${grace}\n`);
    return;
  }
  startReaper(logger);
}

/** Takes a group off the reaper's list once the server has stopped it itself. */
export function releaseGroup(pid: number): void {
  if (!groups.delete(pid)) return;
  reaper?.stdin?.write(`-${pid}\n`);
}

/**
 * Spawns a reaper of the given kind with no shell in between (the shell one is the program itself, given
 * only its fixed script), an empty environment bar a fixed PATH for `sleep`, cwd `/`, and a session
 * and process group of its own: a signal to the server's group (a terminal's Ctrl-C) or to a program's
 * group does not reach it; it leaves when the server's end of its stdin closes. Throws as `spawn` does.
 */
export function spawnReaper(kind: ReaperKind): ChildProcess {
  const [command, args, env] =
    kind === 'sh'
      ? [SHELL, ['-c', REAPER_SCRIPT], { PATH: '/usr/bin:/bin' }]
      : [process.execPath, ['-e', REAPER_SOURCE], {}];
  return spawn(command, args, {
    shell: false,
    cwd: '/',
    env,
    stdio: ['pipe', 'ignore', 'ignore'],
    detached: true,
    windowsHide: true,
  });
}

function startReaper(logger: Logger): void {
  const kind = reaperKind();
  if (kind === undefined) return;
  let started: ChildProcess;
  try {
    started = spawnReaper(kind);
  } catch (error) {
    reaperFailed(kind, error, logger);
    return;
  }
  reaper = started;
  const forget = (): void => {
    if (reaper === started) reaper = undefined;
  };
  started.on('error', (error) => {
    forget();
    reaperFailed(kind, error, logger);
  });
  started.on('exit', (code) => {
    forget();
    // The script ends by itself only once its stdin closed, which the server never does: a status
    // now is a shell that could not run it. A reaper killed by a signal (the OOM killer, a kill) is
    // replaced at once.
    if (kind === 'sh' && code !== null) {
      reaperFailed(kind, new Error(`${SHELL} exited with status ${code}`), logger);
    } else {
      replaceDeadReaper(logger);
    }
  });
  started.stdin?.on('error', () => {
    forget();
    replaceDeadReaper(logger);
  });
  // Neither keeps the server alive: the reaper is there for when the server is gone.
  started.unref();
  (started.stdin as (NodeJS.WritableStream & { unref?: () => void }) | null)?.unref?.();
  let list = '';
  for (const [pid, graceMs] of groups) list += `+${pid} ${graceMs}\n`;
  started.stdin?.write(list);
}

let lastReplaced = Number.NEGATIVE_INFINITY;

/**
 * Starts a new reaper, with the current list, when the last one died while groups are listed: the
 * groups would otherwise go unwatched until the next run, and a group written to the dead one's pipe
 * meanwhile would be lost. At most once a second (a reaper that dies as it starts waits for the next
 * run instead of being started in a loop).
 */
function replaceDeadReaper(logger: Logger): void {
  if (reaper !== undefined || groups.size === 0) return;
  const now = Date.now();
  if (now - lastReplaced < 1000) return;
  lastReplaced = now;
  startReaper(logger);
}

/** A shell that fails hands over to the Node reaper at once, with the current list; Node's failure is logged. */
function reaperFailed(kind: ReaperKind, error: unknown, logger: Logger): void {
  if (kind === 'sh') {
    // Both 'error' and 'exit' may report the same failure: the hand-over happens once.
    if (shellUsable === false) return;
    shellUsable = false;
    logger.warn({ err: error }, 'exec: /bin/sh could not run the reaper; a Node reaper is used instead');
    if (reaper === undefined && groups.size > 0) startReaper(logger);
    if (reaperKind() !== undefined) return;
  }
  logger.warn({ err: error }, 'exec: the reaper could not be started; programs outlive a killed server');
}
