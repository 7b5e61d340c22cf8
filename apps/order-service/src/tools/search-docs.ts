import type { Dirent } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve } from 'node:path';
import { defineTool, fail, type Logger, ok, redactSecretsInText, type ToolDefinition } from '@toolgate/core';
import * as z from 'zod';
import { isUnderRoot, readFileUnderRoot, SafeFileRefusal } from '../safe-file.js';

export const SEARCH_DOCS_MAX_TOP_K = 5;
/** Longest `text` of one hit: a longer line is cut around its first match, `…` marking each cut. */
export const SEARCH_DOCS_MAX_TEXT = 240;
/** How much of a cut line is kept before its first match. */
const TEXT_BEFORE_MATCH = 60;
const DEFAULT_TOP_K = 3;
const MAX_FILE_BYTES = 1024 * 1024;
const DEFAULT_MAX_FILES = 200;
const DEFAULT_MAX_DEPTH = 16;
/** Folder entries looked at per call, per document it may read: a folder of other files stops the walk too. */
const ENTRIES_PER_FILE = 25;

export interface SearchDocsOptions {
  /** The folder of markdown policy documents; nothing outside it is ever read. */
  root: string;
  /** Read documents that have more than one hard link (they may share an inode with a file outside the root). @default false */
  allowHardLinks?: boolean;
  /** Documents read per call at most (in name order); the answer says when the search stopped there. @default 200 */
  maxFiles?: number;
  /** Folder levels below the searched folder that are walked. @default 16 */
  maxDepth?: number;
  logger?: Logger;
}

/** What one call's listing may still take, and whether it had to stop. */
interface Walk {
  readonly realRoot: string;
  readonly logger: Logger;
  readonly maxDepth: number;
  remaining: number;
  /** Folder entries the listing may still look at (ENTRIES_PER_FILE per document allowed). */
  entriesLeft: number;
  /** Why the listing stopped early, if it did: the document limit or the entry limit. */
  stopped: 'files' | 'entries' | undefined;
  readonly visited: Set<string>;
  /** Folders the process may not list (EACCES, EPERM): their documents were not searched. */
  unreadableFolders: number;
}

interface Hit {
  file: string;
  line: number;
  text: string;
  score: number;
}

/**
 * Keyword search over the policy documents under one root: the reference file tool. Listing picks
 * candidates by name (symlinks resolved, anything leaving the root skipped and logged); every file
 * is then read through `readFileUnderRoot`, which opens first and judges the descriptor, so a link
 * or directory swapped in between is never read (see safe-file.ts). Hard links, FIFOs and devices
 * are refused.
 */
