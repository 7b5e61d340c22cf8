import { createReadStream } from 'node:fs';
import { canonicalJson, withDeadline } from '@toolgate/core';
import {
  GENESIS_HASH,
  hashOfCanonical,
  isChainAnchor,
  isCutShort,
  lineOf,
  parseRecordLine,
} from './chain.js';
import { type ChainKey, chainKeysOf, isKeyId } from './chain-key.js';
import { parseTableName } from './pg-table.js';
import { textColumn } from './postgres-sink.js';
import type { AuditHead, AuditKey, AuditQueryable, AuditRecord, ChainAnchor } from './types.js';

/** What every verifier takes beside its source. */
export interface VerifyOptions {
  /**
   * The key the chains were written with (`createAudit({ key })`), or a list of keys (rotation): a
   * record is checked with the key its `keyId` names. A keyed record whose key is not given is
   * reported, and once keys are given so is a record without `keyId` (someone who stripped the keys
   * and recomputed plain SHA-256), unless `allowUnkeyed`.
   * @default none: unkeyed records verify, keyed ones are reported
   */
  keys?: AuditKey | readonly AuditKey[];
  /**
   * With `keys`: accept unkeyed records that come before their chain's first keyed record (a log
   * begun without a key, continued with one). An unkeyed record after a keyed one is still reported,
   * and a chain with no keyed record at all is as forgeable as any unkeyed chain.
   * @default false
   */
  allowUnkeyed?: boolean;
  /**
   * Records the chains must still hold, e.g. heads an application kept elsewhere (`audit.head()`):
   * each chain named must contain that seq with that hash. Finds records cut off a chain's end, a
   * chain deleted whole and a chain rewritten by someone holding the key.
   * @default none
   */
  expect?: AuditHead | readonly AuditHead[];
  /**
   * `verifyAuditFile` only: accept a chain that starts mid-file without `after`, before the file's first
   * record that has one: a file written before the file sink linked chains (it has named the record
   * before each new chain since `after` was introduced). Records after the first `after` must follow
   * the file sink's rules all the same, and with this option records spliced in from another file at
   * a chain's start before that record go unnoticed: use it for such older files only.
   * @default false
   */
  allowUnanchored?: boolean;
}

/** What the verifier found about one chain: intact, or its first broken link. */
export type ChainVerifyResult =
  | {
      readonly chain: string;
      readonly intact: true;
      /** Records checked. */
      readonly records: number;
      /** The last record's hash: store it elsewhere to detect a cut-off tail later. */
      readonly head: string | undefined;
    }
  | {
      readonly chain: string;
      readonly intact: false;
      /** Records of this chain checked before the break. */
      readonly records: number;
      /** 1-based number of the first record that does not verify (a file's line number; a chain's record number in a table). */
      readonly brokenAt: number;
      readonly reason: string;
    };

/**
 * What the verifier found: `intact` when every chain is; `records` counts all chains. A break is
 * described at the top (`brokenAt`, `reason`: the first found) and in `chains`, one entry per
 * chain id (records written before chain ids existed form the chain '').
 */
export type VerifyResult =
  | {
      readonly intact: true;
      readonly records: number;
      /** The hash of the last record read. */
      readonly head: string | undefined;
      readonly chains: readonly ChainVerifyResult[];
    }
  | {
      readonly intact: false;
      readonly records: number;
      readonly brokenAt: number;
      readonly reason: string;
      readonly chains: readonly ChainVerifyResult[];
    };

interface ChainState {
  previous: AuditRecord | undefined;
  /** Whether a record of this chain had a `keyId`: an unkeyed one after it is a downgrade. */
  keyed: boolean;
  /** The line (or a table chain's record number) of `previous`. */
  line: number;
  count: number;
  /** Hashes and lines of the current run's records by seq, kept when an anchor may name them (see `Anchors`). */
  kept: Map<number, { readonly hash: string; readonly line: number }> | undefined;
}

/**
 * How a pass over lines checks an `after` that names a record its chain has since gone past (lines of
 * writers that wrote at once): `keep` says which records' hashes are remembered (every one, or those a
 * first pass found named); an anchor whose record was not remembered is added to `unresolved`, for a
 * second pass that remembers exactly those.
 */
interface Anchors {
  readonly keep: 'all' | ReadonlyMap<string, ReadonlySet<number>> | undefined;
  readonly unresolved: Map<string, Set<number>>;
}

