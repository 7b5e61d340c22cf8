import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { inject } from 'vitest';

const SERVER = fileURLToPath(new URL('./fixtures/crash-server.mjs', import.meta.url));

export interface CrashRunOptions {
  /** Which sink the child writes. */
  sink: 'file' | 'pglite' | 'postgres';
  /** File path, PGlite data directory or connection string. */
  target: string;
  durable: boolean;
  /** The child awaits `audit.ready()` before it connects its transport. @default false */
  ready?: boolean;
  /** Table for the pglite / postgres sinks. */
  table?: string;
  /** The writer on a thread of its own (`thread: true`; file sink only). @default false */
  thread?: boolean;
  /** Calls in flight at once. @default 64 */
  concurrency?: number;
  /** SIGKILL once this many answers arrived. @default 400 */
  killAfter?: number;
}

export interface CrashRun {
  /** The `n` of every call whose successful answer the client received (also those read after the kill). */
  answered: Set<number>;
  /** Answers that were errors (durable mode turns an unstorable record into `unavailable`). */
  errors: number;
  /** Calls sent in all. */
  sent: number;
  /**
   * Calls sent whose answers the client had not read when it sent SIGKILL: the load was still on. (Some
   * or all of them may still be answered from what the child had already written to the pipe.)
   */
  inFlightAtKill: number;
  /** The child's stderr, for diagnostics. */
  stderr: string;
}

/**
 * Starts the crash server (`node test/fixtures/crash-server.mjs`) over stdio with a real SDK client,
 * keeps `concurrency` calls in flight, sends SIGKILL once `killAfter` answers arrived, and returns
 * which calls were answered. Answers already in the pipe when the child died still count: the
 * client read them, so their records must exist in durable mode.
 */
export async function crashRun(options: CrashRunOptions): Promise<CrashRun> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    // --liftoff-only: as the test workers (vitest.config.ts), for the child's PGlite.
    args: [
      '--liftoff-only',
      SERVER,
      options.sink,
      options.target,
      options.durable ? 'durable' : 'default',
      ...(options.ready ? ['ready'] : []),
    ],
    env: {
      ...(process.env as Record<string, string>),
      AUDIT_TABLE: options.table ?? 'toolgate_audit',
      AUDIT_THREAD: options.thread ? '1' : '0',
      // A PGlite child starts its data directory from the one the global setup initialised (no initdb
      // of its own: see test/global-setup.ts); the kill then lands on it as on any other.
      ...(options.sink === 'pglite' ? { AUDIT_PGLITE_DATA_DIR: inject('pgliteDataDir') } : {}),
    },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const client = new Client({ name: 'crash-test', version: '1.0.0' });
  await client.connect(transport);
  const pid = transport.pid;
  if (pid === null) throw new Error('the crash server did not start');
  // The SDK keeps its ChildProcess private: the transport's close (the child's stdio closed) is the end.
  const exited = new Promise<void>((resolve) => {
    const previous = transport.onclose;
    transport.onclose = () => {
      previous?.();
      resolve();
    };
  });
  const answered = new Set<number>();
  let errors = 0;
  let sent = 0;
  let killed = false;
  let inFlightAtKill = 0;
  const killAfter = options.killAfter ?? 400;
  const worker = async (): Promise<void> => {
    while (!killed) {
      const n = sent;
      sent += 1;
      try {
        const result = await client.callTool({ name: 'ping', arguments: { n } });
        if (result.isError) errors += 1;
        else answered.add((result.structuredContent as { n: number }).n);
      } catch {
        // The connection closed under the call: it was never answered.
        return;
      }
      if (!killed && answered.size >= killAfter) {
        killed = true;
        inFlightAtKill = sent - answered.size - errors;
        process.kill(pid, 'SIGKILL');
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency ?? 64 }, worker));
  await exited;
  await client.close().catch(() => undefined);
  return { answered, errors, sent, inFlightAtKill, stderr };
}
