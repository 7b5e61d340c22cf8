import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// The README's code must be the typechecked examples, word for word (bar the import path).
const read = (path: string): string => readFileSync(new URL(path, import.meta.url), 'utf8');

describe('README', () => {
  it.each(['usage.ts', 'safe-exec.ts'])('shows examples/%s exactly, importing the published name', (file) => {
    const example = read(`../examples/${file}`)
      .replace(/^(\/\/.*\n)+/, '')
      .replaceAll("'../src/index.js'", "'@toolgate/exec'");
    expect(read('../README.md')).toContain(`\`\`\`ts\n${example}\`\`\``);
  });
});
