import {
  closeSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger, ToolMiddleware } from '@toolgate/core';
import { createSilentLogger } from '@toolgate/core';
import { serveTools, type TestClient } from '@toolgate/core/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SEARCH_DOCS_MAX_TERMS, searchDocsTool } from '../src/tools/search-docs.js';

// What a writer under DOCS_ROOT can plant to make one search_docs call expensive (red team B): a
// folder far larger than the entries a call may look at, documents of a megabyte scored against a
// query of a hundred distinct keywords, a call cancelled while it reads, and names and lines carrying
// terminal escapes and bidi overrides. Each call must cost a bounded amount, asserted through the
// counts the tool logs at debug level (`search_docs work`), never through timing.
const base = realpathSync(mkdtempSync(join(tmpdir(), 'docs-bounds-')));
const root = join(base, 'root');
const outside = join(base, 'outside');

interface Entry {
  level: string;
  fields: Record<string, unknown>;
  message: string | undefined;
}

function recordingLogger(onEntry: (entry: Entry) => void = () => {}): { logger: Logger; entries: Entry[] } {
  const entries: Entry[] = [];
  const at =
    (level: string) =>
    (fields: Record<string, unknown>, message?: string): void => {
      const entry = { level, fields, message };
      entries.push(entry);
      onEntry(entry);
    };
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, entries };
}

/** The counts of the last call, as the tool logged them. */
function lastWork(entries: Entry[]): Record<string, unknown> | undefined {
  return entries.filter((entry) => entry.message === 'search_docs work').at(-1)?.fields;
}

interface Answer {
  items: { file: string; line: number; text: string; score: number }[];
  total: number;
  note?: string;
}

/** About a megabyte of distinct six-letter words on one line (the red team's document). */
function megabyteLine(): string {
  const words: string[] = [];
  for (let n = 0; words.length * 7 < 1_000_000; n += 1) {
    let rest = n;
    let word = '';
    for (let letter = 0; letter < 6; letter += 1) {
      word += String.fromCharCode(97 + (rest & 15));
      rest >>= 4;
    }
    words.push(word);
  }
  return words.join(' ');
}

const BIG_FOLDER_ENTRIES = 20_000;
const big = megabyteLine();
/** A hundred distinct one-letter CJK keywords: 199 characters, within the query's 200. */
const hostileQuery = Array.from({ length: 100 }, (_, index) => String.fromCharCode(0x4e00 + index)).join(' ');

beforeAll(() => {
  mkdirSync(root);
  mkdirSync(outside);
  // A folder of many more documents than the 5,000 entries (200 documents x 25) a call may look at.
  mkdirSync(join(root, 'many'));
  for (let index = 0; index < BIG_FOLDER_ENTRIES; index += 1) {
    writeFileSync(join(root, 'many', `doc-${String(index).padStart(5, '0')}.md`), 'refund policy\n');
  }
  // A folder of other files, past a small bound.
  mkdirSync(join(root, 'assets'));
  for (let index = 0; index < 2_000; index += 1) {
    closeSync(openSync(join(root, 'assets', `img-${index}.png`), 'w'));
  }
  // Documents of about a megabyte; the first keyword of the hostile query starts one word of each.
  mkdirSync(join(root, 'large'));
  for (let index = 0; index < 3; index += 1) {
    writeFileSync(join(root, 'large', `big-${index}.md`), `${big}\nthe 一丁 rule\n`);
  }
  // Documents the server refuses (hard links to files outside the root): each refusal is logged.
  mkdirSync(join(root, 'linked'));
  for (let index = 0; index < 10; index += 1) {
    writeFileSync(join(outside, `target-${index}.md`), 'refund secret outside\n');
    linkSync(join(outside, `target-${index}.md`), join(root, 'linked', `doc-${index}.md`));
  }
  // Names and lines that would drive a terminal or reorder what a person sees.
  mkdirSync(join(root, 'controls'));
  writeFileSync(
    join(root, 'controls', 'esc\u001b]52;c;aGk=\u0007\n.md'),
    'refund \u001b[2J wiped \u202egnp.exe\u2069 next\u0085line\ttab\n',
  );
  writeFileSync(join(root, 'controls', 'bidi\u202e\u2066dm.txt.md'), 'refund in a reordered name\n');
});

afterAll(() => rmSync(base, { recursive: true, force: true }));

