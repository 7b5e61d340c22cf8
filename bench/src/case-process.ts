// In-process bench cases each in a process of its own: a deployment runs one server (one chain) per
// process, and cases sharing a process share its heap, its garbage and the JIT's type feedback (the
// HTTP bench measured that sharing was not neutral, session 6). The parent only schedules rounds; one
// child runs at a time.
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { BenchCase } from '@toolgate/bench-harness';

type Reply = { type: 'ready' } | { type: 'result'; us: number } | { type: 'closed' };

export interface CaseProcess {
  readonly benchCase: BenchCase;
  close(): Promise<void>;
}

/** Starts `mw-case-child.ts` for case `which` (`bare`, `empty`, `full` or a policy's name). */
export async function startCaseProcess(
  name: string,
  which: string,
  options: { otelSdk?: boolean } = {},
): Promise<CaseProcess> {
  const script = fileURLToPath(new URL('../benchmarks/mw-case-child.ts', import.meta.url));
  const child: ChildProcess = fork(script, [which], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, OTEL_SDK: options.otelSdk ? '1' : '0' },
  });
  let waiting: ((reply: Reply) => void) | undefined;
  let failed: Error | undefined;
  child.on('message', (reply: Reply) => {
    const wake = waiting;
    waiting = undefined;
    wake?.(reply);
  });
  child.once('exit', (code) => {
    failed = new Error(`bench case ${JSON.stringify(which)} exited with ${code}`);
    waiting?.({ type: 'closed' });
  });
  const next = (): Promise<Reply> =>
    new Promise<Reply>((resolve, reject) => {
      if (failed) reject(failed);
      else
        waiting = (reply) => {
          if (failed && reply.type !== 'closed') reject(failed);
          else resolve(reply);
        };
    });
  const ready = await next();
  if (ready.type !== 'ready') throw failed ?? new Error(`bench case ${which} did not start`);
  return {
    benchCase: {
      name,
      round: async (calls, concurrency) => {
        const reply = next();
        child.send({ type: 'round', calls, concurrency });
        const got = await reply;
        if (got.type !== 'result') throw failed ?? new Error(`bench case ${which} did not answer`);
        return got.us;
      },
    },
    close: async () => {
      if (failed) return;
      const reply = next();
      child.send({ type: 'close' });
      await reply.catch(() => undefined);
    },
  };
}
