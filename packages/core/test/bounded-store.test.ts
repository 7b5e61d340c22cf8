import { describe, expect, it } from 'vitest';
import {
  boundStore,
  createMemoryStore,
  type KeyValueStore,
  type Logger,
  StoreFullError,
} from '../src/index.js';

/** A store whose operations never settle, keeping the signal each was given. */
function hangingStore(signals: (AbortSignal | undefined)[]): KeyValueStore {
  const hang = (options?: { signal?: AbortSignal }) => {
    signals.push(options?.signal);
    return new Promise<never>(() => {});
  };
  return {
    setIfAbsent: (_k, _v, _t, options) => hang(options),
    set: (_k, _v, _t, options) => hang(options),
    get: (_k, options) => hang(options),
    delete: (_k, options) => hang(options),
  };
}

describe('boundStore', () => {
  it('passes operations through to the store, with the call’s signal', async () => {
    const bounded = boundStore(createMemoryStore(), 200, 'test');
    const signal = new AbortController().signal;
    expect(await bounded.setIfAbsent('k', 'v', 1000, signal)).toBe(true);
    expect(await bounded.setIfAbsent('k', 'w', 1000)).toBe(false);
    expect(await bounded.get('k', signal)).toBe('v');
    await bounded.set('k', 'x', 1000);
    expect(await bounded.get('k')).toBe('x');
    expect(await bounded.delete('k', signal)).toBe(true);
    expect(await bounded.get('k')).toBeUndefined();
  });

  it('fails a store that does not answer with a TimeoutError named for the policy', async () => {
    const signals: (AbortSignal | undefined)[] = [];
    const bounded = boundStore(hangingStore(signals), 30, 'confirm');
    const failure = await bounded.get('k').catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(DOMException);
    expect(failure).toMatchObject({
      name: 'TimeoutError',
      message: 'confirm: the store did not answer within 30 ms',
    });
  });

  it('rejects with the signal’s reason when the call aborts, and hands the store the signal', async () => {
    const signals: (AbortSignal | undefined)[] = [];
    const bounded = boundStore(hangingStore(signals), 10_000, 'test');
    const controller = new AbortController();
    const pending = bounded.setIfAbsent('k', 'v', 1000, controller.signal);
    const reason = new Error('client went away');
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    expect(signals).toEqual([controller.signal]);
    await expect(bounded.get('k', controller.signal)).rejects.toBe(reason);
    expect(signals).toHaveLength(1);
  });

  it('logs the first failure of an operation in full, then holds repeats back', () => {
    const lines: { fields: unknown; message: string }[] = [];
    const logger = {
      warn: (fields: unknown, message: string) => lines.push({ fields, message }),
    } as unknown as Logger;
    const bounded = boundStore(createMemoryStore(), 100, 'confirm');
    const error = new Error('connect ECONNREFUSED 127.0.0.1:6379');
    bounded.failed('get', error, logger, 'calls are refused');
    bounded.failed('get', error, logger, 'calls are refused');
    expect(lines).toEqual([
      {
        fields: { operation: 'get', err: error },
        message: 'confirm: the store failed (get); calls are refused',
      },
    ]);
    bounded.flush();
    expect(lines).toHaveLength(2);
    expect(lines[1]!.message).toBe('confirm: the store failed 1 more times (get); calls are refused');
  });

  it('logs a full store as full, on lines of its own: a flood never holds back an outage’s first line', () => {
    const lines: { fields: unknown; message: string }[] = [];
    const logger = {
      warn: (fields: unknown, message: string) => lines.push({ fields, message }),
    } as unknown as Logger;
    const bounded = boundStore(createMemoryStore(), 100, 'idempotency');
    const scopeFull = new StoreFullError('scope', 10);
    const storeFull = new StoreFullError('store', 100);
    const outage = new Error('connect ECONNREFUSED 127.0.0.1:6379');
    for (let i = 0; i < 3; i += 1) bounded.failed('setIfAbsent', scopeFull, logger, 'refused rate_limited');
    bounded.failed('setIfAbsent', storeFull, logger, 'refused rate_limited');
    bounded.failed('setIfAbsent', outage, logger, 'refused unavailable');
    expect(lines).toEqual([
      {
        fields: { operation: 'setIfAbsent', err: scopeFull },
        message: 'idempotency: the store is full (setIfAbsent, per scope); refused rate_limited',
      },
      {
        fields: { operation: 'setIfAbsent', err: storeFull },
        message: 'idempotency: the store is full (setIfAbsent, in total); refused rate_limited',
      },
      {
        fields: { operation: 'setIfAbsent', err: outage },
        message: 'idempotency: the store failed (setIfAbsent); refused unavailable',
      },
    ]);
    bounded.flush();
    expect(lines[3]).toEqual({
      fields: { operation: 'setIfAbsent', err: scopeFull, repeated: 2 },
      message: 'idempotency: the store was full 2 more times (setIfAbsent, per scope); refused rate_limited',
    });
    expect(lines).toHaveLength(4);
  });
});
