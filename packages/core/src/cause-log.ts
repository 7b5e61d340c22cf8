import { createLogThrottle } from './log-throttle.js';
import type { Logger } from './types.js';

/** Incident ids written in one line at most; more are written at once in a line of their own. */
const MAX_IDS_PER_LINE = 200;

interface Pending {
  ids: string[];
  logger: Logger;
}

/**
 * Logs the cause behind a ToolError the model saw, without flooding during an outage: per failure class
 * (tool, code, the cause's own code or name) the first occurrence is logged in full, with the error and
 * its stack; the rest are counted and their incident ids written in one summary line per interval, so
 * every id a model quoted can still be found in the log.
 */
export function createCauseLog(intervalMs = 60_000): (logger: Logger, fields: CauseFields) => void {
  const throttle = createLogThrottle({ intervalMs });
  const pending = new Map<string, Pending>();
  const writeIds = (key: string, entry: Pending, repeated: number): void => {
    if (entry.ids.length === 0 && repeated === 0) return;
    entry.logger.error(
      { failureClass: key, repeated, incidentIds: entry.ids },
      'tool errors with the same cause (first one logged in full)',
    );
    entry.ids = [];
  };
  return (logger, fields) => {
    const cause = fields.err.cause as { code?: unknown; name?: unknown } | undefined;
    const causeKind = String(cause?.code ?? cause?.name ?? 'unknown');
    const key = `${fields.tool}:${fields.code}:${causeKind}`;
    let first = false;
    throttle(key, (suppressed) => {
      if (suppressed === 0 && !first) {
        first = true;
        logger.error({ ...fields }, 'tool error with a cause');
        return;
      }
      const entry = pending.get(key);
      if (entry) {
        writeIds(key, entry, suppressed);
        pending.delete(key);
      }
    });
    if (first) return;
    const entry = pending.get(key) ?? { ids: [], logger };
    entry.ids.push(fields.incidentId);
    pending.set(key, entry);
    if (entry.ids.length >= MAX_IDS_PER_LINE) writeIds(key, entry, 0);
  };
}

export interface CauseFields {
  incidentId: string;
  tool: string;
  requestId: unknown;
  code: string;
  err: Error;
}
