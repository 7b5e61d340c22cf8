import { describe, expect, it } from 'vitest';
import { createSecretRedactor, REDACTED, redactSecrets, redactSecretsInText } from '../src/index.js';

const R = REDACTED;
const json = JSON.stringify;
// `value`'s JSON as a logger's line holds it, `levels` times over (`{"msg":"{\"msg\":\"...\"}"}`): each
// level escapes the quotes of the one inside it again (`\"`, then `\\\"`, then `\\\\\\\"`).
const logged = (value: unknown, levels: number): string => {
  let text = json(value);
  for (let level = 0; level < levels; level += 1) text = json({ msg: text });
  return text;
};
const BCRYPT = '$2b$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy';

// Secrets as they appear in real error text, config dumps and headers, and exactly what remains.
const SECRETS: readonly (readonly [string, string])[] = [
  // A .netrc entry's password, on one line or over several, after its login and account.
  ['machine api.example.com login bob password hunter2', `machine api.example.com login bob password ${R}`],
  [
    'machine a.example login x\n  account ops\n  password "p#1"\nmachine b password q2',
    `machine a.example login x\n  account ops\n  password ${R}\nmachine b password q2`,
  ],
  ['default login anonymous password guest@x', `default login anonymous password ${R}`],
  ['machine 10.0.0.7 password s3cret', `machine 10.0.0.7 password ${R}`],
  // A machine without a dot in its name, with the entry's login: one line, or a .netrc file's layout.
  ['machine localhost login bob password hunter2', `machine localhost login bob password ${R}`],
  ['machine db01 login x password y', `machine db01 login x password ${R}`],
  [
    'machine db01\n  login deploy\n  password hunter2\n\nmachine build-server account ops login ci password "p w"\n',
    `machine db01\n  login deploy\n  password ${R}\n\nmachine build-server account ops login ci password ${R}\n`,
  ],
  [
    'machine db01 login deploy account ops password s3cret',
    `machine db01 login deploy account ops password ${R}`,
  ],
  // An entry in a JSON log line: the string's closing quote stays.
  [
    json({ level: 'warn', msg: 'netrc: machine localhost login bob password hunter2' }),
    json({ level: 'warn', msg: `netrc: machine localhost login bob password ${R}` }),
  ],
  [
    logged({ msg: 'machine api.example.com login bob password hunter2' }, 1),
    logged({ msg: `machine api.example.com login bob password ${R}` }, 1),
  ],
  // A long option and its value as the next word: a command line in `Command failed: ...`, `ps`, and
  // NUL-separated in /proc/<pid>/cmdline.
  ['Command failed: mysql --password hunter2 -u root', `Command failed: mysql --password ${R} -u root`],
  ['vault login --token s.Ab12Cd34 && x', `vault login --token ${R} && x`],
  ['app --db-password\t"p w" --client-secret abc', `app --db-password\t"${R}" --client-secret ${R}`],
  ["deploy --api-key 'k 1' --verbose", `deploy --api-key '${R}' --verbose`],
  [
    'mysql\u0000--password\u0000hunter2\u0000-u\u0000root',
    `mysql\u0000--password\u0000${R}\u0000-u\u0000root`,
  ],
  // Passwords of short options, which only some programs give them: the MySQL family's `-p` with the
  // password attached, sshpass's `-p`, and curl's (wget's, HTTPie's) `user:password` (the user stays).
  ['Command failed: mysql -phunter2 -u root', `Command failed: mysql -p${R} -u root`],
  ['mysqldump -ps3cret db > /tmp/db.sql', `mysqldump -p${R} db > /tmp/db.sql`],
  ["mariadb -p'a b' -e 'select 1'", `mariadb -p'${R}' -e 'select 1'`],
  [
    '/usr/bin/mysqladmin -h db -P 3306 -uroot -p"pw 2" status',
    `/usr/bin/mysqladmin -h db -P 3306 -uroot -p"${R}" status`,
  ],
  ['mysql\u0000-phunter2\u0000-u\u0000root', `mysql\u0000-p${R}\u0000-u\u0000root`],
  [
    "cmd: 'mysql -phunter2 -u root', spawnargs: [ 'mysql-dump', '-ps3cret' ]",
    `cmd: 'mysql -p${R} -u root', spawnargs: [ 'mysql-dump', '-p${R}' ]`,
  ],
  [
    '{"cmd":"mysql -p\\"a b\\" db","err":"ran \\"mysql -phunter2\\""}',
    `{"cmd":"mysql -p\\"${R}\\" db","err":"ran \\"mysql -p${R}\\""}`,
  ],
  ['sshpass -p hunter2 ssh -p 22 host', `sshpass -p ${R} ssh -p 22 host`],
  ['sshpass -phunter2 scp a host:b', `sshpass -p${R} scp a host:b`],
  ['sshpass\u0000-v\u0000-p\u0000hunter2\u0000ssh', `sshpass\u0000-v\u0000-p\u0000${R}\u0000ssh`],
  ['curl -u admin:s3cret https://api.example.com/x', `curl -u admin:${R} https://api.example.com/x`],
  ['curl --user admin:s3cret https://x', `curl --user admin:${R} https://x`],
  ['curl --user=admin:s3cret https://x', `curl --user=admin:${R} https://x`],
  [
    'curl -x proxy:3128 --proxy-user u:p -U u2:p:2 https://x',
    `curl -x proxy:3128 --proxy-user u:${R} -U u2:${R} https://x`,
  ],
  ['curl -fsSu \'admin:s 3\' "https://x/?a=1&b=2"', `curl -fsSu 'admin:${R}' "https://x/?a=1&b=2"`],
  ['curl\u0000-u\u0000admin:s3cret\u0000https://x', `curl\u0000-u\u0000admin:${R}\u0000https://x`],
  [
    'http -a ann:pw example.org && wget --auth=bob:pw2 x',
    `http -a ann:${R} example.org && wget --auth=bob:${R} x`,
  ],
  // A later `-p` on the same MySQL command line goes too.
  ['mysql -pa -u root -pb db', `mysql -p${R} -u root -p${R} db`],
  // Argument lists printed as util.inspect (loggers, `String(util.inspect(error))`) and JSON print them:
  // the item after the option, its quotes kept, also over util.inspect's line breaks and in JSON quoted
  // inside a JSON string.
  ["spawnargs: [ 'mysql', '--password', 'hunter2' ]", `spawnargs: [ 'mysql', '--password', '${R}' ]`],
  [
    "spawnargs: [\n    'mysql',\n    '--password',\n    'hunter2',\n    '-u',\n    'root'\n  ]",
    `spawnargs: [\n    'mysql',\n    '--password',\n    '${R}',\n    '-u',\n    'root'\n  ]`,
  ],
  ["spawnargs: [ 'curl', '-u', 'admin:hunter2' ]", `spawnargs: [ 'curl', '-u', 'admin:${R}' ]`],
  // util.inspect puts a long list's items on lines of their own.
  [
    "spawnargs: [\n    'mysql',\n    '-h',\n    'db.internal',\n    '-phunter2',\n    'orders'\n  ]",
    `spawnargs: [\n    'mysql',\n    '-h',\n    'db.internal',\n    '-p${R}',\n    'orders'\n  ]`,
  ],
  [
    "spawnargs: [ 'sshpass', '-p', 'hunter2', 'ssh', 'host' ]",
    `spawnargs: [ 'sshpass', '-p', '${R}', 'ssh', 'host' ]`,
  ],
  [
    '["/usr/bin/sshpass","-v","-phunter2","ssh","-p","22"]',
    `["/usr/bin/sshpass","-v","-p${R}","ssh","-p","22"]`,
  ],
  [
    "[\n  'sshpass',\n  '-p',\n  'hunter2',\n  'ssh',\n  'host'\n]",
    `[\n  'sshpass',\n  '-p',\n  '${R}',\n  'ssh',\n  'host'\n]`,
  ],
  ['{"e":"[\\"sshpass\\",\\"-p\\",\\"a b\\"]"}', `{"e":"[\\"sshpass\\",\\"-p\\",\\"${R}\\"]"}`],
  // A spawn error printed: the program is its `path`, its `spawnargs` leave it out.
  [
    "  path: '/usr/bin/sshpass',\n  spawnargs: [ '-p', 'hunter2', 'ssh', '-p', '22', 'host' ],",
    `  path: '/usr/bin/sshpass',\n  spawnargs: [ '-p', '${R}', 'ssh', '-p', '22', 'host' ],`,
  ],
  [
    '{"code":"ENOENT","path":"sshpass","spawnargs":["-v","-phunter2","ssh"]}',
    `{"code":"ENOENT","path":"sshpass","spawnargs":["-v","-p${R}","ssh"]}`,
  ],
  [
    "cmd: 'curl -sS -X POST -u admin:hunter2 https://api.example.com/v1/orders',\n  spawnargs: [\n    'curl',\n    '-sS',\n    '-X',\n    'POST',\n    '-u',\n    'admin:hunter2',\n    'https://api.example.com/v1/orders'\n  ]",
    `cmd: 'curl -sS -X POST -u admin:${R} https://api.example.com/v1/orders',\n  spawnargs: [\n    'curl',\n    '-sS',\n    '-X',\n    'POST',\n    '-u',\n    'admin:${R}',\n    'https://api.example.com/v1/orders'\n  ]`,
  ],
  [
    "path: '/bin/curl',\n  spawnargs: [ '-u', 'admin:hunter2', 'https://x' ]",
    `path: '/bin/curl',\n  spawnargs: [ '-u', 'admin:${R}', 'https://x' ]`,
  ],
  ['["mysql","--password","hunter2"]', `["mysql","--password","${R}"]`],
  ['"--password","hunter2"', `"--password","${R}"`],
  ['["--Client-Secret","a\\"b","next"]', `["--Client-Secret","${R}","next"]`],
  ['{"spawnargs":["--user","admin:p\\"w"]}', `{"spawnargs":["--user","admin:${R}"]}`],
  ['["wget","-U","u:p w"]', `["wget","-U","u:${R}"]`],
  [
    '{"log":"spawn failed [\\"mysql\\",\\"--password\\",\\"hunter2\\"]"}',
    `{"log":"spawn failed [\\"mysql\\",\\"--password\\",\\"${R}\\"]"}`,
  ],
  ['{"SECRET_KEY":"s3cr3t value","user":"ann"}', `{"SECRET_KEY":"${R}","user":"ann"}`],
  ['{"password": "a\\"b", "pin": null}', `{"password": "${R}", "pin": null}`],
  ["x_api_key='k-123' then", `x_api_key='${R}' then`],
  [
    '//registry.npmjs.org/:_authToken=npm_Abcdefghijklmnopqrstuvwxyz0123456789',
    `//registry.npmjs.org/:_authToken=${R}`,
  ],
  ['//npm.internal/:_auth=dXNlcjpwYXNz', `//npm.internal/:_auth=${R}`],
  [
    'DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4+/==;EndpointSuffix=core.windows.net',
    `DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=${R};EndpointSuffix=core.windows.net`,
  ],
  [
    'Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=abc+/=;',
    `Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=root;SharedAccessKey=${R};`,
  ],
  ['Cookie: sid=abc123; theme=dark', `Cookie: ${R}`],
  ['Set-Cookie: __Host-session=abc123; Path=/; Secure; HttpOnly\nnext', `Set-Cookie: ${R}\nnext`],
  ['sent __Host-sid=xyz987; and __Secure-id=q1', `sent __Host-sid=${R}; and __Secure-id=${R}`],
  ['x_api_key=abcd1234 dbPassword=hunter2 _authToken=t0k', `x_api_key=${R} dbPassword=${R} _authToken=${R}`],
  ['X-Api-Key: 9f8e7d6c5b4a', `X-Api-Key: ${R}`],
  ['password: hunter2', `password: ${R}`],
  ['client_secret=abc&grant_type=client_credentials', `client_secret=${R}&grant_type=client_credentials`],
  ['session_id: 3f2b8c1e-9a4d-4c1b-8f5e-2d7a6b9c0e1f', `session_id: ${R}`],
  ['key id AKIA1234567890AB... (cut)', `key id ${R}... (cut)`],
  ['key AKIAIOSFODNN7EXAMPLE here', `key ${R} here`],
  ['ghp_abcdefghijklmnopqrstuvwxyz0123456789 and github_pat_11ABCDEFG0123456789_abcdefghij', `${R} and ${R}`],
  ['slack xoxb-123456789012-abcdefghijkl stripe sk_live_abcdefghijklmnop', `slack ${R} stripe ${R}`],
  ['google AIzaSyA1234567890abcdefghijklmnopqrstu', `google ${R}`],
  ['use sk-abcdefghijklmnopqrstuvwx now', `use ${R} now`],
  ['Authorization: Bearer abc.def-123', `Authorization: Bearer ${R}`],
  ['authorization: token abc123def', `authorization: token ${R}`],
  ['curl -H "Authorization: Basic dXNlcjpwYXNz"', `curl -H "Authorization: Basic ${R}"`],
  ['sent Bearer eyJhbGciOi.x and Basic dXNlcjpwYXNz', `sent Bearer ${R} and Basic ${R}`],
  ['postgres://app:s3cret@db.internal:5432/orders', `postgres://${R}@db.internal:5432/orders`],
  ['postgres://app:p@ss@db.internal/orders', `postgres://${R}@db.internal/orders`],
  ['-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY----- end', `${R} end`],
  ['-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQdGBF\n-----END PGP PRIVATE KEY BLOCK-----', R],
  [
    `Failing row contains (7, ann@example.com, ${BCRYPT}).`,
    `Failing row contains (7, ann@example.com, ${R}).`,
  ],
  ['hash $argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo ok', `hash ${R} ok`],
  // An AWS key pair as a credentials line writes it: the secret after the id goes too.
  ['creds AKIAIOSFODNN7EXAMPLE:wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY end', `creds ${R} end`],
  ['AKIAIOSFODNN7EXAMPLE, wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', R],
  // URL-encoded and lower-case schemes (a query string, a log that lower-cased its headers).
  ['GET /x?auth=Bearer%20abcdef0123456789 200', `GET /x?auth=Bearer ${R} 200`],
  ['sent basic dXNlcjpwYXNzd29yZA== upstream', `sent basic ${R} upstream`],
  // JSON quoted inside a JSON string (an upstream body in an error), and URL-encoded keys and values.
  [
    'upstream said {\\"password\\":\\"hunter2 x\\",\\"user\\":\\"ann\\"}',
    `upstream said {\\"password\\":\\"${R}\\",\\"user\\":\\"ann\\"}`,
  ],
  ['body: {\\"api_key\\": \\"abc DEF\\"}', `body: {\\"api_key\\": \\"${R}\\"}`],
  ['next=%2Fcb%3Fpassword%3Dhunter2&x=1', `next=%2Fcb%3Fpassword%3D${R}&x=1`],
  ['q=%7B%22client_secret%22%3A%22abc123%22%7D&y=2', `q=%7B%22client_secret%22%3A${R}&y=2`],
  // Further providers' fixed prefixes, each in its real shape.
  [`do ${'dop_v1_'}${'a1'.repeat(32)} end`, `do ${R} end`],
  [`shop shpat_${'0f'.repeat(16)} end`, `shop ${R} end`],
  [`age AGE-SECRET-KEY-1${'QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L'.repeat(2).slice(0, 58)}`, `age ${R}`],
  [`postman PMAK-${'a1'.repeat(12)}-${'b2'.repeat(17)} end`, `postman ${R} end`],
  ['square sq0atp-abcdefghijklmnopqrstuv end', `square ${R} end`],
  ['vault hvs.CAESIJlWh0aTrCa7WZ6lXQ1ZrXk3 end', `vault ${R} end`],
  ['google GOCSPX-abcdefghijklmnopqrstuvwx end', `google ${R} end`],
  [`databricks dapi${'0a'.repeat(16)} end`, `databricks ${R} end`],
  [`twilio SK${'0a'.repeat(16)} end`, `twilio ${R} end`],
  ['bot 123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0 end', `bot ${R} end`],
  [`mailgun key-${'3f'.repeat(16)} end`, `mailgun ${R} end`],
  ['azure abc8Q~defghijklmnopqrstuvwxyz0123456789 end', `azure ${R} end`],
  [
    'gitlab glrt-abcdefghijklmnopqrst and glsa_abcdefghijklmnopqrstuvwxyz012345_0a1b2c3d',
    `gitlab ${R} and ${R}`,
  ],
  // PHP and Ruby hashes.
  ["config ['password' => 'hunter2', 'user' => 'app']", `config ['password' => '${R}', 'user' => 'app']`],
  [':api_key => "k-123456" end', `:api_key => "${R}" end`],
  // Session cookies outside a Cookie header.
  [
    'cookie jar connect.sid=s%3Aabc123.def456; JSESSIONID=9F8E7D6C5B4A; PHPSESSID=abc123def',
    `cookie jar connect.sid=${R}; JSESSIONID=${R}; PHPSESSID=${R}`,
  ],
  // `_PASS` names of docker-compose files and env dumps, Rails' secret_key_base, `api key` with a space.
  [
    'env DB_PASS=hunter2 SMTP_PASS: mail-Pw-77 redis.pass=r3d1s',
    `env DB_PASS=${R} SMTP_PASS: ${R} redis.pass=${R}`,
  ],
  ['{"SECRET_KEY_BASE":"9f2c41d7e8a0b3"}', `{"SECRET_KEY_BASE":"${R}"}`],
  ['401: invalid api key: sk-proj-short1', `401: invalid api key: ${R}`],
  // Program names in any letter case (Windows paths and `.EXE` too), on a command line and in printed
  // argument lists.
  ['Command failed: MYSQL -phunter2 -u root', `Command failed: MYSQL -p${R} -u root`],
  [
    'Mysql.exe -p"a b" -u root && MariaDB-Dump -ps3cret db',
    `Mysql.exe -p"${R}" -u root && MariaDB-Dump -p${R} db`,
  ],
  ['C:\\Tools\\SSHPASS.EXE -p hunter2 ssh -p 22 h', `C:\\Tools\\SSHPASS.EXE -p ${R} ssh -p 22 h`],
  [
    'CURL -u admin:hunter2 https://x; Wget.exe -U u:p x',
    `CURL -u admin:${R} https://x; Wget.exe -U u:${R} x`,
  ],
  ["spawnargs: [ 'MYSQL', '-h', 'db', '-phunter2' ]", `spawnargs: [ 'MYSQL', '-h', 'db', '-p${R}' ]`],
  [
    "spawnargs: [\n    'C:\\\\Tools\\\\Curl.EXE',\n    '-u',\n    'admin:hunter2'\n  ]",
    `spawnargs: [\n    'C:\\\\Tools\\\\Curl.EXE',\n    '-u',\n    'admin:${R}'\n  ]`,
  ],
  [
    json(['C:\\Tools\\SSHPASS.EXE', '-p', 'hunter2', 'ssh']),
    json(['C:\\Tools\\SSHPASS.EXE', '-p', R, 'ssh']),
  ],
  [logged(['Sshpass', '-p', 'hunter2'], 1), logged(['Sshpass', '-p', R], 1)],
  // JSON quoted in a JSON string quoted in another (a logger's line holding a message that holds
  // JSON): the whole value goes, and an escaped quote inside it is part of it, at each depth.
  [logged({ cmd: ['mysql', '--password', 'hunter2'] }, 2), logged({ cmd: ['mysql', '--password', R] }, 2)],
  [logged({ password: 'hunter2 x', user: 'ann' }, 2), logged({ password: R, user: 'ann' }, 2)],
  [logged({ password: 'a"b\\c hunter2' }, 1), logged({ password: R }, 1)],
  [logged({ token: 'a"b\\c hunter2' }, 3), logged({ token: R }, 3)],
  [logged({ cmd: ['curl', '-u', 'admin:hunter2'] }, 2), logged({ cmd: ['curl', '-u', `admin:${R}`] }, 2)],
  [logged({ cmd: ['sshpass', '-p', 'hunter 2', 'ssh'] }, 2), logged({ cmd: ['sshpass', '-p', R, 'ssh'] }, 2)],
  [logged({ cmd: ['mysql', '-phunter2'] }, 1), logged({ cmd: ['mysql', `-p${R}`] }, 1)],
  [logged({ cmd: ['mysql', '-phunter2'] }, 2), logged({ cmd: ['mysql', `-p${R}`] }, 2)],
  [logged({ cmd: ['--user', 'admin:p"w'] }, 2), logged({ cmd: ['--user', `admin:${R}`] }, 2)],
  [logged({ cmd: 'mysql -p"hunter 2" db' }, 2), logged({ cmd: `mysql -p"${R}" db` }, 2)],
  [logged({ cmd: 'x --password "hunter 2" -v' }, 2), logged({ cmd: `x --password "${R}" -v` }, 2)],
  [logged({ cmd: 'x --password hunter2' }, 1), logged({ cmd: `x --password ${R}` }, 1)],
  [logged({ cmd: 'curl -u "admin:hunter 2" x' }, 2), logged({ cmd: `curl -u "admin:${R}" x` }, 2)],
  // A bare value or a header inside a JSON string leaves the escape of the string's closing quote.
  [logged({ e: 'password=hunter2' }, 1), logged({ e: `password=${R}` }, 1)],
  [logged({ h: 'Authorization: Bearer hunter2abcdef' }, 1), logged({ h: `Authorization: Bearer ${R}` }, 1)],
  [logged({ h: 'Cookie: a=hunter2; c=d' }, 1), logged({ h: `Cookie: ${R}` }, 1)],
  [logged({ Cookie: 'a=hunter2' }, 2), logged({ Cookie: R }, 2)],
  [
    logged({ h: 'sent __Host-sid=hunter2 and JSESSIONID=hunter3' }, 1),
    logged({ h: `sent __Host-sid=${R} and JSESSIONID=${R}` }, 1),
  ],
  // XML elements named like a secret key (a SOAP fault, Maven's or NuGet's settings, an upstream XML
  // error body): the text between the tags goes, the tags stay.
  ['<password>hunter2</password>', `<password>${R}</password>`],
  ['<Password>x</Password> <apiKey>k-1</apiKey>', `<Password>${R}</Password> <apiKey>${R}</apiKey>`],
  ['<db:password>x</db:password>', `<db:password>${R}</db:password>`],
  ['<client_secret>s3 cr3t</client_secret>', `<client_secret>${R}</client_secret>`],
  ['<password type="plain" enc=\'no\'>hunter2</password>', `<password type="plain" enc='no'>${R}</password>`],
  [
    '<server>\n  <id>nexus</id>\n  <password>\n    hunter2\n  </password>\n</server>',
    `<server>\n  <id>nexus</id>\n  <password>${R}</password>\n</server>`,
  ],
  [
    '<add key="ClearTextPassword" value="x" /><ns2:ClientSecret>a&amp;b</ns2:ClientSecret>',
    `<add key="ClearTextPassword" value="x" /><ns2:ClientSecret>${R}</ns2:ClientSecret>`,
  ],
  ['<password><![CDATA[a<b]]c]]></password>', `<password>${R}</password>`],
  // Inside JSON strings, where `</` may be written `<\/`, also JSON inside a JSON string.
  [
    '{"body":"<fault><password>hunter2<\\/password><\\/fault>"}',
    `{"body":"<fault><password>${R}<\\/password><\\/fault>"}`,
  ],
  [logged({ body: '<token>a"b\\c</token>' }, 1), logged({ body: `<token>${R}</token>` }, 1)],
  // SQL credential clauses, in any letter case: the literal goes, its quotes stay; a quote doubled or
  // escaped inside it is part of it.
  ["ALTER USER app WITH PASSWORD 'hunter2'", `ALTER USER app WITH PASSWORD '${R}'`],
  [
    "CREATE ROLE r LOGIN ENCRYPTED PASSWORD 'hunter2' VALID UNTIL '2027-01-01'",
    `CREATE ROLE r LOGIN ENCRYPTED PASSWORD '${R}' VALID UNTIL '2027-01-01'`,
  ],
  ["alter role r\n  login\n  password 'a''b''c';", `alter role r\n  login\n  password '${R}';`],
  [
    "CREATE USER MAPPING FOR bob SERVER s OPTIONS (user 'bob', password 'hunter2')",
    `CREATE USER MAPPING FOR bob SERVER s OPTIONS (user 'bob', password '${R}')`,
  ],
  ["CREATE USER 'u'@'%' IDENTIFIED BY 'hunter2'", `CREATE USER 'u'@'%' IDENTIFIED BY '${R}'`],
  [
    "ALTER USER 'u'@'%' IDENTIFIED WITH mysql_native_password BY 'hun''ter\\'2'",
    `ALTER USER 'u'@'%' IDENTIFIED WITH mysql_native_password BY '${R}'`,
  ],
  ['create user u identified by "hun""ter2"', `create user u identified by "${R}"`],
  [
    "ALTER USER u IDENTIFIED BY 'new-pw' REPLACE 'old-pw' RETAIN CURRENT PASSWORD",
    `ALTER USER u IDENTIFIED BY '${R}' REPLACE '${R}' RETAIN CURRENT PASSWORD`,
  ],
  ["SET PASSWORD FOR root = 'hunter2'", `SET PASSWORD FOR root = '${R}'`],
  [
    "SET PASSWORD FOR 'root'@'localhost' = PASSWORD('hunter2'); SET PASSWORD = 'x2'",
    `SET PASSWORD FOR 'root'@'localhost' = PASSWORD('${R}'); SET PASSWORD = '${R}'`,
  ],
  ["SET PASSWORD = PASSWORD('hunter2')", `SET PASSWORD = PASSWORD('${R}')`],
  // MySQL's syntax error quotes the statement (`near '...'`): the literal is read to the line's end.
  [
    "ER_PARSE_ERROR: You have an error in your SQL syntax; near 'IDENTIFIED BY 'hunter2'' at line 1",
    `ER_PARSE_ERROR: You have an error in your SQL syntax; near 'IDENTIFIED BY '${R}`,
  ],
  // In a JSON log line: never past the end of the string around it; a double-quoted literal escaped at
  // each level.
  [
    json({ msg: "near 'IDENTIFIED BY 'hunter2'' at line 1", errno: 1064 }),
    json({ msg: `near 'IDENTIFIED BY '${R}`, errno: 1064 }),
  ],
  [
    logged({ sql: 'CREATE USER u IDENTIFIED BY "hun\\"ter2" ', n: 1 }, 1),
    logged({ sql: `CREATE USER u IDENTIFIED BY "${R}" `, n: 1 }, 1),
  ],
  // A URL's userinfo without a colon (a token, or a user alone) in schemes that take credentials.
  ['https://ghp_abc123@github.com/org/repo.git', `https://${R}@github.com/org/repo.git`],
  ['fetch https://x-token-abc@host/path failed', `fetch https://${R}@host/path failed`],
  ['git clone HTTPS://oauth2-t0k@en@gitlab.example/g/r.git', `git clone HTTPS://${R}@gitlab.example/g/r.git`],
  [
    'redis://s3cret@cache:6379/0 amqps://tok@mq/vh wss://t@ws.example/x',
    `redis://${R}@cache:6379/0 amqps://${R}@mq/vh wss://${R}@ws.example/x`,
  ],
  [
    json({ remote: 'https://ghp_abc123@github.com/o/r.git' }),
    json({ remote: `https://${R}@github.com/o/r.git` }),
  ],
  // After a key named like a secret, a URL whose userinfo went stays a URL (no `]@host` left behind).
  [
    'includes credentials: https://t0k@host/p; password: postgres://app:s3cret@db/x',
    `includes credentials: https://${R}@host/p; password: postgres://${R}@db/x`,
  ],
  // A YAML block scalar under a secret key (a k8s manifest, a config dump): the indented lines go, the
  // indicator stays; also as a sequence item, and in a JSON string whose line breaks are `\n`.
  ['password: |\n  hunter2\n  more\nuser: ann', `password: |\n  ${R}\nuser: ann`],
  ['spec:\n  token: >-\n    abc\n    def\n  other: 1', `spec:\n  token: >-\n    ${R}\n  other: 1`],
  [
    'db:\n  - password: |2+\n      hunter2\n\n      more\n  - user: ann',
    `db:\n  - password: |2+\n      ${R}\n  - user: ann`,
  ],
  [
    'stringData:\r\n  "client_secret": > # rotated\r\n    hunter2\r\nkind: Secret',
    `stringData:\r\n  "client_secret": > # rotated\r\n    ${R}\r\nkind: Secret`,
  ],
  [
    json({ config: 'db:\n  password: |\n    hunter2\n    more\n  user: ann' }),
    json({ config: `db:\n  password: |\n    ${R}\n  user: ann` }),
  ],
  [json({ c: 'token: >-\n    abc "q"\n' }), json({ c: `token: >-\n    ${R}\n` })],
  // Webhook URLs whose path is the secret: scheme, host and the ids that are not the secret stay.
  [
    'POST https://hooks.slack.com/services/T0AB12CD/B0EF34GH/Xy9aBcDeFgHiJkLmNoPqRsTu failed',
    `POST https://hooks.slack.com/services/T0AB12CD/B0EF34GH/${R} failed`,
  ],
  [
    'https://hooks.slack.com/workflows/T0123/A0456/789012345/secretXYZ, https://hooks.slack.com/triggers/T0123/456789/abcdef0123',
    `https://hooks.slack.com/workflows/T0123/A0456/789012345/${R}, https://hooks.slack.com/triggers/T0123/456789/${R}`,
  ],
  [
    '{"url":"https:\\/\\/hooks.slack.com\\/services\\/T1\\/B2\\/hunter2"}',
    `{"url":"https:\\/\\/hooks.slack.com\\/services\\/T1\\/B2\\/${R}"}`,
  ],
  [
    'https://discord.com/api/webhooks/1234567890/AbC-hunter2_x9 and https://canary.discordapp.com/api/v10/webhooks/42/t0k?wait=true',
    `https://discord.com/api/webhooks/1234567890/${R} and https://canary.discordapp.com/api/v10/webhooks/42/${R}?wait=true`,
  ],
  [
    'teams https://acme.webhook.office.com/webhookb2/0a1b-2c@3d4e/IncomingWebhook/hunter2.abc/5f6a "x" (https://outlook.office.com/webhook/a@b/IncomingWebhook/c/d).',
    `teams https://acme.webhook.office.com/webhookb2/${R} "x" (https://outlook.office.com/webhook/${R}).`,
  ],
  // Env-style keys whose last word is `PWD` (MySQL's `MYSQL_PWD`).
  ['MYSQL_PWD=hunter2 DB_PWD: x db.pwd=y', `MYSQL_PWD=${R} DB_PWD: ${R} db.pwd=${R}`],
  ['{"smtp_pwd":"hunter2","pwd":"p w"}', `{"smtp_pwd":"${R}","pwd":"${R}"}`],
  // The password fed to sudo's stdin, echoed in an error; a quoted one keeps its quotes.
  ['Command failed: echo hunter2 | sudo -S apt update', `Command failed: echo ${R} | sudo -S apt update`],
  ["echo -n 'p w' | /usr/bin/sudo -k -u root -S id", `echo -n '${R}' | /usr/bin/sudo -k -u root -S id`],
  ["printf '%s\\n' 'hunter2' | sudo -kS id", `printf '%s\\n' '${R}' | sudo -kS id`],
  ["printf 'hunter2\\n' | sudo --stdin id", `printf '${R}' | sudo --stdin id`],
  ["sudo -S <<< 'hunter2' id; sudo -S id <<< s3cret", `sudo -S <<< '${R}' id; sudo -S id <<< ${R}`],
  [json({ cmd: 'echo "hunter 2" | sudo -S id' }), json({ cmd: `echo "${R}" | sudo -S id` })],
];

