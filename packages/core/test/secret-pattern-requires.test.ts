import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  createSecretRedactor,
  REDACTED,
  redactSecretsInText,
  SECRET_PATTERNS,
  type SecretPattern,
} from '../src/index.js';

const gated = SECRET_PATTERNS.filter((pattern) => pattern.requires !== undefined);

// Texts each gated pattern matches, in the shapes the redaction tests use.
const MATCHED: readonly string[] = [
  'DB_PASSWORD=hunter2',
  'x_api_key: abc123',
  '"client_secret":"s3cr3t value"',
  '\\"password\\":\\"x y\\"',
  'password%3Dhunter2&next=1',
  '%22client_secret%22%3A%22abc%22',
  'SharedAccessSignature=sig; AccountKey=abc==;',
  '//registry.npmjs.org/:_authToken=npm_abcdef',
  'PIN: 4711',
  'SESSION-ID=abc',
  'mysql --password hunter2',
  'app\u0000--Client-Secret\u0000"a b"',
  "deploy --X_API_KEY\t'k 1'",
  'Command failed: mysql -phunter2 -u root',
  "mariadb-dump\u0000-p'a b'\u0000db",
  'sshpass -p hunter2 ssh host',
  'sshpass -v -P assword: -phunter2',
  'curl -fsSu admin:s3cret https://x',
  'wget\u0000-U\u0000"u:p w"',
  'x --proxy-user u:p',
  "--user='admin:s 3'",
  "spawnargs: [ 'mysql', '--password', 'hunter2' ]",
  '\\"--Client-Secret\\",\\"a b\\"',
  'mysql -pa -u root -pb',
  '["curl","-u","admin:s3cret"]',
  "[\n  'mysql',\n  '-h',\n  'db',\n  '-ps3cret'\n]",
  '["sshpass","-v","-p","s3cret","ssh"]',
  'machine api.example.com\n  login bob\n  password s3cret',
  "[ '-U', 'proxy:s3cret', 'https://x' ]",
  "[\n  '--proxy-user',\n  'u:p'\n]",
  `key material MII${'A'.repeat(64)}== end`,
  `EC key MHcCAQEE${'b'.repeat(48)}`,
  `ed key MC4CAQAw${'c'.repeat(48)}`,
  `MIGHAgEAMBMGByqGSM49${'d'.repeat(48)}`,
  `  ${'e'.repeat(64)}\n  ${'f'.repeat(20)}==\n-----END PRIVATE KEY-----`,
  `${'g'.repeat(64)}\\n${'h'.repeat(20)}\\n-----END RSA PRIVATE KEY-----`,
  '<db:Password type="x">hunter2</db:Password>',
  '{"b":"<apiKey>k<\\/apiKey>"}',
  "ALTER ROLE r LOGIN PASSWORD 'a''b'",
  'create user u identified with mysql_native_password by "x"',
  "SET PASSWORD FOR 'root'@'%' = PASSWORD('x')",
  "[REDACTED]' REPLACE 'old'",
  'password: |\n  hunter2\n  more',
  '  - "client_secret": >- # x\r\n      abc',
  '{"c":"token: >-\\n    abc\\n"}',
  'https://hooks.slack.com/services/T1/B2/s3cret',
  'https:\\/\\/hooks.slack.com\\/triggers\\/T1\\/s3cret',
  'https://ptb.discord.com/api/v10/webhooks/42/t0k',
  'https://acme.webhook.office.com/webhookb2/a@b/IncomingWebhook/c/d',
  'MYSQL_PWD=hunter2',
  "echo -n 'p w' | /usr/bin/sudo -u root -kS id",
  "printf '%s\\n' hunter2 | sudo --stdin id",
  "sudo -S id <<< 'hunter2'",
];

function matches(pattern: SecretPattern, text: string): boolean {
  return new RegExp(pattern.pattern.source, pattern.pattern.flags.replace(/[gy]/g, '')).test(text);
}

