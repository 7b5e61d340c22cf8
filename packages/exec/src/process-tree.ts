import type { ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';

/** `signalProcessTree`'s answer when the group held no process at all. */
export const GROUP_EMPTY = 'empty';

/**
 * Signals the child's whole process group (it was spawned `detached`, so it leads its own group and
 * its children inherit it). A group that is already gone is not an error. On Windows, where there are
 * no process groups, only the child itself is signalled.
 *
 * Never throws: it runs from timers and process events, where a throw would end the server. Any other
 * failure (EPERM: the group now holds only processes this server may not signal, such as a setuid
 * program the tool started) falls back to the child itself and is returned for the caller to log.
 * `GROUP_EMPTY` says the group had no process left (ESRCH): nothing to wait for.
 */
export function signalProcessTree(
  child: ChildProcess,
  signal: NodeJS.Signals,
): Error | typeof GROUP_EMPTY | undefined {
  const pid = child.pid;
  if (pid === undefined) return undefined;
  try {
    if (process.platform === 'win32') child.kill(signal);
    else process.kill(-pid, signal);
    return undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return GROUP_EMPTY;
    try {
      child.kill(signal);
    } catch {
      // The child is gone or not ours either: nothing more can be signalled.
    }
    return error instanceof Error ? error : new Error(String(error));
  }
}

// Between checks of a group that still had members after its SIGKILL: short first, then at most this.
const GROUP_POLL_MAX_MS = 50;

/**
 * Resolves true once the process group `pgid` holds no live process, or false when members are still
 * alive after `boundMs` (stuck in uninterruptible I/O, say). Called after the group got SIGKILL, so it
 * usually answers at the first check (one `kill(-pgid, 0)`). A zombie counts as gone: an init that
 * never reaps orphans (Node itself as PID 1 in a container, for one) would otherwise hold the group
 * open forever; a zombie holds no memory, descriptors or CPU.
 */
export function whenGroupGone(pgid: number, boundMs: number): Promise<boolean> | true {
  if (process.platform === 'win32' || !groupSignalable(pgid)) return true;
  const giveUpAt = performance.now() + boundMs;
  return new Promise<boolean>((resolve) => {
    let delayMs = 1;
    const check = async (): Promise<void> => {
      if (!groupSignalable(pgid) || !(await groupHasLiveMember(pgid))) {
        resolve(true);
        return;
      }
      if (performance.now() >= giveUpAt) {
        resolve(false);
        return;
      }
      setTimeout(() => void check(), delayMs).unref();
      delayMs = Math.min(delayMs * 2, GROUP_POLL_MAX_MS);
    };
    void check();
  });
}

/** False once `kill(-pgid, 0)` finds no process at all in the group (zombies included). */
function groupSignalable(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    // EPERM: members this server may not signal (a setuid program); they are there all the same.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/**
 * Whether any process of the group is alive (not a zombie). Linux: from /proc/<pid>/stat; elsewhere
 * (macOS's launchd reaps every orphan) a group `kill` still reaches is taken as alive.
 */
async function groupHasLiveMember(pgid: number): Promise<boolean> {
  if (process.platform !== 'linux') return true;
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return true;
  }
  const states = await Promise.all(
    entries.map(async (entry) => {
      if (!/^\d+$/.test(entry)) return false;
      try {
        return isLiveMember(await readFile(`/proc/${entry}/stat`, 'latin1'), pgid);
      } catch {
        return false; // gone while we looked
      }
    }),
  );
  return states.includes(true);
}

/** `pid (comm) state ppid pgrp ...`: comm may hold spaces and parentheses, so fields count from its last `)`. */
function isLiveMember(stat: string, pgid: number): boolean {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  return Number(fields[2]) === pgid && state !== 'Z' && state !== 'X';
}
