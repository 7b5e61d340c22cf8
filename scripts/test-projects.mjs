import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// What marks a test file as reading a service's address or CI: it then reports what it needs (or fails
// when CI=true), so its outcome depends on those variables.
const READS_SERVICES =
  /TEST_DATABASE_URL|TEST_REDIS_URL|process\.env\.CI\b|reportMissingService|fleet-harness|as-user/;

/**
 * A package's test files as two vitest projects, for a package where most files never read a service's
 * address: `services` (the files that do, or read CI: turbo's `test:services` task, whose cache key
 * holds those variables) and `standalone` (the rest: turbo's `test` task, whose key does not, so CI's
 * second run, the same command with PostgreSQL and Redis, replays it instead of running it again).
 * Decided by each file's text, so a new file that reads TEST_DATABASE_URL can never land in
 * `standalone`, where turbo would hide the variable from it.
 */
export function testProjects(testDir) {
  const dir = fileURLToPath(testDir);
  const files = readdirSync(dir)
    .filter((name) => name.endsWith('.test.ts'))
    .sort();
  const services = files.filter((name) => READS_SERVICES.test(readFileSync(`${dir}/${name}`, 'utf8')));
  const standalone = files.filter((name) => !services.includes(name));
  return [
    { extends: true, test: { name: 'standalone', include: standalone.map((name) => `test/${name}`) } },
    { extends: true, test: { name: 'services', include: services.map((name) => `test/${name}`) } },
  ];
}
