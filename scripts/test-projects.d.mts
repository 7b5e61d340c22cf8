/** A vitest project: the root config (`extends: true`) with a name and the files it runs. */
export interface TestProject {
  extends: true;
  test: { name: 'standalone' | 'services'; include: string[] };
}

/** The `standalone` and `services` projects of the test files in `testDir` (see test-projects.mjs). */
export function testProjects(testDir: URL): TestProject[];
