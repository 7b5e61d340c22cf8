// Round 27 of the secret patterns: a value quoted with JSON's `\u0027` / `\u0022` escape (.NET's JSON
// writer), camelCase keys whose last word is `Pwd`, a YAML block scalar in JSON two and three levels
// down, and `.pgpass` lines. Table rows (what goes, what stays), inputs a quadratic scan would not get
// through, and real tools/call round trips where the secret reaches the model through a failing tool's
// message and `_meta`. The boundary's redaction (core alone) must leave no `hunter2` for the model.
import { execSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { defineTool, fail, REDACTED, redactSecrets, redactSecretsInText } from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';
import { upstreamFailure } from './fixtures/upstream-failure.js';

const R = REDACTED;
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

// JSON of JSON: a string holding `value` as JSON, `depth` times over (1: `\n`, 2: `\\n`, 3: `\\\\n`).
const nest = (value: string, depth: number): string => {
  let out = value;
  for (let level = 0; level < depth; level += 1) out = JSON.stringify({ body: out });
  return out;
};

describe('a value quoted with an escaped quote (\\u0027, \\u0022)', () => {
  it.each([
    ['bare text', 'password=\\u0027a b\\u0027', `password=\\u0027${R}\\u0027`],
    [
      'in a JSON string',
      '{"error":"login failed: password=\\u0027a b\\u0027 rejected"}',
      `{"error":"login failed: password=\\u0027${R}\\u0027 rejected"}`,
    ],
    ['key: value', 'secret: \\u0027a b c\\u0027, retry', `secret: \\u0027${R}\\u0027, retry`],
    ['\\u0022', '{"m":"token=\\u0022a b\\u0022 expired"}', `{"m":"token=\\u0022${R}\\u0022 expired"}`],
    [
      'the other quote inside the value',
      '{"m":"api_key=\\u0027a \\u0022b\\u0022 c\\u0027 bad"}',
      `{"m":"api_key=\\u0027${R}\\u0027 bad"}`,
    ],
    [
      'JSON inside a JSON string (\\\\u0027)',
      '{"log":"{\\"m\\":\\"password=\\\\u0027a b\\\\u0027 no\\"}"}',
      `{"log":"{\\"m\\":\\"password=\\\\u0027${R}\\\\u0027 no\\"}"}`,
    ],
    [
      'never closed: to the end of the JSON string',
      '{"m":"password=\\u0027a b c"}',
      `{"m":"password=\\u0027${R}"}`,
    ],
    [
      'never closed: to the end of the line',
      'password=\\u0027a b\nnext line',
      `password=\\u0027${R}\nnext line`,
    ],
    ['under passwd', 'passwd=\\u0027a b\\u0027', `passwd=\\u0027${R}\\u0027`],
    ['a camelCase Pwd key', 'smtpPwd=\\u0027a b\\u0027', `smtpPwd=\\u0027${R}\\u0027`],
  ])('%s: the whole value goes, the escapes stay', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    // Read again, nothing changes.
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it.each([
    ['prose with an apostrophe', '{"m":"it\\u0027s the wrong user name"}'],
    ['a quoted value under another key', '{"m":"name=\\u0027a b\\u0027 taken"}'],
    ['an empty value', 'user=\\u0027\\u0027'],
    ['a redacted value', `password=\\u0027${R}\\u0027 rejected`],
    ['a value after the key word in prose', 'the password \\u0027policy\\u0027 needs 12 characters'],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });
});

describe('camelCase keys whose last word is Pwd (as the key matcher for objects reads them)', () => {
  it.each([
    ['key=value', 'smtpPwd=hunter2', `smtpPwd=${R}`],
    ['JSON', '{"smtpPwd":"a b","host":"mx"}', `{"smtpPwd":"${R}","host":"mx"}`],
    ['key: value', 'dbPWD: hunter2', `dbPWD: ${R}`],
    ['a dotted name', 'config.mailPwd = hunter2;', `config.mailPwd = ${R};`],
    ['a digit before it', 'db2Pwd=hunter2', `db2Pwd=${R}`],
    ['URL-encoded', 'user=ann&smtpPwd%3Dhunter2&x=1', `user=ann&smtpPwd%3D${R}&x=1`],
    ['JSON inside a JSON string', '{"b":"{\\"ftpPwd\\":\\"a b\\"}"}', `{"b":"{\\"ftpPwd\\":\\"${R}\\"}"}`],
    ['Passwd already read', 'dbPasswd: hunter2', `dbPasswd: ${R}`],
  ])('%s: the value goes', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecrets({ message: text })).toEqual({ message: expected });
  });

  it.each([
    ['the shell working directory', 'PWD=/home/app OLDPWD=/tmp'],
    ['a camelCase Pwd holding a path (a working directory)', 'oldPwd=/srv/app, rootPwd: ~/src'],
    ['a Windows path', '"workerPwd":"C:\\\\app"'],
    ['no word break before it', 'SMTPPWD=x, smtppwd=x, cwd=x'],
    ['Pwd not the last word', 'smtpPwdFile=/etc/x smtpPwdLength=12 hasPwdSet=true'],
    ['a null value', '{"smtpPwd":null}'],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });
});

