import { spawn } from 'node:child_process';
import { once } from 'node:events';

/**
 * Runs the TypeScript module `script` (through tsx) in a process of its own, with `env` added to this
 * process's environment, and returns what it wrote to stdout once it exited 0 (its stderr passes
 * through). `what` names it in the error when it failed.
 */
export async function runInOwnProcess(
  script: string,
  env: Readonly<Record<string, string>>,
  what: string,
): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const chunks: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
  const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
  if (code !== 0) throw new Error(`bench: ${what} failed (${signal ?? `exit ${code}`})`);
  return Buffer.concat(chunks).toString('utf8');
}
