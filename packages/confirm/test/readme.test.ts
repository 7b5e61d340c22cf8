import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// The README's code must be the typechecked example, word for word (bar the import path).
const read = (path: string): string => readFileSync(new URL(path, import.meta.url), 'utf8');

describe('README', () => {
  it('shows examples/usage.ts exactly, importing the published name', () => {
    const example = read('../examples/usage.ts')
      .replace(/^(\/\/.*\n)+\n?/, '')
      .replaceAll("'../src/index.js'", "'@toolgate/confirm'");
    const readme = read('../README.md');
    expect(readme).toContain(`\`\`\`ts\n${example}\`\`\``);
  });

  it('shows examples/url-page.ts exactly, importing the published name', () => {
    const example = read('../examples/url-page.ts')
      .replace(/^(\/\/.*\n)+\n?/, '')
      .replaceAll("'../src/index.js'", "'@toolgate/confirm'");
    expect(read('../README.md')).toContain(`\`\`\`ts\n${example}\`\`\``);
  });
});