// Ordinary text a model reads: none of it may change.
const ORDINARY: readonly string[] = [
  // ssh's own port after a path that is not sshpass's.
  "  path: '/usr/bin/ssh',\n  spawnargs: [ '-p', '22', 'host' ],",
  // Prose about a password that gives none (a password given in prose goes: see redact-secrets-s34).
  'The password is required, the machine says.',
  'machine learning login page: password reset',
  'run with --max-tokens 1500 --token-count 3 --password-file /run/secrets/db --password --user ann',
  // Short options that carry no password here: mysql's prompt (`-p` alone) and port (`-P`), other
  // programs' `-p` and `-u`, and a user name without a password.
  'mysql -p -u root; mysql -P 3306 -u root -p',
  'mysqldump -p\u0000db',
  'ssh -p 22 host; scp -P 2222 a host:b',
  'docker run -u 1000:1000 img && sudo -u www-data id',
  'tar -cpf x.tar dir; cp -p a b; grep -u x; mkdir -p /tmp/a-b',
  'curl -u admin https://x; wget -a log.txt https://x',
  'mysql -u root && cp -pr a b | tar -cpf - . ; curl -u ann https://x && ssh -p 22 h',
  // Printed argument lists without a password: another program's `-p` and `-u`, options named like a
  // secret key but not one, `--password` before the next option or alone, a user without a password.
  "spawnargs: [ 'ssh', '-p', '22' ], [ 'docker', 'run', '-u', '1000:1000' ], [ 'sudo', '-u', 'a:b' ]",
  '["--password-file","/run/secrets/x"] ["--max-tokens","1500"] ["--password","-u","root"] ["--password"]',
  "[ '-u', 'root' ] [ 'curl', '--user', 'ann' ] [ 'order', 'shipped', 'today' ]",
  'Order 4000123412341234 shipped on 2026-11-29. See https://example.com/track?id=7.',
  'Created 2026-11-30T10:00:00.000Z, updated 2026-11-30 10:00:00+00, id 3f2b8c1e-9a4d-4c1b-8f5e-2d7a6b9c0e1f.',
  'max_tokens: 1500, token_count=3, tokens used: 12, passwordless login is on.',
  'The password must be at least 8 characters; reset your password from the profile page.',
  'Basic plan and Basic authentication are off; the bearer of this note may pass.',
  'Use the secret menu: press A then B. Cookies are disabled in your browser.',
  'Key (email) must be unique; AKIA is a prefix; gh_pages and sk_ are not keys.',
  'Refund RF-2026-0042 of 12.50 EUR was approved by Ann at 14:30.',
  'Basic questions go to support; basic plan, basic tier and basic auth are off. Bearer bonds 2026.',
  'The session id is shown on the page; sessionid cookies are cleared on sign-out.',
  'bypass: off, compass: north, the by-pass road is open. The API key page lists your keys.',
  // Prose about machines and logins is no .netrc entry: a machine without a dot in its name needs a login
  // that reads as a user name (not ending in punctuation, not a word that follows "login" in a sentence).
  'The machine learning login page password reset flow is down.',
  'machine translation login screen password field; virtual machine console login prompt, password required.',
  'Each machine has a login and a password; the machine room login with password is closed.',
  'machine shop login bob. password reset sent; machine db01 login: password expired',
  // Other programs in capitals keep their `-p` and `-u`; a MySQL `-p` alone prompts, `-P` is the port.
  'SSH -p 22 host; Docker run -u 1000:1000 img; MYSQL -p -u root; MySQL -P 3306 -u root -p',
  "[ 'SSH', '-p', '22' ] [ 'SUDO', '-u', 'a:b' ] [ 'MYSQL', '-P', '3306' ]",
  // XML: empty elements, a secret-named element holding child elements (its children are read on their
  // own), prose naming a tag, names that only start with a secret word.
  '<password/> <password /> <password></password> <password>  </password> <password>\n</password>',
  '<password><policy>min 8</policy></password>',
  'Fill in the <password> field; the <password> tag is required.',
  '<password-policy>8</password-policy><passwordless>true</passwordless><tokens>12</tokens>',
  '{"a":"<password>","b":"</password>"}',
  // SQL: no literal after the keyword, a function named like it, prose.
  'ALTER ROLE app PASSWORD NULL; CREATE USER u WITH PASSWORD NULL',
  "SELECT password_hash('x'), crypt(password, gen_salt('bf')) FROM users",
  'Rows are IDENTIFIED BY the user id; the password was SET BY an admin.',
  "CREATE ROLE r LOGIN PASSWORD ''; ALTER USER u IDENTIFIED BY ''",
  // URLs: scp-like git remotes, e-mail addresses, an `@` in the path, ssh's user name, no userinfo.
  'git@github.com:org/repo.git and ann@example.com wrote https://example.com/@user',
  'ssh://git@github.com/org/repo.git https://example.com/a?b=@c#@d mailto:ann@example.com',
  // YAML block scalars under other keys; the shell's working directory; echo piped elsewhere, to sudo
  // without `-S`, or a variable fed to it; webhook URLs without their secret.
  'description: |\n  the password rotates\n  weekly\npassword_policy: >-\n  min 8',
  'PWD=/home/app OLDPWD=/tmp cd $PWD; pwd: ~/src; "PWD":"C:\\app"',
  'echo hello | grep h; echo x | sudo tee /etc/f; echo "$SUDO_PASS" | sudo -S id; sudo -u www-data id',
  'see https://hooks.slack.com/services/ and https://discord.com/api/webhooks/ for setup',
];

