import { SECRET_PATTERNS, type SecretPattern } from '@toolgate/core';

// Markers the model sees in place of what was removed: short, bracketed, and matched by no pattern.
const PATH = '[path]';
const SQL = '[sql]';
const HOST = '[host]';
const CONNECTION = '[connection]';
const URL = '[url]';
const ENV = '[env]';
const ROW = '[row]';
const NAME = '[name]';
const VERSION = '[version]';

// Schemes whose URLs are connection strings to a store or broker, not links.
const CONNECTION_SCHEMES =
  '(?:jdbc:[a-z0-9]+|postgres(?:ql)?|mysql|mariadb|mongodb(?:\\+srv)?|rediss?|amqps?|mssql|sqlserver|oracle|cockroachdb|clickhouse|nats|kafka|ldaps?|memcached|cassandra|neo4j(?:\\+s)?|bolt|couchbases?)';
// A URL body: up to whitespace or a quote, never ending on sentence punctuation.
const URL_BODY = `[^\\s'"<>(){}]*[^\\s'"<>(){}.,;:!?]`;
const LINE_COL = '(?::\\d+){0,2}';
// A path segment of a POSIX path.
const SEG = '[\\w.@+%~-]';
// The last segment may not end in sentence punctuation: "No file /srv/x/y." keeps its full stop.
const LAST_SEG = '(?:[\\w.@+%~-]*[\\w@+%~-])?';
// What may not come right before a path (so `and/or`, `12/05/2024` and `km/h` stay).
const NOT_AFTER_WORD = '(?<![\\w.~/:\\\\-])';
// An SQL statement runs to `;` or the end of the line, and on over lines that begin with a clause.
const SQL_TAIL =
  '[^;\\n]*(?:\\n[ \\t]*(?:FROM|WHERE|AND|OR|JOIN|LEFT|RIGHT|INNER|OUTER|ON|ORDER|GROUP|HAVING|LIMIT|OFFSET|RETURNING|VALUES|SET|UNION)\\b[^;\\n]*)*;?';
const SQL_ITEM = '(?:[\\w.$"*]+(?:\\s*\\([^()\\n]*\\))?(?:\\s+AS\\s+[\\w"]+)?)';
// Top-level domains a bare dotted name must end in to be taken for a host (file names such as
// `config.json` and `Node.js` end in others and stay).
const HOST_TLDS =
  '(?:com|net|org|io|dev|app|cloud|internal|local|localdomain|lan|corp|intra|intranet|private|svc|cluster|home|test|example|invalid|aws|gcp|azure|co|info|biz|ai|us|uk|de|fr|nl|eu|ch|jp|cn|ru|in|br|ca|au)';
const IPV4_OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const IPV4 = `(?:${IPV4_OCTET}\\.){3}${IPV4_OCTET}`;
const HEX = '[0-9A-Fa-f]{1,4}';
// Optional `:port` and path after a host.
const PORT_PATH = `(?::\\d{1,5})?(?:\\/${LAST_SEG})*`;

function rule(name: string, source: string, replace: string, flags = 'g'): SecretPattern {
  return { name, pattern: new RegExp(source, flags), replace };
}

/**
 * What, besides secrets, never reaches the model in an error: stack frames, paths and file URLs,
 * connection strings and other URLs, environment dumps, SQL statements, IP addresses and host names.
 * Applied in this order, after core's `SECRET_PATTERNS`; each is global and keeps the text around
 * a match. Tuned not to touch ordinary text: ids, dates, times, versions, prices, sentences.
 */
