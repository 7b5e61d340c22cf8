import { opendir, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { defineTool, fail, type Logger, ok, redactSecretsInText, type ToolDefinition } from '@toolgate/core';
import * as z from 'zod';
import { bindCustomerIdIfAny } from '../customer-scope.js';
import { isUnderRoot, readFileUnderRoot, SafeFileRefusal } from '../safe-file.js';
import type { ServerSecrets } from '../server-secrets.js';
import { documentText } from '../third-party-text.js';

export const SEARCH_DOCS_MAX_TOP_K = 5;
/** Longest `text` of one hit: a longer line is cut around its first match, `…` marking each cut. */
export const SEARCH_DOCS_MAX_TEXT = 240;
/** Distinct keywords of a query that are looked for; the answer says when the others were left out. */
export const SEARCH_DOCS_MAX_TERMS = 20;
/** Largest document read (1 MiB): a larger one is skipped, and the answer counts it. */
export const SEARCH_DOCS_MAX_FILE_BYTES = 1024 * 1024;
/** Bytes of documents one call reads by default (8 MiB): then it stops and says so. */
export const SEARCH_DOCS_DEFAULT_MAX_BYTES = 8 * 1024 * 1024;
/** How much of a cut line is kept before its first match. */
const TEXT_BEFORE_MATCH = 60;
/** Characters of a long line redacted on each side of its excerpt before the cut (see `excerpt`). */
const REDACT_MARGIN = 8 * 1024;
const DEFAULT_TOP_K = 3;
const DEFAULT_MAX_FILES = 200;
const DEFAULT_MAX_DEPTH = 16;
/** Folder entries looked at per call, per document it may read: a folder of other files stops the walk too. */
const ENTRIES_PER_FILE = 25;
/** Folder entries fetched from the kernel at a time while listing. */
const FOLDER_READ_BATCH = 128;
/** Characters of a document scored between two turns of the event loop (and two looks at the signal). */
const CHARS_PER_TURN = 64 * 1024;

export interface SearchDocsOptions {
  /** The folder of markdown policy documents; nothing outside it is ever read. */
  root: string;
  /** Read documents that have more than one hard link (they may share an inode with a file outside the root). @default false */
  allowHardLinks?: boolean;
  /** Documents read per call at most (in name order); the answer says when the search stopped there. @default 200 */
  maxFiles?: number;
  /** Folder levels below the searched folder that are walked. @default 16 */
  maxDepth?: number;
  /**
   * Bytes of documents read per call at most: the search stops before the first document that no longer
   * fits, and the answer says so. @default 8 MiB
   */
  maxBytes?: number;
  logger?: Logger;
  /**
   * The service binds every tool to the caller's customer: this tool reads no customer's data, but it
   * binds the customer too when the token names one, so a person's calls to it count in the same
   * per-caller budget as the scoped tools'. @default false
   */
  customerScoped?: boolean;
  /** The service's own secret values, never returned from a document's line or name. */
  secrets?: ServerSecrets;
}

/** What one call's listing may still take, and whether it had to stop. */
interface Walk {
  readonly realRoot: string;
  readonly logger: Logger;
  readonly signal: AbortSignal;
  readonly maxDepth: number;
  remaining: number;
  /**
   * Folder entries the listing may still read (ENTRIES_PER_FILE per document allowed): a folder is read
   * in its own order, one entry past what is left at most, so a folder of any size costs the call no
   * more than what is left, in time and memory.
   */
  entriesLeft: number;
  /** Folder entries read so far. */
  entriesRead: number;
  /** A folder held more entries than were left: those past the limit were not looked at. */
  entriesCut: boolean;
  /** The document limit was reached: the documents after it were not searched. */
  filesCut: boolean;
  /** Documents over SEARCH_DOCS_MAX_FILE_BYTES met while listing (skipped). */
  oversized: number;
  readonly visited: Set<string>;
  /** Folders the process may not list (EACCES, EPERM): their documents were not searched. */
  unreadableFolders: number;
}

/** A document the listing proposes, with its size when it was listed. */
interface Candidate {
  readonly path: string;
  readonly size: number;
}

interface Hit {
  file: string;
  line: number;
  /** The whole line as the document holds it; cut and made safe only when returned. */
  text: string;
  /** Where in `text.toLowerCase()` the first word a keyword starts begins. */
  lowerAt: number;
  score: number;
}

/** Ordering of names and of hits: as `localeCompare`, without its per-call cost. */
const collator = new Intl.Collator();

/**
 * Keyword search over the policy documents under one root: the reference file tool. Listing picks
 * candidates by name (symlinks resolved, anything leaving the root skipped and logged); every file
 * is then read through `readFileUnderRoot`, which opens first and judges the descriptor, so a link
 * or directory swapped in between is never read (see safe-file.ts). Hard links, FIFOs and devices
 * are refused.
 *
 * One call costs a bounded amount of work whatever the root holds: folder entries read (a folder is
 * read only as far as the call may still look), documents, bytes and keywords are capped, scoring
 * reads each character of a document once whatever the query, the event loop gets a turn between
 * documents and within a long one, and a cancelled or timed-out call stops there.
 */
export function searchDocsTool(options: SearchDocsOptions): ToolDefinition {
  const root = resolve(options.root);
  const maxFiles = positiveInteger('maxFiles', options.maxFiles, DEFAULT_MAX_FILES);
  const maxDepth = positiveInteger('maxDepth', options.maxDepth, DEFAULT_MAX_DEPTH);
  const maxBytes = positiveInteger('maxBytes', options.maxBytes, SEARCH_DOCS_DEFAULT_MAX_BYTES);
  const maxEntries = maxFiles * ENTRIES_PER_FILE;
  const hide = options.secrets?.hide ?? ((text: string) => text);
  return defineTool({
    name: 'search_docs',
    title: 'Search policy documents',
    description:
      'Keyword search over the refund, shipping and returns policy documents. Use it to answer policy questions ' +
      '(refund windows, delivery times, return rules) with the exact wording and where it stands. ' +
      'Not for order data: use search_orders or get_order_status for that. ' +
      `Returns file, line and text of the best matching lines (a long line cut to ${SEARCH_DOCS_MAX_TEXT} characters around the match); ` +
      `top_k defaults to ${DEFAULT_TOP_K}, at most ${SEARCH_DOCS_MAX_TOP_K}.`,
    input: {
      query: z.string().max(200).describe('Keywords to look for, e.g. "refund days". Not empty.'),
      top_k: z
        .number()
        .int()
        .min(1)
        .default(DEFAULT_TOP_K)
        .describe(
          `How many lines to return (default ${DEFAULT_TOP_K}; more than ${SEARCH_DOCS_MAX_TOP_K} is cut to ${SEARCH_DOCS_MAX_TOP_K}).`,
        ),
      path: z
        .string()
        .max(200)
        .optional()
        .describe(
          'Optional document or folder to search, relative to the docs root, e.g. "refund-policy.md".',
        ),
    },
    output: {
      items: z.array(
        z.object({ file: z.string(), line: z.number().int(), text: z.string(), score: z.number() }),
      ),
      unreadable: z
        .number()
        .int()
        .optional()
        .describe('Documents and folders skipped because the server may not read them (absent when none).'),
    },
    annotations: { readOnlyHint: true, openWorldHint: false },
    bind: bindCustomerIdIfAny(options.customerScoped ?? false),
    handler: async ({ query, top_k, path }, ctx) => {
      const refusePath = () =>
        fail('invalid_argument', 'That path is not a document under the docs root.', {
          hint: 'Use a file name from the docs root such as "refund-policy.md", or leave path out to search all documents.',
          fields: [{ path: 'path', expected: 'a relative path inside the docs root' }],
        });
      const allTerms = tokenize(query);
      if (allTerms.length === 0) {
        return fail('invalid_argument', 'The query is empty.', {
          hint: 'Give one or more keywords, e.g. "refund days" or "tracking".',
          fields: [{ path: 'query', expected: 'one or more words' }],
        });
      }
      const terms = allTerms.slice(0, SEARCH_DOCS_MAX_TERMS);
      const realRoot = await realpathOrUndefined(root);
      if (!realRoot) return ok({ items: [] }, { total: 0, note: 'No documents are available.' });
      const start = path === undefined ? realRoot : await resolveUnder(realRoot, path);
      if (!start) return refusePath();
      const logger = options.logger ?? ctx.logger;
      const signal = ctx.signal;
      const walk: Walk = {
        realRoot,
        logger,
        signal,
        maxDepth,
        remaining: maxFiles,
        entriesLeft: maxEntries,
        entriesRead: 0,
        entriesCut: false,
        filesCut: false,
        oversized: 0,
        visited: new Set(),
        unreadableFolders: 0,
      };
      const search: Search = {
        trie: termTrie(terms),
        signal,
        best: [],
        limit: Math.min(top_k, SEARCH_DOCS_MAX_TOP_K),
        total: 0,
        lines: 0,
        chars: 0,
        fileOrder: new Map(),
      };
      let unreadableFiles = 0;
      let documents = 0;
      let bytesLeft = maxBytes;
      let bytesCut = false;
      try {
        for (const candidate of await markdownFiles(walk, start, 0)) {
          // A turn of the event loop between documents, so one call never holds the others up for
          // long, and a cancelled or timed-out call reads no further.
          await nextTurn();
          signal.throwIfAborted();
          if (candidate.size > bytesLeft) {
            bytesCut = true;
            break;
          }
          const file = candidate.path;
          let name: string;
          let text: string;
          try {
            ({ relativePath: name, text } = await readFileUnderRoot(realRoot, relative(realRoot, file), {
              // Never more than the call has left: a document that grew since it was listed is refused.
              maxBytes: Math.min(SEARCH_DOCS_MAX_FILE_BYTES, bytesLeft),
              allowHardLinks: options.allowHardLinks ?? false,
            }));
          } catch (error) {
            if (!(error instanceof SafeFileRefusal)) throw error;
            logger.warn(
              { tool: 'search_docs', entry: file, reason: error.reason, detail: error.message },
              'skipped a document that cannot be read safely',
            );
            // One document the server may not read costs that document, never the whole search; the
            // answer counts it (without its name) whether it was met while listing or named.
            if (error.reason === 'unreadable') {
              unreadableFiles += 1;
              continue;
            }
            if (error.reason === 'too_large') {
              // It grew since it was listed: past what the call has left, the search stops there.
              if (bytesLeft < SEARCH_DOCS_MAX_FILE_BYTES) {
                bytesCut = true;
                break;
              }
              walk.oversized += 1;
              continue;
            }
            // A document the model named itself gets a clear answer; one met while listing is skipped.
            if (file === start) return refusePath();
            continue;
          }
          documents += 1;
          // At most what was asked for (the read is cut there); invalid UTF-8 only makes it count more.
          bytesLeft -= Math.min(Buffer.byteLength(text), bytesLeft);
          // The service's own secrets go before the search: a query can neither show one nor tell,
          // by what it finds, how one starts (a keyword matches the start of a word).
          await scoreDocument(search, name, hide(text));
        }
      } finally {
        // What the call cost, for an operator (and a test) to see without timing it.
        logger.debug(
          {
            tool: 'search_docs',
            entriesRead: walk.entriesRead,
            documents,
            bytes: maxBytes - bytesLeft,
            lines: search.lines,
            chars: search.chars,
            terms: terms.length,
            cancelled: signal.aborted,
          },
          'search_docs work',
        );
      }
      // The documents' words reach the model as they are (a success passes core's boundary unscrubbed):
      // a credential in a line or a file name (a pasted connection string, a token in a name) is
      // redacted in what is returned, and control characters that would drive a terminal or reorder
      // the text shown are made visible.
      const items = search.best.map((hit) => ({
        file: documentText(hit.file, false, options.secrets),
        line: hit.line,
        text: documentText(excerpt(hit.text, hit.lowerAt, search.trie), true),
        score: hit.score,
      }));
      const notes: string[] = [];
      if (top_k > SEARCH_DOCS_MAX_TOP_K) notes.push(`top_k was cut to ${SEARCH_DOCS_MAX_TOP_K}.`);
      if (allTerms.length > terms.length) {
        notes.push(
          `Looked for the first ${SEARCH_DOCS_MAX_TERMS} distinct keywords only (of ${allTerms.length}).`,
        );
      }
      if (walk.filesCut) {
        notes.push(
          `Searched the first ${maxFiles} documents only; give a path (a document or folder) to search the others.`,
        );
      } else if (walk.entriesCut) {
        notes.push(
          `Stopped after looking at ${maxEntries} folder entries; give a path (a document or folder) to search the others.`,
        );
      }
      if (bytesCut) {
        notes.push(
          `Stopped after reading ${formatBytes(maxBytes - bytesLeft)} of documents (at most ${formatBytes(maxBytes)} per call); give a path (a document or folder) to search the others.`,
        );
      }
      if (walk.oversized > 0) {
        notes.push(
          `Skipped ${walk.oversized} ${walk.oversized === 1 ? 'document' : 'documents'} larger than ${formatBytes(SEARCH_DOCS_MAX_FILE_BYTES)}.`,
        );
      }
      const unreadable = unreadableFiles + walk.unreadableFolders;
      if (unreadable > 0) notes.push(unreadableNote(unreadableFiles, walk.unreadableFolders));
      if (search.total === 0) notes.push('No line matches these keywords; try other words.');
      else if (search.total > items.length)
        notes.push(`Showing ${items.length} of ${search.total} matching lines.`);
      return ok(
        unreadable > 0 ? { items, unreadable } : { items },
        notes.length > 0 ? { total: search.total, note: notes.join(' ') } : { total: search.total },
      );
    },
  });
}

/** "Skipped 1 document and 2 folders the server has no permission to read." */
function unreadableNote(files: number, folders: number): string {
  const parts: string[] = [];
  if (files > 0) parts.push(`${files} ${files === 1 ? 'document' : 'documents'}`);
  if (folders > 0) parts.push(`${folders} ${folders === 1 ? 'folder' : 'folders'}`);
  return `Skipped ${parts.join(' and ')} the server has no permission to read.`;
}

/** "8 MiB", "1.5 MiB", "300 KiB", "12 bytes". */
function formatBytes(bytes: number): string {
  if (bytes >= 1024 * 1024) return `${Number((bytes / (1024 * 1024)).toFixed(1))} MiB`;
  if (bytes >= 1024) return `${Number((bytes / 1024).toFixed(1))} KiB`;
  return `${bytes} ${bytes === 1 ? 'byte' : 'bytes'}`;
}

/** The query's distinct words, lowercased, in the order given. */
function tokenize(text: string): string[] {
  return [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])];
}

