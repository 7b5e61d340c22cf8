import { it } from 'vitest';

/** The Redis the tests use, or undefined when TEST_REDIS_URL is not set. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL;

/**
 * Without TEST_REDIS_URL: one test, named for what did not run, that fails in CI (CI=true) and says so
 * on stderr elsewhere, so a missing Redis is counted and visible, never a silent pass.
 */
export function reportRedisMissing(what: string): void {
  it(`needs Redis: ${what} did not run (set TEST_REDIS_URL=redis://127.0.0.1:6379)`, () => {
    if (process.env.CI === 'true')
      throw new Error(`${what} need Redis: TEST_REDIS_URL is not set (CI=true requires it)`);
    process.stderr.write(`confirm: ${what} did not run: TEST_REDIS_URL is not set\n`);
  });
}
