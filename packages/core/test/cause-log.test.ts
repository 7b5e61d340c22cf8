import { afterEach, describe, expect, it, vi } from 'vitest';
import { createCauseLog } from '../src/cause-log.js';
import { type LogEntry, recordingLogger } from '../src/testing.js';

const refused = (): Error =>
  new Error('unavailable', {
    cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
  });

const SUMMARY = 'tool errors with the same cause (first one logged in full)';

function failure(n: number, tool = 'search'): Parameters<ReturnType<typeof createCauseLog>>[1] {
  return { incidentId: `inc_${n}`, tool, requestId: n, code: 'unavailable', err: refused() };
}

describe('createCauseLog', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('writes the first cause in full, then a summary with the count and every incident id', async () => {
    const entries: LogEntry[] = [];
    const logger = recordingLogger(entries);
    const log = createCauseLog(30);
    for (let n = 0; n < 5; n++) {
      log(logger, {
        incidentId: `inc_${n}`,
        tool: 'search',
        requestId: n,
        code: 'unavailable',
        err: refused(),
      });
    }
    log(logger, {
      incidentId: 'inc_other',
      tool: 'track',
      requestId: 9,
      code: 'unavailable',
      err: refused(),
    });
    await new Promise((done) => setTimeout(done, 80));
    expect(
      entries.map((entry) => [entry.message, entry.fields.incidentId ?? entry.fields.incidentIds]),
    ).toEqual([
      ['tool error with a cause', 'inc_0'],
      ['tool error with a cause', 'inc_other'],
      ['tool errors with the same cause (first one logged in full)', ['inc_1', 'inc_2', 'inc_3', 'inc_4']],
    ]);
    expect(entries[2]!.fields).toMatchObject({
      failureClass: 'search:unavailable:ECONNREFUSED',
      repeated: 4,
    });
  });

  it('writes a full list of incident ids at once rather than holding more than 200', () => {
    const entries: LogEntry[] = [];
    const logger = recordingLogger(entries);
    const log = createCauseLog(60_000);
    for (let n = 0; n <= 200; n++) {
      log(logger, {
        incidentId: `inc_${n}`,
        tool: 'search',
        requestId: n,
        code: 'unavailable',
        err: refused(),
      });
    }
    expect(entries).toHaveLength(2);
    expect((entries[1]!.fields.incidentIds as string[]).length).toBe(200);
  });

  it('writes the ids it holds within a second, long before the interval ends (a crash loses at most that)', () => {
    vi.useFakeTimers();
    const entries: LogEntry[] = [];
    const logger = recordingLogger(entries);
    const log = createCauseLog(60_000, 1000);
    for (let n = 0; n < 3; n++) log(logger, failure(n));
    expect(entries.map((entry) => entry.message)).toEqual(['tool error with a cause']);
    vi.advanceTimersByTime(999);
    expect(entries).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(entries.slice(1)).toEqual([
      {
        level: 'error',
        message: SUMMARY,
        fields: {
          failureClass: 'search:unavailable:ECONNREFUSED',
          repeated: 2,
          incidentIds: ['inc_1', 'inc_2'],
        },
      },
    ]);
    // Still one full line per class per interval: later failures are ids only, a line per second at most.
    for (let n = 3; n < 6; n++) log(logger, failure(n));
    vi.advanceTimersByTime(1000);
    expect(entries.map((entry) => entry.message)).toEqual(['tool error with a cause', SUMMARY, SUMMARY]);
    expect(entries[2]!.fields.incidentIds).toEqual(['inc_3', 'inc_4', 'inc_5']);
    // The interval's end has nothing left to write.
    vi.advanceTimersByTime(60_000);
    expect(entries).toHaveLength(3);
  });

  it('flush() writes the held ids at once, per failure class, and nothing when none are held', () => {
    vi.useFakeTimers();
    const entries: LogEntry[] = [];
    const logger = recordingLogger(entries);
    const log = createCauseLog(60_000, 1000);
    for (let n = 0; n < 3; n++) log(logger, failure(n));
    for (let n = 10; n < 12; n++) log(logger, failure(n, 'track'));
    log.flush();
    expect(
      entries.map((entry) => [entry.message, entry.fields.incidentId ?? entry.fields.incidentIds]),
    ).toEqual([
      ['tool error with a cause', 'inc_0'],
      ['tool error with a cause', 'inc_10'],
      [SUMMARY, ['inc_1', 'inc_2']],
      [SUMMARY, ['inc_11']],
    ]);
    log.flush();
    vi.advanceTimersByTime(60_000);
    expect(entries).toHaveLength(4);
  });

  it('holds its ids on a timer that never keeps the process alive', () => {
    const timers: NodeJS.Timeout[] = [];
    const setTimer = globalThis.setTimeout;
    vi.spyOn(globalThis, 'setTimeout').mockImplementation(((...args: Parameters<typeof setTimeout>) => {
      const timer = setTimer(...args);
      timers.push(timer);
      return timer;
    }) as typeof setTimeout);
    const log = createCauseLog(60_000, 1000);
    for (let n = 0; n < 3; n++) log(recordingLogger([]), failure(n));
    vi.restoreAllMocks();
    // One for the interval of the class's full line, one for the held ids.
    expect(timers.map((timer) => timer.hasRef())).toEqual([false, false]);
    log.flush();
  });

  it('never throws when the logger does, and still writes the next line', () => {
    vi.useFakeTimers();
    let broken = true;
    const entries: LogEntry[] = [];
    const working = recordingLogger(entries);
    const logger = {
      ...working,
      error: (fields: Record<string, unknown>, message?: string) => {
        if (broken) throw new Error('EPIPE');
        working.error(fields, message);
      },
    };
    const log = createCauseLog(60_000, 1000);
    for (let n = 0; n <= 200; n++) log(logger, failure(n));
    broken = false;
    log(logger, failure(201));
    log.flush();
    expect(entries.map((entry) => entry.fields.incidentIds)).toEqual([['inc_201']]);
  });
});