describe('a YAML block scalar under a secret key in JSON two and three levels down', () => {
  const yaml =
    'stringData:\n  password: |\n    hunter2\n    hunter2-line-2\n  token: >-\n    hunter2-t\n  user: app\n';
  const redacted = `stringData:\n  password: |\n    ${R}\n  token: >-\n    ${R}\n  user: app\n`;

  it.each([2, 3, 4])('depth %i: the block lines go, indicators and other keys stay', (depth) => {
    const text = nest(yaml, depth);
    expect(text).toContain(`\\${'\\'.repeat(2 ** (depth - 1) - 1)}n`);
    expect(redactSecretsInText(text)).toBe(nest(redacted, depth));
    expect(JSON.parse(JSON.parse(redactSecretsInText(text)).body)).toBeTruthy();
  });

  it.each([
    [
      'CRLF line breaks',
      'db:\r\n  - password: >-\r\n      hunter2\r\n  - name: x\r\n',
      `db:\r\n  - password: >-\r\n      ${R}\r\n  - name: x\r\n`,
    ],
    ['a quoted key', 'k:\n  "client_secret": |\n    hunter2\n', `k:\n  "client_secret": |\n    ${R}\n`],
    ['tab indentation', 'k:\n\tpassword: |\n\t\thunter2\n', `k:\n\tpassword: |\n\t\t${R}\n`],
  ])('%s, two levels down', (_name, value, expected) => {
    expect(redactSecretsInText(nest(value, 2))).toBe(nest(expected, 2));
  });

  it.each([
    ['a block under another key', 'description: |\n  the password is rotated\n  weekly\n'],
    ['an indicator with nothing indented under it', 'password: |\nuser: app\n'],
    ['a redacted block', `password: |\n  ${R}\nuser: app\n`],
  ])('%s stays, two levels down', (_name, value) => {
    const text = nest(value, 2);
    expect(redactSecretsInText(text)).toBe(text);
  });
});

describe('.pgpass lines (hostname:port:database:username:password)', () => {
  it.each([
    ['a line', 'localhost:5432:orders:app:hunter2', `localhost:5432:orders:app:${R}`],
    [
      'a file: wildcards, an escaped colon, a comment, a socket directory',
      '# hostname:port:database:username:password\ndb.internal:5432:*:app:hun\\:ter2\n*:*:*:backup:hunter2\n/var/run/postgresql:5432:app:app:pw',
      `# hostname:port:database:username:password\ndb.internal:5432:*:app:${R}\n*:*:*:backup:${R}\n/var/run/postgresql:5432:app:app:${R}`,
    ],
    ['an IPv4 host, CRLF', '10.0.0.7:6432:app:svc:hunter2\r\nnext', `10.0.0.7:6432:app:svc:${R}\r\nnext`],
    [
      'in a JSON string',
      '{"content":"db:5432:orders:app:hunter2\\nreplica:5433:orders:ro:hunter2\\n"}',
      `{"content":"db:5432:orders:app:${R}\\nreplica:5433:orders:ro:${R}\\n"}`,
    ],
    [
      'in JSON inside a JSON string',
      '{"b":"{\\"c\\":\\"db:5432:o:app:hunter2\\\\ndb2:5432:o:app:hunter2\\"}"}',
      `{"b":"{\\"c\\":\\"db:5432:o:app:${R}\\\\ndb2:5432:o:app:${R}\\"}"}`,
    ],
  ])('%s: the password goes', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it.each([
    ['a timestamp', '12:30:45'],
    ['a timestamp with milliseconds', 'tick at 12:30:45:123:456 ok'],
    ['a colon-separated date', '2024:12:07:11:13'],
    ['IPv6 addresses', 'fe80::1:2:3\n2001:db8:85a3:0:0:8a2e:370:7334\nfe80:1:2:3:4'],
    ['host and port', 'db.example.com:5432'],
    ['host, port, database, user', 'db.example.com:5432:orders:app'],
    ['a stack frame', '    at f (/app/x.js:10:5)'],
    ['a log prefix and its message', 'app:1234:worker:info: started\nweb:1:api:warn: slow'],
    ['a MAC address', '00:1a:2b:3c:4d:5e'],
    ['a passwd line', 'root:x:0:0:root:/root:/bin/bash'],
    ['a line inside prose', 'connect to localhost:5432:orders:app failed'],
    ['a Go and a Python source position', 'main.go:42:7: undefined: x\nFile "app.py", line 3'],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });
});

describe('the new patterns on hostile inputs (each read once: a quadratic scan would time out)', () => {
  const size = 200_000;
  const repeat = (unit: string): string => unit.repeat(Math.ceil(size / unit.length));
  it.each([
    [
      'escaped quotes after a key, never closed',
      `password=\\u0027${repeat('a password=')}`,
      `password=\\u0027${R}`,
    ],
    [
      'escaped quotes after keys, each pair a value',
      repeat('token=\\u0027a\\u0027 '),
      `token=\\u0027${R}\\u0027 `.repeat(Math.ceil(size / 'token=\\u0027a\\u0027 '.length)),
    ],
    ['escaped quotes alone', repeat('\\u0027a'), undefined],
    ['a camelCase Pwd name with no separator', `${repeat('aPwd')}b`, undefined],
    ['camelCase Pwd keys with empty values', repeat('aPwd=;'), undefined],
    ['YAML keys at each JSON break, nothing indented', `"${repeat('\\\\n  password: |')}\\\\n"`, undefined],
    ['JSON breaks without a colon', `"${repeat('x\\\\n')}"`, undefined],
    ['pgpass lines one field short', repeat('a:1:b:c:\n'), undefined],
    ['pgpass lines with a space in the password', repeat('a:1:b:c:d e\\n'), undefined],
    ['a long host field', `${repeat('a')}:1:b:c:d e`, undefined],
  ])('%s', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected ?? text);
  });
});

