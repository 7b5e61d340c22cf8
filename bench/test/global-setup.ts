import { outageDatabaseUrl, prepareTestSchema } from '../src/test-database.js';

/**
 * Creates the suite's PostgreSQL schema (order-service tables and seed) once, before the fault files
 * run two at a time: each file prepares it again (idempotent once it exists), but two files creating
 * the same tables in an empty schema at the same moment can collide in PostgreSQL's catalog.
 * Without TEST_DATABASE_URL and outside CI a missing server is left to the files that need one: they
 * fail with their own message, and the files that do not need it still run.
 */
export default async function setup(): Promise<void> {
  try {
    await prepareTestSchema(outageDatabaseUrl());
  } catch (error) {
    if (process.env.TEST_DATABASE_URL || process.env.CI === 'true') throw error;
    process.stderr.write(
      `bench global setup: no PostgreSQL at the default address (${(error as Error).message}); the files that need one will say so\n`,
    );
  }
}
