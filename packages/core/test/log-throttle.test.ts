import { afterEach, describe, expect, it, vi } from 'vitest';
import { createLogThrottle } from '../src/index.js';

describe('createLogThrottle', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('logs the first occurrence of a key at once, then one summary with the count per interval', () => {
    vi.useFakeTimers();
    const lines: string[] = [];
    const throttle = createLogThrottle({ intervalMs: 1000 });
    for (let i = 0; i < 1826; i += 1) {
      throttle('db-down', (suppressed) => lines.push(`call ${i} failed (+${suppressed} more)`));
    }
    expect(lines).toEqual(['call 0 failed (+0 more)']);
    vi.advanceTimersByTime(1000);
    expect(lines).toEqual(['call 0 failed (+0 more)', 'call 1825 failed (+1825 more)']);
    // Quiet for a whole interval: nothing more, and the next occurrence is logged at once again.
    vi.advanceTimersByTime(5000);
    expect(lines).toHaveLength(2);
    throttle('db-down', (suppressed) => lines.push(`again (+${suppressed} more)`));
    expect(lines.at(-1)).toBe('again (+0 more)');
  });

  it('keeps keys apart', () => {
    vi.useFakeTimers();
    const lines: string[] = [];
    const throttle = createLogThrottle({ intervalMs: 1000 });
    throttle('a', () => lines.push('a'));
    throttle('b', () => lines.push('b'));
    throttle('a', () => lines.push('a2'));
    expect(lines).toEqual(['a', 'b']);
  });

  it('flush() writes pending counts now; a throwing logger never throws out of it', () => {
    const lines: number[] = [];
    const throttle = createLogThrottle({ intervalMs: 60_000 });
    throttle('k', (n) => lines.push(n));
    throttle('k', (n) => lines.push(n));
    throttle('k', (n) => lines.push(n));
    throttle.flush();
    expect(lines).toEqual([0, 2]);
    expect(() =>
      throttle('k', () => {
        throw new Error('broken logger');
      }),
    ).not.toThrow();
    throttle.flush();
  });

  it('refuses an interval that is not a positive number', () => {
    expect(() => createLogThrottle({ intervalMs: 0 })).toThrow(RangeError);
    expect(() => createLogThrottle({ intervalMs: Number.NaN })).toThrow(RangeError);
  });
});