/** The query's keywords as a trie over UTF-16 code units; `bit` marks the keyword that ends at a node. */
interface TermNode {
  readonly next: Map<number, TermNode>;
  bit: number;
}

function termTrie(terms: readonly string[]): TermNode {
  const root: TermNode = { next: new Map(), bit: 0 };
  terms.forEach((term, index) => {
    let node = root;
    for (let unit = 0; unit < term.length; unit += 1) {
      const code = term.charCodeAt(unit);
      let child = node.next.get(code);
      if (child === undefined) {
        child = { next: new Map(), bit: 0 };
        node.next.set(code, child);
      }
      node = child;
    }
    node.bit = 2 ** index;
  });
  return root;
}

/** One call's scoring: the keywords, the best hits so far (at most `limit`, best first) and counts. */
interface Search {
  readonly trie: TermNode;
  readonly signal: AbortSignal;
  readonly best: Hit[];
  readonly limit: number;
  /** Matching lines met. */
  total: number;
  /** Lines scored. */
  lines: number;
  /** Characters scored: each once, whatever the query. */
  chars: number;
  /** How the document being scored orders by name against the documents of kept hits. */
  readonly fileOrder: Map<string, number>;
}

/**
 * Scores each line of `text` by how many keywords start one of its words (runs of letters and digits
 * of the lowercased document), in one pass whatever the query: each word walks the keyword trie from
 * its first character, so a character costs a table lookup and at most one trie step.
 */
