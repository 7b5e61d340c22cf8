import { REDACTED, SECRET_PATTERNS, type SecretPattern } from '@toolgate/core';

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
const ARN = '[arn]';

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
// A JSON escape (`\n`, `\t`, `\r`, or `\\n` in JSON quoted in JSON) right before: its letter ends the
// word before it, so `Error\n/srv/app/x.json` holds a path. Nested in a rule's look-behind, so text
// without escapes costs what it did.
const ESCAPE_BEFORE = '(?<!\\\\)\\\\{1,2}[ntr]';
// The same for Windows' relative paths, whose segments run on over escapes: only escapes (up to four)
// after no path character, which would start the path itself (a start after each `\n` of `a\na\na…`
// would scan the rest of the run again from each).
const LONE_ESCAPES_BEFORE = '(?:^|[^\\w.@+%~\\\\-])(?:\\\\{1,2}[ntr]){1,4}';
// What may not come right before a path (so `and/or`, `12/05/2024` and `km/h` stay).
const NOT_AFTER_WORD = `(?<![\\w.~/\\\\-](?<!${ESCAPE_BEFORE}))`;
// A word, JSON escapes, then a file name (`failed\nconfig.json`): the escape is no directory separator.
// With `:line`, a `.\` lead, a doubled backslash or a second directory it is a path.
const ESCAPED_FILE_NAME = `(?!\\.{1,2}\\\\)${SEG}+(?:\\\\[ntr])+[\\w.@+%~-]*\\.[A-Za-z][A-Za-z0-9]{0,7}(?![\\w@+%~\\\\-]|\\.[\\w@+%~-]|:\\d)`;
// A drive's root alone (`drive C:\ is full`) names nothing internal.
const NOT_DRIVE_ROOT = `(?!\\\\?(?:[\\s'"<>|*?,;)\\]]|[.:](?!\\w)|$))`;
// An SQL statement runs to `;` or the end of the line, and on over lines that begin with a clause.
const SQL_TAIL =
  '[^;\\n]*(?:\\n[ \\t]*(?:FROM|WHERE|AND|OR|JOIN|LEFT|RIGHT|INNER|OUTER|ON|ORDER|GROUP|HAVING|LIMIT|OFFSET|RETURNING|VALUES|SET|UNION)\\b[^;\\n]*)*;?';
const SQL_ITEM = '(?:[\\w.$"*]+(?:\\s*\\([^()\\n]*\\))?(?:\\s+AS\\s+[\\w"]+)?)';
// Top-level domains only private networks use: no e-mail address or public site ends in one.
const INTERNAL_TLDS = '(?:internal|local|localdomain|lan|corp|intra|intranet|private|svc|cluster|home)';
// Top-level domains a bare dotted name must end in to be taken for a host (file names such as
// `config.json` and `Node.js` end in others and stay).
const HOST_TLDS = `(?:com|net|org|io|dev|app|cloud|${INTERNAL_TLDS}|test|example|invalid|aws|gcp|azure|co|info|biz|ai|us|uk|de|fr|nl|eu|ch|jp|cn|ru|in|br|ca|au)`;
const IPV4_OCTET = '(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const IPV4 = `(?:${IPV4_OCTET}\\.){3}${IPV4_OCTET}`;
const HEX = '[0-9A-Fa-f]{1,4}';
// An IPv6 address's zone, and after it the port Node appends (`fe80::1%eth0:5432`): with a zone the
// port cannot be read as one more group.
const ZONE_PORT = '(?:%[\\w.-]+(?::\\d{1,5}(?![\\w:]))?)?';
const LIBPQ_KEY = '(?:host|hostaddr|port|dbname|user|password|sslmode|application_name|connect_timeout)';
// Optional `:port` and path after a host.
const PORT_PATH = `(?::\\d{1,5})?(?:\\/${LAST_SEG})*`;
// Node's syscall errors: `<CODE>: <description>, <syscall>` before the quoted path(s).
const SYSCALL_ERROR = "\\b((?:(?!ERROR:)E[A-Z]{2,15}|UNKNOWN): [a-z][^,'\\n]{0,200}, [a-z][a-z0-9_]{0,24})";
// A path Node quotes, whatever it holds: it ends at a quote followed by a space, punctuation, a quote
// or the end. A quote followed by anything else is the path's own (`it's/x`), at most four of them,
// so a line of quotes is scanned a bounded number of times from each start.
const QUOTED_PATH = `[^'\\n]*(?:'(?=[^\\s,.;:!?)\\]}"'\\\\])[^'\\n]*){0,4}`;
// The same paths as fields of the error's JSON (`JSON.stringify(err)`): a key in quotes, or in `\\"`
// when that JSON is quoted in a JSON string, then a value up to its closing quote.
const JSON_KEY = (key: string): string => `\\\\?"${key}\\\\?":[ \\t]?\\\\?"`;
const JSON_NEXT = ',(?:\\r?\\n)?[ \\t]*';
const JSON_VALUE = '(?:[^"\\\\\\n]|\\\\[^"\\n])*';
// Media types look like relative paths (`application/vnd.oasis.opendocument.text`).
const MEDIA_TYPE =
  '(?:application|audio|font|image|message|model|multipart|text|video)\\/[\\w.+-]+(?![\\w.@+%~\\/-])';