describe('through a real tools/call', () => {
  it('a .NET upstream’s JSON error: escaped-quote values and a camelCase Pwd key go, in message and _meta', async () => {
    const body =
      '{"error":"SMTP login failed: password=\\u0027hunter2 with spaces\\u0027 was rejected",' +
      '"settings":"host=mx.acme.test; smtpPwd=hunter2; port=587","detail":"token=\\u0022hunter2 x\\u0022"}';
    client = await serveTools([
      upstreamFailure('send_mail', 'Sends a mail.', `Upstream 401: ${body}`, { status: 401, body }),
    ]);
    const result = await client.callTool('send_mail', {});
    const envelope = expectFailure(result);
    const redacted =
      `{"error":"SMTP login failed: password=\\u0027${R}\\u0027 was rejected",` +
      `"settings":"host=mx.acme.test; smtpPwd=${R}; port=587","detail":"token=\\u0022${R}\\u0022"}`;
    expect(envelope.message).toBe(`Upstream 401: ${redacted}`);
    expect(result._meta?.['acme/upstream']).toEqual({ status: 401, body: redacted });
    expect(JSON.parse(redacted)).toBeTruthy();
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });

  it('a k8s apply error quoting the request, whose body quotes the manifest: the block goes two levels down', async () => {
    const manifest =
      'apiVersion: v1\nkind: Secret\nstringData:\n  password: |\n    hunter2\n  username: app\n';
    const request = JSON.stringify({ method: 'PATCH', body: JSON.stringify({ manifest }) });
    const message = `apply failed: 422 Unprocessable Entity; request: ${request}`;
    client = await serveTools([
      upstreamFailure('apply_manifest', 'Applies a manifest.', message, { request }),
    ]);
    const result = await client.callTool('apply_manifest', {});
    const envelope = expectFailure(result);
    const clean = `apiVersion: v1\nkind: Secret\nstringData:\n  password: |\n    ${R}\n  username: app\n`;
    const redacted = JSON.stringify({ method: 'PATCH', body: JSON.stringify({ manifest: clean }) });
    expect(envelope.message).toBe(`apply failed: 422 Unprocessable Entity; request: ${redacted}`);
    expect(result._meta?.['acme/upstream']).toEqual({ request: redacted });
    expect(JSON.stringify(result)).not.toContain('hunter2');
  });

  it('Node’s Command failed for a real child process printing its .pgpass: each password goes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'toolgate-pgpass-'));
    const file = join(dir, '.pgpass');
    writeFileSync(file, 'db.internal:5432:orders:app:hunter2\n*:*:*:backup:hunter2-b\n', { mode: 0o600 });
    const tool = defineTool({
      name: 'run_backup',
      description: 'Runs a backup.',
      input: {},
      handler: () => {
        try {
          execSync(`cat "${file}" >&2; exit 2`, { stdio: 'pipe' });
          return fail('internal', 'unexpected success');
        } catch (error) {
          const { message, stderr } = error as Error & { stderr: Buffer };
          const result = fail('unavailable', message);
          result._meta = { ...result._meta, 'acme/backup': { stderr: stderr.toString() } };
          return result;
        }
      },
    });
    try {
      client = await serveTools([tool]);
      const result = await client.callTool('run_backup', {});
      const envelope = expectFailure(result);
      const lines = `db.internal:5432:orders:app:${R}\n*:*:*:backup:${R}\n`;
      expect(envelope.message).toBe(`Command failed: cat "${file}" >&2; exit 2\n${lines}`);
      expect(result._meta?.['acme/backup']).toEqual({ stderr: lines });
      expect(JSON.stringify(result)).not.toContain('hunter2');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