async function scoreDocument(search: Search, file: string, text: string): Promise<void> {
  search.fileOrder.clear();
  const lower = text.toLowerCase();
  // toLowerCase makes only U+0130 longer (two units): without it, a line has the same offsets in both.
  const aligned = lower.length === text.length;
  const { trie } = search;
  let node: TermNode | undefined;
  let inWord = false;
  let wordStart = 0;
  let mask = 0;
  let firstAt = 0;
  let line = 1;
  let lineStart = 0;
  let textLineStart = 0;
  let nextYield = CHARS_PER_TURN;
  const endLine = (end: number): void => {
    search.lines += 1;
    const textEnd = aligned ? end : lineEnd(text, textLineStart);
    if (mask !== 0) {
      const start = aligned ? lineStart : textLineStart;
      record(search, file, line, bitCount(mask), text, start, textEnd, firstAt);
    }
    textLineStart = textEnd + 1;
    line += 1;
    lineStart = end + 1;
    mask = 0;
    inWord = false;
    node = undefined;
  };
  for (let index = 0; index < lower.length; index += 1) {
    if (index >= nextYield) {
      // A long document shares the event loop too, and stops when the call is cancelled.
      nextYield += CHARS_PER_TURN;
      await nextTurn();
      search.signal.throwIfAborted();
    }
    const code = lower.charCodeAt(index);
    if (code === 10) {
      endLine(index);
      continue;
    }
    let width = 1;
    let point = code;
    if (code >= 0xd800 && code <= 0xdbff && index + 1 < lower.length) {
      const low = lower.charCodeAt(index + 1);
      if (low >= 0xdc00 && low <= 0xdfff) {
        point = (code - 0xd800) * 0x400 + (low - 0xdc00) + 0x10000;
        width = 2;
      }
    }
    if (!isWordCharacter(point)) {
      inWord = false;
      node = undefined;
      index += width - 1;
      continue;
    }
    if (!inWord) {
      inWord = true;
      wordStart = index;
      node = trie;
    }
    for (let unit = 0; unit < width && node !== undefined; unit += 1) {
      node = node.next.get(lower.charCodeAt(index + unit));
      if (node !== undefined && node.bit !== 0 && (mask & node.bit) === 0) {
        if (mask === 0) firstAt = wordStart - lineStart;
        mask |= node.bit;
      }
    }
    index += width - 1;
  }
  endLine(lower.length);
  search.chars += lower.length;
}

