import type { ChildProcess } from 'node:child_process';

/**
 * Signals the child's whole process group (it was spawned `detached`, so it leads its own group and
 * its children inherit it). A group that is already gone is not an error. On Windows, where there are
 * no process groups, only the child itself is signalled.
 *
 * Never throws: it runs from timers and process events, where a throw would end the server. Any other
 * failure (EPERM: the group now holds only processes this server may not signal, such as a setuid
 * program the tool started) falls back to the child itself and is returned for the caller to log.
 */
export function signalProcessTree(child: ChildProcess, signal: NodeJS.Signals): Error | undefined {
  const pid = child.pid;
  if (pid === undefined) return undefined;
  try {
    if (process.platform === 'win32') child.kill(signal);
    else process.kill(-pid, signal);
    return undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return undefined;
    try {
      child.kill(signal);
    } catch {
      // The child is gone or not ours either: nothing more can be signalled.
    }
    return error instanceof Error ? error : new Error(String(error));
  }
}
