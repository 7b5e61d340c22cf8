#!/usr/bin/env node
// toolgate-audit: checks an audit chain. The report goes to stdout (this is a CLI, not a server).
import { parseArgs } from 'node:util';
import { type VerifyResult, verifyAuditFile, verifyAuditTable } from './verify.js';

const USAGE = `usage:
  toolgate-audit verify FILE
  toolgate-audit verify --table NAME [--chain ID] [--database-url URL]   (default: $DATABASE_URL; every chain unless --chain)

Exit status: 0 intact, 1 broken, 2 usage or read error.`;

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      table: { type: 'string' },
      chain: { type: 'string' },
      'database-url': { type: 'string' },
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
  let result: VerifyResult;
  if (file !== undefined) {
    result = await verifyAuditFile(file);
  } else {
    const url = values['database-url'] ?? process.env.DATABASE_URL;
    if (!url) {
      console.error('toolgate-audit: --table needs --database-url or $DATABASE_URL');
      return 2;
    }
    const { default: pg } = await import('pg');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      result = await verifyAuditTable({
        client,
        ...(values.table !== undefined && { table: values.table }),
        ...(values.chain !== undefined && { chain: values.chain }),
      });
    } finally {
      await client.end();
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