// A name a database or driver quotes in double quotes, as it wrote them (`relation "users"`) or escaped
// once or more because its message was put in JSON text, or in JSON quoted in JSON (`relation \"users\"`,
// `relation \\\"users\\\"`). An escaped name holds no backslash, so each start scans to one quote. A
// name cut off by the end of the text (a bounded string: `constraint "users_em`) goes too.
const DQ_NAME = '(?:"[^"\\n]*(?:"|$)|\\\\{1,7}"[^"\\\\\\n]*(?:\\\\{1,7}"|\\\\*$))';
// pg's error fields that name the row, the statement, the function or the schema.
const PG_FIELD_KEYS =
  '(?:detail|hint|position|internalPosition|internalQuery|where|schema|table|column|dataType|constraint)';
// Between two fields of JSON text: a comma, then a line break (raw, or escaped as JSON quoted in JSON
// writes it) and indentation, as `JSON.stringify(err, null, 2)` writes them.
const JSON_GAP = '(?:\\r?\\n|(?:\\\\{1,7}r)?\\\\{1,7}n)?[ \\t]*';
// A JSON string's body at the escape level of its quotes (`\2`, the backslashes before them): any
// character but a quote, backslash or line break, a backslash escape, or a quote escaped deeper than
// the closing one.
const ESCAPED_VALUE = '(?:[^"\\\\\\n]|\\\\{1,15}[^"\\\\\\n]|(?!\\2")\\\\{1,15}")*';
// What a connection URL broken by a line break or a space leaves before the break: the URL replaced
// (`[connection]`, `[connection]:`) or a scheme and what follows it (`redis://:`), then the break.
const AFTER_URL_BREAK = `(?:\\[connection\\]:?|\\b${CONNECTION_SCHEMES}:\\/\\/[^\\s'"<>@]{0,200})[ \\t]{0,8}(?:(?:\\r?\\n|\\\\r?\\\\n)[ \\t]{0,8})?`;
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
  // The line is taken whole and given back to where it ends in `)` or `:line`, so a long line costs
  // one pass (a lazy scan for the location took seconds on 50 KB), and eval frames' nested
  // parentheses (`at eval (eval at f (/x.js:1:1), <anonymous>:1:1)`) end the same way. A dump is its
  // indented lines, closed by a `}` line or not (a dump that had to close was scanned again from every
  // frame above it); a dump line is one blank then anything (`[ \t]+[^\n]*` split each indent two
  // ways: 26 lines of `  at f (x) {` took seconds).
  rule(
    'stack-frame',
    '(?:\\r?\\n|^)[ \\t]*at [^\\n]*(?<=\\)|:\\d{1,10}|:0x[0-9A-Fa-f]{1,16})(?:[ \\t]+\\{(?:\\r?\\n[ \\t][^\\n]*)*(?:\\r?\\n[ \\t]*\\})?)?[ \\t]*(?=\\r?\\n|$)',
    '',
  ),
  // A stack inside JSON text (`"stack":"Error: x\\n    at f (/x.js:1:1)"`): its newlines are `\\n`.
  rule('stack-frame', '\\\\n[ \\t]*at (?:[^"\\\\\\n]|\\\\[^n])*?(?<=\\)|:\\d{1,10})(?=\\\\n|")', ''),
  // JavaScriptCore and Firefox: `handler@/srv/app/x.js:1:1`, `@file:///x.js:2:3`, `global code@...`.
  // The name starts after the indentation, not inside it: where both could take a space, a line of
  // spaces was split 200 ways at each (a megabyte of spaces took 3 s).
  rule(
    'stack-frame',
    '(?:\\r?\\n|^)[ \\t]*(?:[\\w$.<>\\[\\]/][\\w$.<>\\[\\]/ ]{0,199})?@[^\\s@]+:\\d{1,10}(?::\\d{1,10})?[ \\t]*(?=\\r?\\n|$)',
    '',
  ),
  // An inspect dump without frames: `[Error: x] { errno: -111, code: 'E', ... }` on one line or many.
  rule(
    'inspect-dump',
    `(?<![ \\t])[ \\t]*\\{[ \\t]*(?:\\r?\\n[ \\t]+)?(?:errno|length|severity|syscall|\\[cause\\]|\\[errors\\]): (?:[^{}]|\\{[^{}]*\\})*\\}`,
    '',
  ),
  // Node's syscall errors quote every path whatever it looks like (relative, one segment, spaces):
  // `ENOENT: no such file or directory, open 'config/secrets.json'`, `EACCES: permission denied, mkdir
  // 'my uploads'`, and for two paths `ENOENT: ..., rename 'a b/x.csv' -> 'it's/y.csv'` (link, symlink,
  // copyfile, chdir). The arrow form first; the one-path form then skips what it left. The description
  // holds no comma, so it ends at the first one, and a quoted path at its quote (or four of its own).
  rule('syscall-path', `${SYSCALL_ERROR} '${QUOTED_PATH}' -> '${QUOTED_PATH}'`, `$1 '${PATH}' -> '${PATH}'`),
  rule('syscall-path', `${SYSCALL_ERROR} '(?!\\[path\\]')${QUOTED_PATH}'`, `$1 '${PATH}'`),
  // `JSON.stringify(err)` of the same error: `{"errno":-2,"code":"ENOENT","syscall":"rename",
  // "path":"a b/x.csv","dest":"archive"}`, and child_process's `"syscall":"spawn bin/tool",
  // "path":"bin/tool"`. A path only after `syscall`, so a validation error's `"path":"items.0.id"`
  // stays. Each value stops at the first quote, so a run of starts costs one step each.
  rule('syscall-path', `(${JSON_KEY('syscall')}spawn(?:Sync)? )(?!\\[path\\])${JSON_VALUE}`, `$1${PATH}`),
  rule(
    'syscall-path',
    `(${JSON_KEY('syscall')}[a-z][a-z0-9_]{0,24}(?: \\[path\\])?\\\\?"${JSON_NEXT}${JSON_KEY('path')})(?!\\[path\\])${JSON_VALUE}`,
    `$1${PATH}`,
  ),
  rule(
    'syscall-path',
    `(${JSON_KEY('path')}\\[path\\]\\\\?"${JSON_NEXT}${JSON_KEY('dest')})(?!\\[path\\])${JSON_VALUE}`,
    `$1${PATH}`,
  ),
  // The arguments child_process lists in `JSON.stringify(err)` (`"spawnargs":["--token","…"]`): a
  // command line's arguments may hold anything (a token, a customer's file), so the list goes whole.
  // Each item stops at its closing quote; an empty list stays.
  rule(
    'spawn-args',
    `(\\\\?)"spawnargs\\1":[ \\t]?\\[[ \\t]*\\1"${JSON_VALUE}\\1"(?:[ \\t]*,[ \\t]*\\1"${JSON_VALUE}\\1")*[ \\t]*\\]`,
    `$1"spawnargs$1":[$1"${REDACTED}$1"]`,
  ),
  // child_process names the command it could not start: `spawn bin/tool ENOENT`, `spawnSync ./x EACCES`,
  // `spawn C:\tools\x.exe ENOENT`; a bare command (`spawn git ENOENT`) stays. Both scans are bounded
  // (`{0,200}`) and the first stops at an error code, so a line of `spawn a/` costs 200 steps a start.
  rule(
    'syscall-path',
    `\\b(spawn(?:Sync)?) (?:(?! E[A-Z]{2,15}\\b)[^\\n/\\\\]){0,200}[/\\\\][^\\n]{0,200}? (E[A-Z]{2,15}|UNKNOWN)\\b`,
    `$1 ${PATH} $2`,
  ),
  // PostgreSQL's report fields as psql and the server log print them (`DETAIL:  Key (email)=(...)`,
  // `CONTEXT:`, `HINT:`, `QUERY:`, `STATEMENT:`, `LINE 1: SELECT ...` and its caret line), to the end
  // of the line.
  rule(
    'pg-detail',
    '(?:\\r?\\n)?(?<![ \\t])[ \\t]*\\b(?:DETAIL|CONTEXT|HINT|QUERY|STATEMENT|LOCATION|INTERNAL QUERY|LINE \\d+):[ \\t]+[^\\n]*(?:\\r?\\n[ \\t]*\\^[ \\t]*(?=\\r?\\n|$))?',
    '',
  ),
  // Row values a constraint violation echoes (emails, password hashes, names): `Failing row contains
  // (...)` and `Key (email)=(ann@example.com)`. Here and below, a scan that may fail never runs past
  // the next place the same rule could start (`(?:(?!start)[^\n])*`): a line of a thousand unclosed
  // starts would otherwise be scanned once from each, quadratic in its length.
  rule(
    'pg-row',
    '\\bFailing row contains \\((?:(?!Failing row contains)[^\\n])*\\)',
    `Failing row contains ${ROW}`,
  ),
  rule(
    'pg-row',
    '\\bKey \\([^()\\n]*(?:\\([^()\\n]*\\)[^()\\n]*)*\\)=\\((?:[^()\\n]|\\([^()\\n]*\\))*\\)',
    `Key ${ROW}`,
  ),
  // The same, cut off by the end of the text (a bounded string): `Key (email)=(ann@exa`, `Key (em`, `Failing row
  // contains (42, ann@exa`.
  rule('pg-row', '\\bKey \\([^()\\n]*(?:\\)=\\([^)\\n]*)?$', `Key ${ROW}`),
  rule(
    'pg-row',
    '\\bFailing row contains \\((?:(?!Failing row contains)[^)\\n])*$',
    `Failing row contains ${ROW}`,
  ),
  // pg's error as JSON text (`JSON.stringify(err)`, also quoted in JSON): after its `severity` and
  // `code`, the fields that hold the row, the statement, the function and the schema's names
  // (`"detail":"Key (email)=(…) already exists.","schema":"public","table":"users","constraint":…`) go
  // whole; `severity`, `code` and pg's own source location (`file`, `line`, `routine`) stay.
  rule(
    'pg-fields',
    `((\\\\{0,7})"severity\\2":[ \\t]?\\2"[A-Z]{1,10}\\2",${JSON_GAP}\\2"code\\2":[ \\t]?\\2"[0-9A-Z]{5}\\2")(?:,${JSON_GAP}\\2"${PG_FIELD_KEYS}\\2":[ \\t]?(?:\\2"${ESCAPED_VALUE}\\2"|\\d{1,10}))+`,
    '$1',
  ),
  // The same names under their keys anywhere in JSON text (`{"error":"…","table":"users"}`): an
  // identifier's value becomes `[name]`.
  rule(
    'pg-fields',
    `((\\\\{0,7})"(?:schema|table|column|dataType|constraint)\\2":[ \\t]?\\2")(?!\\[)[\\w$.-]+(?=\\2"|\\\\*$)`,
    `$1${NAME}`,
  ),
  // libpq's refusal names the client's address, role and database: `no pg_hba.conf entry for host
  // "10.1.2.3", user "app", database "orders"`.
  rule(
    'pg-name',
    `\\b(pg_hba\\.conf (?:entry|rejects connection) for host)[ \\t]+${DQ_NAME}(,[ \\t]*user)[ \\t]+${DQ_NAME}(,[ \\t]*database)[ \\t]+${DQ_NAME}`,
    `$1 ${HOST}$2 ${NAME}$3 ${NAME}`,
  ),
  // Schema names in pg messages: `relation "users"`, `constraint "users_email_key"`, `role "app"
  // does not exist`, `permission denied for table orders`, `syntax error at or near "FORM"`.
  rule(
    'pg-name',
    `\\b(relation|table|column|constraint|schema|database|index|sequence|function|view|extension|tablespace|trigger|type|operator|domain|policy)[ \\t]+(?:${DQ_NAME}|'[^'\\n]*'|\`[^\`\\n]*\`)`,
    `$1 ${NAME}`,
    'gi',
  ),
  // MySQL and SQL Server quote in single quotes, MySQL adding the client's host: `for user 'app'@'10.0.0.4'`.
  rule(
    'pg-name',
    `\\b(for (?:role|user))[ \\t]+(?:${DQ_NAME}|'[^'\\n]*'(?:@'[^'\\n]*')?)`,
    `$1 ${NAME}`,
    'gi',
  ),
  rule(
    'pg-name',
    `\\b(role|user)[ \\t]+${DQ_NAME}(?=[ \\t]+(?:does not exist|already exists|is not permitted to log in|cannot be dropped)\\b)`,
    `$1 ${NAME}`,
    'gi',
  ),
  rule(
    'pg-name',
    '\\b(permission denied for (?:table|relation|schema|sequence|view|function|database|column|foreign table|type|language|large object|materialized view))[ \\t]+[\\w$."]+',
    `$1 ${NAME}`,
    'gi',
  ),
  rule('pg-name', `\\b(at or near)[ \\t]+${DQ_NAME}`, `$1 ${SQL}`, 'gi'),
  // pg's `where` names the statement and function a PL/pgSQL error came from: `SQL statement "SELECT
  // 1/0"`, `PL/pgSQL function vault_guard(integer) line 3 at PERFORM`.
  rule('pg-name', `\\b(SQL statement)[ \\t]+${DQ_NAME}`, `$1 ${SQL}`),
  rule('pg-name', '\\b((?:PL/pgSQL|SQL) function)[ \\t]+[\\w$."]+(?:\\([^()\\n]*\\))?', `$1 ${NAME}`),
  // MySQL: `Duplicate entry 'ann@example.com' for key 'users.email'`, `... to use near 'FORM users' at
  // line 1`; SQLite: `near "FORM": syntax error`.
  rule(
    'db-row',
    "\\b(Duplicate entry)[ \\t]+'(?:(?!Duplicate entry)[^\\n])*?'(?=[ \\t]+for key\\b)",
    `$1 ${ROW}`,
  ),
  rule('db-name', "\\b(for key)[ \\t]+'[^'\\n]*'", `$1 ${NAME}`),
  rule(
    'db-name',
    '\\b(near)[ \\t]+(?:\'(?:(?!\\bnear[ \\t]+\')[^\\n])*?\'(?=[ \\t]+at line \\d)|"[^"\\n]*"(?=:))',
    `$1 ${SQL}`,
  ),
  // SQLite: `UNIQUE constraint failed: users.email`, `no such table: payroll`, `table users has no
  // column named ssn`.
  rule(
    'db-name',
    '\\b((?:UNIQUE|NOT NULL|CHECK|PRIMARY KEY|FOREIGN KEY) constraint failed):[ \\t]*[\\w$."]+(?:,[ \\t]*[\\w$."]+)*',
    `$1: ${NAME}`,
  ),
  rule(
    'db-name',
    '\\b(no such (?:table|column|index|view|trigger|function|collation|module|savepoint)):[ \\t]*[\\w$."]+',
    `$1: ${NAME}`,
  ),
  rule(
    'db-name',
    '\\btable [\\w$."]+ has no column named [\\w$"]+',
    `table ${NAME} has no column named ${NAME}`,
  ),
  // MongoDB: `E11000 duplicate key error collection: shop.users index: email_1 dup key: { email: "..." }`.
  rule(
    'db-row',
    '\\b(collection:)[ \\t]*[\\w$.-]+([ \\t]+index:)[ \\t]*[\\w$.-]+([ \\t]+dup key:)[ \\t]*\\{(?:[^{}\\n]|\\{[^{}\\n]*\\})*\\}',
    `$1 ${NAME}$2 ${NAME}$3 ${ROW}`,
  ),
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
  // `file:///srv/x`, and `file:/opt/app/x.yml` as Java's `File.toURI()` writes it (`jar:file:/…` too).
  rule('file-url', `\\bfile:\\/${URL_BODY}`, PATH, 'gi'),
  rule('node-internal', `\\bnode:[\\w/]+${LINE_COL}`, PATH),
  rule('connection-url', `\\b${CONNECTION_SCHEMES}:\\/\\/${URL_BODY}`, CONNECTION, 'gi'),
  // Any JDBC URL, also without `//`: `jdbc:oracle:thin:app/pw@db-primary:1521:ORCL`, `jdbc:sqlite:/x.db`
  // (Java's DriverManager echoes it verbatim, credentials included: `No suitable driver found for …`).
  rule('connection-url', `\\bjdbc:[a-z][a-z0-9]*:${URL_BODY}`, CONNECTION, 'gi'),
  // Not `\\b`: a match starts only where a scheme can (a run like `a.a.a.` was scanned from each dot).
  rule('url', `(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*:\\/\\/${URL_BODY}`, URL, 'gi'),
  // libpq keyword form: `host=db01 port=5432 dbname=orders user=app password=...` (two pairs or more).
  // The first value stops before the next keyword (`password=password=...` is one start per keyword).
  rule(
    'connection-keywords',
    `\\b${LIBPQ_KEY}=(?:(?!\\b${LIBPQ_KEY}=)\\S)+(?:\\s+${LIBPQ_KEY}=\\S+)+`,
    CONNECTION,
  ),
  // ADO.NET / ODBC form: `Server=sql01;Database=orders;User Id=sa;Password=...;`.
  rule(
    'connection-semicolon',
    '\\b(?:Server|Data Source|Host|Address|Addr)\\s*=\\s*(?:(?!\\b(?:Server|Data Source|Host|Address|Addr)\\s*=)[^;\\n])+;(?:[ \\t]*[A-Za-z][\\w ]*=[^;\\n]*(?:;|$))+',
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
  // The lazy scan for FROM never crosses another SELECT: from each SELECT of a long run of them
  // ("SELECT SELECT ...", a model's text quoted back) it would otherwise scan to the end (seconds on 200 KB).
  rule('sql', `\\bSELECT\\s(?:(?!SELECT\\b)[^;])*?\\bFROM\\b${SQL_TAIL}`, SQL),
  // What a nested SELECT left before it (`SELECT id, (` of `SELECT id, (SELECT ...) FROM t`), within a line.
  rule('sql', '\\bSELECT\\s[^;\\n]{0,200}?\\[sql\\]', SQL),
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
  // DDL a migration or query builder quotes back (upper case only: "create a table" is English).
  rule(
    'sql',
    `\\b(?:CREATE|ALTER|DROP)\\s+(?:(?:OR\\s+REPLACE|TEMP|TEMPORARY|UNIQUE|MATERIALIZED|UNLOGGED)\\s+)*(?:TABLE|INDEX|VIEW|SCHEMA|DATABASE|SEQUENCE|FUNCTION|PROCEDURE|TRIGGER|ROLE|USER|TYPE|EXTENSION|POLICY|DOMAIN)\\b${SQL_TAIL}`,
    SQL,
  ),
  rule('sql', `\\bTRUNCATE\\s+(?:TABLE\\s+)?[\\w."]+${SQL_TAIL}`, SQL),
  // Cloud resource names carry account ids, roles and buckets: `arn:aws:iam::123456789012:role/x`.
  rule('arn', `\\barn:aws[\\w-]*:[\\w-]+:[\\w-]*:\\d{0,12}:[^\\s'"<>,;)]+`, ARN),
  // `C:/Users/alice/.env`: Node and most tools accept forward slashes on Windows.
  rule(
    'windows-path',
    `(?<!\\w(?<!${ESCAPE_BEFORE}))[A-Za-z]:\\/(?:[^\\/\\n'"<>|*?:]*\\/)*(?:[^\\s\\/'"<>|*?:]*[^\\s\\/'"<>|*?:.,;])?${LINE_COL}`,
    PATH,
  ),
  // A path from a variable: `$HOME/.ssh/id_rsa`, `${HOME}/.aws/credentials`, `%USERPROFILE%\.ssh`.
  rule(
    'posix-path',
    `(?<![\\w$%{])(?:\\$\\{?[A-Za-z_]\\w*\\}?|%[A-Za-z_]\\w*%)[\\/\\\\][^\\s'"<>|]*[^\\s'"<>|.,;]`,
    PATH,
  ),
  // `C:\Program Files\app\db.js:10:5` (segments may hold spaces) and `\\server\share\x`.
  rule(
    'windows-path',
    `(?<!\\w(?<!${ESCAPE_BEFORE}))[A-Za-z]:\\\\${NOT_DRIVE_ROOT}(?:[^\\\\\\n'"<>|*?:]*\\\\)*(?:[^\\s\\\\'"<>|*?:]*[^\\s\\\\'"<>|*?:.,;])?${LINE_COL}`,
    PATH,
  ),
  // Windows' relative paths, as `posix-path` finds relative ones below (before the host rules, which
  // would take `pool.ts:42` for a host): `src\\db\\pool.ts:42:13`, `.\\config\\secrets.json`, also with
  // each backslash doubled as JSON writes it; not a JSON escape before a file name (`ESCAPED_FILE_NAME`).
  rule(
    'windows-path',
    `(?<![\\w.@+%~/:\\\\-](?<!${LONE_ESCAPES_BEFORE}))(?!${ESCAPED_FILE_NAME})(?:\\.{1,2}\\\\{1,2})?(?:${SEG}+\\\\{1,2})+[\\w.@+%~-]*\\.[A-Za-z][A-Za-z0-9]{0,7}${LINE_COL}(?![\\w@+%~\\\\-]|\\.[\\w@+%~-])`,
    PATH,
  ),
  rule('unc-path', `(?<![\\w\\\\])\\\\\\\\[\\w.$-]+\\\\(?:[^\\s'"<>|]*[^\\s'"<>|.,;])?`, PATH),
  // `/srv/app/db.js:10:5`, `~/.ssh/id_rsa`, `./src/x.ts`, and one segment with an extension (`/app.js`).
  rule(
    'posix-path',
    `${NOT_AFTER_WORD}(?:~[A-Za-z_][\\w.-]*|~|\\.{1,2})?\\/(?:${SEG}+\\/)+${LAST_SEG}${LINE_COL}`,
    PATH,
  ),
  // Another user's home with one segment after it: `~alice/.ssh`, `~deploy/app.env`.
  rule('posix-path', `${NOT_AFTER_WORD}~[A-Za-z_][\\w.-]*\\/${SEG}*[\\w@+%~-]`, PATH),
  rule('posix-path', `${NOT_AFTER_WORD}\\/[\\w@+%-]+\\.[A-Za-z]\\w{0,7}${LINE_COL}(?![\\w/])`, PATH),
  // What the resolver failed to find is a host name whatever its shape: `getaddrinfo ENOTFOUND orders-db`,
  // `querySrv ENOTFOUND _mongodb._tcp.x`, libpq's `could not translate host name "db-primary"`.
  rule(
    'hostname',
    `\\b(getaddrinfo|query[A-Za-z]*|getHostBy[A-Za-z]+|lookup(?:Service)?)[ \\t]+(E[A-Z_]+)[ \\t]+[^\\s'",;)]+`,
    `$1 $2 ${HOST}`,
  ),
  rule('hostname', `\\b(could not translate host name)[ \\t]+${DQ_NAME}`, `$1 ${HOST}`),
  // libpq 13 and older (psycopg2's wheels, long-term distributions): `could not connect to server:
  // Connection refused\n\tIs the server running on host "db-primary" (10.0.0.5) and accepting\n\tTCP/IP
  // connections on port 5432?`.
  rule(
    'hostname',
    '\\b(running on host)[ \\t]+"[^"\\n]*"((?:[ \\t]+\\([^()\\n]*\\))?[ \\t]+and accepting\\s+TCP/IP connections on port)[ \\t]+\\d{1,5}(?!\\d)',
    `$1 ${HOST}$2 ${HOST}`,
  ),
  // libpq's failed connection names the host as given, the address it resolved to and the port:
  // `connection to server at "db-primary" (10.0.0.5), port 5432 failed` (pg_dump, psql, psycopg).
  rule(
    'hostname',
    '\\b(connection to server at)[ \\t]+"[^"\\n]*"(?:[ \\t]+\\([^()\\n]*\\))?(,[ \\t]*port)[ \\t]+\\d{1,5}(?!\\d)',
    `$1 ${HOST}$2 ${HOST}`,
  ),
  // Node's TLS check names the host asked for and every name the certificate holds.
  rule(
    'hostname',
    `\\b(Host|IP): [^\\s]+?(\\.? is not (?:in the cert's (?:altnames|list)|cert's CN): )[^\\n"]*`,
    `$1: ${HOST}$2${HOST}`,
  ),
  // The same check's message cut off by the end of the text (a bounded string), before its names end.
  rule(
    'hostname',
    "\\b(does not match certificate's altnames: (?:Host|IP): )(?!\\[host\\])[^\\n]*$",
    `$1${HOST}`,
  ),
  // Connection settings in a dump or JSON (`{ host: 'db-prod-1', database: 'orders' }`), whatever the
  // first key; a value with a space (a street address) is not a host.
  rule(
    'hostname',
    `\\b(host|hostname|hostaddr|address|servername|remoteAddress|localAddress)(["']?[ \\t]*[:=][ \\t]*)(["'])(?!\\[)[^"'\\s]+\\3`,
    `$1$2$3${HOST}$3`,
  ),
  rule(
    'db-name',
    `\\b(database|dbname)(["']?[ \\t]*[:=][ \\t]*)(["'])(?!\\[)[^"'\\s]+\\3`,
    `$1$2$3${NAME}$3`,
  ),
  // The port beside them, unquoted in JSON (`JSON.stringify(err)`: `"address":"10.0.0.5","port":5432`).
  rule('hostname', `\\b((?:port|localPort|remotePort)["']?[ \\t]*[:=][ \\t]*)\\d{1,5}(?!\\d)`, `$1${HOST}`),
  // IPv6: bracketed (`[2001:db8::1]:8443`), full, or compressed with `::` (`::1:5432`, `fe80::1%eth0`,
  // `::ffff:10.0.0.1`, and with Node's port after a mapped or zoned address, `::ffff:10.0.0.1:5432`,
  // `fe80::1%eth0:5432`). Times such
  // as 12:30:45 have no `::` and fewer than eight groups.
  rule('ipv6', '\\[[0-9A-Fa-f]*:[0-9A-Fa-f:.]*(?:%[\\w.]+)?\\](?::\\d{1,5})?', HOST),
  rule('ipv6', `(?<![\\w:.])(?:${HEX}:){7}${HEX}${ZONE_PORT}(?![\\w:])`, HOST),
  rule(
    'ipv6',
    `(?<![\\w:.])(?=[0-9A-Fa-f:.]*[0-9A-Fa-f])(?:${HEX}(?::${HEX}){0,6})?::(?:(?:${HEX}:){0,6}${IPV4}(?::\\d{1,5}(?![\\w:]))?|${HEX}(?::${HEX}){0,6})?${ZONE_PORT}(?![\\w:])`,
    HOST,
  ),
  rule('ipv4', `(?<![\\w.])${IPV4}(?![\\w]|\\.\\d)${PORT_PATH}`, HOST),
  // `localhost`, `name-with-dash:port`, `db01.prod:5432` (also as `user@db-primary:5432`: an e-mail
  // address has no port), and dotted names ending in a known TLD.
  rule('hostname', `(?<![\\w.@/-])localhost${PORT_PATH}(?![\\w-])`, HOST, 'gi'),
  rule(
    'hostname',
    `(?<![\\w./-])[a-z][a-z0-9]*(?:[.-][a-z0-9]+)+:\\d{1,5}(?![\\d])(?:\\/${LAST_SEG})*`,
    HOST,
    'gi',
  ),
  rule(
    'hostname',
    `(?<![\\w.@/-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\\.)+${HOST_TLDS}(?![\\w-]|\\.[a-z0-9])${PORT_PATH}`,
    HOST,
    'gi',
  ),
  // The target ssh, scp, rsync and git name as `user@host` (`git@gitlab.corp.internal: Permission denied
  // (publickey).`, `app@db-primary.corp.internal:/srv/data`): after an `@` only under a private TLD, so an
  // e-mail address (`ann@example.com`) stays.
  rule(
    'hostname',
    `(?<=@)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\\.)+${INTERNAL_TLDS}(?![\\w-]|\\.[a-z0-9])${PORT_PATH}`,
    HOST,
    'gi',
  ),
  // A relative path of two segments or more ending in a file name with an extension, with or without
  // `:line:col`: `config/secrets.json`, `error in src/db/pool.ts:42:13`, `./x.ts`, `see docs/setup.md.`
  // (the full stop stays). Not `and/or`, `km/h`, `TCP/IP` (no extension), `12/05/2024`, `1/2.5`,
  // `node/20.1.0`, `v1.2/3.4` (none led by a letter), `18.x/20.x` (a version range),
  // `application/vnd.api+json` (`+json` after it) nor any two-segment media type. Last, after the host
  // rules: `example.com/a/b.js` is a host.
  // A match starts only where a segment run does (not after a segment character, `/`, `:` or `\`),
  // and no segment holds a `/`, so a 200 KB run of `a/` is scanned once.
  rule(
    'posix-path',
    `(?<![\\w.@+%~/\\\\-](?<!${ESCAPE_BEFORE}))(?!${MEDIA_TYPE})(?:${SEG}+\\/)+[\\w.@+%~-]*\\.[A-Za-z][A-Za-z0-9]{0,7}(?<!\\d\\.[xX])${LINE_COL}(?![\\w@+%~/-]|\\.[\\w@+%~-])`,
    PATH,
  ),
  // A connection URL's credentials cut from it by a line break or a space (a wrapped log line:
  // `postgres://app:\nS3cr3t@10.0.0.5:5432/orders`): a `user:password` glued to a host this table
  // replaced (`app:S3cr3t@[host]`), a word between a replaced URL and a replaced host (`[connection]
  // 3cr3t@[host]`; `git@[host]` keeps its user), a `user:password` glued to a dotted host name, or a word glued to one that a path
  // or port follows (`S3cr3t@cluster0.x.mongodb.net/db`; an e-mail address has neither) is userinfo. A match starts only
  // after a separator, so a long run without one is scanned once.
  // The host left after a break right before its `@`: `[connection]\n@cluster0.x.mongodb.net/db`.
  rule(
    'connection-userinfo',
    `(${AFTER_URL_BREAK})@[a-z0-9-]+(?:\\.[a-z0-9-]+)+${PORT_PATH}`,
    `$1@${HOST}`,
    'gi',
  ),
  rule(
    'connection-userinfo',
    `(?<![^\\s'"<>(){}@])[^\\s'"<>(){}@\\u0080-\\uffff]*:[^\\s'"<>(){}@:\\u0080-\\uffff]*@(?=\\[host\\])`,
    `${REDACTED}@`,
  ),
  rule(
    'connection-userinfo',
    `(${AFTER_URL_BREAK})[^\\s'"<>(){}@\\u0080-\\uffff]+@(?=\\[host\\])`,
    `$1${REDACTED}@`,
    'gi',
  ),
  rule(
    'connection-userinfo',
    `(?<![^\\s'"<>(){}@])(?:[^\\s'"<>(){}@\\u0080-\\uffff]*:[^\\s'"<>(){}@:\\u0080-\\uffff]+|[^\\s'"<>(){}@\\u0080-\\uffff]+(?=@[a-z0-9-]+(?:\\.[a-z0-9-]+)+(?::\\d{1,5})?\\/))@[a-z0-9-]+(?:\\.[a-z0-9-]+)+${PORT_PATH}`,
    `${REDACTED}@${HOST}`,
    'gi',
  ),
];

/** Everything scrubbed from an error result by default: core's `SECRET_PATTERNS`, then `INTERNAL_PATTERNS`. */
export const ERROR_SCRUB_PATTERNS: readonly SecretPattern[] = [...SECRET_PATTERNS, ...INTERNAL_PATTERNS];
