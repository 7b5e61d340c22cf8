import type { ChildProcess } from 'node:child_process';

/**
 * Signals the child's whole process group (it was spawned `detached`, so it leads its own group and
 * its children inherit it). A group that is already gone is not an error. On Windows, where there are
 * no process groups, only the child itself is signalled.
 */
export function signalProcessTree(child: ChildProcess, signal: NodeJS.Signals): void {
  const pid = child.pid;
  if (pid === undefined) return;
  try {
    if (process.platform === 'win32') child.kill(signal);
    else process.kill(-pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
