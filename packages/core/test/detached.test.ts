import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from 'vitest';
import { createLogThrottle, runDetached } from '../src/index.js';

describe('runDetached', () => {
  it('runs outside the caller’s async context, down to what it awaits and schedules', async () => {
    const storage = new AsyncLocalStorage<string>();
    const seen: (string | undefined)[] = [];
    const result = await storage.run('call 1', async () => {
      seen.push(storage.getStore()); // the control: inside the call
      const value = await runDetached(async () => {
        seen.push(storage.getStore());
        await new Promise((resolve) => setTimeout(resolve, 1));
        seen.push(storage.getStore());
        await new Promise<void>((resolve) => setImmediate(resolve));
        seen.push(storage.getStore());
        return 42;
      });
      seen.push(storage.getStore()); // and back inside once it returned
      return value;
    });
    expect(result).toBe(42);
    expect(seen).toEqual(['call 1', undefined, undefined, undefined, 'call 1']);
  });

  it('returns what fn returns and lets what fn throws through', () => {
    expect(runDetached(() => 'value')).toBe('value');
    expect(() =>
      runDetached(() => {
        throw new RangeError('boom');
      }),
    ).toThrow(RangeError);
  });

  it("a log throttle's later summary is written outside the call that opened the window", async () => {
    const storage = new AsyncLocalStorage<string>();
    const throttle = createLogThrottle({ intervalMs: 5 });
    const stores: (string | undefined)[] = [];
    storage.run('first call', () => {
      throttle('db-down', () => stores.push(storage.getStore()));
      throttle('db-down', () => stores.push(storage.getStore()));
    });
    await new Promise((resolve) => setTimeout(resolve, 30));
    // The first line belongs to the call that logged it; the summary (1 suppressed) to nobody.
    expect(stores).toEqual(['first call', undefined]);
    throttle.flush();
  });
});