/** The verifier options, checked once: keys by id, and the expected heads. */
interface Checks {
  readonly keys: ReadonlyMap<string, ChainKey> | undefined;
  readonly allowUnkeyed: boolean;
  readonly allowUnanchored: boolean;
  readonly expect: readonly AuditHead[];
}

/** What one pass over a source checks with. */
interface Pass {
  readonly anchors: Anchors;
  readonly checks: Checks;
  /** The expected heads' state, undefined when none are expected. */
  readonly expected: ExpectedHeads | undefined;
  /** A file the file sink wrote: where each record may stand (see `checkPlacement`); undefined for other lines. */
  readonly file: FilePlacement | undefined;
}

/** What a pass over a file knows of the records before the current line (see `checkPlacement`). */
interface FilePlacement {
  /** The last record read (lines cut short passed over), and its line. */
  last: { chain: string; seq: number; hash: string; line: number } | undefined;
  /** Whether a record with `after` was read: from there on every chain starting mid-file must have one. */
  linked: boolean;
}

function checksOf(options: VerifyOptions | undefined, caller: string): Checks {
  const expect = options?.expect;
  const heads: readonly AuditHead[] = expect === undefined ? [] : Array.isArray(expect) ? expect : [expect];
  for (const head of heads) {
    if (!isChainAnchor(head)) {
      throw new RangeError(
        `${caller}: expect must be { chainId, seq, hash } (a string, a positive integer and 64 hex digits)`,
      );
    }
  }
  return {
    keys: options?.keys === undefined ? undefined : chainKeysOf(options.keys, `${caller}: keys`),
    allowUnkeyed: options?.allowUnkeyed ?? false,
    allowUnanchored: options?.allowUnanchored ?? false,
    expect: heads,
  };
}

function passOf(anchors: Anchors, checks: Checks, file = false): Pass {
  return {
    anchors,
    checks,
    expected: checks.expect.length === 0 ? undefined : new ExpectedHeads(checks.expect),
    file: file ? { last: undefined, linked: false } : undefined,
  };
}

/**
 * Checks the chains of a stream of lines (several chains may follow or interleave): each record
 * must hash to its `hash` (under the key its `keyId` names, see `keys`), link to the one before in
 * its chain by `prevHash` and continue its `seq`; each chain must start at seq 1 and hold every
 * record `expect` names. Stops at the first failure.
 */
export async function verifyAuditLines(
  lines: Iterable<string> | AsyncIterable<string>,
  options?: VerifyOptions,
): Promise<VerifyResult> {
  const checks = checksOf(options, 'verifyAuditLines');
  // An array can be read twice; any other source once, remembering every hash an anchor may name.
  if (Array.isArray(lines)) return verifyTwice(() => lines, checks);
  return verifyPass(lines, passOf({ keep: 'all', unresolved: new Map() }, checks));
}

/**
 * Verifies the lines `read` gives; when an anchor names a record its chain went past (which one pass
 * does not remember), reads them again remembering exactly the named records.
 */
async function verifyTwice(
  read: () => Iterable<string> | AsyncIterable<string>,
  checks: Checks,
): Promise<VerifyResult> {
  const unresolved = new Map<string, Set<number>>();
  const first = await verifyPass(read(), passOf({ keep: undefined, unresolved }, checks));
  if (unresolved.size === 0) return first;
  return verifyPass(read(), passOf({ keep: unresolved, unresolved: new Map() }, checks));
}

async function verifyPass(
  lines: Iterable<string> | AsyncIterable<string>,
  pass: Pass,
): Promise<VerifyResult> {
  const chains = new Map<string, ChainState>();
  let number = 0;
  let last: string | undefined;
  // The first line a write cut short left (see `isCutShort`): reported only when nothing after it breaks.
  let torn: number | undefined;
  for await (const line of lines) {
    number += 1;
    const checked = checkLine(line, number, chains, pass);
    if (typeof checked === 'string') {
      // A crash mid-write leaves such a line for good (the next writer closes it off and chains on
      // from the record before it): stopping there would leave every later record unchecked, so an
      // edit made after any crash would be reported exactly as the crash was.
      if (isCutShort(line)) {
        torn ??= number;
        continue;
      }
      return broken(chains, chainOfLine(line), number, checked);
    }
    last = checked.hash;
  }
  // A missing record has no line: it is reported at the line after the last.
  const missed = pass.expected?.firstMissed(chains, () => number + 1);
  if (missed !== undefined) return broken(chains, missed.chain, missed.brokenAt, missed.reason);
  if (torn !== undefined) return broken(chains, '', torn, notRecordReason(torn));
  return intact(chains, last);
}