/** Where the line starting at `start` ends (its `\n`, or the end of the text). */
function lineEnd(text: string, start: number): number {
  const end = text.indexOf('\n', start);
  return end === -1 ? text.length : end;
}

/**
 * Counts a matching line (`text` from `start` to `end`) and keeps it when it is among the `limit` best
 * (higher score, then file, then line), building the hit only then.
 */
function record(
  search: Search,
  file: string,
  line: number,
  score: number,
  text: string,
  start: number,
  end: number,
  lowerAt: number,
): void {
  search.total += 1;
  const { best, limit } = search;
  const last = best[limit - 1];
  if (last !== undefined && compareHits(search, score, file, line, last) >= 0) return;
  let at = best.length;
  while (at > 0 && compareHits(search, score, file, line, best[at - 1] as Hit) < 0) at -= 1;
  best.splice(at, 0, { file, line, text: text.slice(start, end), lowerAt, score });
  if (best.length > limit) best.pop();
}

/** A line of the document being scored against a kept hit; the names' order is computed once per pair. */
function compareHits(search: Search, score: number, file: string, line: number, kept: Hit): number {
  if (score !== kept.score) return kept.score - score;
  if (file === kept.file) return line - kept.line;
  let order = search.fileOrder.get(kept.file);
  if (order === undefined) {
    order = collator.compare(file, kept.file);
    search.fileOrder.set(kept.file, order);
  }
  return order || line - kept.line;
}