describe('search_docs costs one call a bounded amount, whatever the docs root holds', () => {
  let client: TestClient;
  let small: TestClient;
  const recorded = recordingLogger();
  const smallRecorded = recordingLogger();

  beforeAll(async () => {
    client = await serveTools([searchDocsTool({ root, logger: recorded.logger, maxBytes: 1_572_864 })], {
      logger: createSilentLogger(),
    });
    small = await serveTools([searchDocsTool({ root, logger: smallRecorded.logger, maxFiles: 4 })], {
      logger: createSilentLogger(),
    });
  });

  afterAll(async () => {
    await client.close();
    await small.close();
  });

  it('reads a folder far larger than the bound only as far as the bound, and says it stopped', async () => {
    const result = await client.callTool('search_docs', { query: 'refund', path: 'many' });
    expect(result.isError).not.toBe(true);
    const answer = result.structuredContent as unknown as Answer;
    expect(answer.total).toBe(200);
    expect(answer.note).toMatch(/Searched the first 200 documents only; give a path/);
    const work = lastWork(recorded.entries);
    // 5,000 entries may be looked at; one more only tells the folder holds more. Before, all 20,000
    // were read and sorted.
    expect(work).toMatchObject({ documents: 200, cancelled: false });
    expect(work?.entriesRead).toBeLessThanOrEqual(5_001);
    expect(work?.entriesRead).toBeGreaterThanOrEqual(200);
  });

  it('stops after the entries a small bound allows in a folder of other files, and says so', async () => {
    const result = await small.callTool('search_docs', { query: 'refund', path: 'assets' });
    const answer = result.structuredContent as unknown as Answer;
    expect(answer.total).toBe(0);
    expect(answer.note).toMatch(/Stopped after looking at 100 folder entries; give a path/);
    expect(lastWork(smallRecorded.entries)).toMatchObject({ entriesRead: 101, documents: 0 });
  });

  it('scores a megabyte once whatever the query, looks for 20 keywords and stops at the bytes per call', async () => {
    const result = await client.callTool('search_docs', { query: hostileQuery, path: 'large', top_k: 5 });
    expect(result.isError).not.toBe(true);
    const answer = result.structuredContent as unknown as Answer;
    // The per-call limit (1.5 MiB here) lets one megabyte document in, not two.
    expect(answer.items).toEqual([{ file: 'large/big-0.md', line: 2, text: 'the 一丁 rule', score: 1 }]);
    expect(answer.note).toContain(
      `Looked for the first ${SEARCH_DOCS_MAX_TERMS} distinct keywords only (of 100).`,
    );
    expect(answer.note).toMatch(
      /Stopped after reading 976\.6 KiB of documents \(at most 1\.5 MiB per call\); give a path/,
    );
    const document = `${big}\nthe 一丁 rule\n`;
    const hostile = lastWork(recorded.entries);
    expect(hostile).toMatchObject({
      documents: 1,
      bytes: Buffer.byteLength(document),
      terms: SEARCH_DOCS_MAX_TERMS,
      lines: 3,
      chars: document.length,
    });
    // One keyword costs the same: each character is scored once, not once per keyword and word.
    await client.callTool('search_docs', { query: '一', path: 'large' });
    expect(lastWork(recorded.entries)).toMatchObject({
      documents: 1,
      terms: 1,
      lines: 3,
      chars: document.length,
    });
  });

  it('escapes control characters and bidi overrides in returned names and lines', async () => {
    const result = await client.callTool('search_docs', { query: 'refund', path: 'controls', top_k: 5 });
    const answer = result.structuredContent as unknown as Answer;
    expect(answer.items).toEqual([
      { file: 'controls/bidi\\u202e\\u2066dm.txt.md', line: 1, text: 'refund in a reordered name', score: 1 },
      {
        file: 'controls/esc\\u001b]52;c;aGk=\\u0007\\u000a.md',
        line: 1,
        text: 'refund \\u001b[2J wiped \\u202egnp.exe\\u2069 next\\u0085line\ttab',
        score: 1,
      },
    ]);
    // Nothing of the kind is left anywhere in what the model reads.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
    const unsafe = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
    for (const item of answer.items) {
      expect(item.file).not.toMatch(unsafe);
      expect(item.text).not.toMatch(unsafe);
    }
    const text = (result.content as { type: string; text: string }[])[0]?.text ?? '';
    expect(JSON.parse(text).items).toEqual(answer.items);
  });
});

describe('search_docs cancelled while it reads', () => {
  it('opens no further document once the client cancels', async () => {
    const controller = new AbortController();
    // The first refused document cancels the call, from the client, while the tool is still reading.
    const recorded = recordingLogger((entry) => {
      if (entry.message === 'skipped a document that cannot be read safely') controller.abort();
    });
    let handlerDone: () => void = () => {};
    const done = new Promise<void>((resolve) => {
      handlerDone = resolve;
    });
    // Settles when the handler itself does (abandonAfterMs: false: core never answers without it).
    const watch: ToolMiddleware = async (_ctx, next) => {
      try {
        return await next();
      } finally {
        handlerDone();
      }
    };
    const client = await serveTools([searchDocsTool({ root, logger: recorded.logger })], {
      logger: createSilentLogger(),
      middleware: [watch],
      abandonAfterMs: false,
    });
    try {
      await expect(
        client.callTool('search_docs', { query: 'refund', path: 'linked' }, { signal: controller.signal }),
      ).rejects.toThrow();
      await done;
      const opened = recorded.entries.filter(
        (entry) => entry.message === 'skipped a document that cannot be read safely',
      );
      // Ten documents were listed; before, all ten were opened after the cancel.
      expect(opened).toHaveLength(1);
      expect(lastWork(recorded.entries)).toMatchObject({ documents: 0, cancelled: true });
    } finally {
      await client.close();
    }
  });
});
