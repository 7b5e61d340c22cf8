import { getEventListeners } from 'node:events';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { createDeadline, deadlineSignal } from '../src/index.js';

// A full garbage collection on demand (the flag set at run time, the function read from a new context).
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const aborted = (signal: AbortSignal): Promise<unknown> =>
  new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));

describe('deadlineSignal', () => {
  it('fires at its time limit even when garbage collections run meanwhile', async () => {
    // AbortSignal.any([signal, AbortSignal.timeout()]) never fired here on Node 20: the collection took
    // the timeout signal it held weakly.
    const outer = new AbortController();
    const signal = deadlineSignal(outer.signal, 150);
    const reason = aborted(signal);
    for (let i = 0; i < 5; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      collectGarbage();
    }
    expect(await reason).toMatchObject({ name: 'TimeoutError' });
    expect(outer.signal.aborted).toBe(false);
  });

  it('follows the outer signal, with its reason, and without one', async () => {
    const outer = new AbortController();
    const signal = deadlineSignal(outer.signal, 60_000);
    const reason = aborted(signal);
    outer.abort(new Error('client cancelled'));
    expect(await reason).toEqual(new Error('client cancelled'));
    const already = new AbortController();
    already.abort(new Error('gone'));
    expect(deadlineSignal(already.signal, 60_000).reason).toEqual(new Error('gone'));
    expect(await aborted(deadlineSignal(undefined, 30))).toMatchObject({ name: 'TimeoutError' });
    expect(() => deadlineSignal(undefined, 0)).toThrow(RangeError);
  });
});

describe('createDeadline', () => {
  it('lets go of the caller’s signal and its timer once released: 1000 finished calls hold nothing', async () => {
    // A long-lived signal (a connection's, a server's) under many calls: each deadline held a listener
    // on it until its time limit, after its work was long done.
    const outer = new AbortController();
    for (let i = 0; i < 1000; i += 1) createDeadline(outer.signal, 60_000).release();
    expect(getEventListeners(outer.signal, 'abort')).toHaveLength(0);
    const released = createDeadline(outer.signal, 30);
    released.release();
    released.release();
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(released.signal.aborted).toBe(false);
    outer.abort(new Error('client cancelled'));
    expect(released.signal.aborted).toBe(false);
  });

  it('aborts like deadlineSignal until released', async () => {
    const outer = new AbortController();
    const deadline = createDeadline(outer.signal, 60_000);
    expect(getEventListeners(outer.signal, 'abort')).toHaveLength(1);
    const reason = aborted(deadline.signal);
    outer.abort(new Error('client cancelled'));
    expect(await reason).toEqual(new Error('client cancelled'));
    expect(await aborted(createDeadline(undefined, 30).signal)).toMatchObject({ name: 'TimeoutError' });
    expect(() => createDeadline(undefined, -1)).toThrow(RangeError);
  });
});
