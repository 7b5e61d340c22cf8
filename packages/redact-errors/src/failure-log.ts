import { createLogThrottle, type Logger } from '@toolgate/core';

/** One failure to log: the full line, and what a summary of its repeats should say. */
export interface FailureLine {
  /** The failure class: repeats of the same key within an interval are only counted. */
  key: string;
  logger: Logger;
  level: 'info' | 'warn' | 'error';
  message: string;
  /** The whole line (call fields, incident id, the error with its stack), built only when it is written. */
  fields: () => Record<string, unknown>;
  /** What every repeat shares (tool, outcome, reason): the summary line's fields. */
  common: Record<string, unknown>;
  /** The incident id the model saw, if any. */
  incidentId: string | undefined;
}

/** Logs failures, throttled per failure class. */
export type FailureLog = ((line: FailureLine) => void) & {
  /** Writes pending summaries now. */
  flush(): void;
};

/**
 * Incident ids one line lists (about 4 KB). When a flood fills the list before the interval ends, the
 * ids are written at once in a line of their own, so every id the model saw is in the log.
 */
export const MAX_LISTED_INCIDENTS = 200;
// Failure classes whose repeats are tracked at once. Past it the oldest class is forgotten, its pending
// ids written first (an upstream choosing a new error code per call must not push a real incident's ids
// out of the log); its next summary still has the count.
const MAX_CLASSES = 1000;

interface Repeats {
  /** The incident id of the line that carried the full error and stack. */
  readonly firstIncidentId: string | undefined;
  /** Incident ids of repeats not yet written. */
  ids: string[];
  /** The class's first line: where and how its ids are written. */
  readonly line: FailureLine;
}

/** Writes a class's pending incident ids at once, in a line of their own. */
function writeIds(key: string, state: Repeats): void {
  const { line } = state;
  line.logger[line.level](
    { ...line.common, failure: key, firstIncidentId: state.firstIncidentId, incidentIds: state.ids },
    `${line.message} (repeated: incident ids)`,
  );
  state.ids = [];
}

/**
 * During an outage every call fails the same way; logging each with its stack buried the line that
 * says what broke (1,826 lines in 10 s, issue 13). The first failure of a class is logged whole, under
 * its incident id; repeats within `intervalMs` become one summary line per interval with their count
 * and their incident ids (a full list of `MAX_LISTED_INCIDENTS` is written early, in a line of its own),
 * so an id the model quotes can always be found.
 */
export function createFailureLog(intervalMs: number): FailureLog {
  const throttle = createLogThrottle({ intervalMs });
  const repeats = new Map<string, Repeats>();

  const log = ((line: FailureLine): void => {
    // Counted first: if this turns out to be the first of a new window, its state is replaced below.
    const pending = repeats.get(line.key);
    if (pending !== undefined && line.incidentId !== undefined) {
      if (pending.ids.length >= MAX_LISTED_INCIDENTS) writeIds(line.key, pending);
      pending.ids.push(line.incidentId);
    }
    throttle(line.key, (suppressed) => {
      if (suppressed === 0) {
        repeats.delete(line.key);
        if (repeats.size >= MAX_CLASSES) {
          const [oldest, state] = repeats.entries().next().value as [string, Repeats];
          repeats.delete(oldest);
          if (state.ids.length > 0) writeIds(oldest, state);
        }
        repeats.set(line.key, { firstIncidentId: line.incidentId, ids: [], line });
        line.logger[line.level]({ ...line.fields(), failure: line.key }, line.message);
        return;
      }
      const state = repeats.get(line.key);
      const ids = state?.ids ?? [];
      if (state !== undefined) state.ids = [];
      line.logger[line.level](
        {
          ...line.common,
          failure: line.key,
          repeated: suppressed,
          intervalMs,
          firstIncidentId: state?.firstIncidentId,
          incidentIds: ids,
        },
        `${line.message} (repeated)`,
      );
    });
  }) as FailureLog;

  log.flush = () => throttle.flush();
  return log;
}

/**
 * What makes two failures "the same" for the log: the error's own `code` (`ECONNREFUSED`, a SQLSTATE),
 * else its name and the frame that threw it (two different bugs keep their own stacks). Each field is
 * read on its own and a getter or proxy trap that throws reads as absent: the class is then made of what
 * could be read, and the failure is still logged (and decided) as itself, not as the getter's error.
 */
export function failureClass(error: unknown): string {
  if (typeof error !== 'object' || error === null) return typeof error;
  const code = readField(error, 'code');
  if (typeof code === 'string' || typeof code === 'number') return String(code);
  const name = readField(error, 'name');
  const stack = readField(error, 'stack');
  const label = typeof name === 'string' ? name : 'Error';
  const frame = typeof stack === 'string' ? /\n\s*(at [^\n]*)/.exec(stack)?.[1] : undefined;
  return frame === undefined ? label : `${label} ${frame}`;
}

/** A field of a thrown value, or undefined when reading it throws (a getter, a proxy trap). */
function readField(error: object, field: 'code' | 'name' | 'stack'): unknown {
  try {
    return (error as Record<string, unknown>)[field];
  } catch {
    return undefined;
  }
}
