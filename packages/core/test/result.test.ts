import { describe, expect, it } from 'vitest';
import { fail, mirrorsStructuredContent, ok } from '../src/index.js';

describe('mirrorsStructuredContent', () => {
  it('is true for an ok() result as built, and the mark never reaches the wire', () => {
    const result = ok({ items: [1, 2] }, { total: 2 });
    expect(mirrorsStructuredContent(result)).toBe(true);
    expect(JSON.parse(JSON.stringify(result))).toEqual({
      content: [{ type: 'text', text: '{"ok":true,"items":[1,2],"total":2}' }],
      structuredContent: { ok: true, items: [1, 2], total: 2 },
    });
    expect(Object.keys(result)).toEqual(['content', 'structuredContent']);
  });

  it('is false for a copy with other content or other data, and for results built by hand', () => {
    const result = ok({ value: 'a' });
    // A middleware that rewrites the text (spreading the block keeps nothing of ok()'s mark there)
    const first = result.content[0] as { type: 'text'; text: string };
    expect(mirrorsStructuredContent({ ...result, content: [{ ...first, text: '{"ok":true}' }] })).toBe(false);
    // ... or replaces the data
    expect(mirrorsStructuredContent({ ...result, structuredContent: { ok: true, value: 'b' } })).toBe(false);
    // ... or adds a part before the JSON text
    expect(
      mirrorsStructuredContent({ ...result, content: [{ type: 'text', text: 'note' }, ...result.content] }),
    ).toBe(false);
    // A copy that keeps both is still a mirror
    expect(mirrorsStructuredContent({ ...result, _meta: { traced: true } })).toBe(true);
    const byHand = {
      content: [{ type: 'text' as const, text: '{"ok":true}' }],
      structuredContent: { ok: true },
    };
    expect(mirrorsStructuredContent(byHand)).toBe(false);
    expect(mirrorsStructuredContent(fail('internal', 'x'))).toBe(false);
  });
});
