// The bench harness's estimators: what RESULTS.md's "added µs" and "95% interval" columns are made of.
import { median, medianDifference, medianDifferenceInterval } from '@toolgate/bench-harness';
import { describe, expect, it } from 'vitest';

describe('bench harness estimators', () => {
  it('pairs each round with the baseline round of the same pass', () => {
    // A slow second round hits both cases: paired, the case costs 2 µs every round.
    expect(medianDifference([12, 42, 13], [10, 40, 11])).toBe(2);
    expect(median([3, 1, 2, 10])).toBe(2.5);
  });

  it('gives a zero-width interval when every round differs by the same amount', () => {
    const baseline = Array.from({ length: 60 }, (_, index) => 20 + (index % 7));
    const values = baseline.map((value) => value + 3);
    expect(medianDifferenceInterval(values, baseline)).toEqual([3, 3]);
  });

  it('holds the median, widens with the rounds’ spread, and repeats exactly for the same rounds', () => {
    const baseline = Array.from({ length: 60 }, () => 30);
    const spread = (width: number) =>
      baseline.map((value, index) => value + 4 + ((index * 37) % 11) * width - 5 * width);
    const [narrowLow, narrowHigh] = medianDifferenceInterval(spread(0.1), baseline);
    const [wideLow, wideHigh] = medianDifferenceInterval(spread(1), baseline);
    expect(narrowLow).toBeLessThanOrEqual(medianDifference(spread(0.1), baseline));
    expect(narrowHigh).toBeGreaterThanOrEqual(medianDifference(spread(0.1), baseline));
    expect(wideHigh - wideLow).toBeGreaterThan(narrowHigh - narrowLow);
    expect(medianDifferenceInterval(spread(1), baseline)).toEqual([wideLow, wideHigh]);
  });

  it('resamples whole sets of processes when told which set each round ran in', () => {
    // Three sets: in each the case is steady, but each set is off by its own amount (+1, +3, +5 µs).
    const baseline = Array.from({ length: 30 }, () => 30);
    const blocks = baseline.map((_, index) => Math.floor(index / 10));
    const values = baseline.map((value, index) => value + 1 + 2 * blocks[index]! + (index % 2) * 0.01);
    const [roundLow, roundHigh] = medianDifferenceInterval(values, baseline);
    const [setLow, setHigh] = medianDifferenceInterval(values, baseline, blocks);
    // Rounds taken as independent: a narrow interval around +3; by sets: as wide as the sets disagree.
    expect(roundHigh - roundLow).toBeLessThan(setHigh - setLow);
    expect(setLow).toBeLessThanOrEqual(1.01);
    expect(setHigh).toBeGreaterThanOrEqual(5);
  });
});
