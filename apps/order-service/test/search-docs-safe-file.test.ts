import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  openUnderRoot,
  readFileUnderRoot,
  SafeFileRefusal,
  type SafeFileRefusalReason,
} from '../src/safe-file.js';

const base = realpathSync(mkdtempSync(join(tmpdir(), 'safe-file-')));
const root = join(base, 'root');
const outside = join(base, 'outside');
mkdirSync(join(root, 'sub'), { recursive: true });
mkdirSync(outside);
writeFileSync(join(root, 'inside.md'), 'inside text\n');
writeFileSync(join(root, 'sub', 'deep.md'), 'deep text\n');
writeFileSync(join(outside, 'secret.md'), 'hunter2\n');
symlinkSync(join(root, 'inside.md'), join(root, 'link-in.md'));
symlinkSync('sub/deep.md', join(root, 'relative-link.md'));
symlinkSync(join(outside, 'secret.md'), join(root, 'link-out.md'));
symlinkSync(outside, join(root, 'dir-out'));
symlinkSync('/dev/null', join(root, 'device-link'));
linkSync(join(outside, 'secret.md'), join(root, 'hard.md'));
execFileSync('mkfifo', [join(root, 'pipe.md')]);

afterAll(() => rmSync(base, { recursive: true, force: true }));

async function refusal(relativePath: string, options = {}): Promise<SafeFileRefusalReason> {
  const error = await openUnderRoot(root, relativePath, options).then(
    async (opened) => {
      await opened.handle.close();
      return undefined;
    },
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(SafeFileRefusal);
  return (error as SafeFileRefusal).reason;
}

describe('openUnderRoot', () => {
  it('opens a regular file under the root and reads it from the descriptor', async () => {
    expect(await readFileUnderRoot(root, 'inside.md', { maxBytes: 100 })).toEqual({
      relativePath: 'inside.md',
      text: 'inside text\n',
    });
    expect(await readFileUnderRoot(root, 'sub/./deep.md', { maxBytes: 100 })).toEqual({
      relativePath: 'sub/deep.md',
      text: 'deep text\n',
    });
  });

  it('follows symlinks that stay inside the root and names the file they point to', async () => {
    expect(await readFileUnderRoot(root, 'link-in.md', { maxBytes: 100 })).toEqual({
      relativePath: 'inside.md',
      text: 'inside text\n',
    });
    expect((await readFileUnderRoot(root, 'relative-link.md', { maxBytes: 100 })).relativePath).toBe(
      'sub/deep.md',
    );
  });

  it.each([
    ['link-out.md', 'outside_root'],
    ['dir-out/secret.md', 'outside_root'],
    ['device-link', 'outside_root'],
    ['../outside/secret.md', 'outside_root'],
    ['sub/../../outside/secret.md', 'outside_root'],
    ['..', 'outside_root'],
    ['.', 'outside_root'],
    [join(outside, 'secret.md'), 'invalid_path'],
    ['/etc/passwd', 'invalid_path'],
    ['\\etc\\passwd', 'invalid_path'],
    ['inside.md\u0000.png', 'invalid_path'],
    ['', 'invalid_path'],
    ['missing.md', 'not_found'],
    ['sub', 'not_regular'],
    ['pipe.md', 'not_regular'],
    ['hard.md', 'hard_link'],
  ] as const)('refuses %j as %s', async (path, reason) => {
    expect(await refusal(path)).toBe(reason);
  });

  it('opens a FIFO never: the call returns at once instead of waiting for a writer', async () => {
    // Had it opened the FIFO for reading without O_NONBLOCK, this would hang until the test timed out.
    expect(await refusal('pipe.md')).toBe('not_regular');
  });

  it('reads a hard-linked file only when allowHardLinks says so', async () => {
    const opened = await openUnderRoot(root, 'hard.md', { allowHardLinks: true });
    await opened.handle.close();
    expect([opened.relativePath, opened.stats.nlink]).toEqual(['hard.md', 2]);
  });

  it('refuses a file larger than maxBytes', async () => {
    expect(await refusal('inside.md', { maxBytes: 3 })).toBe('too_large');
  });

  it('never returns a file outside the root while a link and a folder are swapped under it', async () => {
    const raceRoot = join(base, 'race-root');
    const raceOut = join(base, 'race-out');
    mkdirSync(join(raceRoot, 'dir'), { recursive: true });
    mkdirSync(raceOut);
    writeFileSync(join(raceRoot, 'real.md'), 'inside\n');
    writeFileSync(join(raceRoot, 'dir', 'doc.md'), 'inside\n');
    writeFileSync(join(raceOut, 'doc.md'), 'OUTSIDE\n');
    symlinkSync('real.md', join(raceRoot, 'swap.md'));
    let stop = false;
    // The attacker: alternates swap.md between an inside and an outside target, and dir/ between a
    // real folder and a link to the outside folder, as fast as the event loop lets it.
    const attacker = (async () => {
      const { rename, symlink, unlink } = await import('node:fs/promises');
      let round = 0;
      while (!stop) {
        round += 1;
        const target = round % 2 === 0 ? 'real.md' : join(raceOut, 'doc.md');
        await symlink(target, join(raceRoot, 'swap.tmp'));
        await rename(join(raceRoot, 'swap.tmp'), join(raceRoot, 'swap.md'));
        await rename(join(raceRoot, 'dir'), join(raceRoot, 'dir.real'));
        await symlink(raceOut, join(raceRoot, 'dir'));
        await unlink(join(raceRoot, 'dir'));
        await rename(join(raceRoot, 'dir.real'), join(raceRoot, 'dir'));
      }
    })();
    const seen = { inside: 0, outside: 0, refused: 0 };
    const until = Date.now() + 2000;
    while (Date.now() < until) {
      for (const path of ['swap.md', 'dir/doc.md']) {
        try {
          const { text } = await readFileUnderRoot(raceRoot, path, { maxBytes: 100 });
          seen[text === 'inside\n' ? 'inside' : 'outside'] += 1;
        } catch (error) {
          if (!(error instanceof SafeFileRefusal)) throw error;
          seen.refused += 1;
        }
      }
    }
    stop = true;
    await attacker;
    expect(seen.outside).toBe(0);
    expect(seen.inside).toBeGreaterThan(0);
    expect(seen.refused).toBeGreaterThan(0);
  });
});
