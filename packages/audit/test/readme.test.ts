import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// The README's code must be the typechecked examples, word for word (bar the import path).
const read = (path: string): string => readFileSync(new URL(path, import.meta.url), 'utf8');

describe('README', () => {
  it.each(['usage', 'postgres', 'shutdown', 'keyed'])(
    'shows examples/%s.ts exactly, importing the published name',
    (name) => {
      const example = read(`../examples/${name}.ts`)
        .replace(/^(\/\/.*\n)+\n?/, '')
        .replaceAll("'../src/index.js'", "'@toolgate/audit'");
      const readme = read('../README.md');
      expect(readme).toContain(`\`\`\`ts\n${example}\`\`\``);
    },
  );
});