describe('redactSecrets', () => {
  it('replaces values under secret-looking keys at any depth', () => {
    expect(
      redactSecrets({
        user: 'ann',
        password: 'hunter2',
        nested: { 'X-Api-Key': 'abc', list: [{ refreshToken: 't' }, { ok: 'keep' }] },
      }),
    ).toEqual({
      user: 'ann',
      password: REDACTED,
      nested: { 'X-Api-Key': REDACTED, list: [{ refreshToken: REDACTED }, { ok: 'keep' }] },
    });
  });

  it('replaces values under short secret names only when they are the whole key, and under full-width keys', () => {
    expect(
      redactSecrets({
        pwd: 'hunter2',
        PIN: '4921',
        card: { cvv: '123', Pass: 'p', OTP: '889911', auth: 'Bearer-less-credential' },
        ＰＡＳＳＷＯＲＤ: 'wide',
        ａｐｉ＿ｋｅｙ: 'wide-key',
        // Substrings of these names in ordinary keys stay.
        shipping: 'express',
        passenger: 'ann',
        author: 'bob',
        design: 'blue',
        pinned: true,
        // As the last word of a longer name (env names, camelCase), but `auth` only whole.
        DB_PASS: 'hunter2',
        smtpPass: 'mail-pw',
        'card.pin': '4921',
        bypass: 'off',
        compass: 'north',
        require_auth: true,
        pinCode: 'keep-me',
        'pass\u200bword': 'zero-width',
        'api\u00adkey': 'soft-hyphen',
      }),
    ).toEqual({
      pwd: REDACTED,
      PIN: REDACTED,
      card: { cvv: REDACTED, Pass: REDACTED, OTP: REDACTED, auth: REDACTED },
      ＰＡＳＳＷＯＲＤ: REDACTED,
      ａｐｉ＿ｋｅｙ: REDACTED,
      shipping: 'express',
      passenger: 'ann',
      author: 'bob',
      design: 'blue',
      pinned: true,
      DB_PASS: REDACTED,
      smtpPass: REDACTED,
      'card.pin': REDACTED,
      bypass: 'off',
      compass: 'north',
      require_auth: true,
      pinCode: 'keep-me',
      'pass\u200bword': REDACTED,
      'api\u00adkey': REDACTED,
    });
  });

  it('finds secret patterns inside ordinary values', () => {
    const jwt =
      'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U';
    expect(redactSecretsInText(`Authorization: Bearer abc.def-123`)).toBe(
      `Authorization: Bearer ${REDACTED}`,
    );
    expect(redactSecretsInText(`token ${jwt} end`)).toBe(`token ${REDACTED} end`);
    expect(redactSecretsInText('key AKIAIOSFODNN7EXAMPLE here')).toBe(`key ${REDACTED} here`);
    expect(redactSecretsInText('postgres://app:s3cret@db.internal:5432/orders')).toBe(
      `postgres://${REDACTED}@db.internal:5432/orders`,
    );
    expect(redactSecretsInText('-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----')).toBe(
      REDACTED,
    );
    expect(redactSecretsInText('DB_PASSWORD=hunter2 other=1')).toBe(`DB_PASSWORD=${REDACTED} other=1`);
    expect(redactSecretsInText('use sk-abcdefghijklmnopqrstuvwx now')).toBe(`use ${REDACTED} now`);
  });

  it.each(SECRETS)('redacts %j', (text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    // Redacting again changes nothing: scrubbers may run twice (tool and boundary).
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it('scans a long run of scheme characters once (no retry from every position)', () => {
    // No time bound: the quadratic scan took about two seconds on 50 KB, so on these 300 KB it would
    // outlast the test's timeout by far, where a linear one takes milliseconds.
    expect(redactSecretsInText(`${'a.'.repeat(150_000)} postgres://u:p@h/db`)).toBe(
      `${'a.'.repeat(150_000)} postgres://${R}@h/db`,
    );
  });

  it('scans escaped and URL-encoded keys and command-line options without a secret after them once (no retry from every key)', () => {
    // As above, no time bound: the texts are 200-340 KB, which a quadratic scan would not finish within
    // the test's timeout.
    const texts = [
      'password\\":\\"'.repeat(20_000),
      `password\\":\\"${'a'.repeat(200_000)}`,
      '%22password%22%3A'.repeat(20_000),
      '%22'.repeat(100_000),
      'token\\" : \\'.repeat(30_000),
      '1234567890:AA'.repeat(20_000),
      'abc8Q~'.repeat(40_000),
      // Command lines: program names and options each pattern may start at, without a password after
      // them (`--user=` inside a `--user=` value once read the rest of the run again from each).
      `${'-p'.repeat(150_000)} mysql`,
      `mysql${' -p -P 1'.repeat(40_000)}`,
      'mysql '.repeat(50_000),
      `mysql ${"-p' ".repeat(75_000)}`,
      `curl ${'-u a:'.repeat(60_000)}`,
      `curl${' -u a'.repeat(75_000)}`,
      `curl -${'u'.repeat(300_000)}`,
      '--user='.repeat(45_000),
      `sshpass${' -P x'.repeat(75_000)}`,
      `mysql ${'-pa '.repeat(100_000)}`,
      // Printed argument lists: an option item each printed-list pattern may start at, its value another
      // option or never closed.
      "', '--password', '".repeat(17_000),
      '","--password","'.repeat(19_000),
      '\\",\\"--password\\",\\"'.repeat(15_000),
      `'--password', '${'a'.repeat(300_000)}`,
      `"--user","${'\\:'.repeat(150_000)}`,
      `curl ${"', '-u', 'a".repeat(25_000)}`,
      "[ '-u', '".repeat(30_000),
      `[ 'curl',${"\n  '-v',".repeat(40_000)}`,
      `'curl', ${"'curl', '-u', ".repeat(20_000)}`,
      `[ 'mysql',${"\n  '-p',".repeat(40_000)}`,
      "'sshpass', '-v', ".repeat(25_000),
      `'sshpass', '-p', '${'a'.repeat(300_000)}`,
      // .netrc entries: a long run of login tokens without a password, and entries that never get one.
      `machine a.b${' login x'.repeat(40_000)}`,
      'machine a.b '.repeat(25_000),
      'default login password '.repeat(13_000),
    ];
    for (const text of texts) expect(redactSecretsInText(text).length).toBeGreaterThan(0);
    expect(redactSecretsInText(`password\\":\\"${'a'.repeat(200_000)}\\"`)).toBe(`password\\":\\"${R}\\"`);
    expect(redactSecretsInText(`mysql ${'-p'.repeat(150_000)}`)).toBe(`mysql -p${R}`);
    expect(redactSecretsInText(`[ ${"'--password', ".repeat(20_000)}'hunter2' ]`)).toBe(
      `[ ${"'--password', ".repeat(20_000)}'${R}' ]`,
    );
  });

  it('keeps a printed argument list valid JSON: an escaped quote or backslash is part of the value', () => {
    const printed = JSON.stringify({
      spawnargs: ['mysql', '--password', 'a"b\\', '--user', 'ann:p"w\\', 'db'],
    });
    expect(JSON.parse(redactSecretsInText(printed))).toEqual({
      spawnargs: ['mysql', '--password', R, '--user', `ann:${R}`, 'db'],
    });
  });

  it('reads a quote escaped at any depth of JSON in JSON strings: the whole value goes, each level stays JSON', () => {
    const secret = 'a"b\\ c hunter2';
    const cases: (readonly [unknown, unknown])[] = [
      [
        { cmd: ['mysql', '--password', secret, '-u', 'root'] },
        { cmd: ['mysql', '--password', R, '-u', 'root'] },
      ],
      [
        { password: secret, user: 'ann' },
        { password: R, user: 'ann' },
      ],
      [
        { cmd: ['curl', '-u', `ann:${secret}`, 'https://x'] },
        { cmd: ['curl', '-u', `ann:${R}`, 'https://x'] },
      ],
      [{ cmd: ['sshpass', '-p', secret, 'ssh', 'h'] }, { cmd: ['sshpass', '-p', R, 'ssh', 'h'] }],
      [{ cmd: ['MYSQL', `-p${secret}`, 'db'] }, { cmd: ['MYSQL', `-p${R}`, 'db'] }],
      [{ spawnargs: ['--user', `ann:${secret}`] }, { spawnargs: ['--user', `ann:${R}`] }],
    ];
    for (const [value, expected] of cases) {
      // Plain JSON, then held by a logger's line once, twice, three and four times over.
      for (let levels = 0; levels <= 4; levels += 1) {
        let text = redactSecretsInText(logged(value, levels));
        for (let level = 0; level < levels; level += 1) text = (JSON.parse(text) as { msg: string }).msg;
        expect(JSON.parse(text), `${levels} levels: ${json(value)}`).toEqual(expected);
      }
    }
  });

  it('scans escaped quotes, capitalised program names and .netrc entries without a secret after them once', () => {
    // No time bound: a scan that read the rest of a 300 KB text again from each start would outlast the
    // test. Each text is a run of what a pattern may start at, its secret never closed or never there.
    const texts = [
      // Keys and printed lists quoted two and more levels down, also mixed, and backslash runs.
      'password\\\\\\":\\\\\\"'.repeat(20_000),
      'password\\":\\"password\\\\\\":\\\\\\"'.repeat(12_000),
      `password\\\\\\":\\\\\\"${'a'.repeat(200_000)}`,
      `password":"${'\\'.repeat(300_000)}`,
      `password":"${'\\"'.repeat(150_000)}`,
      `password=${'\\'.repeat(300_000)}"`,
      '\\\\\\",\\\\\\"--password\\\\\\",\\\\\\"'.repeat(12_000),
      `\\\\\\"--user\\\\\\",\\\\\\"${'\\\\\\\\:'.repeat(50_000)}`,
      `mysql -p${'\\'.repeat(300_000)}"`,
      `--password ${'\\'.repeat(300_000)}"`,
      `Cookie: ${'\\'.repeat(300_000)}"`,
      `Authorization: ${'\\'.repeat(300_000)}"`,
      `__Host-a=${'\\'.repeat(300_000)}"`,
      `"${'\\'.repeat(300_000)}sshpass"`,
      // Program names in capitals.
      'MYSQL '.repeat(50_000),
      'SSHPASS -v '.repeat(25_000),
      `CURL${' -u a'.repeat(75_000)}`,
      '[ \\\\\\"CURL\\\\\\",'.repeat(20_000),
      `'Mysql', ${"'MYSQL', '-p', ".repeat(20_000)}`,
      // .netrc entries of machines without a dot: no login, logins without a password, long tokens.
      'machine db01 '.repeat(25_000),
      'machine db01 login x '.repeat(15_000),
      `machine db01${' account x'.repeat(40_000)}`,
      `machine db01 login ${'x'.repeat(300_000)}:`,
      `machine a.b login x password ${'\\'.repeat(300_000)}"`,
      `machine a.b password ${'\\"'.repeat(150_000)}`,
    ];
    for (const text of texts) expect(redactSecretsInText(text).length).toBeGreaterThan(0);
    expect(redactSecretsInText(`MYSQL ${'-p'.repeat(150_000)}`)).toBe(`MYSQL -p${R}`);
    expect(redactSecretsInText(`password\\":\\"${'a\\\\\\"'.repeat(50_000)}\\"`)).toBe(
      `password\\":\\"${R}\\"`,
    );
  });

  it('scans XML elements, SQL credential clauses and URLs without a secret after them once', () => {
    // No time bound: a scan that read the rest of a 200-340 KB text again from each start would outlast
    // the test. Each text is a run of what a pattern may start at, its secret never closed or never there.
    const texts = [
      // Secret-named elements never closed, with attributes never closed, CDATA sections never closed
      // or holding more starts, quotes inside the text, names that never end.
      '<password>'.repeat(30_000),
      '<password>x'.repeat(28_000),
      '<password a=1 '.repeat(22_000),
      '<password>a</passwor'.repeat(15_000),
      '<password><![CDATA['.repeat(16_000),
      `<password><![CDATA[${'<password>a'.repeat(28_000)}`,
      `<password><![CDATA[${']]'.repeat(150_000)}`,
      `<password>${'" '.repeat(150_000)}`,
      `<${'a:'.repeat(150_000)}`,
      `<${'password'.repeat(37_000)}>x`,
      // Literals never closed: a quote, an escaped quote, backslashes, JSON-escaped quotes, and runs of
      // the keywords whose literal is missing, empty or never closed.
      "IDENTIFIED BY '".repeat(20_000),
      `IDENTIFIED BY '${'a'.repeat(300_000)}`,
      "IDENTIFIED BY 'a\\'".repeat(18_000),
      `IDENTIFIED BY '${'\\'.repeat(300_000)}`,
      `IDENTIFIED BY \\"${'\\\\\\"'.repeat(75_000)}`,
      "IDENTIFIED BY ''".repeat(20_000),
      'IDENTIFIED WITH x BY '.repeat(15_000),
      'ALTER USER '.repeat(28_000),
      'ALTER USER x PASSWORD NULL '.repeat(12_000),
      `CREATE ROLE r${' password x\n'.repeat(25_000)}`,
      "ALTER USER x PASSWORD '' ".repeat(12_000),
      'SET PASSWORD FOR '.repeat(18_000),
      `SET PASSWORD FOR ${'x'.repeat(300_000)}`,
      "[REDACTED]' REPLACE ".repeat(15_000),
      // URL schemes without userinfo, userinfo without a host, `@` runs.
      'https://'.repeat(40_000),
      'https://a'.repeat(35_000),
      `https://${'a@'.repeat(150_000)}`,
      `https://${'a'.repeat(300_000)}`,
    ];
    for (const text of texts) expect(redactSecretsInText(text).length).toBeGreaterThan(0);
    expect(redactSecretsInText(`${'<password>'.repeat(30_000)}x</password>`)).toBe(
      `${'<password>'.repeat(30_000)}${R}</password>`,
    );
    expect(redactSecretsInText(`${'ALTER USER '.repeat(28_000)}PASSWORD 'hunter2'`)).toBe(
      `${'ALTER USER '.repeat(28_000)}PASSWORD '${R}'`,
    );
    expect(redactSecretsInText(`IDENTIFIED BY '${"a''".repeat(100_000)}'`)).toBe(`IDENTIFIED BY '${R}'`);
    expect(redactSecretsInText(`https://${'a@'.repeat(150_000)}host/x`)).toBe(`https://${R}@host/x`);
  });

  it('scans YAML block scalars, webhook URLs, PWD keys and sudo command lines without a secret after them once', () => {
    // No time bound: a scan that read the rest of a 200-340 KB text again from each start would outlast
    // the test. Each text is a run of what a pattern may start at, its secret never there.
    const texts = [
      'password: |\n'.repeat(25_000),
      `password: |\n${'\n'.repeat(300_000)}x`,
      `  password: >-\n${'   \n'.repeat(80_000)}`,
      `${'a'.repeat(300_000)}: |\n  x`,
      `- ${'- '.repeat(150_000)}password: |`,
      'password: |\\n'.repeat(25_000),
      `"password: |\\n${'\\n'.repeat(150_000)}`,
      `"password: |\\n  ${'\\\\'.repeat(150_000)}`,
      `https://hooks.slack.com/services/${'T1/'.repeat(100_000)}`,
      'https://hooks.slack.com/services/T/'.repeat(8_000),
      'https://discord.com/api/webhooks/1/'.repeat(8_000),
      'https://a.webhook.office.com/webhookb2/'.repeat(7_000),
      'PWD='.repeat(75_000),
      `pwd: ${'\\'.repeat(300_000)}`,
      `echo ${'a '.repeat(150_000)}`,
      'echo '.repeat(60_000),
      `echo '${"a'".repeat(150_000)}`,
      `printf ${'%'.repeat(300_000)}`,
      `echo x | sudo${' -u a'.repeat(50_000)}`,
      `echo x | sudo${' -k'.repeat(100_000)}`,
      'sudo -S '.repeat(40_000),
      `sudo -S ${'<<'.repeat(150_000)}`,
      `${'a/'.repeat(150_000)} sudo -S <<<`,
    ];
    for (const text of texts) expect(redactSecretsInText(text).length).toBeGreaterThan(0);
    expect(redactSecretsInText(`password: |\n${'\n'.repeat(300_000)}  x`)).toBe(
      `password: |\n${'\n'.repeat(300_000)}  ${R}`,
    );
    expect(redactSecretsInText(`echo x | sudo${' -k'.repeat(100_000)} -S id`)).toBe(
      `echo ${R} | sudo${' -k'.repeat(100_000)} -S id`,
    );
  });

  it.each(ORDINARY)('leaves ordinary text alone: %j', (text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });

  it('leaves ordinary text alone', () => {
    const text = 'Order 4921000012345678 shipped on 2026-11-29. See https://example.com/track?id=7.';
    expect(redactSecretsInText(text)).toBe(text);
  });

  it('redacts secret patterns inside object keys as well as values', () => {
    const out = redactSecrets({
      'postgres://app:hunter2@db:5432/x': 1,
      nested: [{ 'https://deploy:s3cr3tpass@git.internal/repo': 'v' }],
    }) as Record<string, unknown>;
    expect(JSON.stringify(out)).not.toContain('hunter2');
    expect(JSON.stringify(out)).not.toContain('s3cr3tpass');
    expect(Object.values(out)[0]).toBe(1);
    expect(Object.values((out.nested as Record<string, unknown>[])[0]!)).toEqual(['v']);
  });

  it('keeps a hostile __proto__ key as a key and never touches the prototype', () => {
    const input = JSON.parse('{"__proto__":{"polluted":true,"token":"t"},"a":1}') as Record<string, unknown>;
    const out = redactSecrets(input) as Record<string, unknown>;
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(Object.keys(out)).toEqual(['__proto__', 'a']);
    expect(JSON.stringify(out)).toBe('{"__proto__":{"polluted":true,"token":"[REDACTED]"},"a":1}');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('takes configured keys and does not change its input', () => {
    const input = { pin: '1234', password: 'x' };
    expect(redactSecrets(input, { keys: ['pin'] })).toEqual({ pin: REDACTED, password: 'x' });
    expect(input).toEqual({ pin: '1234', password: 'x' });
  });
});

// A command's arguments as an array (a spawn error's `spawnargs`, a handler's `args`): each item is
// scrubbed alone, so the value after `--password` is read as the next item.
const ARGV_SECRETS: readonly (readonly [readonly string[], readonly string[]])[] = [
  [
    ['mysql', '--password', 'hunter2', '-u', 'root'],
    ['mysql', '--password', R, '-u', 'root'],
  ],
  [
    ['vault', 'login', '--Client-Secret', 'a b c'],
    ['vault', 'login', '--Client-Secret', R],
  ],
  [
    ['curl', '-u', 'admin:hunter2', 'https://x'],
    ['curl', '-u', `admin:${R}`, 'https://x'],
  ],
  [
    ['/usr/bin/curl', '-fsSuadmin:hunter2', '-U', 'p:x y', 'https://x'],
    ['/usr/bin/curl', `-fsSuadmin:${R}`, '-U', `p:${R}`, 'https://x'],
  ],
  // Node's `spawnargs` leave the program out: an array starting with an option takes `-u user:pw`.
  [
    ['-u', 'admin:hunter2', 'https://x'],
    ['-u', `admin:${R}`, 'https://x'],
  ],
  [
    ['docker', 'run', '--user', 'ann:hunter2', '--proxy-user', 'u:p'],
    ['docker', 'run', '--user', `ann:${R}`, '--proxy-user', `u:${R}`],
  ],
  [
    ['sshpass', '-v', '-P', 'assword:', '-p', 'hunter2', 'ssh', '-p', '22', 'host'],
    ['sshpass', '-v', '-P', 'assword:', '-p', R, 'ssh', '-p', '22', 'host'],
  ],
  [
    ['sshpass', '-phunter2', 'scp', '-p', 'a', 'host:b'],
    ['sshpass', `-p${R}`, 'scp', '-p', 'a', 'host:b'],
  ],
  [
    ['mysqldump', '-phunter2', '-u', 'root', '-pother', 'db'],
    ['mysqldump', `-p${R}`, '-u', 'root', `-p${R}`, 'db'],
  ],
  // Program names in any letter case.
  [
    ['MYSQL', '-phunter2', '-u', 'root'],
    ['MYSQL', `-p${R}`, '-u', 'root'],
  ],
  [
    ['C:\\Tools\\SSHPASS.EXE', '-p', 'hunter2', 'ssh', '-p', '22', 'h'],
    ['C:\\Tools\\SSHPASS.EXE', '-p', R, 'ssh', '-p', '22', 'h'],
  ],
  [
    ['/usr/local/bin/Curl', '-u', 'admin:hunter2', 'https://x'],
    ['/usr/local/bin/Curl', '-u', `admin:${R}`, 'https://x'],
  ],
];

// Arrays without a password: another program's `-p` and `-u`, options named like a secret key but not
// one, `--password` before the next option or alone, a user without a password, ordinary words.
const ARGV_ORDINARY: readonly (readonly string[])[] = [
  ['ssh', '-p', '22', 'host'],
  ['docker', 'run', '-u', '1000:1000', 'img'],
  ['sudo', '-u', 'www-data', 'id'],
  ['--password-file', '/run/secrets/x'],
  ['--max-tokens', '1500', '--token-count', '3'],
  ['--password'],
  ['mysql', '--password', '-u', 'root', '-p'],
  ['curl', '-u', 'admin', 'https://x', '--user', 'ann'],
  ['cp', '-pr', 'a', 'b', '-u', 'x:y'],
  ['order', 'shipped', 'today', 'http', 'curl'],
  ['SSH', '-p', '22', 'host'],
  ['MYSQL', '-P', '3306', '-p'],
];

describe('secrets in a command’s argument array', () => {
  it.each(ARGV_SECRETS)('redacts %j', (argv, expected) => {
    expect(redactSecrets({ spawnargs: argv, _meta: { args: [...argv] } })).toEqual({
      spawnargs: expected,
      _meta: { args: expected },
    });
    // Redacting again changes nothing.
    expect(redactSecrets(expected)).toEqual(expected);
  });

  it.each(ARGV_ORDINARY)('leaves %j alone', (...argv) => {
    expect(redactSecrets(argv)).toEqual(argv);
  });

  it('reads a spawn error’s spawnargs as the program’s its path names (Node leaves the program out of them)', () => {
    const spawnError = (path: string, spawnargs: string[]) => ({
      errno: -2,
      code: 'ENOENT',
      path,
      spawnargs,
    });
    expect(redactSecrets(spawnError('mysql', ['-phunter2', '-u', 'root']))).toEqual(
      spawnError('mysql', [`-p${R}`, '-u', 'root']),
    );
    expect(
      redactSecrets({ path: 'C:\\Tools\\SSHPASS.EXE', spawnargs: ['-p', 'hunter2', 'ssh', '-p', '22'] }),
    ).toEqual({
      path: 'C:\\Tools\\SSHPASS.EXE',
      spawnargs: ['-p', R, 'ssh', '-p', '22'],
    });
    expect(redactSecrets({ error: spawnError('/usr/bin/mysqldump', ['-ps3cret', 'db']) })).toEqual({
      error: spawnError('/usr/bin/mysqldump', [`-p${R}`, 'db']),
    });
    // Another program's own short options stay.
    for (const value of [
      spawnError('/usr/bin/ssh', ['-p', '22', 'host']),
      spawnError('cp', ['-p', 'a', 'b']),
    ]) {
      expect(redactSecrets(value)).toEqual(value);
    }
  });

  it('reads an object’s values as no command line', () => {
    const value = { flag: '--password', note: 'hunter2' };
    expect(redactSecrets(value)).toEqual(value);
  });

  it('reports each redacted argument under its pattern’s name, and only for patterns it is given', () => {
    const seen: string[] = [];
    const redact = createSecretRedactor({ onSplitSecret: (name) => seen.push(name) });
    expect(redact(['curl', '-u', 'a:b', '--token', 't'])).toEqual(['curl', '-u', `a:${R}`, '--token', R]);
    expect(seen).toEqual(['cli-user-password', 'cli-option-secret']);
    const ticketsOnly = createSecretRedactor({
      patterns: [{ name: 'ticket', pattern: /TICKET-\d+/g, replace: R }],
    });
    expect(ticketsOnly(['--password', 'hunter2', 'TICKET-1'])).toEqual(['--password', 'hunter2', R]);
  });

  it('reads long arrays of options once', () => {
    // No time bound: a pass that read the rest of the array again from each item would outlast the test.
    const last = (argv: string[]): unknown => (redactSecrets(argv) as string[]).at(-1);
    const options = Array.from({ length: 100_000 }, () => '--password');
    expect(last([...options, 'hunter2'])).toBe(R);
    const pairs = Array.from({ length: 100_000 }, (_, index) => (index % 2 === 0 ? '--password' : 'x'));
    expect(redactSecrets(pairs)).toEqual(pairs.map((item) => (item === 'x' ? R : item)));
    expect(last(['sshpass', ...Array.from({ length: 100_000 }, () => '-v'), '-p', 'hunter2'])).toBe(R);
    expect(last(['curl', ...Array.from({ length: 100_000 }, () => '-u'), 'a:b'])).toBe(`a:${R}`);
  });
});
