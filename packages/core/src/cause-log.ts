import { runDetached } from './detached.js';
import { createLogThrottle } from './log-throttle.js';
import type { Logger } from './types.js';

/** Incident ids written in one line at most; more are written at once in a line of their own. */
const MAX_IDS_PER_LINE = 200;

interface Pending {
  ids: string[];
  logger: Logger;
  timer: NodeJS.Timeout;
}

/** Logs one ToolError cause (see `createCauseLog`); `flush()` writes the incident ids it holds now. */
export type CauseLog = ((logger: Logger, fields: CauseFields) => void) & { flush(): void };

/**
 * Logs the cause behind a ToolError the model saw, without flooding during an outage: per failure class
 * (tool, code, the cause's own code or name) the first occurrence in an interval is logged in full, with
 * the error and its stack; the incident ids of the rest are written in one summary line within `holdMs`
 * (or at once, 200 at a time), so every id a model quoted can be found in the log, and a crash loses at
 * most `holdMs` of them. `flush()` writes what is held (call it when the server closes). Never throws.
 */
export function createCauseLog(intervalMs = 60_000, holdMs = 1000): CauseLog {
  const throttle = createLogThrottle({ intervalMs });
  const pending = new Map<string, Pending>();
  const writeIds = (key: string, entry: Pending): void => {
    if (pending.get(key) === entry) pending.delete(key);
    clearTimeout(entry.timer);
    if (entry.ids.length === 0) return;
    const ids = entry.ids;
    entry.ids = [];
    try {
      entry.logger.error(
        { failureClass: key, repeated: ids.length, incidentIds: ids },
        'tool errors with the same cause (first one logged in full)',
      );
    } catch {
      // nothing sensible to do: the logger itself is broken
    }
  };
  const log = ((logger, fields) => {
    const cause = fields.err.cause as { code?: unknown; name?: unknown } | undefined;
    const causeKind = String(cause?.code ?? cause?.name ?? 'unknown');
    const during = fields.during === undefined ? '' : `${fields.during}:`;
    const key = `${during}${fields.tool}:${fields.code}:${causeKind}`;
    let first = false;
    throttle(key, (suppressed) => {
      if (suppressed === 0 && !first) {
        first = true;
        logger.error({ ...fields }, 'tool error with a cause');
        return;
      }
      // The end of an interval that held occurrences back: whatever is still held goes now.
      const entry = pending.get(key);
      if (entry) writeIds(key, entry);
    });
    if (first) return;
    let entry = pending.get(key);
    if (entry === undefined) {
      // Outside the call's async context (the line is for every call held); never holds the process open.
      const timer = runDetached(() => setTimeout(() => writeIds(key, created), holdMs));
      timer.unref();
      const created: Pending = { ids: [], logger, timer };
      entry = created;
      pending.set(key, entry);
    }
    entry.ids.push(fields.incidentId);
    if (entry.ids.length >= MAX_IDS_PER_LINE) writeIds(key, entry);
  }) as CauseLog;
  log.flush = (): void => {
    for (const [key, entry] of [...pending]) writeIds(key, entry);
  };
  return log;
}

export interface CauseFields {
  incidentId: string;
  tool: string;
  requestId: unknown;
  code: string;
  err: Error;
  /** What core was doing when it failed, when not running the chain (`identify`): its own failure class. */
  during?: string;
}
