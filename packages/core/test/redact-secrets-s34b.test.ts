// Round 34b of the secret patterns: an `auth` value that looks like a credential (Docker's config),
// password hashes in htpasswd and shadow lines (and more hash schemes), a password, an API key or a
// token named in prose without `is`, and short names of one-time and card codes (`otp`, `cvv`, ...).
// Table rows (what goes, what stays), inputs a quadratic scan would not get through, and real
// tools/call round trips where the secret reaches the model through a failing tool's message and
// `_meta`: the boundary's redaction (core alone) must leave no `S3cretPw` for the model.
import { afterEach, describe, expect, it } from 'vitest';
import {
  createSecretKeyMatcher,
  REDACTED,
  redactSecrets,
  redactSecretsInText,
  SECRET_PATTERNS,
} from '../src/index.js';
import { expectFailure, serveTools, type TestClient } from '../src/testing.js';
import { upstreamFailure } from './fixtures/upstream-failure.js';

const R = REDACTED;
let client: TestClient | undefined;
afterEach(async () => {
  await client?.close();
  client = undefined;
});

// `bob:S3cretPw`, `alice:hunter2`, `admin:admin123`, `bob@example.com:p@ss w0rd`, `deploy:S3cretPw99`.
const BOB = 'Ym9iOlMzY3JldFB3';
const ALICE = 'YWxpY2U6aHVudGVyMg==';
const ADMIN = 'YWRtaW46YWRtaW4xMjM=';
const MAIL = 'Ym9iQGV4YW1wbGUuY29tOnBAc3MgdzByZA==';
const DEPLOY = 'ZGVwbG95OlMzY3JldFB3OTk=';

