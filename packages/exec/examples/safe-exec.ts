// The README's safeExec example, typechecked with the package (see examples/usage.ts).
import { defineTool, ok } from '@toolgate/core';
import * as z from 'zod';
import { safeExec, value } from '../src/index.js';

export const gitLog = defineTool({
  name: 'git_log',
  description: 'The last 20 commits that touched one file of the repository.',
  input: { path: z.string().describe('A file path inside the repository') },
  handler: async ({ path }, ctx) => {
    const outcome = await safeExec('/usr/bin/git', ['log', '--oneline', '-n', '20', '--', value(path)], {
      cwd: '/srv/repo',
      signal: ctx.signal,
      logger: ctx.logger,
    });
    // outcome: { exitCode, signal, stdout, stderr, stdoutBytes, stderrBytes, truncated, stoppedForOutput, stderrTail, durationMs }
    return ok({ commits: outcome.stdout.split('\n').filter((line) => line !== '') });
  },
});