/** `verifyAuditLines` over a JSON-lines file written by `createFileSink`, streamed. */
export async function verifyAuditFile(path: string, options?: VerifyOptions): Promise<VerifyResult> {
  const checks = checksOf(options, 'verifyAuditFile');
  const unresolved = new Map<string, Set<number>>();
  const first = await verifyFilePass(path, passOf({ keep: undefined, unresolved }, checks, true));
  if (unresolved.size === 0) return first;
  return verifyFilePass(path, passOf({ keep: unresolved, unresolved: new Map() }, checks, true));
}

async function verifyFilePass(path: string, pass: Pass): Promise<VerifyResult> {
  const stream = createReadStream(path, { encoding: 'utf8' });
  const file = { endsWithNewline: true };
  const source = fileLines(stream, file);
  // A wrapper, so that the verifier stopping early leaves `source` open to ask whether lines follow.
  let read = 0;
  const unclosed = {
    [Symbol.asyncIterator]: () => ({
      next: async () => {
        const item = await source.next();
        if (item.done !== true) read += 1;
        return item;
      },
    }),
  };
  try {
    const result = await verifyPass(unclosed, pass);
    if (result.intact || result.reason !== notRecordReason(result.brokenAt)) return result;
    // The failing line is the last one and no newline ends it: a write cut short (a crash mid-write;
    // a sink reopening the file closes such a line and chains on from the record before it).
    if (result.brokenAt === read && (await source.next()).done && !file.endsWithNewline) {
      return { ...result, reason: tornReason(result.brokenAt) };
    }
    return result;
  } finally {
    await source.return(undefined);
    stream.destroy();
  }
}

/**
 * The lines of a file as the file sink writes them: split at `\n` only, each line's text exactly as
 * stored. Not `readline`: it also ends a line at a lone `\r` and drops the `\r` of `\r\n`, so a file
 * whose line ends were rewritten (CRLF, or `\r` alone, which a reader splitting at `\n` sees as one
 * line holding two records) would verify as the file that was written. A record never holds a raw
 * `\r` (JSON escapes it), so here one is part of its line, and that line is not the exact text that
 * was hashed. `file.endsWithNewline` says, once the stream ended, whether its last byte was `\n`.
 */
async function* fileLines(
  stream: AsyncIterable<string>,
  file: { endsWithNewline: boolean },
): AsyncGenerator<string, void, undefined> {
  let pending = '';
  for await (const chunk of stream) {
    if (chunk.length === 0) continue;
    file.endsWithNewline = chunk.charCodeAt(chunk.length - 1) === 0x0a;
    let start = 0;
    let end = chunk.indexOf('\n');
    while (end !== -1) {
      const line = pending + chunk.slice(start, end);
      pending = '';
      yield line;
      start = end + 1;
      end = chunk.indexOf('\n', start);
    }
    pending += chunk.slice(start);
  }
  // The text after the last newline: a line the file ends inside (a torn write), never an empty one.
  if (pending !== '') yield pending;
}

function notRecordReason(line: number): string {
  return `record ${line} is not an audit record (not JSON, or no seq, hash and prevHash)`;
}

function tornReason(line: number): string {
  return `record ${line} is torn: the file ends inside it (a write cut short, e.g. by a crash); the records before it are intact`;
}

export interface VerifyTableOptions extends VerifyOptions {
  client: AuditQueryable;
  /** @default 'toolgate_audit' */
  table?: string;
  /** Check only this chain. @default every chain in the table */
  chain?: string;
  /**
   * How long one read (a page of records, the list of chains, a named record) may take. Past it the
   * verification rejects with a `TimeoutError` DOMException: it could not verify, which says nothing
   * of the chains. A silent partition sends no reset, and without a limit the read waits for the
   * kernel to give up on the connection (about 15 minutes on Linux). With a `pg.Pool`, every read runs
   * on one connection checked out for the verification (the checkout is bound by the same limit), and
   * a connection whose read failed or timed out is destroyed, not handed back: a silent one would
   * otherwise stay checked out for those 15 minutes, and a few would starve the pool. With a
   * `pg.Client` the read is abandoned, not cancelled: the connection may still wait for its answer
   * (it is then best ended: `end()` drops a connection with a query in flight at once).
   * @default 30000
   */
  timeoutMs?: number;
}