describe('SecretPattern.requires: a cheaper test every text the pattern matches passes', () => {
  it('the costly patterns (der-key, key-value-secret and the command-line options) each declare one', () => {
    expect(gated.map((pattern) => pattern.name)).toEqual([
      'der-key',
      'der-key',
      'webhook-url',
      'webhook-url',
      'webhook-url',
      'netrc-password',
      'xml-secret-element',
      'sql-password',
      'sql-password',
      'sql-password',
      'sql-password',
      'yaml-block-secret',
      'yaml-block-secret',
      'key-value-secret',
      'key-value-secret',
      'cli-option-secret',
      'cli-option-secret',
      'cli-option-secret',
      'mysql-password-option',
      'mysql-password-option',
      'mysql-password-option',
      'sshpass-password',
      'sshpass-password',
      'cli-user-password',
      'cli-user-password',
      'cli-user-password',
      'cli-user-password',
      'cli-user-password',
      'sudo-stdin-password',
      'sudo-stdin-password',
    ]);
  });

  it('passes every text of the corpus its pattern matches, and each corpus text is matched by some gated pattern', () => {
    for (const text of MATCHED) {
      const by = gated.filter((pattern) => matches(pattern, text));
      expect(by.length, text).toBeGreaterThan(0);
      for (const pattern of by) expect(pattern.requires!.test(text), `${pattern.name}: ${text}`).toBe(true);
    }
  });

  it('never fails a text its pattern matches: texts built from the patterns’ own pieces and random noise', () => {
    const pieces = [
      'password',
      'PassWd',
      'passphrase',
      'secret',
      'TOKEN',
      'api key',
      'api-key',
      'access_key',
      'private-key',
      'account_key',
      'client_secret',
      'credentials',
      'signature',
      'session_id',
      'session-key',
      '_pass',
      '.pass',
      'pass',
      'pwd',
      'pin',
      'sig',
      '_auth',
      '=',
      ': ',
      '=>',
      '%3D',
      '%3a',
      '%22',
      '"',
      "'",
      '\\"',
      ' ',
      '\t',
      '--',
      '\u0000',
      'mysql',
      'mariadb-dump',
      'sshpass',
      'curl',
      'wget',
      'http',
      ' -p',
      '-P',
      '-u ',
      '-U',
      '-a',
      '-s',
      '-v',
      '--user',
      '--proxy-user',
      '--auth',
      ':',
      '/',
      '&&',
      '|',
      ',',
      "', '",
      '","',
      '[',
      '-pa',
      'hunter2',
      'x',
      '&',
      ';',
      'MII',
      'MIG',
      'AgEA',
      'AgEB',
      'MHcCAQEE',
      'MC4CAQAw',
      'A'.repeat(60),
      '==',
      '\n',
      '\\n',
      '\\r\\n',
      '-----END ',
      'PRIVATE KEY',
      '-----',
      'RSA ',
      ' BLOCK',
      '<',
      '>',
      '</',
      '<\\/',
      '<password>',
      '</password>',
      '<db:',
      '<![CDATA[',
      ']]>',
      'ALTER USER ',
      'create role ',
      ' PASSWORD ',
      'IDENTIFIED ',
      'WITH x ',
      'BY ',
      'SET PASSWORD ',
      'FOR ',
      'PASSWORD(',
      ' REPLACE ',
      '[REDACTED]',
      "''",
      ': |',
      ': >-',
      '|2+',
      '- ',
      '  ',
      '\\t',
      '#',
      '\r\n',
      'https://',
      'https:\\/\\/',
      'hooks.slack.com/',
      'services/',
      'T1/',
      'discord.com/api/',
      'webhooks/',
      '42/',
      'a.webhook.office.com/',
      'webhookb2/',
      'echo ',
      'printf ',
      '%s ',
      ' | ',
      'sudo',
      ' -S',
      '--stdin',
      '<<<',
      'MYSQL_PWD',
      '$',
    ];
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.constantFrom(...pieces), fc.string({ maxLength: 6 })), { maxLength: 14 }),
        (parts) => {
          const text = parts.join('');
          for (const pattern of gated) {
            if (matches(pattern, text))
              expect(pattern.requires!.test(text), `${pattern.name}: ${JSON.stringify(text)}`).toBe(true);
          }
        },
      ),
      { numRuns: 20_000 },
    );
  });

  it('redaction with the gates gives exactly what it gives without them', () => {
    const ungated = SECRET_PATTERNS.map(({ requires: _ignored, ...pattern }) => pattern);
    for (const text of [
      ...MATCHED,
      'order 4000000000007919 shipped',
      'pin the version',
      'the key is in the drawer',
    ]) {
      expect(redactSecretsInText(text)).toBe(redactSecretsInText(text, ungated));
    }
    expect(redactSecretsInText('DB_PASSWORD=hunter2')).toBe(`DB_PASSWORD=${REDACTED}`);
  });

  it('a custom pattern’s global requires is made stateless, so it never skips a text on a stale lastIndex', () => {
    const redact = createSecretRedactor({
      patterns: [{ name: 'ticket', pattern: /TICKET-\d+/g, replace: REDACTED, requires: /TICKET/g }],
    });
    for (let round = 0; round < 3; round += 1) {
      expect(redact({ a: 'see TICKET-1', b: 'and TICKET-22' })).toEqual({
        a: `see ${REDACTED}`,
        b: `and ${REDACTED}`,
      });
    }
  });
});
