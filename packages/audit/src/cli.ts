#!/usr/bin/env node
// toolgate-audit: checks an audit chain. The report goes to stdout (this is a CLI, not a server).
import { parseArgs } from 'node:util';
import { withDeadline } from '@toolgate/core';
import { MIN_KEY_BYTES, readAuditKeyFile } from './chain-key.js';
import { parseTableName } from './pg-table.js';
import type { AuditHead } from './types.js';
import { type VerifyOptions, type VerifyResult, verifyAuditFile, verifyAuditTable } from './verify.js';

const USAGE = `usage:
  toolgate-audit verify FILE [options]
  toolgate-audit verify --table NAME [--chain ID] [--database-url URL] [options]
      (default: $DATABASE_URL; every chain unless --chain)

options:
  --key-file PATH        a chain key: the file's bytes, less one trailing newline (repeat for rotated keys)
  --key-env NAME         a chain key: the value of $NAME (repeatable)
  --allow-unkeyed        with keys: accept unkeyed records before a chain's first keyed one
  --allow-unanchored     a FILE written before chains were linked: accept chains that start mid-file
                         without after, up to the file's first record that has one
  --expect-head CHAIN:SEQ:HASH
                         the chain must still hold that record (a head kept elsewhere; repeatable)
  --timeout-ms MS        with --table: how long connecting and each read may wait for the database
                         before giving up, exit 2 (default 30000)

Exit status: 0 intact, 1 broken, 2 usage or read error (or no answer within --timeout-ms: not verified).`;

/** A usage error: reported with its message, exit status 2. */
class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      table: { type: 'string' },
      chain: { type: 'string' },
      'database-url': { type: 'string' },
      'key-file': { type: 'string', multiple: true },
      'key-env': { type: 'string', multiple: true },
      'allow-unkeyed': { type: 'boolean' },
      'allow-unanchored': { type: 'boolean' },
      'expect-head': { type: 'string', multiple: true },
      'timeout-ms': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [command, file, ...extra] = positionals;
  if (
    values.help ||
    command !== 'verify' ||
    extra.length > 0 ||
    (file === undefined) === (values.table === undefined)
  ) {
    console.error(USAGE);
    return 2;
  }
  let options: VerifyOptions;
  let timeoutMs: number;
  try {
    if (values['allow-unanchored'] && file === undefined) {
      throw new UsageError('--allow-unanchored applies to a FILE only (a table names no line order)');
    }
    options = await verifyOptionsOf(values);
    timeoutMs = timeoutOf(values['timeout-ms'], file !== undefined);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`toolgate-audit: ${error.message}`);
    return 2;
  }
  let result: VerifyResult;
  if (file !== undefined) {
    result = await verifyAuditFile(file, options);
  } else {
    const url = values['database-url'] ?? process.env.DATABASE_URL;
    if (!url) {
      console.error('toolgate-audit: --table needs --database-url or $DATABASE_URL');
      return 2;
    }
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: url });
    // A connection lost mid-read is also emitted as the client's 'error', besides rejecting the read
    // in flight (reported below, exit 2). Unheard, Node ends the process with exit 1: "broken".
    client.on('error', ignore);
    // A silent partition sends no reset: every wait on the database has a limit, and past it the
    // socket is destroyed (the server may never hear of it; its session ends on its own).
    try {
      try {
        await withDeadline(() => client.connect(), { timeoutMs, what: 'connecting' });
      } catch (error) {
        if (!isTimeout(error)) throw error;
        console.error(
          `toolgate-audit: could not verify: the database did not answer within ${timeoutMs} ms while connecting (--timeout-ms)`,
        );
        return 2;
      }
      try {
        result = await verifyAuditTable({
          ...options,
          client,
          timeoutMs,
          ...(values.table !== undefined && { table: values.table }),
          ...(values.chain !== undefined && { chain: values.chain }),
        });
      } catch (error) {
        if (!isTimeout(error)) throw error;
        const read = parseTableName(values.table ?? 'toolgate_audit').sql;
        console.error(
          `toolgate-audit: could not verify: the database did not answer a read of ${printable(read)} within ${timeoutMs} ms (--timeout-ms)`,
        );
        return 2;
      }
    } finally {
      await endWithin(client, timeoutMs);
    }
  }
  for (const chain of result.chains) {
    const name = chainName(chain.chain);
    console.log(
      chain.intact
        ? `chain ${name}: intact, ${chain.records} records${chain.head ? `, head ${chain.head}` : ''}`
        : `chain ${name}: broken at record ${chain.brokenAt}: ${printable(chain.reason)}`,
    );
  }
  if (result.intact) {
    console.log(`intact: ${result.records} records in ${result.chains.length} chains`);
    return 0;
  }
  console.log(`broken at record ${result.brokenAt}: ${printable(result.reason)}`);
  return 1;
}

