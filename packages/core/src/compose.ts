import type { ToolResult } from './result.js';
import type { NextFn, ToolContext, ToolMiddleware } from './types.js';

/**
 * The onion: the first middleware listed is the outermost. Returns a middleware, so compositions
 * nest. A second `next()` from the same middleware rejects (in every environment), and a
 * synchronous throw becomes a rejection.
 */
export function compose(middlewares: readonly ToolMiddleware[]): ToolMiddleware {
  if (!Array.isArray(middlewares)) throw new TypeError('compose: middlewares must be an array');
  middlewares.forEach((entry, index) => {
    if (typeof entry !== 'function') throw new TypeError(`compose: middleware[${index}] is not a function`);
  });
  const stack = [...middlewares];
  // No middleware: the chain is its innermost step (the one promise it returns, nothing per call).
  if (stack.length === 0) {
    return function composed(_ctx: ToolContext, next: NextFn): Promise<ToolResult> {
      try {
        return Promise.resolve(next());
      } catch (error) {
        return Promise.reject(error);
      }
    };
  }

  return function composed(ctx: ToolContext, next: NextFn): Promise<ToolResult> {
    let lastIndex = -1;
    const dispatch = (index: number): Promise<ToolResult> => {
      if (index <= lastIndex) {
        return Promise.reject(new Error('next() called multiple times'));
      }
      lastIndex = index;
      if (index === stack.length) {
        try {
          return Promise.resolve(next());
        } catch (error) {
          return Promise.reject(error);
        }
      }
      const middleware = stack[index]!;
      try {
        return Promise.resolve(middleware(ctx, () => dispatch(index + 1)));
      } catch (error) {
        return Promise.reject(error);
      }
    };
    return dispatch(0);
  };
}

/**
 * The promise of `next()`, with a synchronous throw turned into a rejection: for a middleware that
 * follows the rest of the chain with `.then` instead of an async frame. (Core's chain never throws
 * synchronously; a caller driving a middleware by hand may.)
 */
export function callNext(next: NextFn): Promise<ToolResult> {
  try {
    return next();
  } catch (error) {
    return Promise.reject(error);
  }
}

/**
 * Runs `onResult` or `onError` when `pending` settles, beside the chain rather than in it: for a
 * middleware that only observes a call's outcome (records it, ends its span, remembers it) and answers
 * with `pending` itself. Its handlers are the first attached to `pending`, so they run before anything
 * the middleware's caller attaches, and the answer goes on in the same microtask turn. A `.then` that
 * hands the result on would add one microtask hop per such middleware to every call, and hops cost
 * more than their own work: over HTTP, the SDK's Node adapter sends headers and body in one write only
 * when the answer is ready within two hops of its first read, and one hop per policy put the full stack
 * past that (bench/PROFILE.md, session 26). What a handler throws goes to `onFault` (a middleware
 * passes its logger's report), never to the caller: the call's outcome is `pending`'s.
 */
export function afterSettled(
  pending: Promise<ToolResult>,
  onResult: (result: ToolResult) => void,
  onError: (error: unknown) => void,
  onFault?: (fault: unknown) => void,
): void {
  pending.then(
    (result) => {
      try {
        onResult(result);
      } catch (fault) {
        onFault?.(fault);
      }
    },
    (error: unknown) => {
      try {
        onError(error);
      } catch (fault) {
        onFault?.(fault);
      }
    },
  );
}