function bitCount(mask: number): number {
  let count = 0;
  for (let rest = mask; rest !== 0; rest &= rest - 1) count += 1;
  return count;
}

/** Whether a code point is a letter or a digit (`[\p{L}\p{N}]`), as a table filled on first use. */
const WORD_CLASS = new Uint8Array(0x110000);
const WORD_CHARACTER = /^[\p{L}\p{N}]$/u;

function isWordCharacter(point: number): boolean {
  let known = WORD_CLASS[point];
  if (known === 0) {
    known = WORD_CHARACTER.test(String.fromCodePoint(point)) ? 1 : 2;
    WORD_CLASS[point] = known;
  }
  return known === 1;
}

/**
 * The line, trimmed, when it is short; otherwise SEARCH_DOCS_MAX_TEXT characters around its first
 * match (`lowerAt`, an offset in the lowercased line). A document may hold a line of up to a megabyte
 * (an inlined image, control bytes that JSON escapes sixfold): returned whole, five of them flood the
 * model's context, and one can push the answer past the 10 MiB a stdio client accepts in one message.
 *
 * Credentials (core's patterns) are redacted before the cut, so the cut never leaves part of one no
 * pattern recognises: in the line, or in a long line in a window of REDACT_MARGIN characters more on
 * each side of the excerpt (a credential longer than that, across the window's edge, may lose its
 * start there), and the first match is looked for again in what is left.
 */
