/**
 * Characters that could make a prompt say something other than what it shows: every control (the
 * renderer writes its own newlines between lines, so a line never holds one), every format character
 * (zero-width, bidirectional marks, embeddings, overrides and isolates, U+061C, the soft hyphen, the BOM,
 * tag characters that spell hidden text), line and paragraph separators, lone surrogates, variation
 * selectors and the characters that render as blank (U+034F, Hangul fillers).
 */
const UNSAFE =
  // biome-ignore lint/suspicious/noMisleadingCharacterClass: each invisible character is matched on its own, on purpose.
  /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\u034F\u115F\u1160\u180B-\u180F\u3164\uFE00-\uFE0F\uFFA0\u{E0100}-\u{E01EF}]/gu;

/** Each unsafe character becomes U+FFFD, visibly: the person sees that something was there. */
export function sanitise(text: string): string {
  return text.replace(UNSAFE, '\uFFFD');
}

// What a markdown renderer would turn into a link, an image, HTML, an entity or a code span.
const MARKDOWN_ACTIVE = /[[\]<>&`]/g;

/**
 * Markdown's active characters written as JSON's `\u` escapes: the exact text still reads off the
 * prompt, and a client that renders it as markdown shows it as typed.
 */
function inert(text: string): string {
  return text.replace(MARKDOWN_ACTIVE, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A value as JSON (quotes and escapes visible), inert to markdown. */
function valueText(value: unknown): string {
  return inert(JSON.stringify(value) ?? 'undefined');
}

const MAX_VALUE_CHARS = 300;

/**
 * What the person is asked to approve: the effect sentence (or the tool's title), the tool and every
 * argument (as JSON, so a string's quotes and escapes are visible), sanitised line by line (no value
 * can start a line of its own) and bounded. A cut says how much was not shown, so nothing is hidden
 * silently.
 */
export function renderPrompt(
  tool: { name: string; title: string | undefined },
  args: Readonly<Record<string, unknown>>,
  describe: ((args: Readonly<Record<string, unknown>>) => string) | undefined,
  maxChars: number,
): string {
  const lines = [
    // describe() interpolates values the model chose: inert as they are on their own lines, so no
    // comment, tag, entity or link it copies can hide the lines below or say more than runs; and held
    // to a value's length, so a long one cannot push the tool and the arguments out of the prompt.
    describe === undefined
      ? `Run "${tool.title ?? tool.name}"?`
      : cut(inert(String(describe(args))), MAX_VALUE_CHARS),
    `Tool: ${tool.name}`,
  ];
  const names = Object.keys(args);
  lines.push(names.length === 0 ? 'Arguments: none' : 'Arguments:');
  for (const name of names) lines.push(`  ${name}: ${cut(valueText(args[name]), MAX_VALUE_CHARS)}`);
  return cut(lines.map(sanitise).join('\n'), maxChars);
}

function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const note = ` … (${text.length - max} more characters not shown)`;
  let end = Math.max(0, max - note.length);
  // Never end on half a surrogate pair: it would show as a broken character.
  if (end > 0 && isHighSurrogate(text.charCodeAt(end - 1))) end -= 1;
  return text.slice(0, end) + note;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