/** The keys and expected heads the flags name. A key is never printed, only the flag that gave it. */
async function verifyOptionsOf(values: {
  'key-file'?: string[];
  'key-env'?: string[];
  'allow-unkeyed'?: boolean;
  'allow-unanchored'?: boolean;
  'expect-head'?: string[];
}): Promise<VerifyOptions> {
  const keys: Buffer[] = [];
  const addKey = (key: Buffer, flag: string): void => {
    if (key.length < MIN_KEY_BYTES) {
      throw new UsageError(`${flag}: a key must be at least ${MIN_KEY_BYTES} bytes (got ${key.length})`);
    }
    keys.push(key);
  };
  for (const path of values['key-file'] ?? []) {
    addKey(readAuditKeyFile(path), `--key-file ${printable(path)}`);
  }
  for (const name of values['key-env'] ?? []) {
    const value = process.env[name];
    if (value === undefined || value === '') throw new UsageError(`--key-env ${name}: $${name} is not set`);
    addKey(Buffer.from(value, 'utf8'), `--key-env ${name}`);
  }
  const expect = (values['expect-head'] ?? []).map(parseHead);
  if (values['allow-unkeyed'] && keys.length === 0) {
    throw new UsageError('--allow-unkeyed needs a key (--key-file or --key-env)');
  }
  return {
    ...(keys.length > 0 && { keys }),
    ...(values['allow-unkeyed'] && { allowUnkeyed: true }),
    ...(values['allow-unanchored'] && { allowUnanchored: true }),
    ...(expect.length > 0 && { expect }),
  };
}

function ignore(): void {}

/** `--timeout-ms`: a whole number of milliseconds from 1 (--table only); 30000 when not given. */
function timeoutOf(text: string | undefined, forFile: boolean): number {
  if (text === undefined) return 30_000;
  if (forFile)
    throw new UsageError('--timeout-ms applies to --table only (a file is read without a time limit)');
  const timeoutMs = Number(text);
  if (!/^[1-9][0-9]*$/.test(text) || !Number.isSafeInteger(timeoutMs)) {
    throw new UsageError(`--timeout-ms ${printable(text)}: expected a whole number of milliseconds from 1`);
  }
  return timeoutMs;
}

function isTimeout(error: unknown): error is DOMException {
  return error instanceof DOMException && error.name === 'TimeoutError';
}

/**
 * Ends the connection: a goodbye, whose close the client waits for (node-postgres drops a connection
 * with a read in flight at once). A partition may keep that close away: past the limit the socket is
 * destroyed, so the process can exit with what it found.
 */
async function endWithin(client: import('pg').Client, timeoutMs: number): Promise<void> {
  try {
    await withDeadline(() => client.end(), { timeoutMs, what: 'ending the connection' });
  } catch {
    (
      client as unknown as { connection?: { stream?: { destroy?: () => void } } }
    ).connection?.stream?.destroy?.();
  }
}

/** `CHAIN:SEQ:HASH`, split from the right: a chain id may hold colons. */
function parseHead(text: string): AuditHead {
  const match = /^(.*):([1-9][0-9]*):([0-9a-f]{64})$/.exec(text);
  const seq = Number(match?.[2]);
  if (match === null || !Number.isSafeInteger(seq)) {
    throw new UsageError(
      `--expect-head ${printable(text)}: expected CHAIN:SEQ:HASH (a seq from 1, a hash of 64 lower-case hex digits)`,
    );
  }
  return { chainId: match[1]!, seq, hash: match[3]! };
}

/** A chain id as the writer makes them (printable ASCII) as is; any other text from the file as escaped JSON. */
function chainName(chain: string): string {
  if (chain === '') return '(none)';
  return /^[\x21-\x7e]+$/.test(chain) ? chain : printable(JSON.stringify(chain));
}

/** Text that may hold the file's characters, with all but printable ASCII escaped: one report line stays one line. */
function printable(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(`toolgate-audit: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 2;
  },
);