const PAGE = 1000;

interface TableRow {
  page_key: string;
  chain: string;
  time_ms: string;
  tool: string;
  outcome: string;
  principal: string | null;
  caller: string | null;
  incident_id: string | null;
  hash: string;
  record: string;
}

/**
 * Verifies every chain of a table written by `createPostgresSink` (or only `chain`), read in pages by
 * seq: each chain must verify as a file does, and every copied column (chain, seq, time, tool,
 * outcome, principal, caller, incident_id, hash) must equal the hashed record's field, so an UPDATE of a
 * column that queries read is found too.
 */
export async function verifyAuditTable(options: VerifyTableOptions): Promise<VerifyResult> {
  const table = parseTableName(options.table ?? 'toolgate_audit');
  const timeoutMs = options.timeoutMs ?? 30_000;
  if (!(Number.isFinite(timeoutMs) && timeoutMs > 0)) {
    throw new RangeError('verifyAuditTable: timeoutMs must be a positive number');
  }
  const what = `verifyAuditTable: a read of ${table.sql}`;
  // Options are checked before any connection is taken.
  const checks = checksOf(options, 'verifyAuditTable');
  const pool = isPool(options.client) ? options.client : undefined;
  const connection = pool === undefined ? undefined : await checkOut(pool, timeoutMs);
  const source = connection ?? options.client;
  let failed: Error | undefined;
  const client: AuditQueryable = {
    query: (text, params) =>
      withDeadline(() => source.query(text, params), { timeoutMs, what }).catch((error: unknown) => {
        failed ??= error instanceof Error ? error : new Error('verifyAuditTable: a read failed');
        throw error;
      }),
  };
  try {
    return await verifyTable(client, options, table, checks);
  } finally {
    // A connection whose read failed may still wait for its answer: destroyed (release with an error),
    // never handed back to the pool for the next caller to wait on.
    connection?.release(failed);
  }
}

/**
 * A `pg.Pool` (or one like it): checks connections out with `connect()` and counts them. A `pg.Client`
 * has `connect()` too, but no counts.
 */
interface PoolLike extends AuditQueryable {
  connect(): Promise<PooledConnection>;
  readonly totalCount: number;
  readonly idleCount: number;
}

/** A pool's checked-out connection: `release(error)` destroys it instead of keeping it. */
interface PooledConnection extends AuditQueryable {
  release(error?: Error): void;
}

function isPool(client: AuditQueryable): client is PoolLike {
  const candidate = client as Partial<PoolLike>;
  return (
    typeof candidate.connect === 'function' &&
    typeof candidate.totalCount === 'number' &&
    typeof candidate.idleCount === 'number'
  );
}

/** Checks a connection out within `timeoutMs`; one that arrives after the limit is destroyed. */
async function checkOut(pool: PoolLike, timeoutMs: number): Promise<PooledConnection> {
  const pending = pool.connect();
  try {
    return await withDeadline(() => pending, {
      timeoutMs,
      what: 'verifyAuditTable: checking a connection out of the pool',
    });
  } catch (error) {
    pending.then(
      (late) => late.release(new Error('verifyAuditTable: checked out after the time limit')),
      () => undefined,
    );
    throw error;
  }
}

