import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyAuditLines } from '../src/index.js';

const CHILD = fileURLToPath(new URL('./fixtures/audit-child.mjs', import.meta.url));

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'toolgate-audit-exit-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function runChild(mode: string, file: string): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, mode, file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

async function recordLines(file: string): Promise<string[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.split('\n').filter((line) => line !== '');
}

describe('process shutdown flushes (a real child process)', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    '%s: every record is written, then the process dies of the signal',
    async (signal) => {
      const file = join(dir, `${signal}.jsonl`);
      const exit = await runChild(signal.toLowerCase(), file);
      expect({ code: exit.code, signal: exit.signal, stdout: exit.stdout }).toEqual({
        code: null,
        signal,
        stdout: '',
      });
      const lines = await recordLines(file);
      expect(lines).toHaveLength(50);
      await expect(verifyAuditLines(lines)).resolves.toMatchObject({ intact: true, records: 50 });
    },
  );

  it('with the application’s own SIGTERM handler, audit flushes and leaves the ending to it', async () => {
    const file = join(dir, 'own.jsonl');
    const exit = await runChild('own-handler', file);
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 7, signal: null });
    // The application exited 50 ms after the signal; the slow sink needed longer, so what the hook
    // could flush by then is there, in order and chained.
    const lines = await recordLines(file);
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({ intact: true });
  });

  it('flushOnExit: false leaves the signal alone: the process dies at once, records unwritten', async () => {
    const file = join(dir, 'opt-out.jsonl');
    const exit = await runChild('opt-out', file);
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: null, signal: 'SIGTERM' });
    expect(await recordLines(file)).toEqual([]);
  });
});

describe('the default sink', () => {
  it('writes JSON lines to stderr and nothing to stdout', async () => {
    const exit = await runChild('stderr', join(dir, 'unused'));
    expect({ code: exit.code, stdout: exit.stdout }).toEqual({ code: 0, stdout: '' });
    const lines = exit.stderr.split('\n').filter((line) => line !== '');
    expect(lines.map((line) => JSON.parse(line) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ seq: 1, tool: 'ping', outcome: 'ok' }),
      expect.objectContaining({ seq: 2, tool: 'ping', outcome: 'ok' }),
      expect.objectContaining({ seq: 3, tool: 'ping', outcome: 'ok' }),
    ]);
    await expect(verifyAuditLines(lines)).resolves.toMatchObject({ intact: true, records: 3 });
  });
});
