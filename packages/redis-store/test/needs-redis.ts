import { reportMissingService } from '@toolgate/core/testing';
import { it } from 'vitest';

/** The Redis the tests use, or undefined when TEST_REDIS_URL is not set. */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL;

/** Without TEST_REDIS_URL: one test named for what did not run, skipped with the reason (failed in CI). */
export function reportRedisMissing(what: string): void {
  reportMissingService(it, what, 'TEST_REDIS_URL', 'redis://127.0.0.1:6379');
}
