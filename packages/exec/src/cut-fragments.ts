/**
 * Parts of a known value that a program's own cut leaves at an end of its output (`head -c`,
 * `tail -c`, `xxd -l`): exec's cut never splits a value (`OutputCapture`), but a program given a
 * model-chosen length does.
 */

/**
 * Fewest characters of a known value that a program's own cut may leave at an end of the output and
 * still be replaced (`edgeFragmentRanges`): so `head -c` shows at most the first 3 characters of a
 * value, `tail -c` the last 3.
 */
export const MIN_CUT_FRAGMENT = 4;

export interface EdgeForm {
  readonly form: string;
  /** Its first and last characters a part needs at the least. */
  readonly head: string;
  readonly tail: string;
}

/** A form whose characters stand `unit` to a character of the value (UTF-16: 2). */
export function edgeForm(form: string, unit: number): EdgeForm {
  const least = MIN_CUT_FRAGMENT * unit - unit + 1;
  return { form, head: form.slice(0, least), tail: form.slice(form.length - least) };
}

/**
 * Whether a cut part holds `MIN_CUT_FRAGMENT` letters or digits: the dashes of a PEM armour line
 * (`-----`) end and start much output, and are no part of a secret worth hiding.
 */
function enoughWordCharacters(part: string): boolean {
  return (part.match(/[\p{L}\p{N}]/gu)?.length ?? 0) >= MIN_CUT_FRAGMENT;
}

/** White space and NUL: what may follow a cut part at the output's end (`cut -z`, a final line break). */
function isEdgeSpace(code: number): boolean {
  return code === 0 || code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
}

/**
 * The ranges of `text` that hold a cut part of a form at one of its ends (white space and NUL aside):
 * the longest beginning of the form (not all of it, at least its `head`) that the text ends with, and
 * the longest end of it (at least its `tail`) that the text starts with. `head -c N` on a file that
 * holds a value, for N from its start to its end, shows the value's first characters; where they are
 * `MIN_CUT_FRAGMENT` or more, they go. The cost does not grow with the output: each form is looked for
 * in the form's length at each end.
 */
export function edgeFragmentRanges(text: string, edges: readonly EdgeForm[]): Array<[number, number]> {
  let start = 0;
  while (start < text.length && isEdgeSpace(text.charCodeAt(start))) start += 1;
  let end = text.length;
  while (end > start && isEdgeSpace(text.charCodeAt(end - 1))) end -= 1;
  const found: Array<[number, number]> = [];
  for (const { form, head, tail } of edges) {
    if (form.length <= head.length) continue;
    const last = text.slice(Math.max(start, end - form.length + 1), end);
    for (let at = last.indexOf(head); at !== -1; at = last.indexOf(head, at + 1)) {
      if (form.startsWith(last.slice(at)) && enoughWordCharacters(last.slice(at))) {
        found.push([end - last.length + at, end]);
        break;
      }
    }
    const first = text.slice(start, Math.min(end, start + form.length - 1));
    for (let at = first.lastIndexOf(tail); at !== -1; at = at > 0 ? first.lastIndexOf(tail, at - 1) : -1) {
      if (
        form.endsWith(first.slice(0, at + tail.length)) &&
        enoughWordCharacters(first.slice(0, at + tail.length))
      ) {
        found.push([start, start + at + tail.length]);
        break;
      }
    }
  }
  return found;
}