describe('an auth value that looks like a credential', () => {
  it.each([
    [
      "Docker's config.json",
      `{"auths":{"registry.example.com":{"auth":"${BOB}"}}}`,
      `{"auths":{"registry.example.com":{"auth":"${R}"}}}`,
    ],
    ['pretty-printed', `{\n  "auth": "${DEPLOY}"\n}`, `{\n  "auth": "${R}"\n}`],
    ['padded, a space after the colon', `"auth": "${ALICE}"`, `"auth": "${R}"`],
    ['key=value', `auth=${BOB}`, `auth=${R}`],
    ['key: value', `auth: ${ADMIN}`, `auth: ${R}`],
    ['a user that is an e-mail, a password with a space', `auth=${MAIL}`, `auth=${R}`],
    ['capitals', `"Auth": "${BOB}" AUTH=${BOB}`, `"Auth": "${R}" AUTH=${R}`],
    ['the last word of a name', `X_AUTH=${BOB}; basic-auth: ${ALICE}`, `X_AUTH=${R}; basic-auth: ${R}`],
    ['single quotes', `{'auth': '${BOB}'}`, `{'auth': '${R}'}`],
    ['JSON inside a JSON string', `{"b":"{\\"auth\\":\\"${BOB}\\"}"}`, `{"b":"{\\"auth\\":\\"${R}\\"}"}`],
    ['URL-encoded', `?auth%3D${BOB}&x=1`, `?auth%3D${R}&x=1`],
    ['unpadded', 'auth=YWxpY2U6aHVudGVyMg', `auth=${R}`],
    ['at the end of a sentence', `using auth=${BOB}.`, `using auth=${R}.`],
    ['a long token', 'auth: 3f9a2c81d0e94b7f5a61abcd', `auth: ${R}`],
    ['a UUID', '"auth":"3f2b8c1e-9a4d-4c1b-8f5e-2d7a6b9c0e1f"', `"auth":"${R}"`],
  ])('%s: the value goes', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it.each([
    ['a scheme', 'auth=none; "auth":"basic"; auth: required; auth: bearer; auth=md5; auth: trust'],
    ['settings in capitals', 'auth: LDAP; AUTH=Kerberos; "auth":"OAuth2"; auth: SigV4; auth=NTLM'],
    ['booleans and nulls', 'auth=true "auth":false auth: null require_auth=yes'],
    ['short base64 with a colon', 'auth=YTpi'],
    ['base64 without a colon', 'auth=SGVsbG8gd29ybGQh "auth":"dXNlcm5hbWVvbmx5"'],
    ['base64 that is no text', 'auth=/////////w=='],
    ['a setting named in words', 'auth: oauth2-client-credentials-v2; auth=scram_sha_256'],
    ['a path', 'auth: /etc/app/credentials/htpasswd-01; auth=./secrets/registry-auth-2'],
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a CI workflow's expression, not a template
    ['a template', 'auth: ${{ secrets.REGISTRY_AUTH }}; auth=$REGISTRY_AUTH_2024_TOKEN'],
    ['a URL', 'auth: https://login.example.com/oauth2/v1/authorize'],
    ['a date', 'auth=2026-12-07T10:00:00Z'],
    ['a token without a digit', 'auth: abcdefghijklmnopqrstuvwxyz'],
    ['a short token', 'auth: a1b2c3d4e5f6'],
    ['words that hold auth', 'author: Ym9iOlMzY3JldFB3x; oauth=abc; authorization required'],
    ['camelCase', `basicAuth=${BOB}`],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });

  it('the object key matcher still reads auth only whole', () => {
    expect(redactSecrets({ auths: { r: { auth: BOB } }, require_auth: true })).toEqual({
      auths: { r: { auth: R } },
      require_auth: true,
    });
  });
});

describe('password hashes', () => {
  const apr1 = '$apr1$abcdefgh$ABCDEFGHIJKLMNOPQRSTU.';
  const md5 = '$1$saltsalt$qwertyuiopasdfghjklzx/';
  const yescrypt = '$y$j9T$F5Jx5fExrKuPp53xLKQ..1$X3DX6M94c7o.9agCG9G317fhZg9SqC.5i5rd.RhAtQ7';
  it.each([
    ['an htpasswd line (apr1)', `bob:${apr1}`, `bob:${R}`],
    ['MD5-crypt anywhere', `hash ${md5} stored`, `hash ${R} stored`],
    ['yescrypt anywhere', `"hash":"${yescrypt}"`, `"hash":"${R}"`],
    [
      'a shadow line, its other fields kept',
      'root:$6$saltsalt$hashhashhashhashhashhashhashhashhash:19000:0:99999:7:::',
      `root:${R}:19000:0:99999:7:::`,
    ],
    [
      'a shadow line, a locked hash',
      'app:!$6$saltsalt$hashhashhashhash:19000:0:99999:7:::',
      `app:${R}:19000:0:99999:7:::`,
    ],
    ['a shadow line, DES', 'bin:ab01FAX.bQRSU:19000::99999:7:::', `bin:${R}:19000::99999:7:::`],
    ['an htpasswd line, bcrypt cut short', 'ann:$2y$10$abcdefghijklmnopqrstuu', `ann:${R}`],
    ['an htpasswd file, one line each', `bob:${apr1}\nann:$2y$05$abcdefghij\n`, `bob:${R}\nann:${R}\n`],
    [
      'a shadow line in a JSON string',
      '{"out":"root:$6$abc$defdefdefdef:19000:0:99999:7:::\\nbin:*:19000:0:99999:7:::"}',
      `{"out":"root:${R}:19000:0:99999:7:::\\nbin:*:19000:0:99999:7:::"}`,
    ],
    ['argon2 without v=', '$argon2i$m=4096,t=3,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA', R],
    ['LDAP {SSHA}', 'userPassword: {SSHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=', `userPassword: ${R}`],
    ['{SHA} in htpasswd', 'bob:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=', `bob:${R}`],
    ['{SSHA512}, {CRYPT}', '{SSHA512}abcdefghijklmnop {CRYPT}ab01FAX.bQRSU', `${R} ${R}`],
    ['{PBKDF2-SHA256}', '{PBKDF2-SHA256}10000$c2FsdA$aGFzaGhhc2g', R],
    ['Dovecot {SHA512-CRYPT}', 'bob:{SHA512-CRYPT}$6$salt$short::', `bob:${R}::`],
    ['Django pbkdf2', 'pbkdf2_sha256$600000$abcSalt$Zm9vYmFyYmF6cXV4cXV1eHh4eHh4eA==', R],
  ])('%s: the hash goes', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it.each([
    ['a shadow line without a password', 'bin:*:19000:0:99999:7:::\nsync:!:19000::::::\nnobody:!!:19000::'],
    ['an /etc/passwd line', 'root:x:0:0:root:/root:/bin/bash'],
    ['prices and shell arguments', 'price:$5$ each; cost:$5$10$15; echo a:$1$2'],
    ['a Redis key, a time, a URL', 'session:1234:user:profile:v1 at 12:30:45 via https://x.example/$1$'],
    ['13 characters before fewer fields', 'id:ABCDEFGHIJKLM:12 and key:abcdefghijklm:x'],
    ['a template placeholder', 'git checkout {SHA}; /builds/{SHA}/artifacts/build12345678; {sha}abc'],
    ['a crypt id without a hash', 'format is $6$ or $2y$; use $apr1$ for Apache'],
    ['a bcrypt hash cut short outside a line', 'hash $2y$10$abcdefghijklmnopqrstuu'],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });
});

describe('a password, token or API key named in prose', () => {
  it.each([
    ['password and a value', 'password S3cretPw', `password ${R}`],
    ['mid-sentence', 'login with password S3cretPw failed', `login with password ${R} failed`],
    ['passphrase and a value', 'passphrase c0rrect#horse9', `passphrase ${R}`],
    ['quoted', "password 'p@ssw0rd'", `password '${R}'`],
    ['for a user, is', 'Password for bob is S3cretPw', `Password for bob is ${R}`],
    [
      'for a user, was',
      'the password for ann@example.com was Xk92pq!',
      `the password for ann@example.com was ${R}!`,
    ],
    ['for a quoted user, a colon', "Password for 'bob': S3cretPw9.", `Password for 'bob': ${R}.`],
    ['a token for a user', 'token for svc-ci is abc123xyz9', `token for svc-ci is ${R}`],
    ['api-key and a key', 'api-key abcdef0123456789', `api-key ${R}`],
    ['API key is', 'The API key is k3y0123456789.', `The API key is ${R}.`],
    ['invalid api key, quoted', "invalid api key 'abc123def456'", `invalid api key '${R}'`],
    ['a header name without its colon', 'x-api-key abcd1234efgh5678', `x-api-key ${R}`],
    ['apikey, a UUID', 'apikey 3f2b8c1e-9a4d-4c1b-8f5e-2d7a6b9c0e1f', `apikey ${R}`],
    ['api key: (the key rule)', 'api key: abcdef0123456789', `api key: ${R}`],
    [
      'in a JSON string',
      '{"error":"password S3cretPw rejected; api-key abcdef0123456789"}',
      `{"error":"password ${R} rejected; api-key ${R}"}`,
    ],
  ])('%s: the value goes', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it.each([
    ['password reset', 'password reset required; password expired; Enter password twice'],
    ['password for a user, no value', 'password for bob is incorrect; password for bob: required'],
    ['password for more words', 'password for the user is abc12345'],
    ['a policy', 'password policy v2 applies; password length 12; password hashing uses argon2id'],
    ['a hash name', 'password sha256; password bcrypt-hashed; passphrase 4-words'],
    ['digits alone, letters alone', 'password 12345678; password dragon'],
    ['a version', 'password v1.2.3 released; the password is v2.0.1-rc1'],
    ['a keyword inside a word', 'password123 is weak; mypassword S3cretPw; --password-file x1y2z3'],
    ['api key without a key', 'api key missing; api-key header required; API key is invalid'],
    ['a short api key', 'api key v1beta1; api key abc123'],
    ['an api key setting in words', 'api key rotation-policy2; api key ABCDEFGHIJKL'],
    ['a date', 'api key 2026-12-07T10:00:00Z'],
    // url-allowlist's own refusal (CI caught the first version of the rule garbling it).
    [
      'an aside in brackets',
      'URLs with a user name or password (user@host) are not accepted; password [see docs#4]',
    ],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });
});

describe('short names of one-time and card codes', () => {
  it.each([
    ['otp', 'otp=123456', `otp=${R}`],
    ['cvv', 'cvv=123', `cvv=${R}`],
    ['cvc, a JSON string', '{"cvc":"123","exp":"12/27"}', `{"cvc":"${R}","exp":"12/27"}`],
    ['cvv2 as a JSON number', '{"cvv2":123}', `{"cvv2":${R}}`],
    ['totp', 'totp: 889911', `totp: ${R}`],
    ['mfa_code', 'mfa_code=889911&user=ann', `mfa_code=${R}&user=ann`],
    [
      'the last word of a name',
      'SMS_OTP=123456 card.cvv=999 user-2fa-code: 12345678',
      `SMS_OTP=${R} card.cvv=${R} user-2fa-code: ${R}`,
    ],
    [
      'camelCase',
      'smsOtp=123456 cardCVV=123 userMfaCode=889911 totpCode: 889911',
      `smsOtp=${R} cardCVV=${R} userMfaCode=${R} totpCode: ${R}`,
    ],
    // The property test's counterexample: the camelCase names take a `2` too, and the requires gate must.
    ['a camelCase name with a 2', 'smsOtp2:0 cardCvc2=123', `smsOtp2:${R} cardCvc2=${R}`],
    ['a backup code', '"otp":"a1b2-c3d4"', `"otp":"${R}"`],
    ['JSON inside a JSON string', '{"b":"{\\"otp\\":\\"123456\\"}"}', `{"b":"{\\"otp\\":\\"${R}\\"}"}`],
  ])('%s: the value goes', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected);
    expect(redactSecretsInText(expected)).toBe(expected);
  });

  it.each([
    ['a setting', 'otp: required; cvv=none; "totp":"enabled"; mfa_code: invalid; otp=true'],
    ['names that hold the word', 'cvv_required=true otp_enabled: yes otpLength=6 cvvCheck=2'],
    ['an otpauth URI', 'otpauth://totp/Example:alice?issuer=Example&digits=6&period=30'],
    ['no word break', 'SMSOTP=123456 xotp=1 bigcvv=1 cvvv=123'],
    ['prose', 'enter the otp 123456 below; the CVV is 3 digits'],
    ['a code in a later field', 'otp=abc&x=1'],
  ])('%s stays', (_name, text) => {
    expect(redactSecretsInText(text)).toBe(text);
  });

  it('the object key matcher names the same codes', () => {
    const isSecretKey = createSecretKeyMatcher();
    for (const key of [
      'otp',
      'totp',
      'cvv',
      'cvc',
      'cvv2',
      'cvc2',
      'SMS_OTP',
      'smsOtp',
      'cardCVV',
      'user.totp',
    ]) {
      expect(isSecretKey(key), key).toBe(true);
    }
    for (const key of ['mfa_code', 'mfaCode', 'userMfaCode', 'otp_code', 'totpCode', '2fa_code']) {
      expect(isSecretKey(key), key).toBe(true);
    }
    for (const key of ['otpauth', 'otp_enabled', 'cvv_required', 'otpLength', 'code', 'zip_code', 'author']) {
      expect(isSecretKey(key), key).toBe(false);
    }
  });
});

describe('the new rules on hostile inputs (each read once: a quadratic scan would time out)', () => {
  const size = 200_000;
  const repeat = (unit: string): string => unit.repeat(Math.ceil(size / unit.length));
  it.each([
    ['auth= over and over', repeat('auth='), undefined],
    ['x_auth= over and over', repeat('x_auth='), undefined],
    ['"auth":" over and over', repeat('"auth":"'), undefined],
    ['auth and base64 without a colon, then no end', `auth=${repeat('SGVs')}#`, undefined],
    ['auth and base64 with colons, then no end', `auth=${repeat('Ym9iOlMz')}#`, undefined],
    ['auth and a token without a digit', `auth=${repeat('a')}`, undefined],
    ['auth and a token, then no end', `auth=${repeat('a1')}#`, undefined],
    ['auth and words', `auth=${repeat('ab-')}ab`, undefined],
    ['a long name before auth', `${repeat('a_')}auth=none`, undefined],
    ['otp= over and over', repeat('otp='), undefined],
    ['"otp":" over and over', repeat('"otp":"'), undefined],
    ['mfa_code= over and over', repeat('mfa_code='), undefined],
    ['a long camelCase name', `${repeat('aB')}Otp`, undefined],
    ['a long name before otp', `${repeat('a_')}otp=1`, `${repeat('a_')}otp=${R}`],
    ['user:$1$ over and over', repeat(' a:$1$'), undefined],
    ['user:$1$ and no second $', ` a:$1$${repeat('x')}`, undefined],
    ['hash lines after =', repeat('=a:$1$xxxxxxxx'), undefined],
    ['a run of !', ` a:${repeat('!')}`, undefined],
    ['DES-shaped fields without the rest', repeat(' a:abcdefghijklm:1'), undefined],
    ['$y$ over and over', repeat('$y$'), undefined],
    ['$7$ and a long run', `$7$${repeat('a')}`, undefined],
    ['{SHA} over and over', repeat('{SHA}'), undefined],
    ['pbkdf2 over and over', repeat('pbkdf2_sha256$1$'), undefined],
    ['password for, over and over', repeat('password for '), undefined],
    ['password for x, over and over', repeat('password for x '), undefined],
    ['password and a long word', `password ${repeat('a')}`, undefined],
    ['api key, over and over', repeat('api key is '), undefined],
    ['api-key and a long run', `api-key ${repeat('a')}`, undefined],
    ['api-key and a long compound', `api-key ${repeat('ab-')}ab`, undefined],
  ])('%s', (_name, text, expected) => {
    expect(redactSecretsInText(text)).toBe(expected ?? text);
  });

  it('ordinary argument strings pass no new pattern’s cheaper test', () => {
    const gates = SECRET_PATTERNS.filter(
      (pattern) =>
        pattern.name === 'auth-credential' ||
        pattern.name === 'password-hash' ||
        pattern.pattern.source.includes('(?:Otp|OTP|Totp') ||
        pattern.pattern.source.includes('api[ _-]?key[ \\t]+(?:'),
    ).map((pattern) => pattern.requires);
    expect(gates).toHaveLength(6);
    expect(gates.every((gate) => gate !== undefined)).toBe(true);
    for (const text of [
      'ord_123',
      'alice@example.com',
      'search',
      '2026-12-07T10:00:00Z',
      'Compass 12:30:45',
      'author Ann',
      '3f2b8c1e-9a4d-4c1b-8f5e-2d7a6b9c0e1f',
    ]) {
      for (const gate of gates) expect(gate?.test(text), `${gate}: ${text}`).toBe(false);
    }
  });
});

describe('through a real tools/call', () => {
  it('a registry login failure: Docker auth, an htpasswd line and a shadow line go, the rest stays', async () => {
    const config = `{"auths":{"registry.example.com":{"auth":"${BOB}"}},"credsStore":"","auth":"none"}`;
    const message =
      `docker login failed with config ${config}; ` +
      'htpasswd has bob:$apr1$abcdefgh$ABCDEFGHIJKLMNOPQRSTU. and the host root:$6$S3cretPw$abcdefghijklmnop:19000:0:99999:7:::';
    client = await serveTools([
      upstreamFailure('push_image', 'Pushes an image.', message, {
        config,
        line: `X_AUTH=${DEPLOY} auth=basic`,
      }),
    ]);
    const result = await client.callTool('push_image', {});
    const envelope = expectFailure(result);
    const clean = `{"auths":{"registry.example.com":{"auth":"${R}"}},"credsStore":"","auth":"none"}`;
    expect(envelope.message).toBe(
      `docker login failed with config ${clean}; htpasswd has bob:${R} and the host root:${R}:19000:0:99999:7:::`,
    );
    expect(result._meta?.['acme/upstream']).toEqual({ config: clean, line: `X_AUTH=${R} auth=basic` });
    expect(JSON.parse(clean)).toBeTruthy();
    const seen = JSON.stringify(result);
    for (const leak of [BOB, DEPLOY, 'S3cretPw', 'ABCDEFGHIJKLMNOPQRSTU']) expect(seen).not.toContain(leak);
  });

  it('a checkout failure: prose passwords, an API key, an OTP and a CVV go; settings stay', async () => {
    const message =
      'Password for bob is S3cretPw; retried with password S3cretPw2 and api-key abcdef0123456789S3cretPw. ' +
      'otp: required, cvv=none';
    client = await serveTools([
      upstreamFailure('checkout', 'Checks out a cart.', message, {
        request: '{"card":{"number":"[masked]","cvv":"739"},"otp":"889911","mfa_code":889911}',
        form: 'smsOtp=889911&cvv_required=true',
      }),
    ]);
    const result = await client.callTool('checkout', {});
    const envelope = expectFailure(result);
    expect(envelope.message).toBe(
      `Password for bob is ${R}; retried with password ${R} and api-key ${R}. otp: required, cvv=none`,
    );
    expect(result._meta?.['acme/upstream']).toEqual({
      request: `{"card":{"number":"[masked]","cvv":"${R}"},"otp":"${R}","mfa_code":${R}}`,
      form: `smsOtp=${R}&cvv_required=true`,
    });
    const seen = JSON.stringify(result);
    for (const leak of ['S3cretPw', '739', '889911', 'abcdef0123456789']) expect(seen).not.toContain(leak);
  });
});
