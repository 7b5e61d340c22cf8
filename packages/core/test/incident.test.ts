import { describe, expect, it } from 'vitest';
import { incidentOfThrow, isIncidentId, newIncidentId, ToolError } from '../src/index.js';

describe('incidentOfThrow: the incident id core answers a thrown error with', () => {
  it("sets one for anything but a ToolError, for a ToolError with a cause or a code none of core's; keeps one already set", () => {
    for (const error of [
      new Error('connect ECONNREFUSED 10.0.0.7:5432'),
      'a string',
      new ToolError('unavailable', 'The store is down.', { cause: new Error('ETIMEDOUT') }),
      // A code none of core's (an upstream's own, relayed): the boundary answers internal for it.
      new ToolError('UPSTREAM_QUOTA_EXCEEDED' as never, 'Quota exceeded.', {
        hint: 'Later.',
        retryable: true,
      }),
    ]) {
      const ctx: { incidentId?: string } = {};
      const id = incidentOfThrow(ctx, error);
      expect(isIncidentId(id)).toBe(true);
      expect(ctx.incidentId).toBe(id);
      expect(incidentOfThrow(ctx, error)).toBe(id);
    }
    const given = newIncidentId();
    expect(incidentOfThrow({ incidentId: given }, new Error('x'))).toBe(given);
  });

  it('a ToolError without a cause gets none, unless the call already has one', () => {
    const ctx: { incidentId?: string } = {};
    expect(incidentOfThrow(ctx, new ToolError('not_found', 'No order A-1.'))).toBeUndefined();
    expect(ctx.incidentId).toBeUndefined();
    const given = newIncidentId();
    expect(incidentOfThrow({ incidentId: given }, new ToolError('not_found', 'No order A-1.'))).toBe(given);
  });
});
