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