export function searchDocsTool(options: SearchDocsOptions): ToolDefinition {
  const root = resolve(options.root);
  const maxFiles = positiveInteger('maxFiles', options.maxFiles, DEFAULT_MAX_FILES);
  const maxDepth = positiveInteger('maxDepth', options.maxDepth, DEFAULT_MAX_DEPTH);
  const maxEntries = maxFiles * ENTRIES_PER_FILE;
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
    handler: async ({ query, top_k, path }, ctx) => {
      const refusePath = () =>
        fail('invalid_argument', 'That path is not a document under the docs root.', {
          hint: 'Use a file name from the docs root such as "refund-policy.md", or leave path out to search all documents.',
          fields: [{ path: 'path', expected: 'a relative path inside the docs root' }],
        });
      const terms = tokenize(query);
      if (terms.length === 0) {
        return fail('invalid_argument', 'The query is empty.', {
          hint: 'Give one or more keywords, e.g. "refund days" or "tracking".',
          fields: [{ path: 'query', expected: 'one or more words' }],
        });
      }
      const realRoot = await realpathOrUndefined(root);
      if (!realRoot) return ok({ items: [] }, { total: 0, note: 'No documents are available.' });
      const start = path === undefined ? realRoot : await resolveUnder(realRoot, path);
      if (!start) return refusePath();
      const logger = options.logger ?? ctx.logger;
      const hits: Hit[] = [];
      const walk: Walk = {
        realRoot,
        logger,
        maxDepth,
        remaining: maxFiles,
        entriesLeft: maxEntries,
        stopped: undefined,
        visited: new Set(),
        unreadableFolders: 0,
      };
      let unreadableFiles = 0;
      for (const file of await markdownFiles(walk, start, 0)) {
        let name: string;
        let text: string;
        try {
          ({ relativePath: name, text } = await readFileUnderRoot(realRoot, relative(realRoot, file), {
            maxBytes: MAX_FILE_BYTES,
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
          // A document the model named itself gets a clear answer; one met while listing is skipped.
          if (file === start) return refusePath();
          continue;
        }
        text.split('\n').forEach((lineText, index) => {
          const score = scoreLine(lineText, terms);
          if (score > 0)
            hits.push({ file: name, line: index + 1, text: excerpt(lineText.trim(), terms), score });
        });
      }
      hits.sort((a, b) => b.score - a.score || a.file.localeCompare(b.file) || a.line - b.line);
      const limit = Math.min(top_k, SEARCH_DOCS_MAX_TOP_K);
      // The documents' words reach the model as they are (a success passes core's boundary unscrubbed):
      // a credential in a line or a file name (a pasted connection string, a token in a name) is
      // redacted in what is returned.
      const items = hits.slice(0, limit).map((hit) => ({
        ...hit,
        file: redactSecretsInText(hit.file),
        text: redactSecretsInText(hit.text),
      }));
      const notes: string[] = [];
      if (top_k > SEARCH_DOCS_MAX_TOP_K) notes.push(`top_k was cut to ${SEARCH_DOCS_MAX_TOP_K}.`);
      if (walk.stopped === 'files') {
        notes.push(
          `Searched the first ${maxFiles} documents only; give a path (a document or folder) to search the others.`,
        );
      } else if (walk.stopped === 'entries') {
        notes.push(
          `Stopped after looking at ${maxEntries} folder entries; give a path (a document or folder) to search the others.`,
        );
      }
      const unreadable = unreadableFiles + walk.unreadableFolders;
      if (unreadable > 0) notes.push(unreadableNote(unreadableFiles, walk.unreadableFolders));
      if (hits.length === 0) notes.push('No line matches these keywords; try other words.');
      else if (hits.length > items.length)
        notes.push(`Showing ${items.length} of ${hits.length} matching lines.`);
      return ok(
        unreadable > 0 ? { items, unreadable } : { items },
        notes.length > 0 ? { total: hits.length, note: notes.join(' ') } : { total: hits.length },
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

function tokenize(text: string): string[] {
  return [...new Set(text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])];
}

function scoreLine(line: string, terms: readonly string[]): number {
  const words = new Set(tokenize(line));
  let score = 0;
  for (const term of terms)
    if (words.has(term) || [...words].some((word) => word.startsWith(term))) score += 1;
  return score;
}

/**
 * `line` when it is short; otherwise SEARCH_DOCS_MAX_TEXT characters around its first match. A
 * document may hold a line of up to a megabyte (an inlined image, control bytes that JSON escapes
 * sixfold): returned whole, five of them flood the model's context, and one can push the answer past
 * the 10 MiB a stdio client accepts in one message.
 */
function excerpt(line: string, terms: readonly string[]): string {
  if (line.length <= SEARCH_DOCS_MAX_TEXT) return line;
  let match = 0;
  for (const word of line.matchAll(/[\p{L}\p{N}]+/gu)) {
    const lower = word[0].toLowerCase();
    if (terms.some((term) => lower.startsWith(term))) {
      match = word.index;
      break;
    }
  }
  let start = Math.max(0, Math.min(match - TEXT_BEFORE_MATCH, line.length - SEARCH_DOCS_MAX_TEXT));
  let end = start + SEARCH_DOCS_MAX_TEXT;
  // Never split a surrogate pair.
  if (isLowSurrogate(line.charCodeAt(start))) start += 1;
  if (isLowSurrogate(line.charCodeAt(end))) end -= 1;
  return `${start > 0 ? '…' : ''}${line.slice(start, end)}${end < line.length ? '…' : ''}`;
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
 * The candidate documents under `start`, in name order, at most `walk.remaining` of them, no deeper
 * than `walk.maxDepth` folders and after looking at no more than `walk.entriesLeft` folder entries (a
 * root that grew large costs one call a bounded amount of work).
 */
async function markdownFiles(walk: Walk, start: string, depth: number): Promise<string[]> {
  // A link back to a parent folder would loop forever.
  if (walk.visited.has(start)) return [];
  walk.visited.add(start);
  // By name and racy on purpose: it only proposes candidates; readFileUnderRoot decides what is read.
  const info = await stat(start).catch(() => undefined);
  if (info === undefined) return [];
  if (info.isFile()) {
    if (!start.endsWith('.md') || info.size > MAX_FILE_BYTES) return [];
    if (walk.remaining === 0) {
      walk.stopped = 'files';
      return [];
    }
    walk.remaining -= 1;
    return [start];
  }
  // FIFOs, sockets and devices are neither documents nor folders.
  if (!info.isDirectory() || depth > walk.maxDepth) return [];
  const found: string[] = [];
  let entries: Dirent[];
  try {
    entries = await readdir(start, { withFileTypes: true });
  } catch (error) {
    // Listing needs read permission (a folder of mode 0711 can be searched, not listed): counted, so
    // the answer says documents were left out. A folder gone meanwhile is simply empty.
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EACCES' || code === 'EPERM') {
      walk.unreadableFolders += 1;
      walk.logger.warn({ tool: 'search_docs', entry: start, code }, 'skipped a folder that cannot be listed');
    }
    return [];
  }
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (walk.stopped !== undefined) break;
    if (walk.entriesLeft === 0) {
      walk.stopped = 'entries';
      break;
    }
    walk.entriesLeft -= 1;
    const real = await realpathOrUndefined(join(start, entry.name));
    if (!real) continue;
    if (!isUnderRoot(walk.realRoot, real)) {
      // A symlink pointing out of the root: never read, always logged.
      walk.logger.warn(
        { tool: 'search_docs', entry: join(start, entry.name) },
        'skipped a link that leaves the docs root',
      );
      continue;
    }
    found.push(...(await markdownFiles(walk, real, depth + 1)));
  }
  return found;
}

function positiveInteger(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new TypeError(`searchDocsTool: ${name} must be a positive integer, got ${String(value)}`);
  }
  return value;
}
