import { describe, expect, it } from 'vitest';
import { CIRCUIT_BREAKER_DEFAULTS, type CircuitBreakerOptions, createCircuitBreakers } from '../src/index.js';

function refused(options: CircuitBreakerOptions): () => void {
  return () => createCircuitBreakers(options).shutdown();
}

describe('createCircuitBreakers options', () => {
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
    });
    expect(Object.isFrozen(CIRCUIT_BREAKER_DEFAULTS)).toBe(true);
    expect(refused({})).not.toThrow();
    expect(refused({ capacity: Number.POSITIVE_INFINITY, timeout: false })).not.toThrow();
  });

  it.each([
    [
      { timeout: -5 },
      'options.timeout must be a positive number of milliseconds, or false to disable the deadline',
    ],
    [{ timeout: Number.NaN }, 'options.timeout must be a positive number'],
    [{ timeout: Number.POSITIVE_INFINITY }, 'options.timeout must be a positive number'],
    [
      { errorThresholdPercentage: 100 },
      'options.errorThresholdPercentage must be a number from 0 up to (not including) 100',
    ],
    [{ errorThresholdPercentage: -1 }, 'options.errorThresholdPercentage must be'],
    [{ consecutiveFailures: 0 }, 'options.consecutiveFailures must be an integer of at least 1, or false'],
    [{ consecutiveFailures: 1.5 }, 'options.consecutiveFailures must be an integer of at least 1, or false'],
    [{ volumeThreshold: 0 }, 'options.volumeThreshold must be an integer of at least 1'],
    [{ volumeThreshold: 2.5 }, 'options.volumeThreshold must be an integer of at least 1'],
    [{ rollingCountBuckets: 0 }, 'options.rollingCountBuckets must be an integer of at least 1'],
    [
      { rollingCountTimeout: 5, rollingCountBuckets: 10 },
      'options.rollingCountTimeout must be a number of milliseconds of at least rollingCountBuckets',
    ],
    [{ resetTimeout: 0 }, 'options.resetTimeout must be a positive number of milliseconds'],
    [{ capacity: 0 }, 'options.capacity must be an integer of at least 1, or Infinity'],
    [{ capacity: 1.5 }, 'options.capacity must be an integer of at least 1, or Infinity'],
    [
      { dependencies: { 'carrier-api': { volumeThreshold: 0 } } },
      'dependencies["carrier-api"].volumeThreshold must be',
    ],
    [{ tools: { slow: { resetTimeout: -1 } } }, 'tools["slow"].resetTimeout must be a positive number'],
  ] as [CircuitBreakerOptions, string][])('refuses %j', (options, message) => {
    expect(refused(options)).toThrow(`createCircuitBreakers: ${message}`);
  });

  it('refuses settings on a tool that shares a dependency: they belong to the dependency', () => {
    expect(refused({ tools: { track_shipment: { dependency: 'carrier-api', timeout: 5_000 } } })).toThrow(
      new TypeError(
        'createCircuitBreakers: tools["track_shipment"] names dependency "carrier-api", so its settings (timeout) belong in dependencies["carrier-api"]',
      ),
    );
    expect(refused({ tools: { track_shipment: { dependency: '' } } })).toThrow(
      'createCircuitBreakers: tools["track_shipment"].dependency must be a non-empty string',
    );
    expect(refused({ tools: { track_shipment: null as never } })).toThrow(
      'createCircuitBreakers: tools["track_shipment"] must be an object or false',
    );
  });

  it('refuses two sets of settings for one breaker name', () => {
    expect(
      refused({ tools: { search: { timeout: 100 } }, dependencies: { search: { timeout: 200 } } }),
    ).toThrow(
      'createCircuitBreakers: tools["search"] and dependencies["search"] would configure the same breaker',
    );
  });

  it('refuses a listener that is not a function', () => {
    const breakers = createCircuitBreakers();
    expect(() => breakers.on('open', 'nope' as never)).toThrow(
      'circuit breakers: a listener must be a function',
    );
    breakers.shutdown();
  });
});
