import type { AuditSink } from './types.js';

// Sinks of this package that are done with a batch's `bytes` once their `write` settles (they write
// or copy them within it): the writer seals the next batch into the same buffer instead of a new one.
// A custom sink may keep `bytes` (or the batch) after its write, so it always gets a buffer of its own.
const doneWhenSettled = new WeakSet<AuditSink>();

/** Marks a sink that never reads a batch's bytes after its `write` settled. */
export function doneWithBytesWhenSettled<S extends AuditSink>(sink: S): S {
  doneWhenSettled.add(sink);
  return sink;
}

/** Whether the writer may reuse a batch's buffer once `sink`'s write of it settled. */
export function isDoneWithBytesWhenSettled(sink: AuditSink): boolean {
  return doneWhenSettled.has(sink);
}
