import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const FIXTURE = fileURLToPath(new URL('./fixtures/pending-memory.mjs', import.meta.url));
const MAX_BUFFER_BYTES = 8 * 2 ** 20;

interface Measured {
  readonly calls: number;
  readonly countedBytes: number;
  readonly heldBytes: number;
}

/**
 * A child process (`--expose-gc`, which vitest's workers lack) serving real round trips into an audit
 * whose sink never answers, until its byte bound drops a record; it reports the heap growth after gc.
 */
async function measure(mode: string): Promise<Measured> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--expose-gc', FIXTURE, mode, String(MAX_BUFFER_BYTES)],
    { timeout: 50_000 },
  );
  return JSON.parse(stdout) as Measured;
}

describe('maxBufferBytes bounds the heap the waiting records hold, not only their length', () => {
  // Old: JSON built piece by piece (`out += piece`) was kept as a tree of its pieces, 28 bytes of heap
  // per counted character for an array of numbers (8 MiB counted, 230 MB held); CJK text took two
  // bytes per counted character; an oversized call's preview five.
  it.each([
    ['numbers', 'a 30,000-number array per call'],
    ['cjk', '30,000 CJK characters per call (two bytes each on the heap)'],
    ['preview', 'args over maxArgsChars: the marker and the preview'],
    ['small', 'a 100-number array per call'],
    ['caller-slice', "a caller id sliced from a fresh 16 KB string per call (an app's identify)"],
  ])('sink down, %s (%s): the heap grows by about the bytes counted', async (mode) => {
    const { calls, countedBytes, heldBytes } = await measure(mode);
    expect(calls).toBeGreaterThan(10);
    // The bound was reached: the buffer holds about maxBufferBytes.
    expect(countedBytes).toBeGreaterThan(MAX_BUFFER_BYTES * 0.9);
    expect(countedBytes).toBeLessThanOrEqual(MAX_BUFFER_BYTES);
    expect(heldBytes / countedBytes).toBeLessThan(1.15);
  });
});
