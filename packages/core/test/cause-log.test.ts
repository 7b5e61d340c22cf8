import { describe, expect, it } from 'vitest';
import { createCauseLog } from '../src/cause-log.js';
import { type LogEntry, recordingLogger } from '../src/testing.js';

const refused = (): Error =>
  new Error('unavailable', {
    cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
  });

describe('createCauseLog', () => {
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
});
