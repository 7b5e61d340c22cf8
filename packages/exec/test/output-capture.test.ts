import { describe, expect, it } from 'vitest';
import { OutputCapture } from '../src/output-capture.js';

function capture(limit: number, tailBytes: number, chunks: string[]): OutputCapture {
  const output = new OutputCapture(limit, tailBytes);
  for (const chunk of chunks) output.push(Buffer.from(chunk));
  return output;
}

describe('OutputCapture', () => {
  it('keeps everything under the limit, across chunks', () => {
    const output = capture(10, 4, ['abc', 'def']);
    expect([output.text(), output.truncated, output.total, output.tailText()]).toEqual([
      'abcdef',
      false,
      6,
      'cdef',
    ]);
  });

  it('keeps exactly the limit when the cut falls between characters', () => {
    const output = capture(4, 0, ['ab', 'cdef']);
    expect([output.text(), output.truncated, output.total]).toEqual(['abcd', true, 6]);
  });

  it('moves the cut back to the start of a character split across chunks', () => {
    // '€' is 3 bytes; the limit falls after its first and after its second byte.
    expect(capture(3, 0, ['ab', '€z']).text()).toBe('ab');
    expect(capture(4, 0, ['ab', '€z']).text()).toBe('ab');
    expect(capture(5, 0, ['ab', '€z']).text()).toBe('ab€');
    // '𝄞' is 4 bytes; a cut after 1, 2 or 3 of them drops it whole.
    for (const limit of [2, 3, 4]) expect(capture(limit, 0, ['a𝄞b']).text()).toBe('a');
    expect(capture(5, 0, ['a𝄞b']).text()).toBe('a𝄞');
  });

  it('starts the tail at a character boundary', () => {
    // The last 5 bytes of 'x€€' begin inside the first '€'.
    expect(capture(100, 5, ['x€', '€']).tailText()).toBe('€');
  });

  it('moves the cut before a secret value the limit would split, and the tail past one', () => {
    const secrets = ['SECRET-ONE', 'xSECRET'];
    const cut = (limit: number, tailBytes: number, chunks: string[]): OutputCapture => {
      const output = new OutputCapture(limit, tailBytes, secrets);
      for (const chunk of chunks) output.push(Buffer.from(chunk));
      return output;
    };
    // The limit falls inside SECRET-ONE, written across two chunks.
    expect(cut(9, 0, ['ab SEC', 'RET-ONE cd']).text()).toBe('ab ');
    // Moving the cut to SECRET-ONE's start would split xSECRET, which overlaps it: both go.
    expect(cut(8, 0, ['a xSECRET-ONE b']).text()).toBe('a ');
    // A secret ending exactly at the limit stays whole (for the scrubber); one the limit does not reach is not there.
    expect(cut(13, 0, ['ab SECRET-ONE cd']).text()).toBe('ab SECRET-ONE');
    expect(cut(3, 0, ['ab SECRET-ONE cd']).text()).toBe('ab ');
    // The last 8 bytes start inside SECRET-ONE: the tail starts after it.
    expect(cut(100, 8, ['ab SECRET', '-ONE cd']).tailText()).toBe(' cd');
    expect(cut(100, 3, ['ab SECRET-ONE cd']).tailText()).toBe(' cd');
  });

  it('keeps memory bounded however much is written', () => {
    const output = new OutputCapture(8, 4);
    for (let index = 0; index < 10_000; index += 1) output.push(Buffer.from('0123456789'));
    expect([output.text(), output.total, output.tailText()]).toEqual(['01234567', 100_000, '6789']);
  });
});
