// Section 1b's text (benchmarks/instructions.ts): the verdicts against issue 18's bounds read as
// shares of the bare round trip, from rows as the count gives them (session 13's first run).
import { describe, expect, it } from 'vitest';
import { type InstructionRow, instructionsSection } from '../benchmarks/instructions.js';

const row = (name: string, k: number, sha256K = 0): InstructionRow => ({
  name,
  perCall: k * 1000,
  spread: 200,
  sha256PerCall: sha256K * 1000,
  majorGcPerCall: 17_000,
  realUsPerCall: 1800,
});

const measured = [
  row('bare', 180.8),
  row('empty', 180.7),
  row('full', 248.0, 14.7),
  row('otel', 180.2),
  row('audit (file)', 224.1, 12.8),
  row('repeat-guard', 190.3),
  row('circuit-breaker', 184.2),
];

describe('section 1b', () => {
  it('checks the bounds as shares of the bare round trip', () => {
    const text = instructionsSection(measured);
    expect(text).toContain('## 1b. Instructions per call, in process (callgrind)');
    // Stack: +67.2 k of a 180.8 k round trip is 0.372, under 0.48 (86.8 k).
    expect(text).toMatch(
      /\| full stack \(no SDK\), over the bare SDK \| ≤ \+86\.8 k \(0\.48 of bare\) \| \+67\.2 k \(\+52\.5 k without SHA-256\) \| 0\.372 \| met \|/,
    );
    // The costliest policy but audit, over the empty chain: repeat-guard's +9.6 k.
    expect(text).toMatch(
      /\| costliest policy but audit \(repeat-guard\), over core's empty chain \| ≤ \+21\.7 k \(0\.12 of bare\) \| \+9\.6 k \| 0\.053 \| met \|/,
    );
    // Audit: +43.4 k over the empty chain, above 0.16 of bare (28.9 k).
    expect(text).toMatch(
      /\| audit \(file\) alone, over the empty chain \| ≤ \+28\.9 k \(0\.16 of bare\) \| \+43\.4 k \(\+30\.6 k without SHA-256\) \| 0\.240 \| missed \|/,
    );
    expect(text).toContain('| empty chain ratio | ≤ 1.05x | 0.999x | | met |');
    // One table row per case, with its spread and the full collector's share.
    expect(text).toContain(
      '| core + audit (file) alone | 224.1 k | 0.2 k | +43.3 k | +43.4 k | 1.239x | 12.8 k | 17.0 k | 1800 |',
    );
    expect(text).toContain('| core, empty chain | 180.7 k | 0.2 k | −0.1 k |  | 0.999x |  | 17.0 k | 1800 |');
  });

  it('reports a missed stack and a missed policy as missed', () => {
    const heavier = measured.map((entry) =>
      entry.name === 'full'
        ? row('full', 300)
        : entry.name === 'repeat-guard'
          ? row('repeat-guard', 205)
          : entry,
    );
    const text = instructionsSection(heavier);
    expect(text).toMatch(/\| full stack \(no SDK\), over the bare SDK \| .* \| 0\.659 \| missed \|/);
    expect(text).toMatch(
      /\| costliest policy but audit \(repeat-guard\), .* \| \+24\.3 k \| 0\.134 \| missed \|/,
    );
  });
});
