import type { ToolResult } from './result.js';

/**
 * After-call steps that run together. A middleware that maps the chain's outcome (replaces a failure,
 * records a call and may hold its answer back, answers a deadline) would write `pending.then(onResult,
 * onError)`: one microtask hop per such middleware on every call. With `mapSettled`, the steps of
 * middleware stacked on one another run in one pass, inner first, inside the reaction of the promise
 * they all wait on: the answer leaves one hop after the innermost step's source settles, however many
 * steps are stacked. Over HTTP, the SDK's Node adapter writes a response in one go only when the
 * answer is ready within a few hops of its first read, and three policies that each kept a `.then`
 * put the full stack past that (bench/PROFILE.md, session 26).
 *
 * The semantics are `.then`'s: each step gets what the step below answered (or threw), each step's
 * promise settles with what it answered, in order, and a step that answers a promise holds the steps
 * above it until that settles. Only the timing differs: an observer attached to a lower step's
 * promise (`afterSettled`) now runs after the steps above it computed their answers, still before the
 * answer leaves.
 *
 * A step is stacked onto the last step made when its `pending` is that step's promise and the stack
 * has not run yet: during one call's synchronous return through the chain, that is every middleware
 * that maps what its `next()` returned. Anything else (another call in between, a middleware that
 * awaited first, a promise of its own) starts a stack of its own: one hop, as `.then`.
 */

/**
 * One after-call step and the promise it settles. A class, built in one go: the first version pushed
 * `{ ...step, promise, resolve, reject }`, and an object spread with properties added after it took
 * 3.5 µs a step on Node 20 (measured; a class instance takes 0.03), most of a call's policy cost.
 */
class Step {
  resolve!: (answer: ToolResult | PromiseLike<ToolResult>) => void;
  reject!: (error: unknown) => void;
  readonly promise: Promise<ToolResult>;

  constructor(
    readonly onResult: (result: ToolResult) => ToolResult | PromiseLike<ToolResult>,
    readonly onError: (error: unknown) => ToolResult | PromiseLike<ToolResult>,
  ) {
    this.promise = new Promise<ToolResult>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }
}

class Stack {
  readonly steps: Step[] = [];
  ran = false;

  /** Runs the steps from `from` with the outcome below them: `value` answered (`ok`) or thrown. */
  run(value: unknown, ok: boolean, from: number): void {
    this.ran = true;
    // Nothing stacks onto a stack that ran; and the last call's steps are not kept alive until the next.
    if (lastStack === this) {
      lastStack = undefined;
      lastPromise = undefined;
    }
    const steps = this.steps;
    const last = steps.length - 1;
    for (let index = from; index <= last; index += 1) {
      const step = steps[index]!;
      let answer: unknown;
      let thenable: boolean;
      try {
        answer = ok ? step.onResult(value as ToolResult) : step.onError(value);
        // In the try too: a hostile answer's `then` getter may throw.
        thenable = isThenable(answer);
      } catch (error) {
        // A lower step's promise that nobody else holds must not report its rejection as unhandled:
        // the step above it takes the error, as a `.then` above it would have.
        if (index < last) step.promise.catch(ignore);
        step.reject(error);
        value = error;
        ok = false;
        continue;
      }
      if (thenable) {
        if (index < last) step.promise.catch(ignore);
        step.resolve(answer as PromiseLike<ToolResult>);
        if (index < last) this.#after(answer as PromiseLike<unknown>, index + 1);
        return;
      }
      step.resolve(answer as ToolResult);
      value = answer;
      ok = true;
    }
  }

  /** The steps from `from` wait for `pending`, an answer a step below them gave as a promise. */
  #after(pending: PromiseLike<unknown>, from: number): void {
    try {
      pending.then(
        (settled) => this.run(settled, true, from),
        (error: unknown) => this.run(error, false, from),
      );
    } catch (error) {
      this.run(error, false, from);
    }
  }
}

function ignore(): void {}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

// The promise of the last step made and its stack. Steps stack only onto it (see above): one
// comparison per step, nothing stored on the promise itself (a promise whose shape changed leaves
// V8's fast paths for `await` and `then`).
let lastPromise: Promise<ToolResult> | undefined;
let lastStack: Stack | undefined;

function push(stack: Stack, onResult: Step['onResult'], onError: Step['onError']): Promise<ToolResult> {
  const step = new Step(onResult, onError);
  stack.steps.push(step);
  lastPromise = step.promise;
  lastStack = stack;
  return step.promise;
}

/**
 * `pending.then(onResult, onError)` for a middleware's after-call step, run in one pass with the steps
 * stacked below it (see the module's comment). `onError` throws to pass an error on.
 */
export function mapSettled(
  pending: Promise<ToolResult>,
  onResult: (result: ToolResult) => ToolResult | PromiseLike<ToolResult>,
  onError: (error: unknown) => ToolResult | PromiseLike<ToolResult>,
): Promise<ToolResult> {
  if (pending === lastPromise && lastStack !== undefined && !lastStack.ran) {
    return push(lastStack, onResult, onError);
  }
  const stack = new Stack();
  const promise = push(stack, onResult, onError);
  pending.then(
    (result) => stack.run(result, true, 0),
    (error: unknown) => stack.run(error, false, 0),
  );
  return promise;
}

/** A call's answer its middleware settles itself (a deadline, a cancel, or the chain's outcome). */
export interface Settleable {
  readonly promise: Promise<ToolResult>;
  /** Settles `promise` (once: later calls do nothing), and runs the steps stacked on it in the same pass. */
  settle(answer: ToolResult | PromiseLike<ToolResult>): void;
}

const passResult = (result: ToolResult): ToolResult => result;
const passError = (error: unknown): never => {
  throw error;
};

/**
 * An answer promise for a middleware that races the chain (the circuit breaker's deadline): like
 * `new Promise(resolve => ...)`, but the steps `mapSettled` stacks on it run inside `settle`, so a
 * racing middleware costs the hops of the race alone.
 */
export function createSettleable(): Settleable {
  return new SettleableStack();
}

/** A stack whose first step passes on what `settle` is given: the stack is the settleable itself. */
class SettleableStack extends Stack implements Settleable {
  readonly promise: Promise<ToolResult> = push(this, passResult, passError);

  settle(answer: ToolResult | PromiseLike<ToolResult>): void {
    if (!this.ran) this.run(answer, true, 0);
  }
}
