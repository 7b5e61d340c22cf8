import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { expectFailure, parseResultText, recordingLogger, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import * as z from 'zod';
import { execTool, value } from '../src/index.js';
import { ECHO, NODE, scratchDir, serve } from './harness.js';

// Declarations whose probes throw (a date the declaration parses, JSON it decodes) or build a different
// number of entries (an enum that adds one) beside a value the declaration turns into a leading "-"
// (arithmetic, a slug, an emptied short flag). Each leaf is probed alone: one that throws does not
// hide the others.
const sandbox = scratchDir();
const marker = path.join(sandbox, 'ran');
const common = { command: NODE, cwd: sandbox, env: { RAN_MARKER: marker } };
const slugOf = (text: string): string => text.toLowerCase().replace(/[^a-z0-9=/._]+/g, '-');
const dayOf = (date: string): string => new Date(date).toISOString().slice(0, 10);

// The red team's: an enum-controlled spread misaligns the filled probe; the number is scaled.
const scaled = execTool({
  ...common,
  name: 'scaled',
  description: 'Scales a count, optionally reversed (test).',
  input: { mode: z.enum(['head', 'tail']), n: z.number().int() },
  args: (input) => [ECHO, ...(input.mode === 'tail' ? ['--reverse'] : []), String(input.n * 10)],
});

// The red team's: the filled probe throws on the date (`x` is none); the label is slugged.
const slug = execTool({
  ...common,
  name: 'slug',
  description: 'Lists entries since a day under a label (test).',
  input: { since: z.string(), label: z.string() },
  args: (input) => [ECHO, `--since=${dayOf(input.since)}`, slugOf(input.label)],
});

// A slug beside an enum-controlled spread (no throw: the filled probe misaligns).
const slugSpread = execTool({
  ...common,
  name: 'slug_spread',
  description: 'A slugged tag, sorted one way or the other (test).',
  input: { order: z.enum(['asc', 'desc']), tag: z.string() },
  args: (input) => [ECHO, ...(input.order === 'desc' ? ['--reverse'] : []), slugOf(input.tag)],
});

// The red team's: grep-like, a throwing date beside an inline short flag the model may empty.
const search = execTool({
  ...common,
  name: 'search_dated',
  description: 'Searches a file for a pattern, labelled with a day (test).',
  input: { since: z.string(), pattern: z.string(), file: z.string() },
  args: (input) => [
    ECHO,
    `--label=${dayOf(input.since)}`,
    '-n',
    `-e${input.pattern}`,
    '--',
    value(input.file),
  ],
});

// A negative number inside JSON the declaration decodes: `x` and `{"n":x5}` are no JSON.
const decoded = execTool({
  ...common,
  name: 'decoded',
  description: 'Reads a limit from a JSON filter (test).',
  input: { filter: z.string() },
  args: (input) => [ECHO, '--limit', String((JSON.parse(input.filter) as { n: number }).n)],
});

// A day passed as an operand: a negative year (`-000001-01-01`) comes out of toISOString with a leading
// "-" (and cut to `-000001-01`, which does not start with the input), and no probe of the date runs
// (every change of it is no date), so the strict rule decides.
const stamped = execTool({
  ...common,
  name: 'stamped',
  description: 'Passes a timestamp operand (test).',
  input: { at: z.string() },
  args: (input) => [ECHO, '--utc', dayOf(input.at)],
});

// A declaration that handles a negative number itself: the sign picks a branch (probes misalign), the
// element is its own "--from-end". The strict rule must let it through.
const fromEnd = execTool({
  ...common,
  name: 'from_end',
  description: 'Lines from the start or, for a negative offset, from the end (test).',
  input: { offset: z.number().int() },
  args: (input) => [
    ECHO,
    ...(input.offset < 0 ? ['--from-end', String(-input.offset)] : [String(input.offset)]),
  ],
});

// Keys of a record the model fills, slugged.
const tagged = execTool({
  ...common,
  name: 'tagged',
  description: 'Passes the slugged keys of a record (test).',
  input: { tags: z.record(z.string(), z.number()) },
  args: (input) => [ECHO, '--tags', ...Object.keys(input.tags).map(slugOf)],
});

// More leaves than are probed one by one (32), a date among them so the filled probe throws.
const batch = execTool({
  ...common,
  name: 'batch',
  description: 'Slugged names of many files since a day (test).',
  input: { since: z.string(), files: z.array(z.string()) },
  args: (input) => [ECHO, `--since=${dayOf(input.since)}`, ...input.files.map(slugOf)],
});

// An optional pattern: empty adds no entries (the `x` probe misaligns), the declaration's flags stay.
const optional = execTool({
  ...common,
  name: 'optional',
  description: 'Searches with an optional pattern (test).',
  input: { pattern: z.string().default(''), file: z.string() },
  args: (input) => [ECHO, '-n', ...(input.pattern ? ['-e', input.pattern] : []), '--', input.file],
});

// Counts its runs: the probes cost a bounded number of them whatever the size of the input.
let countedRuns = 0;
const counted = execTool({
  ...common,
  name: 'counted',
  description: 'Counts the items it was given (test).',
  input: { items: z.array(z.string()) },
  args: (input) => {
    countedRuns += 1;
    return [ECHO, '--count', String(input.items.length)];
  },
});

// Branches on the last character: `x` and the neutral form take the other branch, so a leading "-"
// of the text leaves only the strict rule; every pattern of the probes meets the whole text.
const bang = execTool({
  ...common,
  name: 'bang',
  description: 'Measures a text, flagged when it ends in "!" (test).',
  input: { text: z.string() },
  args: (input) => [ECHO, ...(input.text.endsWith('!') ? ['--bang'] : []), String(input.text.length)],
});

let client: TestClient;
beforeAll(async () => {
  client = await serve(
    [scaled, slug, slugSpread, search, decoded, stamped, fromEnd, tagged, batch, optional, counted, bang],
    recordingLogger([]),
  );
});
afterAll(async () => client.close());
beforeEach(() => rmSync(marker, { force: true }));

const DASH_HINT =
  'Values are passed to the program as data and may not start with "-" (that would read as an option). Remove the leading "-".';
const dashRefusal = (field: string) => ({
  ok: false,
  error: 'invalid_argument',
  message: `Argument ${field} may not start with "-".`,
  hint: DASH_HINT,
  retryable: false,
  fields: [{ path: field, expected: 'a value that does not start with "-"' }],
});

async function argvOf(tool: string, args: Record<string, unknown>): Promise<string[]> {
  const result = await client.callTool(tool, args);
  expect(result.isError, JSON.stringify(parseResultText(result))).toBeUndefined();
  return (JSON.parse((parseResultText(result) as { stdout: string }).stdout) as { argv: string[] }).argv;
}

async function expectRefused(tool: string, args: Record<string, unknown>, field: string): Promise<void> {
  expect(expectFailure(await client.callTool(tool, args)), `${tool} ${JSON.stringify(args)}`).toEqual(
    dashRefusal(field),
  );
  expect(existsSync(marker)).toBe(false);
}

describe('a model-made dash beside a value whose probe throws or misaligns', () => {
  it('refuses a negative number the declaration scaled, whichever branch the enum took', async () => {
    await expectRefused('scaled', { mode: 'tail', n: -5 }, 'n');
    await expectRefused('scaled', { mode: 'head', n: -5 }, 'n');
    expect(await argvOf('scaled', { mode: 'tail', n: 5 })).toEqual(['--reverse', '50']);
    expect(await argvOf('scaled', { mode: 'head', n: 0 })).toEqual(['0']);
  });

  it('refuses a slug that turns leading punctuation or a space into "-" beside a parsed date', async () => {
    await expectRefused('slug', { since: '2026-01-01', label: '!rf' }, 'label');
    await expectRefused('slug', { since: '2026-01-01', label: ' output=/etc/passwd' }, 'label');
    await expectRefused('slug', { since: '2026-01-01', label: '~~exec=sh' }, 'label');
    expect(await argvOf('slug', { since: '2026-01-01', label: 'Q3 report!' })).toEqual([
      '--since=2026-01-01',
      'q3-report-',
    ]);
  });

  it('refuses a slug beside an enum that adds an entry', async () => {
    await expectRefused('slug_spread', { order: 'desc', tag: '!rf' }, 'tag');
    await expectRefused('slug_spread', { order: 'asc', tag: '  verbose' }, 'tag');
    expect(await argvOf('slug_spread', { order: 'desc', tag: 'Big Orders' })).toEqual([
      '--reverse',
      'big-orders',
    ]);
  });

  it('refuses an emptied short flag beside a parsed date: it would take "--" and leave the operand an option', async () => {
    expect(
      expectFailure(
        await client.callTool('search_dated', { since: '2026-01-01', pattern: '', file: '--version' }),
      ),
    ).toEqual({
      ok: false,
      error: 'invalid_argument',
      message: 'Argument pattern may not be empty.',
      hint: 'This option needs a value: pass a non-empty one.',
      retryable: false,
      fields: [{ path: 'pattern', expected: 'a non-empty value' }],
    });
    expect(existsSync(marker)).toBe(false);
    expect(await argvOf('search_dated', { since: '2026-01-01', pattern: 'err', file: '--version' })).toEqual([
      '--label=2026-01-01',
      '-n',
      '-eerr',
      '--',
      '--version',
    ]);
  });

  it('refuses a negative number inside JSON the declaration decodes (its dash removed, the JSON still parses)', async () => {
    await expectRefused('decoded', { filter: '{"n":-5}' }, 'filter');
    await expectRefused('decoded', { filter: '{"n": -1e3}' }, 'filter');
    expect(await argvOf('decoded', { filter: '{"n":5,"note":"last-30-days"}' })).toEqual(['--limit', '5']);
  });

  it('refuses every dash element while an unprobeable value starts with "-" (the strict rule)', async () => {
    await expectRefused('stamped', { at: '-000001-01-01' }, 'at');
    await expectRefused('stamped', { at: '-271821-04-20' }, 'at');
    expect(await argvOf('stamped', { at: '2026-03-04T05:06:07Z' })).toEqual(['--utc', '2026-03-04']);
  });

  it('lets a declaration branch on a negative number and write its own flag', async () => {
    expect(await argvOf('from_end', { offset: -5 })).toEqual(['--from-end', '5']);
    expect(await argvOf('from_end', { offset: 7 })).toEqual(['7']);
  });

  it('refuses a record key a slug turns into an option', async () => {
    await expectRefused('tagged', { tags: { ok: 1, '!rf': 2 } }, 'tags');
    await expectRefused('tagged', { tags: { ' draft': 1 } }, 'tags');
    expect(await argvOf('tagged', { tags: { 'Q3 sales': 1, 'a-b': 2, draft_2: 3 } })).toEqual([
      '--tags',
      'q3-sales',
      'a-b',
      'draft_2',
    ]);
  });

  it('probes an array whole, however long: a slug among its items is refused, plain names pass', async () => {
    const files = Array.from({ length: 40 }, (_, index) => `Report ${index}.txt`);
    const argv = await argvOf('batch', { since: '2026-01-01', files });
    expect(argv).toEqual(['--since=2026-01-01', ...files.map(slugOf)]);
    rmSync(marker, { force: true });
    const hostile = [...files.slice(0, 38), '!rf', 'last.txt'];
    expect(expectFailure(await client.callTool('batch', { since: '2026-01-01', files: hostile }))).toEqual(
      dashRefusal('files'),
    );
    expect(existsSync(marker)).toBe(false);
  });

  it("keeps an optional pattern that adds no entries when empty, and the declaration's flags", async () => {
    expect(await argvOf('optional', { file: 'a.log' })).toEqual(['-n', '--', 'a.log']);
    expect(await argvOf('optional', { pattern: 'x-y', file: 'a.log' })).toEqual([
      '-n',
      '-e',
      'x-y',
      '--',
      'a.log',
    ]);
  });
});

// Realistic calls of the same tools that must run unchanged: dashes inside values, dates, JSON,
// negative numbers a declaration handles, punctuation that is not leading.
const LEGITIMATE: Array<[string, Record<string, unknown>, string[]]> = [
  ['scaled', { mode: 'tail', n: 12 }, ['--reverse', '120']],
  ['scaled', { mode: 'head', n: 1 }, ['10']],
  ['slug', { since: '2026-12-31', label: 'q3-report' }, ['--since=2026-12-31', 'q3-report']],
  [
    'slug',
    { since: '2026-02-01T10:00:00Z', label: 'Orders (EU) / 2026' },
    ['--since=2026-02-01', 'orders-eu-/-2026'],
  ],
  ['slug', { since: 'March 7, 2026', label: 'x' }, [`--since=${dayOf('March 7, 2026')}`, 'x']],
  ['slug', { since: '2026-01-01', label: 'a--b' }, ['--since=2026-01-01', 'a-b']],
  ['slug_spread', { order: 'asc', tag: 'e-mail' }, ['e-mail']],
  ['slug_spread', { order: 'desc', tag: '2026 Q1' }, ['--reverse', '2026-q1']],
  [
    'search_dated',
    { since: '2026-01-01', pattern: '-v', file: 'x.log' },
    ['--label=2026-01-01', '-n', '-e-v', '--', 'x.log'],
  ],
  [
    'search_dated',
    { since: '2026-01-01', pattern: '^ERROR', file: 'app-1.log' },
    ['--label=2026-01-01', '-n', '-e^ERROR', '--', 'app-1.log'],
  ],
  ['decoded', { filter: '{"n":0}' }, ['--limit', '0']],
  ['decoded', { filter: ' {"n": 25, "range": "2026-01-01/2026-02-01"}' }, ['--limit', '25']],
  ['stamped', { at: '2026-01-01' }, ['--utc', '2026-01-01']],
  ['stamped', { at: '2026-06-30T23:59:59+02:00' }, ['--utc', '2026-06-30']],
  ['stamped', { at: '+010000-01-01' }, ['--utc', '+010000-01']],
  ['from_end', { offset: -1 }, ['--from-end', '1']],
  ['from_end', { offset: 0 }, ['0']],
  ['tagged', { tags: {} }, ['--tags']],
  ['optional', { pattern: 'a b', file: 'b-2.log' }, ['-n', '-e', 'a b', '--', 'b-2.log']],
];

describe('legitimate calls of the same tools', () => {
  it.each(LEGITIMATE)('%s %j runs unchanged', async (tool, args, expected) => {
    expect(await argvOf(tool, args)).toEqual(expected);
  });
});

describe('hostile sizes (each probe pattern reads a value once; a quadratic scan would time out)', () => {
  const size = 200_000;
  it.each([
    ['punctuation a slug turns into "-"', 'slug', { since: '2026-01-01', label: '!'.repeat(size) }],
    ['spaces before a word', 'slug', { since: '2026-01-01', label: `${' '.repeat(size)}rf` }],
    ['a dash before punctuation with no letter or digit', 'bang', { text: `-${'!'.repeat(size)}` }],
    ['a dash before spaces and tabs', 'bang', { text: `-${' \t'.repeat(size / 2)}!` }],
    ['a key of spaces', 'tagged', { tags: { [`${' '.repeat(size)}rf`]: 1 } }],
  ])('%s: refused', async (_name, tool, args) => {
    // The message names the field; core cuts a long one, so only the code and the hint are compared.
    const envelope = expectFailure(await client.callTool(tool, args));
    expect(envelope.error).toBe('invalid_argument');
    expect(envelope.hint).toBe(DASH_HINT);
    expect(existsSync(marker)).toBe(false);
  });

  it('a text that ends in "!" and starts with no dash, or whose dash leads nothing, still runs', async () => {
    expect(await argvOf('bang', { text: 'wow!' })).toEqual(['--bang', '4']);
    const long = `${'ab-'.repeat(size / 4)}!`;
    expect(await argvOf('bang', { text: long })).toEqual(['--bang', String(long.length)]);
    // The dash changed to `x` or removed, the text still ends in "!": the probes line up, "--bang" stays.
    const spelled = `%2D${' \t'.repeat(size / 2)}!`;
    expect(await argvOf('bang', { text: spelled })).toEqual(['--bang', String(spelled.length)]);
  });

  it('runs the declaration a bounded number of times for 50,000 leaves', async () => {
    countedRuns = 0;
    const items = Array.from({ length: 50_000 }, (_, index) => (index % 2 === 0 ? 'a' : '!b'));
    expect(await argvOf('counted', { items })).toEqual(['--count', '50000']);
    // The call, the filled and dashless probes, and at most 8 runs for the one field (the array, whole).
    expect(countedRuns).toBeLessThanOrEqual(1 + 2 + 8);
  });
});