async function verifyTable(
  client: AuditQueryable,
  options: VerifyTableOptions,
  table: ReturnType<typeof parseTableName>,
  checks: ReturnType<typeof checksOf>,
): Promise<VerifyResult> {
  const pass = passOf(TABLE_ANCHORS, checks);
  let names: string[];
  if (options.chain !== undefined) {
    const other = checks.expect.find((head) => head.chainId !== options.chain);
    if (other !== undefined) {
      throw new RangeError(
        `verifyAuditTable: expect names chain ${JSON.stringify(other.chainId)}, but only chain ${JSON.stringify(options.chain)} is verified`,
      );
    }
    names = [options.chain];
  } else {
    const { rows } = await client.query(`SELECT DISTINCT chain FROM ${table.sql} ORDER BY chain`);
    names = (rows as { chain: string }[]).map((row) => row.chain);
  }
  const chains = new Map<string, ChainState>();
  let last: string | undefined;
  for (const chain of names) {
    chains.set(chain, { previous: undefined, keyed: false, line: 0, count: 0, kept: undefined });
    let after = '0';
    for (;;) {
      const { rows } = await client.query(
        // The page key is aliased apart from `seq`: ORDER BY seq must sort the bigint column, not text.
        `SELECT seq::text AS page_key, chain, floor(extract(epoch FROM time) * 1000)::bigint::text AS time_ms,
            tool, outcome, principal, caller, incident_id, hash, record::text AS record
          FROM ${table.sql} WHERE chain = $1 AND seq > $2::bigint ORDER BY seq LIMIT ${PAGE}`,
        [chain, after],
      );
      for (const row of rows as TableRow[]) {
        const state = chains.get(chain)!;
        const number = state.count + 1;
        const checked = checkLine(row.record, number, chains, pass, chain);
        if (typeof checked === 'string') return broken(chains, chain, number, checked);
        if (checked.seq === 1 && checked.after !== undefined) {
          const missing = await missingAnchorInTable(client, table.sql, checked.after);
          if (missing !== undefined) {
            state.count -= 1;
            return broken(chains, chain, number, `record ${number} (seq 1) ${missing}`);
          }
        }
        const differs = columnThatDiffers(row, checked);
        if (differs) {
          state.count -= 1;
          return broken(
            chains,
            chain,
            number,
            `record ${number} (seq ${checked.seq}): column ${differs} differs from the hashed record (the row was updated)`,
          );
        }
        last = checked.hash;
      }
      if (rows.length < PAGE) break;
      after = (rows.at(-1) as TableRow).page_key;
    }
  }
  // A missing record is reported at the number after its chain's last record.
  const missed = pass.expected?.firstMissed(chains, (chain) => (chains.get(chain)?.count ?? 0) + 1);
  if (missed !== undefined) return broken(chains, missed.chain, missed.brokenAt, missed.reason);
  return intact(chains, last);
}

/** A table is read chain by chain: `verifyAuditTable` looks each named record up itself. */
const TABLE_ANCHORS: Anchors = { keep: undefined, unresolved: new Map() };

const anchorMissing = (after: ChainAnchor): string =>
  `starts after record ${after.seq} of chain ${after.chainId}, which is missing: a chain or its last records were deleted`;
const anchorReplaced = (after: ChainAnchor): string =>
  `starts after record ${after.seq} of chain ${after.chainId}, whose hash differs: that chain was replaced`;

/** `missingAnchor` for a table: the named record looked up by its key. */
async function missingAnchorInTable(
  client: AuditQueryable,
  table: string,
  after: ChainAnchor,
): Promise<string | undefined> {
  const { rows } = await client.query(`SELECT hash FROM ${table} WHERE chain = $1 AND seq = $2::bigint`, [
    after.chainId,
    String(after.seq),
  ]);
  const found = rows[0] as { hash: string } | undefined;
  if (found === undefined) return anchorMissing(after);
  return found.hash === after.hash ? undefined : anchorReplaced(after);
}

function columnThatDiffers(row: TableRow, record: AuditRecord): string | undefined {
  if ((record.chainId ?? row.chain) !== row.chain) return 'chain';
  if (row.page_key !== String(record.seq)) return 'seq';
  if (row.hash !== record.hash) return 'hash';
  if (row.time_ms !== String(Date.parse(record.time))) return 'time';
  if (row.tool !== storedText(record.tool)) return 'tool';
  if (row.outcome !== record.outcome) return 'outcome';
  if (row.principal !== (record.principal === undefined ? null : storedText(record.principal)))
    return 'principal';
  if (row.caller !== (record.caller === undefined ? null : storedText(record.caller))) return 'caller';
  if (row.incident_id !== (record.incidentId === undefined ? null : storedText(record.incidentId)))
    return 'incident_id';
  return undefined;
}

/**
 * What a text column holds for a record's string: the sink's `textColumn`, sent as UTF-8, where a
 * lone surrogate (a client may send one in a tool name) becomes U+FFFD while the JSON keeps its escape.
 * A forged record's non-string field is compared as its text rather than throwing.
 */
function storedText(value: unknown): string {
  return textColumn(String(value)).toWellFormed();
}

function chainOfLine(line: string): string {
  return parseRecordLine(line)?.chainId ?? '';
}

/**
 * Checks one line against its chain's state and advances it; returns the record, or why it fails.
 * `expectedChain` (a table read by chain) refuses a record of another chain.
 */
