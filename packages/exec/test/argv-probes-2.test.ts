import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { expectFailure, parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { execTool, option, value } from '../src/index.js';
import { ECHO, NODE, scratchDir, serve } from './harness.js';

// Round 2 of the argv rule: the probes follow the input schema. Each field is probed alone (an array
// or a record whole, so the model's array lengths cannot push a field out of reach), fields the model
// picks from a fixed set are not probed, a field the input leaves empty is filled (so an emptied
// inline flag shows against its filled counterpart), and numbers are probed with 0 and a large value.
const sandbox = scratchDir();
const marker = path.join(sandbox, 'ran');
const common = { command: NODE, cwd: sandbox, env: { RAN_MARKER: marker } };
const slugOf = (text: string): string => text.toLowerCase().replace(/[^a-z0-9=/._]+/g, '-');

// The red team's d12: a cluster of short flags whose inline value the model empties.
const cluster = execTool({
  ...common,
  name: 'isearch',
  description: 'Case-insensitive search (test).',
  input: { pattern: z.string().max(100), file: z.string() },
  args: (input) => [ECHO, `-ie${input.pattern}`, '--', value(input.file)],
});
const cluster3 = execTool({
  ...common,
  name: 'nsearch',
  description: 'Numbered recursive search (test).',
  input: { pattern: z.string() },
  args: (input) => [ECHO, `-nri${input.pattern.trim()}`, '--', '.'],
});

// The red team's d1/d2: an inline value emptied by an empty array, an absent optional, an empty record.
const terms = execTool({
  ...common,
  name: 'terms',
  description: 'Searches for any of the terms (test).',
  input: { terms: z.array(z.string().regex(/^\w+$/)), file: z.string() },
  args: (input) => [ECHO, `-e${input.terms.join('|')}`, '--', value(input.file)],
});
const optionalPattern = execTool({
  ...common,
  name: 'opt',
  description: 'Searches with an optional pattern (test).',
  input: { pattern: z.string().min(1).optional() },
  args: (input) => [ECHO, `-e${input.pattern ?? ''}`, '--', 'file.txt'],
});
const keys = execTool({
  ...common,
  name: 'keys',
  description: 'Prints the chosen fields (test).',
  input: { fields: z.record(z.string().regex(/^\w+$/), z.boolean()) },
  args: (input) => [ECHO, `-f${Object.keys(input.fields).join(',')}`, '--', 'file.txt'],
});
const nested = execTool({
  ...common,
  name: 'nested',
  description: 'Cuts columns with an optional separator (test).',
  input: { opts: z.object({ sep: z.string().optional(), columns: z.string() }) },
  args: (input) => [ECHO, `-d${input.opts.sep ?? ''}`, `-f${input.opts.columns}`, '--', 'file.txt'],
});

// The red team's d9 and d1: a difference of two non-negative numbers, with and without an enum.
const gap = execTool({
  ...common,
  name: 'gap',
  description: 'Lines between two markers (test).',
  input: { from: z.number().int().min(0), to: z.number().int().min(0) },
  args: (input) => [ECHO, String(input.to - input.from - 1)],
});
const range = execTool({
  ...common,
  name: 'range',
  description: 'Lines of a range, head or tail (test).',
  input: { mode: z.enum(['head', 'tail']), from: z.number().int().min(0), to: z.number().int().min(0) },
  args: (input) => [ECHO, ...(input.mode === 'tail' ? ['--reverse'] : []), String(input.to - input.from)],
});

// The red team's d6: 32 and more tags before an enum that adds an entry and a slugged label.
const label = execTool({
  ...common,
  name: 'label',
  description: 'Tags and a label (test).',
  input: {
    tags: z.array(z.string().regex(/^\w+$/)).max(64),
    mode: z.enum(['head', 'tail']),
    label: z.string(),
  },
  args: (input) => [
    ECHO,
    `--tags=${input.tags.join(',')}`,
    ...(input.mode === 'tail' ? ['--reverse'] : []),
    slugOf(input.label),
  ],
});

// Items of an array probed field by field: a date in every item makes any probe of a whole item throw.
const dayOf = (date: string): string => new Date(date).toISOString().slice(0, 10);
const events = execTool({
  ...common,
  name: 'events',
  description: 'Labelled days, some bold (test).',
  input: {
    events: z.array(z.object({ day: z.string(), label: z.string(), bold: z.boolean() })).max(100),
  },
  args: (input) => [
    ECHO,
    ...input.events.flatMap((event) => [
      `--day=${dayOf(event.day)}`,
      ...(event.bold ? ['--bold'] : []),
      slugOf(event.label),
    ]),
  ],
});

// A value of a shape the probes do not follow (a union, a transform's output), emptied.
const either = execTool({
  ...common,
  name: 'either',
  description: 'One pattern or several (test).',
  input: { pattern: z.union([z.string(), z.array(z.string())]) },
  args: (input) => [ECHO, `-e${[input.pattern].flat().join('|')}`, '--', 'file.txt'],
});
const csv = execTool({
  ...common,
  name: 'csv',
  description: 'Patterns as comma-separated text (test).',
  input: { csv: z.string().transform((text) => text.split(',').filter(Boolean)) },
  args: (input) => [ECHO, `-e${input.csv.join('|')}`, '--', 'file.txt'],
});

// Keys the model chooses, counted: every key renames to the same probe name.
const tagKeys = execTool({
  ...common,
  name: 'tag_keys',
  description: 'Counts the tags (test).',
  input: { tags: z.record(z.string(), z.number()) },
  args: (input) => [ECHO, '--count', String(Object.keys(input.tags).length)],
});

// Legitimate shapes the new probes must leave alone.
const count = execTool({
  ...common,
  name: 'count',
  description: 'Old-style count flags and a special zero (test).',
  input: { lines: z.number().int().min(1), limit: z.number().int().min(0) },
  args: (input) => [ECHO, `-${input.lines}`, input.limit === 0 ? 'all' : `-${input.limit}`],
});
const stdinDefault = execTool({
  ...common,
  name: 'stdin_default',
  description: 'Reads the files, or stdin when none (test).',
  input: { file: z.string().optional(), files: z.array(z.string()) },
  args: (input) => [
    ECHO,
    '--first',
    input.file ?? '-',
    '--rest',
    ...(input.files.length > 0 ? input.files.map((file) => value(file)) : ['-']),
  ],
});
const inPlace = execTool({
  ...common,
  name: 'in_place',
  description: 'Edits in place, with an optional backup suffix (test).',
  input: { suffix: z.string().min(1).optional(), script: z.string() },
  args: (input) => [
    ECHO,
    input.suffix === undefined ? '-i' : option('-i', input.suffix, { inline: true }),
    '-e',
    value(input.script),
  ],
});
const listing = execTool({
  ...common,
  name: 'listing',
  description: 'Lists, all entries when asked, at a verbosity (test).',
  input: {
    all: z.boolean().optional(),
    sort: z.enum(['t', 'S']).optional(),
    verbose: z.number().int().min(0).max(3),
    note: z.number().optional(),
  },
  args: (input) => [
    ECHO,
    `-l${input.all === true ? 'a' : ''}`,
    `-${input.sort ?? 'U'}`,
    ...Array.from({ length: input.verbose }, () => '-v'),
  ],
});

let client: TestClient;
beforeAll(async () => {
  client = await serve(
    [
      cluster,
      cluster3,
      terms,
      optionalPattern,
      keys,
      nested,
      gap,
      range,
      label,
      count,
      stdinDefault,
      inPlace,
      listing,
      tagKeys,
      events,
      either,
      csv,
    ],
    recordingLogger([]),
  );
});
afterAll(async () => client.close());
beforeEach(() => rmSync(marker, { force: true }));

const DASH_HINT =
  'Values are passed to the program as data and may not start with "-" (that would read as an option). Remove the leading "-".';

async function argvOf(tool: string, args: Record<string, unknown>): Promise<string[]> {
  const result = await client.callTool(tool, args);
  expect(result.isError, JSON.stringify(parseResultText(result))).toBeUndefined();
  return (JSON.parse((parseResultText(result) as { stdout: string }).stdout) as { argv: string[] }).argv;
}

async function expectRefused(
  tool: string,
  args: Record<string, unknown>,
  field: string,
  kind: 'dash' | 'empty',
): Promise<void> {
  const expected =
    kind === 'dash'
      ? {
          ok: false,
          error: 'invalid_argument',
          message: `Argument ${field} may not start with "-".`,
          hint: DASH_HINT,
          retryable: false,
          fields: [{ path: field, expected: 'a value that does not start with "-"' }],
        }
      : {
          ok: false,
          error: 'invalid_argument',
          message: `Argument ${field} may not be empty.`,
          hint: 'This option needs a value: pass a non-empty one.',
          retryable: false,
          fields: [{ path: field, expected: 'a non-empty value' }],
        };
  expect(expectFailure(await client.callTool(tool, args)), `${tool} ${JSON.stringify(args)}`).toEqual(
    expected,
  );
  expect(existsSync(marker)).toBe(false);
}

describe('an emptied inline value behind a cluster of short flags (d12)', () => {
  it('refuses `-ie` emptied: it would take "--" and leave the operand an option', async () => {
    await expectRefused('isearch', { pattern: '', file: '--version' }, 'pattern', 'empty');
  });

  it('refuses `-nri` emptied by white space the declaration trims', async () => {
    await expectRefused('nsearch', { pattern: '   ' }, 'pattern', 'empty');
  });
});

describe('an inline value emptied where no value exists to probe (d1, d2)', () => {
  it('refuses an empty array joined behind -e', async () => {
    await expectRefused('terms', { terms: [], file: '--version' }, 'terms', 'empty');
  });

  it('refuses an absent optional behind -e', async () => {
    await expectRefused('opt', {}, 'pattern', 'empty');
  });

  it("refuses an empty record's keys behind -f", async () => {
    await expectRefused('keys', { fields: {} }, 'fields', 'empty');
  });

  it('refuses an absent optional inside an object, naming its path', async () => {
    await expectRefused('nested', { opts: { columns: '1,3' } }, 'opts.sep', 'empty');
  });
});

describe('a dash made by arithmetic on non-negative numbers (d9, d1)', () => {
  it('refuses `to - from - 1` below zero: the large (or 1) probe of `to` turns it positive', async () => {
    await expectRefused('gap', { from: 5, to: 0 }, 'to', 'dash');
    await expectRefused('gap', { from: 0, to: 0 }, 'to', 'dash');
    // Larger than any fixed probe: `from` 1 or 0 turns it positive (and the large `to` would).
    await expectRefused('gap', { from: 1_000_000_000, to: 3 }, 'from', 'dash');
  });

  it('refuses `to - from` below zero beside an enum that adds an entry', async () => {
    await expectRefused('range', { mode: 'tail', from: 5, to: 0 }, 'from', 'dash');
    await expectRefused('range', { mode: 'head', from: 5, to: 0 }, 'from', 'dash');
  });
});

describe('a shape the probes do not follow, emptied', () => {
  it('refuses an empty array of a union', async () => {
    await expectRefused('either', { pattern: [] }, 'pattern', 'empty');
  });

  it("refuses a transform's empty output", async () => {
    await expectRefused('csv', { csv: ',' }, 'csv', 'empty');
  });
});

describe('more values than any per-value bound (d6)', () => {
  it.each([31, 32, 40, 64])('%i tags: the slugged label is still probed alone and refused', async (size) => {
    for (const mode of ['head', 'tail']) {
      await expectRefused('label', { tags: Array(size).fill('a'), mode, label: '!rf' }, 'label', 'dash');
    }
  });
});

// Realistic calls of the same declarations that must run unchanged.
const LEGITIMATE: Array<[string, Record<string, unknown>, string[]]> = [
  ['isearch', { pattern: 'HELLO', file: 'file.txt' }, ['-ieHELLO', '--', 'file.txt']],
  ['isearch', { pattern: '-v', file: '--version' }, ['-ie-v', '--', '--version']],
  ['isearch', { pattern: 'x', file: 'a-b.txt' }, ['-iex', '--', 'a-b.txt']],
  ['nsearch', { pattern: ' TODO ' }, ['-nriTODO', '--', '.']],
  ['terms', { terms: ['a'], file: 'file.txt' }, ['-ea', '--', 'file.txt']],
  ['terms', { terms: ['error', 'warn_2'], file: '-notes.txt' }, ['-eerror|warn_2', '--', '-notes.txt']],
  ['opt', { pattern: 'x' }, ['-ex', '--', 'file.txt']],
  ['opt', { pattern: '^a-b$' }, ['-e^a-b$', '--', 'file.txt']],
  ['keys', { fields: { a: true, b_2: false } }, ['-fa,b_2', '--', 'file.txt']],
  ['nested', { opts: { sep: ',', columns: '1-3' } }, ['-d,', '-f1-3', '--', 'file.txt']],
  ['gap', { from: 2, to: 10 }, ['7']],
  ['gap', { from: 0, to: 1 }, ['0']],
  ['gap', { from: 1_000_000_000, to: 2_000_000_000 }, ['999999999']],
  ['range', { mode: 'tail', from: 1, to: 4 }, ['--reverse', '3']],
  ['range', { mode: 'head', from: 0, to: 0 }, ['0']],
  ['label', { tags: [], mode: 'head', label: 'a-b' }, ['--tags=', 'a-b']],
  [
    'label',
    { tags: Array(40).fill('x'), mode: 'tail', label: 'e-mail' },
    [`--tags=${Array(40).fill('x').join(',')}`, '--reverse', 'e-mail'],
  ],
  // The declaration's own dashes before numbers, and a branch on zero.
  ['count', { lines: 5, limit: 7 }, ['-5', '-7']],
  ['count', { lines: 1, limit: 0 }, ['-1', 'all']],
  ['count', { lines: 12, limit: 1 }, ['-12', '-1']],
  // A default the declaration writes where the model sent nothing: its dash is its own.
  ['stdin_default', { files: [] }, ['--first', '-', '--rest', '-']],
  ['stdin_default', { file: 'a.txt', files: ['b.txt'] }, ['--first', 'a.txt', '--rest', 'b.txt']],
  // An option that takes an optional inline value, written bare when absent, tagged when present.
  ['in_place', { script: 's/a/b/' }, ['-i', '-e', 's/a/b/']],
  ['in_place', { suffix: '.bak', script: 's/a/b/' }, ['-i.bak', '-e', 's/a/b/']],
  // Booleans and enums are not probed: an absent one leaves the cluster short, as the declaration wrote.
  ['listing', { verbose: 0 }, ['-l', '-U']],
  ['listing', { all: true, sort: 't', verbose: 2 }, ['-la', '-t', '-v', '-v']],
  ['either', { pattern: ['a', 'b'] }, ['-ea|b', '--', 'file.txt']],
  ['either', { pattern: 'a-b' }, ['-ea-b', '--', 'file.txt']],
  ['csv', { csv: 'a,b-c' }, ['-ea|b-c', '--', 'file.txt']],
  // A huge number elsewhere: the large probe of the bounded count stays within its maximum (3).
  ['listing', { verbose: 3, note: 2_000_000_000 }, ['-l', '-U', '-v', '-v', '-v']],
];

describe('items of an array, field by field', () => {
  const many = (label: string) =>
    Array.from({ length: 40 }, (_, index) => ({
      day: '2026-01-02',
      label: index === 39 ? label : `Week ${index}`,
      bold: index % 2 === 0,
    }));

  it('refuses a slugged label in the 40th item, though every probe of a whole item throws', async () => {
    await expectRefused('events', { events: many('!rf') }, 'events.label', 'dash');
  });

  it('runs the same items with a plain label', async () => {
    const argv = await argvOf('events', { events: many('Last week') });
    expect(argv).toHaveLength(40 * 2 + 20);
    expect(argv.slice(-2)).toEqual(['--day=2026-01-02', 'last-week']);
  });
});

describe('legitimate calls of the same declarations', () => {
  it.each(LEGITIMATE)('%s %j runs unchanged', async (tool, args, expected) => {
    expect(await argvOf(tool, args)).toEqual(expected);
  });
});

describe('hostile sizes (linear probes; a quadratic step would time out)', () => {
  const size = 200_000;

  it('a 200 KB slugged label behind 64 tags is refused', async () => {
    const envelope = expectFailure(
      await client.callTool('label', { tags: Array(64).fill('a'), mode: 'tail', label: '!'.repeat(size) }),
    );
    expect(envelope.error).toBe('invalid_argument');
    expect(envelope.hint).toBe(DASH_HINT);
    expect(existsSync(marker)).toBe(false);
  });

  it('100 items with a 200 KB slugged label in the last are refused', async () => {
    const items = Array.from({ length: 100 }, (_, index) => ({
      day: '2026-01-02',
      label: index === 99 ? '!'.repeat(size) : 'ok',
      bold: false,
    }));
    const envelope = expectFailure(await client.callTool('events', { events: items }));
    expect(envelope.error).toBe('invalid_argument');
    expect(envelope.hint).toBe(DASH_HINT);
    expect(existsSync(marker)).toBe(false);
  });

  it('a 200 KB pattern of spaces the declaration trims away is refused as empty', async () => {
    await expectRefused('nsearch', { pattern: ' '.repeat(size) }, 'pattern', 'empty');
  });

  it('32,768 record keys that all rename to the same name (200 KB and more) still run', async () => {
    const alphabet = '!#$%&*+~';
    const tags: Record<string, number> = {};
    for (let index = 0; index < alphabet.length ** 5; index++) {
      let key = '';
      for (let rest = index, digit = 0; digit < 5; digit++, rest = Math.floor(rest / alphabet.length)) {
        key += alphabet[rest % alphabet.length];
      }
      tags[key] = index;
    }
    expect(JSON.stringify(tags).length).toBeGreaterThan(size);
    expect(await argvOf('tag_keys', { tags })).toEqual(['--count', String(alphabet.length ** 5)]);
  });
});