function excerpt(untrimmed: string, lowerAt: number, trie: TermNode): string {
  const line = untrimmed.trim();
  const lead = untrimmed.length - untrimmed.trimStart().length;
  const match = Math.max(0, textOffset(untrimmed, lowerAt) - lead);
  let from = 0;
  let to = line.length;
  if (line.length > SEARCH_DOCS_MAX_TEXT + 2 * REDACT_MARGIN) {
    from = Math.max(0, match - TEXT_BEFORE_MATCH - REDACT_MARGIN);
    to = Math.min(line.length, match + SEARCH_DOCS_MAX_TEXT + REDACT_MARGIN);
    if (isLowSurrogate(line.charCodeAt(from))) from += 1;
    if (isLowSurrogate(line.charCodeAt(to))) to -= 1;
  }
  const window = redactSecretsInText(line.slice(from, to));
  if (from === 0 && to === line.length && window.length <= SEARCH_DOCS_MAX_TEXT) return window;
  const found = firstMatch(trie, window);
  const at = found ?? Math.min(match - from, window.length);
  let start = Math.max(0, Math.min(at - TEXT_BEFORE_MATCH, window.length - SEARCH_DOCS_MAX_TEXT));
  let end = Math.min(window.length, start + SEARCH_DOCS_MAX_TEXT);
  // Never split a surrogate pair.
  if (isLowSurrogate(window.charCodeAt(start))) start += 1;
  if (isLowSurrogate(window.charCodeAt(end))) end -= 1;
  const before = start > 0 || from > 0 ? '…' : '';
  const after = end < window.length || to < line.length ? '…' : '';
  return `${before}${window.slice(start, end)}${after}`;
}

/** Where in `text` the first word a keyword starts begins (as `scoreDocument` finds it), or undefined. */
function firstMatch(trie: TermNode, text: string): number | undefined {
  const lower = text.toLowerCase();
  let node: TermNode | undefined;
  let wordStart = -1;
  for (let index = 0; index < lower.length; index += 1) {
    const point = lower.codePointAt(index)!;
    const width = point > 0xffff ? 2 : 1;
    if (!isWordCharacter(point)) {
      node = undefined;
      wordStart = -1;
    } else {
      if (wordStart < 0) {
        wordStart = index;
        node = trie;
      }
      for (let unit = 0; unit < width && node !== undefined; unit += 1) {
        node = node.next.get(lower.charCodeAt(index + unit));
        if (node !== undefined && node.bit !== 0) return textOffset(text, wordStart);
      }
    }
    index += width - 1;
  }
  return undefined;
}

