import { describe, expect, it } from 'vitest';
import {
  CIRCUIT_BREAKER_DEFAULTS,
  type CircuitBreakerOptions,
  createCircuitBreaker,
  createCircuitBreakers,
} from '../src/index.js';

function refused(options: CircuitBreakerOptions): () => void {
  return () => createCircuitBreaker(options).close();
}

describe('createCircuitBreaker options', () => {
  it('has stated, sane defaults for a tool server', () => {
    expect(CIRCUIT_BREAKER_DEFAULTS).toEqual({
      timeout: 30_000,
      consecutiveFailures: 5,
      errorThresholdPercentage: 50,
      volumeThreshold: 5,
      rollingCountTimeout: 60_000,
      rollingCountBuckets: 12,
      resetTimeout: 30_000,
      capacity: 32,
      callerShare: 0.5,
      isolateCallers: true,
      minFailingCallers: 2,
    });
    expect(Object.isFrozen(CIRCUIT_BREAKER_DEFAULTS)).toBe(true);
    expect(refused({})).not.toThrow();
    expect(refused({ capacity: Number.POSITIVE_INFINITY, timeout: false })).not.toThrow();
  });

  it.each([
    [{ timeout: -5 }, 'timeout must be a positive number of milliseconds, or false to disable the deadline'],
    [{ timeout: Number.NaN }, 'timeout must be a positive number'],
    [{ timeout: Number.POSITIVE_INFINITY }, 'timeout must be a positive number'],
    [
      { errorThresholdPercentage: 100 },
      'errorThresholdPercentage must be a number from 0 up to (not including) 100',
    ],
    [{ errorThresholdPercentage: -1 }, 'errorThresholdPercentage must be'],
    [{ consecutiveFailures: 0 }, 'consecutiveFailures must be an integer of at least 1, or false'],
    [{ consecutiveFailures: 1.5 }, 'consecutiveFailures must be an integer of at least 1, or false'],
    [{ volumeThreshold: 0 }, 'volumeThreshold must be an integer of at least 1'],
    [{ volumeThreshold: 2.5 }, 'volumeThreshold must be an integer of at least 1'],
    [{ rollingCountBuckets: 0 }, 'rollingCountBuckets must be an integer of at least 1'],
    [
      { rollingCountTimeout: 5, rollingCountBuckets: 10 },
      'rollingCountTimeout must be a number of milliseconds of at least rollingCountBuckets',
    ],
    [{ resetTimeout: 0 }, 'resetTimeout must be a positive number of milliseconds'],
    // Node runs a longer timer after 1 ms: the breaker would go half-open at once, the deadline spin.
    [
      { resetTimeout: 2 ** 31 },
      'resetTimeout must be at most 2147483647 ms (the longest timer Node.js runs)',
    ],
    [{ timeout: 2 ** 31 }, 'timeout must be at most 2147483647 ms (the longest timer Node.js runs)'],
    [
      { rollingCountTimeout: 2 ** 32, rollingCountBuckets: 1 },
      'rollingCountTimeout must be at most 2147483647 ms per bucket (the longest timer Node.js runs)',
    ],
    [{ capacity: 0 }, 'capacity must be an integer of at least 1, or Infinity'],
    [{ capacity: 1.5 }, 'capacity must be an integer of at least 1, or Infinity'],
    [{ isolateCallers: 'yes' as unknown as boolean }, 'isolateCallers must be true or false'],
    [
      { minFailingCallers: 1 },
      'minFailingCallers must be an integer of at least 2 (isolateCallers: false turns isolation off)',
    ],
    [{ tools: { slow: { minFailingCallers: 2.5 } } }, 'tools.slow: minFailingCallers must be an integer'],
    [
      { dependencies: { 'carrier-api': { volumeThreshold: 0 } } },
      'dependencies.carrier-api: volumeThreshold must be',
    ],
    [{ tools: { slow: { resetTimeout: -1 } } }, 'tools.slow: resetTimeout must be a positive number'],
  ] as [CircuitBreakerOptions, string][])('refuses %j', (options, message) => {
    expect(refused(options)).toThrow(`createCircuitBreaker: ${message}`);
  });

  it('refuses settings on a tool that shares a dependency: they belong to the dependency', () => {
    expect(refused({ tools: { track_shipment: { dependency: 'carrier-api', timeout: 5_000 } } })).toThrow(
      new TypeError(
        'createCircuitBreaker: tools.track_shipment: names dependency "carrier-api", so its settings (timeout) belong in dependencies.carrier-api',
      ),
    );
    expect(refused({ tools: { track_shipment: { dependency: '' } } })).toThrow(
      'createCircuitBreaker: tools.track_shipment: dependency must be a non-empty string',
    );
    expect(refused({ tools: { track_shipment: null as never } })).toThrow(
      'createCircuitBreaker: tools.track_shipment must be an object of options or false',
    );
  });

  it('refuses two sets of settings for one breaker name', () => {
    expect(
      refused({ tools: { search: { timeout: 100 } }, dependencies: { search: { timeout: 200 } } }),
    ).toThrow('createCircuitBreaker: tools.search and dependencies.search would configure the same breaker');
  });

  it('refuses an unknown per-tool option, naming the tool and what a tool may set', () => {
    expect(refused({ tools: { track_shipment: { timeoutMs: 5_000 } as never } })).toThrow(
      new TypeError(
        'createCircuitBreaker: tools.track_shipment has unknown option(s) timeoutMs; a tool may set timeout, consecutiveFailures, errorThresholdPercentage, volumeThreshold, rollingCountTimeout, rollingCountBuckets, resetTimeout, capacity, callerShare, isolateCallers, minFailingCallers, dependency',
      ),
    );
    expect(refused({ dependency: 'db' } as never)).toThrow(
      'createCircuitBreaker: dependency is a per-tool option (tools.<name>.dependency)',
    );
  });

  it('refuses a listener that is not a function', () => {
    const breaker = createCircuitBreaker();
    expect(() => breaker.on('open', 'nope' as never)).toThrow(
      'circuit breakers: a listener must be a function',
    );
    breaker.close();
  });

  it('keeps createCircuitBreakers one release, with the old { middleware, stats, on, shutdown } shape', () => {
    const old = createCircuitBreakers({ tools: { slow: { timeout: 100 } } });
    expect(typeof old.middleware).toBe('function');
    expect(old.stats()).toEqual({});
    expect(typeof old.on('open', () => undefined)).toBe('function');
    expect(() => old.shutdown()).not.toThrow();
    expect(() => createCircuitBreakers({ tools: { slow: { timeout: 0 } } })).toThrow(
      'createCircuitBreaker: tools.slow: timeout must be a positive number',
    );
  });
});