function checkLine(
  line: string,
  number: number,
  chains: Map<string, ChainState>,
  pass: Pass,
  expectedChain?: string,
): AuditRecord | string {
  const record = parseRecordLine(line);
  if (!record) return notRecordReason(number);
  const { hash, ...rest } = record;
  const { keyId } = record;
  const { keys } = pass.checks;
  let key: ChainKey | undefined;
  if (keyId !== undefined) {
    if (!isKeyId(keyId)) return `record ${number} (seq ${record.seq}) has a malformed keyId`;
    key = keys?.get(keyId);
    if (key === undefined) {
      return `record ${number} (seq ${record.seq}) is keyed with key ${keyId}: pass its key to verify`;
    }
  } else if (keys !== undefined && !pass.checks.allowUnkeyed) {
    // Keys given, a record without one: its plain SHA-256 is what anyone who strips the keyId and
    // recomputes the hashes would write (a downgrade).
    return `record ${number} (seq ${record.seq}) is not keyed: its hash is plain SHA-256, which anyone can recompute (a log begun without a key is verified with allowUnkeyed)`;
  }
  const canonical = canonicalJson(rest);
  if ((key === undefined ? hashOfCanonical(canonical) : key.hash(canonical)) !== hash) {
    return `record ${number} (seq ${record.seq}) was altered: its content does not match its hash`;
  }
  // The writer stores exactly this text (`hash` last; a row written by hand may have it in its sorted
  // place). Any other spelling of the same value is refused: JSON.parse keeps the last of two equal
  // keys, while another reader (or a person) may see the first.
  if (line !== lineOf(canonical, hash) && line !== canonicalJson(record)) {
    return `record ${number} (seq ${record.seq}) was altered: its text is not the exact text that was hashed (a duplicate key, spacing or another spelling)`;
  }
  const chain = expectedChain ?? record.chainId ?? '';
  if (expectedChain !== undefined && record.chainId !== undefined && record.chainId !== expectedChain) {
    return `record ${number} (seq ${record.seq}) belongs to chain ${record.chainId}, not ${expectedChain}`;
  }
  let state = chains.get(chain);
  if (!state) {
    state = { previous: undefined, keyed: false, line: 0, count: 0, kept: undefined };
    chains.set(chain, state);
  }
  if (key === undefined && state.keyed) {
    return `record ${number} (seq ${record.seq}) is not keyed, after keyed records of its chain: its keyId was stripped (a downgrade)`;
  }
  const { previous } = state;
  // A file sink whose chain id comes back after another writer's records (a stable chainId) cannot
  // continue its chain from there: it starts it again at seq 1, after the record it found last. That
  // record must come after this chain's previous one, so a copy of an earlier first record is no restart.
  const restart =
    previous !== undefined &&
    expectedChain === undefined &&
    restartOf(record, chain, state, chains, pass.anchors);
  if (typeof restart === 'string') return `record ${number} (seq 1) ${restart}`;
  if (!previous || restart) {
    if (record.prevHash !== GENESIS_HASH || record.seq !== 1) {
      return `record ${number} (seq ${record.seq}) does not start the chain: the records before it were deleted`;
    }
    if (record.after !== undefined) {
      if (!isChainAnchor(record.after))
        return `record ${number} (seq 1) names a malformed earlier record in after`;
      // A table is read chain by chain: verifyAuditTable looks the named record up itself.
      if (expectedChain === undefined) {
        const named = namedRecord(record.after, chains, pass.anchors);
        if (typeof named === 'string') return `record ${number} (seq 1) ${named}`;
      }
    }
    state.kept?.clear();
  } else if (record.prevHash !== previous.hash || record.seq !== previous.seq + 1) {
    if (record.seq <= previous.seq) {
      return `record ${number} is out of order: seq ${record.seq} after seq ${previous.seq} (a record was inserted or moved)`;
    }
    if (record.seq > previous.seq + 1) {
      return `record ${number} does not follow the previous record of its chain: seq jumps from ${previous.seq} to ${record.seq} (a record was deleted or moved)`;
    }
    return `record ${number} (seq ${record.seq}) does not link to the previous record of its chain: its prevHash differs (a record was inserted or replaced)`;
  }
  if (pass.file !== undefined) {
    const misplaced = checkPlacement(record, chain, number, !previous || restart, state, chains, pass);
    if (misplaced !== undefined) return misplaced;
  }
  state.previous = record;
  if (key !== undefined) state.keyed = true;
  state.line = number;
  state.count += 1;
  pass.expected?.see(chain, record, number);
  const { keep } = pass.anchors;
  if (keep === 'all' || keep?.get(chain)?.has(record.seq)) {
    state.kept ??= new Map();
    state.kept.set(record.seq, { hash: record.hash, line: number });
  }
  return record;
}

