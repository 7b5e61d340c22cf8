import { isPassThrough, runDetached, type ToolContext, type ToolMiddleware } from '@toolgate/core';
import { shutdownAnswer } from './answers.js';
import { DependencyBreaker } from './breaker.js';
import { CircuitEvents } from './events.js';
import { resolveOptions } from './settings.js';
import type {
  BreakerStats,
  CircuitBreaker,
  CircuitBreakerOptions,
  CircuitBreakers,
  CircuitEventListener,
  CircuitEventType,
} from './types.js';

/**
 * The middleware that runs each call through its tool's breaker: one per tool, or one per named
 * dependency shared by several tools. Breakers are made on a tool's first call and live until
 * `close()`; never one per call. The returned middleware also carries `stats()`, `state(name)`,
 * `on(type, listener)` and `close()`. Put it innermost:
 * `otel → audit → redact-errors → authz → rate-limit → repeat-guard → idempotency → confirm → circuit-breaker → handler`.
 */
export function createCircuitBreaker(options: CircuitBreakerOptions = {}): CircuitBreaker {
  const resolved = resolveOptions(options);
  const logger = options.logger;
  const events = new CircuitEvents();
  const breakers = new Map<string, DependencyBreaker>();
  // Per tool name, decided on its first call: its breaker, or null when it opted out.
  const plans = new Map<string, DependencyBreaker | null>();
  let shut = false;

  const breakerFor = (ctx: ToolContext): DependencyBreaker | null => {
    const planned = plans.get(ctx.toolName);
    if (planned !== undefined) return planned;
    const plan = resolved.plan(ctx.toolName);
    let breaker: DependencyBreaker | null = null;
    if (plan?.kind !== 'off') {
      const name = plan?.kind === 'shared' ? plan.dependency : ctx.toolName;
      breaker = breakers.get(name) ?? null;
      if (breaker === null) {
        const settings = resolved.breakerSettings(name);
        // Made outside the call that happens to come first: opossum's rolling-window interval lives as
        // long as the breaker and would keep that call's context (its span, its baggage) alive with it.
        const breakerLogger = logger ?? ctx.logger;
        breaker = runDetached(() => new DependencyBreaker(name, settings, breakerLogger, events));
        breakers.set(name, breaker);
      }
      breaker.tools.add(ctx.toolName);
    }
    plans.set(ctx.toolName, breaker);
    return breaker;
  };

  const middleware: ToolMiddleware = (ctx, next) => {
    // Unknown tools and refused arguments never reach a dependency: nothing to guard or count, and
    // no breaker is ever made for a name a client invents.
    if (isPassThrough(ctx)) return next();
    if (shut) {
      // A policy's answer, not the tool's outcome: recorded, so audit shows why and idempotency
      // (storeFailures) never keeps it for the retry after the restart.
      ctx.decisions.push({
        by: 'circuit-breaker',
        action: 'shut-down',
        reason: 'the breakers were closed: the server is shutting down',
        detail: {},
      });
      return Promise.resolve(shutdownAnswer(ctx.toolName));
    }
    const breaker = breakerFor(ctx);
    return breaker === null ? next() : breaker.run(ctx, next);
  };

  const close = (): void => {
    shut = true;
    for (const breaker of breakers.values()) breaker.shutdown();
    breakers.clear();
    plans.clear();
    events.clear();
  };

  return Object.assign(middleware, {
    stats() {
      const all: Record<string, BreakerStats> = {};
      for (const [name, breaker] of breakers) all[name] = breaker.stats();
      return all;
    },
    state(name: string) {
      return breakers.get(name)?.state();
    },
    on: (type: CircuitEventType, listener: CircuitEventListener) => events.on(type, listener),
    close,
    shutdown: close,
  });
}

/**
 * @deprecated Use `createCircuitBreaker(options)`, which returns the middleware itself with `stats()`,
 * `state(name)`, `on()` and `close()`. This alias (old shape: `{ middleware, stats, on, shutdown }`)
 * goes in the next release.
 */
export function createCircuitBreakers(options: CircuitBreakerOptions = {}): CircuitBreakers {
  const breaker = createCircuitBreaker(options);
  return {
    middleware: breaker,
    stats: () => breaker.stats(),
    on: (type, listener) => breaker.on(type, listener),
    shutdown: () => breaker.close(),
  };
}
