// Server time per batch of the PostgreSQL sink's INSERT shapes (same rows, same table layout):
//   npx tsx bench/pg-insert-shapes.ts [rows per batch]
import pg from 'pg';

const N = Number(process.argv[2] ?? 1024);
const BATCHES = 30;
const pool = new pg.Pool({
  connectionString: process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  max: 1,
});
const line = (seq: number) =>
  `{"args":{"api_key":"[REDACTED]","customer_email":"customer${seq}@","days":30},"caller":"local","chainId":"bench-1-abcdef01","decisions":[],"durationMs":0.123,"outcome":"ok","prevHash":"${'0'.repeat(64)}","requestId":${seq},"resultBytes":96,"seq":${seq},"sessionId":"bench","time":"2026-01-02T03:04:05.006Z","tool":"search_orders","hash":"${'a'.repeat(64)}"}`;
const table = `toolgate_audit_shapes_${process.pid}`;
await pool.query(`DROP TABLE IF EXISTS ${table}`);
await pool.query(`CREATE TABLE ${table} (chain text NOT NULL, seq bigint NOT NULL, time timestamptz NOT NULL,
  tool text NOT NULL, outcome text NOT NULL, principal text, caller text, incident_id text, hash text NOT NULL,
  record json NOT NULL, PRIMARY KEY (chain, seq))`);
let seq = 0;
function batch() {
  const seqs: string[] = [];
  const lines: string[] = [];
  for (let i = 0; i < N; i += 1) {
    seq += 1;
    seqs.push(String(seq));
    lines.push(line(seq));
  }
  const same = <T>(value: T) => seqs.map(() => value);
  return {
    seqs,
    lines,
    times: same('2026-01-02T03:04:05.006Z'),
    tools: same('search_orders'),
    outcomes: same('ok'),
    principals: same(null),
    callers: same('local'),
    incidents: same(null),
    hashes: seqs.map(() => 'a'.repeat(64)),
  };
}
const shapes: [string, (b: ReturnType<typeof batch>) => [string, unknown[]]][] = [
  [
    'unnest of 10 arrays (current)',
    (b) => [
      `INSERT INTO ${table} (chain, seq, time, tool, outcome, principal, caller, incident_id, hash, record)
       SELECT $1::text, s, t, tl, o, p, c, i, h, r::json FROM unnest($2::bigint[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
       AS u(s, t, tl, o, p, c, i, h, r) ON CONFLICT (chain, seq) DO NOTHING RETURNING 1`,
      ['c', b.seqs, b.times, b.tools, b.outcomes, b.principals, b.callers, b.incidents, b.hashes, b.lines],
    ],
  ],
  [
    'unnest, records as one newline-joined text',
    (b) => [
      `INSERT INTO ${table} (chain, seq, time, tool, outcome, principal, caller, incident_id, hash, record)
       SELECT $1::text, s, t, tl, o, p, c, i, h, r::json FROM unnest($2::bigint[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], string_to_array($10::text, E'\\n'))
       AS u(s, t, tl, o, p, c, i, h, r) ON CONFLICT (chain, seq) DO NOTHING RETURNING 1`,
      [
        'c',
        b.seqs,
        b.times,
        b.tools,
        b.outcomes,
        b.principals,
        b.callers,
        b.incidents,
        b.hashes,
        b.lines.join('\n'),
      ],
    ],
  ],
  [
    'unnest, newline-joined, no RETURNING (count from rowCount)',
    (b) => [
      `INSERT INTO ${table} (chain, seq, time, tool, outcome, principal, caller, incident_id, hash, record)
       SELECT $1::text, s, t, tl, o, p, c, i, h, r::json FROM unnest($2::bigint[], $3::timestamptz[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], string_to_array($10::text, E'\\n'))
       AS u(s, t, tl, o, p, c, i, h, r) ON CONFLICT (chain, seq) DO NOTHING`,
      [
        'c',
        b.seqs,
        b.times,
        b.tools,
        b.outcomes,
        b.principals,
        b.callers,
        b.incidents,
        b.hashes,
        b.lines.join('\n'),
      ],
    ],
  ],
  [
    'newline-joined records, hashes, times, outcomes; seq from ordinality',
    (b) => [
      `INSERT INTO ${table} (chain, seq, time, tool, outcome, principal, caller, incident_id, hash, record)
       SELECT $1::text, $2::bigint + u.n - 1, t::timestamptz, tl, o, p, c, i, h, r::json
         FROM unnest(string_to_array($3::text, E'\n'), $4::text[], string_to_array($5::text, E'\n'), $6::text[], $7::text[], $8::text[],
                     string_to_array($9::text, E'\n'), string_to_array($10::text, E'\n')) WITH ORDINALITY
         AS u(t, tl, o, p, c, i, h, r, n) ON CONFLICT (chain, seq) DO NOTHING RETURNING 1`,
      [
        'c',
        b.seqs[0],
        b.times.join('\n'),
        b.tools,
        b.outcomes.join('\n'),
        b.principals,
        b.callers,
        b.incidents,
        b.hashes.join('\n'),
        b.lines.join('\n'),
      ],
    ],
  ],
];
for (const [name, shape] of shapes) {
  const started = performance.now();
  for (let i = 0; i < BATCHES; i += 1) {
    const [text, params] = shape(batch());
    await pool.query(text, params);
  }
  const ms = performance.now() - started;
  console.log(
    `${name.padEnd(58)} ${(ms / BATCHES).toFixed(1)} ms/batch of ${N} = ${((N * BATCHES) / (ms / 1000)).toFixed(0)} rows/s`,
  );
}
await pool.query(`DROP TABLE ${table}`);
await pool.end();