/**
 * Whether a record starts its chain again (see `checkLine`): seq 1 after the genesis hash, naming
 * another chain's record that came after this chain's last one; else false (the line is a copy or
 * forgery, refused as out of order), or why the named record is missing. A pass that cannot tell yet
 * lets the second decide.
 */
function restartOf(
  record: AuditRecord,
  chain: string,
  state: ChainState,
  chains: Map<string, ChainState>,
  anchors: Anchors,
): boolean | string {
  if (record.seq !== 1 || record.prevHash !== GENESIS_HASH || !isChainAnchor(record.after)) return false;
  if (record.after.chainId === chain) return false;
  const named = namedRecord(record.after, chains, anchors);
  if (typeof named === 'string') return named;
  return named === UNRESOLVED || named > state.line;
}

const UNRESOLVED = Symbol('unresolved');

/**
 * Whether a record stands where the file sink would have written it; undefined when it does, else why
 * not. The sink appends one process's records at a time, and a chain goes on only while its last
 * record is the file's last line (see `createFileSink`'s head()), so in a file every record follows
 * the record right before it (lines cut short by a crash passed over): the previous record of its
 * own chain, or, starting a chain, the record its `after` names (the sink names the file's last
 * record whenever the file has one). Another file's records spliced in, a chain's records moved among
 * another's, or a chain started from nothing mid-file are reported here.
 */
function checkPlacement(
  record: AuditRecord,
  chain: string,
  number: number,
  starts: boolean,
  state: ChainState,
  chains: Map<string, ChainState>,
  pass: Pass,
): string | undefined {
  const file = pass.file!;
  const misplaced = misplacement(record, chain, number, starts, state, chains, pass, file);
  if (misplaced !== undefined) return misplaced;
  const last = file.last;
  if (last === undefined) file.last = { chain, seq: record.seq, hash: record.hash, line: number };
  else {
    last.chain = chain;
    last.seq = record.seq;
    last.hash = record.hash;
    last.line = number;
  }
  if (record.after !== undefined) file.linked = true;
  return undefined;
}

/** Why a record does not stand where the file sink would have written it (see `checkPlacement`). */
function misplacement(
  record: AuditRecord,
  chain: string,
  number: number,
  starts: boolean,
  state: ChainState,
  chains: Map<string, ChainState>,
  pass: Pass,
  file: FilePlacement,
): string | undefined {
  const last = file.last;
  // The file's first record: nothing to follow (an `after` there was reported as missing).
  if (last === undefined) return undefined;
  if (!starts) {
    if (last.line === state.line) return undefined;
    return `record ${number} (seq ${record.seq}) follows record ${last.seq} of chain ${last.chain} (record ${last.line}), not record ${record.seq - 1} of its own chain ${chain} (record ${state.line}): the file sink writes a chain's records one after another, so records were moved or inserted between them`;
  }
  const after = record.after;
  if (after === undefined) {
    if (pass.checks.allowUnanchored && !file.linked) return undefined;
    return `record ${number} (seq 1) starts chain ${chain} mid-file without naming the record before it (after), which the file sink always does: it was written to another file and moved here (a file written before chains were linked verifies with allowUnanchored)`;
  }
  if (after.chainId === last.chain && after.seq === last.seq) {
    return after.hash === last.hash ? undefined : `record ${number} (seq 1) ${anchorReplaced(after)}`;
  }
  // It names another record. Whether that one is there with that hash was checked; a first pass
  // that could not tell (the record's chain went past it) leaves it to the second.
  if (namedRecord(after, chains, pass.anchors) === UNRESOLVED) return undefined;
  return `record ${number} (seq 1) starts after record ${after.seq} of chain ${after.chainId}, but follows record ${last.seq} of chain ${last.chain} (record ${last.line}): the file sink starts a chain right after the record it names, so records were moved, inserted or deleted between them`;
}

/**
 * The line of the record a first record names (`after`), or why it is not in the lines read before
 * it. A chain that went on past it is asked for the hash it remembered of it; when this pass did not
 * remember it, the anchor is noted for a second pass and taken as found (UNRESOLVED) for now.
 */