export const INTERNAL_PATTERNS: readonly SecretPattern[] = [
  // `    at fn (/srv/app/x.js:10:5)`, `at new Promise (<anonymous>)`, `at com.x.Y.m(Y.java:12)`,
  // `at wasm://wasm/0a1b:wasm-function[9]:0x4dd44f`; and the property dump util.inspect() prints
  // after the last frame (` {\n  errno: -111,\n  code: 'ECONNREFUSED', ... address, port\n}`), nested
  // `[cause]` dumps included.
  rule(
    'stack-frame',
    '(?:\\r?\\n|^)[ \\t]*at [^\\n]*?(?:\\([^()\\n]*\\)|[^\\s()]+:(?:\\d+(?::\\d+)?|0x[0-9A-Fa-f]+))(?:[ \\t]+\\{(?:\\r?\\n[ \\t]+[^\\n]*)*\\r?\\n[ \\t]*\\})?[ \\t]*(?=\\r?\\n|$)',
    '',
  ),
  // An inspect dump without frames: `[Error: x] { errno: -111, code: 'E', ... }` on one line or many.
  rule(
    'inspect-dump',
    `[ \\t]*\\{[ \\t]*(?:\\r?\\n[ \\t]+)?(?:errno|length|severity|syscall|\\[cause\\]|\\[errors\\]): (?:[^{}]|\\{[^{}]*\\})*\\}`,
    '',
  ),
  // PostgreSQL's report fields as psql and the server log print them (`DETAIL:  Key (email)=(...)`,
  // `CONTEXT:`, `HINT:`, `QUERY:`, `STATEMENT:`, `LINE 1: SELECT ...` and its caret line), to the end
  // of the line.
  rule(
    'pg-detail',
    '(?:\\r?\\n)?[ \\t]*\\b(?:DETAIL|CONTEXT|HINT|QUERY|STATEMENT|LOCATION|INTERNAL QUERY|LINE \\d+):[ \\t]+[^\\n]*(?:\\r?\\n[ \\t]*\\^[ \\t]*(?=\\r?\\n|$))?',
    '',
  ),
  // Row values a constraint violation echoes (emails, password hashes, names): `Failing row contains
  // (...)` and `Key (email)=(ann@example.com)`.
  rule('pg-row', 'Failing row contains \\([^\\n]*\\)', `Failing row contains ${ROW}`),
  rule(
    'pg-row',
    '\\bKey \\([^()\\n]*(?:\\([^()\\n]*\\)[^()\\n]*)*\\)=\\((?:[^()\\n]|\\([^()\\n]*\\))*\\)',
    `Key ${ROW}`,
  ),
  // Schema names in pg messages: `relation "users"`, `constraint "users_email_key"`, `role "app"
  // does not exist`, `permission denied for table orders`, `syntax error at or near "FORM"`.
  rule(
    'pg-name',
    '\\b(relation|table|column|constraint|schema|database|index|sequence|function|view|extension|tablespace|trigger|type|operator|domain|policy)[ \\t]+"[^"\\n]*"',
    `$1 ${NAME}`,
    'gi',
  ),
  rule('pg-name', '\\b(for (?:role|user))[ \\t]+"[^"\\n]*"', `$1 ${NAME}`, 'gi'),
  rule(
    'pg-name',
    '\\b(role|user)[ \\t]+"[^"\\n]*"(?=[ \\t]+(?:does not exist|already exists|is not permitted to log in|cannot be dropped)\\b)',
    `$1 ${NAME}`,
    'gi',
  ),
  rule(
    'pg-name',
    '\\b(permission denied for (?:table|relation|schema|sequence|view|function|database|column|foreign table|type|language|large object|materialized view))[ \\t]+[\\w$."]+',
    `$1 ${NAME}`,
    'gi',
  ),
  rule('pg-name', '\\b(at or near)[ \\t]+"[^"\\n]*"', `$1 ${SQL}`, 'gi'),
  // Server version banners: `PostgreSQL 15.20 (Debian 15.20-0+deb12u1) on x86_64-pc-linux-gnu,
  // compiled by gcc ..., 64-bit`, `nginx/1.22.1`, `Redis 7.2.4`.
  rule(
    'version-banner',
    '\\bPostgreSQL \\d+(?:\\.\\d+)*(?:[ \\t]+\\([^()\\n]*\\))?(?:[ \\t]+on [^\\s,]+)?(?:, compiled by [^\\n]*?, \\d+-bit)?',
    VERSION,
  ),
  rule(
    'version-banner',
    '\\b(?:PostgreSQL|MySQL|MariaDB|Redis|Valkey|MongoDB|nginx|Apache|HAProxy|OpenSSL|OpenSSH|Express|Microsoft-IIS|Kestrel|gunicorn|uvicorn|Werkzeug|Jetty|Tomcat)(?:[ /]v?| version )\\d+\\.\\d+[\\w.+~-]*',
    VERSION,
  ),
  rule('python-frame', '(?:\\r?\\n|^)[ \\t]*File "[^"\\n]+", line \\d+(?:, in [^\\n]*)?', ''),
  rule('file-url', `\\bfile:\\/\\/${URL_BODY}`, PATH, 'gi'),
  rule('node-internal', `\\bnode:[\\w/]+${LINE_COL}`, PATH),
  rule('connection-url', `\\b${CONNECTION_SCHEMES}:\\/\\/${URL_BODY}`, CONNECTION, 'gi'),
  rule('url', `\\b[a-z][a-z0-9+.-]*:\\/\\/${URL_BODY}`, URL, 'gi'),
  // libpq keyword form: `host=db01 port=5432 dbname=orders user=app password=...` (two pairs or more).
  rule(
    'connection-keywords',
    '\\b(?:host|hostaddr|port|dbname|user|password|sslmode|application_name|connect_timeout)=\\S+(?:\\s+(?:host|hostaddr|port|dbname|user|password|sslmode|application_name|connect_timeout)=\\S+)+',
    CONNECTION,
  ),
  // ADO.NET / ODBC form: `Server=sql01;Database=orders;User Id=sa;Password=...;`.
  rule(
    'connection-semicolon',
    '\\b(?:Server|Data Source|Host|Address|Addr)\\s*=\\s*[^;\\n]+;(?:[ \\t]*[A-Za-z][\\w ]*=[^;\\n]*(?:;|$))+',
    CONNECTION,
    'gi',
  ),
  // `DATABASE_URL=...` and the usual bare names (PATH, HOME, ...): an environment dump.
  rule(
    'env-var',
    `(?<![\\w-])(?:[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|PATH|HOME|USER|SHELL|PWD|HOSTNAME|HOST|PORT|LANG|TERM|TMPDIR|LOGNAME)=(?:"[^"]*"|'[^']*'|\\S*)`,
    ENV,
  ),
  // SQL: upper-case keywords are taken as SQL; lower-case only with SQL's shape (a column list,
  // `=`, a clause), so "select a size from the list" stays.
  rule('sql', `\\bSELECT\\s[^;]*?\\bFROM\\b${SQL_TAIL}`, SQL),
  rule(
    'sql',
    `\\bselect\\s+(?:distinct\\s+)?(?:\\*|${SQL_ITEM}(?:\\s*,\\s*${SQL_ITEM})+)\\s+from\\s+[\\w."]+${SQL_TAIL}`,
    SQL,
    'gi',
  ),
  rule(
    'sql',
    `\\bselect\\s+${SQL_ITEM}\\s+from\\s+[\\w."]+\\s+(?:where|join|inner|left|order\\s+by|group\\s+by|limit)\\b${SQL_TAIL}`,
    SQL,
    'gi',
  ),
  rule(
    'sql',
    `\\binsert\\s+into\\s+[\\w."]+\\s*(?:\\(|values\\b|select\\b|default\\s+values\\b)${SQL_TAIL}`,
    SQL,
    'gi',
  ),
  rule('sql', `\\bupdate\\s+[\\w."]+\\s+set\\s+[\\w."]+\\s*=${SQL_TAIL}`, SQL, 'gi'),
  rule('sql', `\\bdelete\\s+from\\s+[\\w."]+\\s+(?:where|using|returning)\\b${SQL_TAIL}`, SQL, 'gi'),
  rule('sql', `\\b(?:DELETE\\s+FROM|INSERT\\s+INTO|UPDATE)\\s+[\\w."]+${SQL_TAIL}`, SQL),
  // `C:\Program Files\app\db.js:10:5` (segments may hold spaces) and `\\server\share\x`.
  rule(
    'windows-path',
    `\\b[A-Za-z]:\\\\(?:[^\\\\\\n'"<>|*?:]*\\\\)*(?:[^\\s\\\\'"<>|*?:]*[^\\s\\\\'"<>|*?:.,;])?${LINE_COL}`,
    PATH,
  ),
  rule('unc-path', `(?<![\\w\\\\])\\\\\\\\[\\w.$-]+\\\\(?:[^\\s'"<>|]*[^\\s'"<>|.,;])?`, PATH),
  // `/srv/app/db.js:10:5`, `~/.ssh/id_rsa`, `./src/x.ts`, and one segment with an extension (`/app.js`).
  rule('posix-path', `${NOT_AFTER_WORD}(?:~|\\.{1,2})?\\/(?:${SEG}+\\/)+${LAST_SEG}${LINE_COL}`, PATH),
  rule('posix-path', `${NOT_AFTER_WORD}\\/[\\w@+%-]+\\.[A-Za-z]\\w{0,7}${LINE_COL}(?![\\w/])`, PATH),
  // IPv6: bracketed (`[2001:db8::1]:8443`), full, or compressed with `::` (`::1:5432`, `fe80::1%eth0`,
  // `::ffff:10.0.0.1`). Times such as 12:30:45 have no `::` and fewer than eight groups.
  rule('ipv6', '\\[[0-9A-Fa-f]*:[0-9A-Fa-f:.]*(?:%[\\w.]+)?\\](?::\\d{1,5})?', HOST),
  rule('ipv6', `(?<![\\w:.])(?:${HEX}:){7}${HEX}(?:%[\\w.]+)?(?![\\w:])`, HOST),
  rule(
    'ipv6',
    `(?<![\\w:.])(?=[0-9A-Fa-f:.]*[0-9A-Fa-f])(?:${HEX}(?::${HEX}){0,6})?::(?:(?:${HEX}:){0,6}${IPV4}|${HEX}(?::${HEX}){0,6})?(?:%[\\w.]+)?(?![\\w:])`,
    HOST,
  ),
  rule('ipv4', `(?<![\\w.])${IPV4}(?![\\w]|\\.\\d)${PORT_PATH}`, HOST),
  // `localhost`, `name-with-dash:port`, `db01.prod:5432`, and dotted names ending in a known TLD.
  rule('hostname', `(?<![\\w.@/-])localhost${PORT_PATH}(?![\\w-])`, HOST, 'gi'),
  rule(
    'hostname',
    `(?<![\\w.@/-])[a-z][a-z0-9]*(?:[.-][a-z0-9]+)+:\\d{1,5}(?![\\d])(?:\\/${LAST_SEG})*`,
    HOST,
    'gi',
  ),
  rule(
    'hostname',
    `(?<![\\w.@/-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\\.)+${HOST_TLDS}(?![\\w-]|\\.[a-z0-9])${PORT_PATH}`,
    HOST,
    'gi',
  ),
];

/** Everything scrubbed from an error result by default: core's `SECRET_PATTERNS`, then `INTERNAL_PATTERNS`. */
export const ERROR_SCRUB_PATTERNS: readonly SecretPattern[] = [...SECRET_PATTERNS, ...INTERNAL_PATTERNS];
