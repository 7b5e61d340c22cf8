// Section 1b's text (benchmarks/instructions.ts): the verdicts against issue 18's bounds read as
// shares of the bare round trip, with SHA-256's AVX2 instructions weighed at their native share.
import { describe, expect, it } from 'vitest';
import { type InstructionRow, instructionsSection, steadyInstructions } from '../benchmarks/instructions.js';

const row = (name: string, k: number, sha256K = 0): InstructionRow => ({
  name,
  perCall: k * 1000,
  spread: 200,
  sha256PerCall: sha256K * 1000,
  majorGcPerCall: 17_000,
  compilerPerCall: 500,
  realUsPerCall: 1800,
});

const measured = [
  row('bare', 163.0),
  row('empty', 163.2),
  row('full', 215.0, 14.7),
  row('otel', 162.5),
  row("audit (file on the calls' thread)", 193.0, 12.8),
  row('repeat-guard', 172.0),
  row('circuit-breaker', 166.0),
];

describe('section 1b', () => {
  it('checks the bounds as shares of the bare round trip, SHA-256 weighed at its native share', () => {
    const text = instructionsSection(measured, 0.35);
    expect(text).toContain('## 1b. Instructions per call, in process (callgrind)');
    expect(text).toContain("costs 0.35 of the AVX2 code's time");
    // Stack: +52.0 k counted; its 14.7 k of SHA-256 weigh 0.35 of that natively: +42.4 k, 0.260 of
    // a 163.0 k round trip, under 0.48 (78.2 k).
    expect(text).toContain(
      '| full stack (no SDK), over the bare SDK | ≤ +78.2 k (0.48 of bare) | +52.0 k | +42.4 k | 0.260 | met |',
    );
    // The costliest policy but audit, over the empty chain: repeat-guard's +8.8 k (no SHA-256).
    expect(text).toContain(
      "| costliest policy but audit (repeat-guard), over core's empty chain | ≤ +19.6 k (0.12 of bare) | +8.8 k |  | 0.054 | met |",
    );
    // Audit: +29.8 k counted, +21.5 k natively, under 0.16 of bare (26.1 k).
    expect(text).toContain(
      "| audit (file on the calls' thread) alone, over the empty chain | ≤ +26.1 k (0.16 of bare) | +29.8 k | +21.5 k | 0.132 | met |",
    );
    expect(text).toContain('| empty chain ratio | ≤ 1.05x | 1.001x | | | met |');
    // One table row per case, with its spread and what was counted beside it.
    expect(text).toContain(
      "| core + audit (file on the calls' thread) alone | 193.0 k | 0.2 k | +30.0 k | +29.8 k | 1.184x | 12.8 k | 17.0 k | 0.5 k | 1800 |",
    );
    expect(text).toContain(
      '| core, empty chain | 163.2 k | 0.2 k | +0.2 k |  | 1.001x |  | 17.0 k | 0.5 k | 1800 |',
    );
  });

  it('judges the AVX2 count as it is on a CPU without SHA extensions', () => {
    const text = instructionsSection(measured, 1);
    expect(text).toContain(
      "| audit (file on the calls' thread) alone, over the empty chain | ≤ +26.1 k (0.16 of bare) | +29.8 k | +29.8 k | 0.183 | missed |",
    );
  });

  it('reports a missed stack and a missed policy as missed', () => {
    const heavier = measured.map((entry) =>
      entry.name === 'full'
        ? row('full', 300)
        : entry.name === 'repeat-guard'
          ? row('repeat-guard', 185)
          : entry,
    );
    const text = instructionsSection(heavier, 0.35);
    expect(text).toMatch(/\| full stack \(no SDK\), over the bare SDK \| .* \| 0\.840 \| missed \|/);
    expect(text).toMatch(
      /\| costliest policy but audit \(repeat-guard\), .* \| \+21\.8 k \| {2}\| 0\.134 \| missed \|/,
    );
  });

  it('charges a call with neither the full collector nor the compilers', () => {
    expect(steadyInstructions({ total: 1_000_000, majorGc: 150_000, compiler: 50_000 })).toBe(800_000);
  });
});