function namedRecord(
  after: ChainAnchor,
  chains: Map<string, ChainState>,
  anchors: Anchors,
): number | string | typeof UNRESOLVED {
  const state = chains.get(after.chainId);
  const last = state?.previous;
  if (state === undefined || last === undefined || last.seq < after.seq) return anchorMissing(after);
  const named = last.seq === after.seq ? { hash: last.hash, line: state.line } : state.kept?.get(after.seq);
  if (named === undefined) {
    let seqs = anchors.unresolved.get(after.chainId);
    if (seqs === undefined) {
      seqs = new Set();
      anchors.unresolved.set(after.chainId, seqs);
    }
    seqs.add(after.seq);
    return UNRESOLVED;
  }
  return named.hash === after.hash ? named.line : anchorReplaced(after);
}

/** An expected head not found, and where to report it. */
interface MissedHead {
  readonly chain: string;
  readonly brokenAt: number;
  readonly reason: string;
}

/**
 * The records `expect` names, by chain and seq, and what one pass found of each: a record at that
 * seq with that hash, or only with another hash (the line of the last one). A chain a file restarts
 * holds a seq more than once: any one of them with the hash is the record.
 */
class ExpectedHeads {
  readonly #heads: readonly AuditHead[];
  readonly #found = new Map<
    string,
    Map<number, { readonly hash: string; matched: boolean; differsAt: number }>
  >();

  constructor(heads: readonly AuditHead[]) {
    this.#heads = heads;
    for (const { chainId, seq, hash } of heads) {
      let bySeq = this.#found.get(chainId);
      if (bySeq === undefined) {
        bySeq = new Map();
        this.#found.set(chainId, bySeq);
      }
      bySeq.set(seq, { hash, matched: false, differsAt: 0 });
    }
  }

  /** Notes a verified record of `chain` read at `number`. */
  see(chain: string, record: AuditRecord, number: number): void {
    const wanted = this.#found.get(chain)?.get(record.seq);
    if (wanted === undefined) return;
    if (record.hash === wanted.hash) wanted.matched = true;
    else wanted.differsAt = number;
  }

  /** The first expected head (in the order given) the chains do not hold; `end` numbers a chain's missing record. */
  firstMissed(chains: Map<string, ChainState>, end: (chain: string) => number): MissedHead | undefined {
    for (const { chainId, seq, hash } of this.#heads) {
      const found = this.#found.get(chainId)!.get(seq)!;
      if (found.hash !== hash) {
        // Two expectations of one record with different hashes: both cannot hold.
        return {
          chain: chainId,
          brokenAt: end(chainId),
          reason: `chain ${chainId} seq ${seq} was expected with two different hashes`,
        };
      }
      if (found.matched) continue;
      if (found.differsAt > 0) {
        return {
          chain: chainId,
          brokenAt: found.differsAt,
          reason: `record ${found.differsAt} (seq ${seq}) of chain ${chainId} has a different hash than the expected ${hash}: the chain was rewritten`,
        };
      }
      const last = chains.get(chainId)?.previous;
      return {
        chain: chainId,
        brokenAt: end(chainId),
        reason:
          last === undefined
            ? `chain ${chainId} has no records but seq ${seq} (hash ${hash}) was expected: the chain was deleted`
            : `chain ${chainId} ends at seq ${last.seq} but seq ${seq} (hash ${hash}) was expected: records were cut off the end`,
      };
    }
    return undefined;
  }
}

function summary(chains: Map<string, ChainState>): ChainVerifyResult[] {
  return [...chains].map(([chain, state]) => ({
    chain,
    intact: true as const,
    records: state.count,
    head: state.previous?.hash,
  }));
}

function total(chains: Map<string, ChainState>): number {
  let records = 0;
  for (const state of chains.values()) records += state.count;
  return records;
}

function intact(chains: Map<string, ChainState>, head: string | undefined): VerifyResult {
  return { intact: true, records: total(chains), head, chains: summary(chains) };
}

function broken(
  chains: Map<string, ChainState>,
  chain: string,
  brokenAt: number,
  reason: string,
): VerifyResult {
  const all: ChainVerifyResult[] = summary(chains).map((entry) =>
    entry.chain === chain ? { chain, intact: false, records: entry.records, brokenAt, reason } : entry,
  );
  if (!chains.has(chain)) all.push({ chain, intact: false, records: 0, brokenAt, reason });
  return { intact: false, records: total(chains), brokenAt, reason, chains: all };
}
