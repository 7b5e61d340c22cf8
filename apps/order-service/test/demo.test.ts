import { describe, expect, it } from 'vitest';
import { DEMO_STEPS, runDemo } from '../src/demo.js';

// The demo is the first command of the root README; CI runs it and it checks its own table.
describe('demo', () => {
  it('every scripted call comes out as the table says, and the audit chain verifies', async () => {
    const report = await runDemo();
    expect(report.rows.filter((row) => !row.passed)).toEqual([]);
    expect(report.rows).toHaveLength(DEMO_STEPS.length + 2);
    expect(report.chain).toBe(`intact (${DEMO_STEPS.length} records)`);
    expect(report.incidentLogged).toBe(true);
    expect(report.passed).toBe(true);
  }, 300_000);
});
