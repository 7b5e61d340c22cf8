// Text from outside (a document, a carrier's answer) that a person may read in a terminal or a client:
// control characters and bidirectional overrides are written out as visible `\uXXXX` text.

// C0 controls but tab, DEL, C1 controls, and the bidirectional embeddings, overrides and isolates.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROLS = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
// The same and tab.
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROLS_AND_TAB = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` with every control character (C0, DEL, C1) and every bidirectional embedding, override and
 * isolate (U+202A-U+202E, U+2066-U+2069) written as visible `\uXXXX` text: text from outside (a
 * document's name or line, a carrier's status) may be shown to a person in a terminal, where an escape
 * sequence would write the clipboard or retitle the window, or in a client where an override shows
 * `txt.exe` as `exe.txt`. A tab stays in a line (`keepTab`): it only spaces.
 */
export function visibleText(text: string, keepTab: boolean): string {
  return text.replace(
    keepTab ? CONTROLS : CONTROLS_AND_TAB,
    (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}
