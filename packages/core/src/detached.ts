import { AsyncResource } from 'node:async_hooks';

// Made while this module loads, outside any call: its async context is the process's own.
const OUTSIDE_CALLS = new AsyncResource('toolgate.detached', { requireManualDestroy: true });

/**
 * Runs `fn` (and everything it goes on to await or schedule) in the async context this module was
 * loaded in, outside any call, and returns what it returns.
 *
 * For background work that a call merely starts on behalf of many: a batch writer that the first
 * record kicks, one timer that serves every call in flight, a log summary due later. Started inside the
 * call that happened to come first, such work would run in that call's context for as long as it
 * lasts: its database queries would join that call's trace (with an OpenTelemetry SDK), log lines
 * would carry its trace id, and every promise and timer it makes would carry the call's context along
 * (measured over HTTP with a real SDK: a few percent of a server's throughput).
 */
export function runDetached<T>(fn: () => T): T {
  return OUTSIDE_CALLS.runInAsyncScope(fn);
}
