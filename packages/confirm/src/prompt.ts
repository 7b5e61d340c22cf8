/**
 * Characters that could make a prompt say something other than what it shows: C0 controls but the
 * newline the renderer itself writes, DEL and C1 controls, zero-width characters, the bidirectional
 * marks, embeddings, overrides and isolates (U+200E/F, U+202A-U+202E, U+2066-U+2069) and the BOM.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const UNSAFE = /[\u0000-\u0009\u000B-\u001F\u007F-\u009F\u200B-\u200F\u202A-\u202E\u2060-\u2069\uFEFF]/g;

/** Each unsafe character becomes U+FFFD, visibly: the person sees that something was there. */
export function sanitise(text: string): string {
  return text.replace(UNSAFE, '\uFFFD');
}

const MAX_VALUE_CHARS = 300;

/**
 * What the person is asked to approve: the effect sentence (or the tool's title), the tool and every
 * argument (as JSON, so a string's quotes and escapes are visible), sanitised and bounded. A cut says
 * how much was not shown, so nothing is hidden silently.
 */
export function renderPrompt(
  tool: { name: string; title: string | undefined },
  args: Readonly<Record<string, unknown>>,
  describe: ((args: Readonly<Record<string, unknown>>) => string) | undefined,
  maxChars: number,
): string {
  const lines = [
    describe === undefined ? `Run "${tool.title ?? tool.name}"?` : describe(args),
    `Tool: ${tool.name}`,
  ];
  const names = Object.keys(args);
  lines.push(names.length === 0 ? 'Arguments: none' : 'Arguments:');
  for (const name of names)
    lines.push(`  ${name}: ${cut(JSON.stringify(args[name]) ?? 'undefined', MAX_VALUE_CHARS)}`);
  return cut(sanitise(lines.join('\n')), maxChars);
}

function cut(text: string, max: number): string {
  if (text.length <= max) return text;
  const note = ` … (${text.length - max} more characters not shown)`;
  return text.slice(0, Math.max(0, max - note.length)) + note;
}