/** The offset in `line` of offset `lowerAt` of `line.toLowerCase()` (only U+0130 lowercases to two units). */
function textOffset(line: string, lowerAt: number): number {
  if (!line.includes('\u0130')) return lowerAt;
  let lowered = 0;
  let index = 0;
  while (lowered < lowerAt && index < line.length) {
    lowered += line.charCodeAt(index) === 0x130 ? 2 : 1;
    index += 1;
  }
  return index;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

async function realpathOrUndefined(path: string): Promise<string | undefined> {
  try {
    return await realpath(path);
  } catch {
    return undefined;
  }
}

/** The real path of `requested` when it exists and stays under the root; undefined otherwise. */
async function resolveUnder(realRoot: string, requested: string): Promise<string | undefined> {
  if (requested.includes('\0') || isAbsolute(requested)) return undefined;
  const lexical = resolve(realRoot, requested);
  if (!isUnderRoot(realRoot, lexical)) return undefined;
  const real = await realpathOrUndefined(lexical);
  return real && isUnderRoot(realRoot, real) ? real : undefined;
}

/**
 * The candidate documents under `start`, at most `walk.remaining` of them, no deeper than
 * `walk.maxDepth` folders and after reading no more than `walk.entriesLeft` folder entries (a root
 * that grew large costs one call a bounded amount of work). A folder's entries are looked at in name
 * order; which entries of a folder larger than what is left are read is the folder's own order.
 */
async function markdownFiles(walk: Walk, start: string, depth: number): Promise<Candidate[]> {
  walk.signal.throwIfAborted();
  // A link back to a parent folder would loop forever.
  if (walk.visited.has(start)) return [];
  walk.visited.add(start);
  // By name and racy on purpose: it only proposes candidates; readFileUnderRoot decides what is read.
  const info = await stat(start).catch(() => undefined);
  if (info === undefined) return [];
  if (info.isFile()) {
    if (!start.endsWith('.md')) return [];
    if (info.size > SEARCH_DOCS_MAX_FILE_BYTES) {
      walk.oversized += 1;
      return [];
    }
    if (walk.remaining === 0) {
      walk.filesCut = true;
      return [];
    }
    walk.remaining -= 1;
    return [{ path: start, size: info.size }];
  }
  // FIFOs, sockets and devices are neither documents nor folders.
  if (!info.isDirectory() || depth > walk.maxDepth) return [];
  const found: Candidate[] = [];
  for (const name of await folderEntries(walk, start)) {
    if (walk.filesCut) break;
    walk.signal.throwIfAborted();
    const real = await realpathOrUndefined(join(start, name));
    if (!real) continue;
    if (!isUnderRoot(walk.realRoot, real)) {
      // A symlink pointing out of the root: never read, always logged.
      walk.logger.warn(
        { tool: 'search_docs', entry: join(start, name) },
        'skipped a link that leaves the docs root',
      );
      continue;
    }
    found.push(...(await markdownFiles(walk, real, depth + 1)));
  }
  return found;
}

/**
 * The names in `folder`, sorted, at most `walk.entriesLeft` of them: the folder is read in its own
 * order and one entry past what is left at most (to know that it holds more, which marks the walk
 * cut), so neither the time nor the memory a call spends grows with the folder. Those read are
 * charged to the call at once, so all folders of one call together read no more than the limit.
 */
async function folderEntries(walk: Walk, folder: string): Promise<string[]> {
  // Once cut, a folder met later would only be read to be left out.
  if (walk.entriesCut) return [];
  const wanted = walk.entriesLeft + 1;
  const names: string[] = [];
  try {
    const dir = await opendir(folder, { bufferSize: Math.min(FOLDER_READ_BATCH, wanted) });
    try {
      while (names.length < wanted) {
        const entry = await dir.read();
        if (entry === null) break;
        names.push(entry.name);
      }
    } finally {
      await dir.close().catch(() => undefined);
    }
  } catch (error) {
    // Listing needs read permission (a folder of mode 0711 can be searched, not listed): counted, so
    // the answer says documents were left out. A folder gone meanwhile is simply empty.
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') {
      walk.unreadableFolders += 1;
      walk.logger.warn(
        { tool: 'search_docs', entry: folder, code },
        'skipped a folder that cannot be listed',
      );
    }
    return [];
  }
  walk.entriesRead += names.length;
  names.sort(collator.compare);
  if (names.length > walk.entriesLeft) {
    // The last in name order of those read only told that there are more.
    names.length = walk.entriesLeft;
    walk.entriesCut = true;
  }
  walk.entriesLeft -= names.length;
  return names;
}

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new TypeError(`searchDocsTool: ${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}
