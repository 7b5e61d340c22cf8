import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  InsufficientScopeError,
  InvalidTokenError,
  ServerError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { exportJWK, exportSPKI, generateKeyPair, importJWK, type KeyObject, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AccessTokenInvalidError,
  AccessTokenScopeError,
  AccessTokenUnavailableError,
  createJwtVerifier,
  isAccessTokenError,
  type JwtVerifierOptions,
} from '../src/index.js';
import { ISSUER, type Issuer, RESOURCE, startIssuer, unsignedToken } from './fixtures.js';

let issuer: Issuer;
beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(() => issuer.close());

const verifierFor = (options: Partial<JwtVerifierOptions> = {}) =>
  createJwtVerifier({ jwksUrl: issuer.jwksUrl, issuer: ISSUER, resource: RESOURCE, ...options });

const now = () => Math.floor(Date.now() / 1000);

async function refusal(promise: Promise<unknown>): Promise<Record<string, unknown>> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isAccessTokenError(error)).toBe(true);
  const e = error as AccessTokenInvalidError;
  return {
    name: e.name,
    kind: e.kind,
    status: e.status,
    reason: e.reason,
    errorCode: e.errorCode,
    message: e.message,
  };
}

describe('createJwtVerifier', () => {
  it('maps a valid token onto the SDK AuthInfo (scope string, client_id, exp, every claim in extra)', async () => {
    const token = await issuer.sign({
      sub: 'user-1',
      client_id: 'desk-app',
      scope: 'orders:read  support',
      tenant: 'acme',
    });
    const auth = await verifierFor().verify(token);
    const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as Record<
      string,
      unknown
    >;
    expect(auth).toEqual({
      token,
      clientId: 'desk-app',
      scopes: ['orders:read', 'support'],
      expiresAt: payload.exp,
      resource: new URL(RESOURCE),
      extra: payload,
    });
    expect(auth.extra).toMatchObject({ sub: 'user-1', iss: ISSUER, tenant: 'acme' });
  });

  it('reads scp arrays and azp, accepts ES256 and a configured extra audience (then no resource)', async () => {
    const token = await issuer.sign(
      { sub: 'svc', azp: 'batch', scp: ['orders:read', 7, 'orders:write'], aud: 'orders-api' },
      { alg: 'ES256' },
    );
    const auth = await verifierFor({ audiences: ['orders-api'] }).verify(token);
    expect([auth.clientId, auth.scopes, auth.resource]).toEqual([
      'batch',
      ['orders:read', 'orders:write'],
      undefined,
    ]);
  });

  it('fetches the JWKS once and serves later tokens from the cache', async () => {
    const verifier = verifierFor();
    const before = issuer.fetches();
    for (let i = 0; i < 3; i += 1) await verifier.verify(await issuer.sign({ sub: `u${i}` }));
    expect(issuer.fetches() - before).toBe(1);
  });

  it('refuses an expired token (beyond the 5 s clock tolerance) with 401 invalid_token', async () => {
    const token = await issuer.sign({ sub: 'u' }, { exp: now() - 6 });
    expect(await refusal(verifierFor().verify(token))).toEqual({
      name: 'AccessTokenInvalidError',
      kind: 'invalid_token',
      status: 401,
      reason: 'expired',
      errorCode: 'invalid_token',
      message: 'The token has expired.',
    });
    // Within the tolerance it still passes.
    await expect(
      verifierFor().verify(await issuer.sign({ sub: 'u' }, { exp: now() - 2 })),
    ).resolves.toMatchObject({ clientId: '' });
  });

  it('refuses a token for another audience', async () => {
    const token = await issuer.sign({ sub: 'u', aud: 'https://other.example.test/mcp' });
    expect(await refusal(verifierFor().verify(token))).toMatchObject({ status: 401, reason: 'audience' });
  });

  it('refuses a token from another issuer', async () => {
    const token = await issuer.sign({ sub: 'u', iss: 'https://evil.example.test' });
    expect(await refusal(verifierFor().verify(token))).toMatchObject({ status: 401, reason: 'issuer' });
  });

  it('refuses an unsigned alg:none token without fetching keys', async () => {
    const verifier = verifierFor();
    const before = issuer.fetches();
    const token = unsignedToken({
      iss: ISSUER,
      aud: RESOURCE,
      sub: 'admin',
      exp: now() + 300,
      scope: 'orders:write',
    });
    expect(await refusal(verifier.verify(token))).toMatchObject({ status: 401, reason: 'algorithm' });
    expect(issuer.fetches()).toBe(before);
  });

  it('refuses a token signed by another key under the same kid', async () => {
    const other = await generateKeyPair('RS256');
    const token = await issuer.sign({ sub: 'u' }, { key: other.privateKey, kid: 'rsa-1' });
    expect(await refusal(verifierFor().verify(token))).toMatchObject({ status: 401, reason: 'signature' });
  });

  it('refuses a token signed under a kid the issuer does not publish', async () => {
    const token = await issuer.sign({ sub: 'u' }, { kid: 'rsa-9' });
    expect(await refusal(verifierFor({ jwksCooldownMs: 0 }).verify(token))).toMatchObject({
      status: 401,
      reason: 'unknown_key',
    });
  });

  it('refuses a token without exp', async () => {
    const token = await issuer.sign({ sub: 'u' }, { exp: false });
    expect(await refusal(verifierFor().verify(token))).toMatchObject({
      status: 401,
      reason: 'missing_claim',
      message: 'The token lacks the required exp claim.',
    });
  });

  it('refuses a token with an algorithm outside the configured list', async () => {
    const token = await issuer.sign({ sub: 'u' }, { alg: 'ES256' });
    expect(await refusal(verifierFor({ algorithms: ['RS256'] }).verify(token))).toMatchObject({
      reason: 'algorithm',
    });
  });

  it('refuses garbage as malformed', async () => {
    expect(await refusal(verifierFor().verify('not-a-jwt'))).toMatchObject({
      status: 401,
      reason: 'malformed',
    });
    expect(await refusal(verifierFor().verify(''))).toMatchObject({ status: 401, reason: 'malformed' });
  });

  it('answers a token without a required scope with 403 insufficient_scope naming the scopes', async () => {
    const token = await issuer.sign({ sub: 'u', scope: 'orders:read' });
    const error = await verifierFor({ requiredScopes: ['orders:read', 'mcp'] })
      .verify(token)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AccessTokenScopeError);
    expect(error).toMatchObject({
      kind: 'insufficient_scope',
      status: 403,
      errorCode: 'insufficient_scope',
      requiredScopes: ['orders:read', 'mcp'],
      message: 'The token lacks the scope(s) mcp.',
    });
  });

  it('answers 503 unavailable (not 401) when the JWKS cannot be fetched', async () => {
    const token = await issuer.sign({ sub: 'u' });
    const down = verifierFor({ jwksUrl: `${issuer.jwksUrl.replace('/jwks.json', '')}/missing.json` });
    const error = await down.verify(token).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AccessTokenUnavailableError);
    expect(error).toMatchObject({ kind: 'unavailable', status: 503, errorCode: 'server_error' });
  });

  it('refuses to construct without an audience, issuer or safe key source, or with alg none', () => {
    const base = { jwksUrl: 'https://auth.example.test/jwks.json', issuer: ISSUER, resource: RESOURCE };
    expect(() => createJwtVerifier({ ...base, resource: '' })).toThrow(/resource is required/);
    expect(() => createJwtVerifier({ ...base, resource: undefined as unknown as string })).toThrow(
      /resource is required/,
    );
    expect(() => createJwtVerifier({ ...base, issuer: '' })).toThrow(/issuer is required/);
    expect(() => createJwtVerifier({ ...base, algorithms: ['none'] })).toThrow(/never none/);
    expect(() => createJwtVerifier({ ...base, algorithms: ['HS256'] })).toThrow(/asymmetric/);
    expect(() => createJwtVerifier({ ...base, algorithms: [] })).toThrow(/non-empty/);
    expect(() => createJwtVerifier({ ...base, jwksUrl: 'http://auth.example.test/jwks.json' })).toThrow(
      /https/,
    );
    expect(() => createJwtVerifier({ ...base, clockToleranceSec: -1 })).toThrow(RangeError);
  });
});

describe('createJwtVerifier against hostile tokens', () => {
  it('refuses HS256 keyed with the published RSA public key (algorithm confusion) without fetching keys', async () => {
    const published = issuer.jwks.keys.find((key) => key.kid === 'rsa-1')!;
    const pem = await exportSPKI((await importJWK(published, 'RS256', { extractable: true })) as KeyObject);
    const verifier = verifierFor();
    const before = issuer.fetches();
    for (const secret of [pem, JSON.stringify(published)]) {
      const token = await new SignJWT({ iss: ISSUER, aud: RESOURCE, sub: 'admin', scope: 'orders:write' })
        .setProtectedHeader({ alg: 'HS256', kid: 'rsa-1' })
        .setExpirationTime('5m')
        .sign(new TextEncoder().encode(secret));
      expect(await refusal(verifier.verify(token))).toMatchObject({ status: 401, reason: 'algorithm' });
    }
    expect(issuer.fetches()).toBe(before);
  });

  it('takes keys only from the configured JWKS: a jku or an embedded jwk is never fetched nor trusted', async () => {
    const attacker = await generateKeyPair('RS256');
    let attackerFetches = 0;
    const attackerJwks = createServer((_req, res) => {
      attackerFetches += 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":[]}');
    });
    await new Promise<void>((resolve) => attackerJwks.listen(0, '127.0.0.1', resolve));
    const jku = `http://127.0.0.1:${(attackerJwks.address() as AddressInfo).port}/jwks.json`;
    try {
      const jwk = { ...(await exportJWK(attacker.publicKey)), kid: 'evil-1' };
      const header = { jku, jwk };
      const verifier = verifierFor({ jwksCooldownMs: 0 });
      const underPublishedKid = await issuer.sign({ sub: 'admin' }, { key: attacker.privateKey, header });
      expect(await refusal(verifier.verify(underPublishedKid))).toMatchObject({ reason: 'signature' });
      const underOwnKid = await issuer.sign(
        { sub: 'admin' },
        { key: attacker.privateKey, kid: 'evil-1', header },
      );
      expect(await refusal(verifier.verify(underOwnKid))).toMatchObject({ reason: 'unknown_key' });
      expect(attackerFetches).toBe(0);
    } finally {
      await new Promise((resolve) => attackerJwks.close(resolve));
    }
  });

  it('refuses a critical header it does not understand as malformed (not as an algorithm problem)', async () => {
    const token = await issuer.sign(
      { sub: 'u' },
      { header: { crit: ['urn:example:bind'], 'urn:example:bind': true } },
    );
    expect(await refusal(verifierFor().verify(token))).toEqual({
      name: 'AccessTokenInvalidError',
      kind: 'invalid_token',
      status: 401,
      reason: 'malformed',
      errorCode: 'invalid_token',
      message: 'The token is not a well-formed JWT.',
    });
  });

  it('requires the configured typ header (at+jwt) and accepts its media-type form', async () => {
    const verifier = verifierFor({ typ: 'at+jwt' });
    for (const typ of [undefined, 'JWT']) {
      const token = await issuer.sign({ sub: 'u' }, typ === undefined ? {} : { header: { typ } });
      expect(await refusal(verifier.verify(token))).toMatchObject({ status: 401, reason: 'claim' });
    }
    for (const typ of ['at+jwt', 'application/at+jwt']) {
      await expect(
        verifier.verify(await issuer.sign({ sub: 'u' }, { header: { typ } })),
      ).resolves.toMatchObject({ extra: { sub: 'u' } });
    }
  });

  it('accepts an aud array only when it names this server, and refuses a token not valid yet', async () => {
    const verifier = verifierFor();
    const ours = await verifier.verify(
      await issuer.sign({ sub: 'u', aud: ['https://other.example.test', RESOURCE] }),
    );
    expect(ours.resource).toEqual(new URL(RESOURCE));
    for (const aud of [['https://other.example.test'], [], [`${RESOURCE}/`], [RESOURCE.toUpperCase()]]) {
      expect(await refusal(verifier.verify(await issuer.sign({ sub: 'u', aud })))).toMatchObject({
        status: 401,
        reason: 'audience',
      });
    }
    const early = await issuer.sign({ sub: 'u', nbf: now() + 60 });
    expect(await refusal(verifier.verify(early))).toMatchObject({ status: 401, reason: 'not_yet_valid' });
  });

  it('fetches the JWKS once for a burst of tokens naming unknown kids (no refetch storm)', async () => {
    const verifier = verifierFor();
    const before = issuer.fetches();
    for (let i = 0; i < 10; i += 1) {
      const token = await issuer.sign({ sub: 'u' }, { kid: `rotated-${i}` });
      expect(await refusal(verifier.verify(token))).toMatchObject({ reason: 'unknown_key' });
    }
    expect(issuer.fetches() - before).toBe(1);
  });

  it('refuses a token longer than maxTokenLength as malformed, before parsing it or fetching keys', async () => {
    // A validly signed token: a tenant can make its issuer put arbitrarily large claims into one.
    const large = await issuer.sign({ sub: 'u', pad: 'x'.repeat(20_000) });
    const verifier = verifierFor();
    const before = issuer.fetches();
    expect(await refusal(verifier.verify(large))).toEqual({
      name: 'AccessTokenInvalidError',
      kind: 'invalid_token',
      status: 401,
      reason: 'malformed',
      errorCode: 'invalid_token',
      message: 'The token is too large.',
    });
    expect(await refusal(verifier.verify(`${'a'.repeat(5_000_000)}.b.c`))).toMatchObject({
      reason: 'malformed',
    });
    expect(issuer.fetches()).toBe(before);
    await expect(verifierFor({ maxTokenLength: 32_768 }).verify(large)).resolves.toMatchObject({
      extra: { sub: 'u' },
    });
    expect(() => verifierFor({ maxTokenLength: 0 })).toThrow(RangeError);
  });

  it('keeps verifying with the keys it holds while a failed fetch cools down (an unknown kid cannot lock everyone out)', async () => {
    const own = await startIssuer();
    try {
      const verifier = createJwtVerifier({
        jwksUrl: own.jwksUrl,
        issuer: ISSUER,
        resource: RESOURCE,
        jwksCooldownMs: 0,
        jwksFailureCooldownMs: 60_000,
      });
      const token = await own.sign({ sub: 'u' });
      await expect(verifier.verify(token)).resolves.toMatchObject({ extra: { sub: 'u' } });
      own.setDown(true);
      // A token naming a key the set does not hold makes jose fetch again; the fetch fails.
      const stranger = await own.sign({ sub: 'x' }, { header: { kid: 'no-such-key' } });
      await expect(verifier.verify(stranger)).rejects.toBeInstanceOf(AccessTokenUnavailableError);
      const fetchesDuringOutage = own.fetches();
      // The keys already held still verify their tokens, without a fetch.
      await expect(verifier.verify(token)).resolves.toMatchObject({ extra: { sub: 'u' } });
      await expect(verifier.verify(stranger)).rejects.toBeInstanceOf(AccessTokenUnavailableError);
      expect(own.fetches()).toBe(fetchesDuringOutage);
    } finally {
      await own.close();
    }
  });

  it('does not fetch the JWKS on every request while it is down, and fetches again after jwksFailureCooldownMs', async () => {
    const own = await startIssuer();
    try {
      own.setDown(true);
      const verifier = createJwtVerifier({
        jwksUrl: own.jwksUrl,
        issuer: ISSUER,
        resource: RESOURCE,
        jwksFailureCooldownMs: 300,
      });
      const token = await own.sign({ sub: 'u' });
      for (let i = 0; i < 5; i += 1) {
        const error = await verifier.verify(token).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(AccessTokenUnavailableError);
        expect(error).toMatchObject({ status: 503, message: 'The signing keys could not be fetched.' });
      }
      expect(own.fetches()).toBe(1);
      own.setDown(false);
      await new Promise((resolve) => setTimeout(resolve, 350));
      await expect(verifier.verify(token)).resolves.toMatchObject({ extra: { sub: 'u' } });
      expect(own.fetches()).toBe(2);
      expect(() =>
        createJwtVerifier({
          jwksUrl: own.jwksUrl,
          issuer: ISSUER,
          resource: RESOURCE,
          jwksFailureCooldownMs: -1,
        }),
      ).toThrow(RangeError);
    } finally {
      await own.close();
    }
  });
});

describe('createJwtVerifier: claims nested past 32 levels', () => {
  /** `depth` arrays one inside the other, as a token's JSON payload parses them. */
  const nested = (depth: number): unknown => JSON.parse(`${'['.repeat(depth)}${']'.repeat(depth)}`);

  it('refuses a validly signed token whose claim nests 5,500 arrays deep as malformed (401)', async () => {
    const exp = now() + 300;
    const token = issuer.signText(
      `{"iss":"${ISSUER}","aud":"${RESOURCE}","exp":${exp},"client_id":"c1","x":${'['.repeat(5_500)}${']'.repeat(5_500)}}`,
    );
    expect(token.length).toBeLessThan(16_384);
    expect(await refusal(verifierFor().verify(token))).toEqual({
      name: 'AccessTokenInvalidError',
      kind: 'invalid_token',
      status: 401,
      reason: 'malformed',
      errorCode: 'invalid_token',
      message: 'The token holds a claim nested too deeply.',
    });
  });

  it('refuses one level past the limit, accepts the limit (the payload is the first level)', async () => {
    // payload (1) > x (2) > 31 more arrays: 33 levels.
    const over = await issuer.sign({ sub: 'u', x: nested(32) });
    expect(await refusal(verifierFor().verify(over))).toMatchObject({ status: 401, reason: 'malformed' });
    const deepest = await issuer.sign({ sub: 'u', x: nested(31), realm_access: { roles: ['a'] } });
    expect((await verifierFor().verify(deepest)).extra?.sub).toBe('u');
  });
});

describe('createJwtVerifier: only a failed fetch starts the failure cooldown', () => {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

  it('an unsigned token naming a published key that cannot be imported does not stop refetches (rotation still lands)', async () => {
    const own = await startIssuer();
    try {
      // A key the set publishes but WebCrypto cannot import (not a point on P-256).
      (own.jwks.keys as unknown[]).push({
        kty: 'EC',
        crv: 'P-256',
        x: 'AAAA',
        y: 'AAAA',
        kid: 'broken',
        alg: 'ES256',
        use: 'sig',
      });
      const verifier = createJwtVerifier({
        jwksUrl: own.jwksUrl,
        issuer: ISSUER,
        resource: RESOURCE,
        jwksCooldownMs: 0,
        jwksFailureCooldownMs: 600_000,
      });
      await expect(verifier.verify(await own.sign({ sub: 'u' }))).resolves.toMatchObject({
        extra: { sub: 'u' },
      });
      // Anyone can send this: the key is chosen from the header before any signature is checked.
      const junk = `${part({ alg: 'ES256', kid: 'broken' })}.${part({ sub: 'mallory' })}.AAAA`;
      await expect(verifier.verify(junk)).rejects.toMatchObject({ status: 503 });
      // The authorization server rotates: publishes a new key and signs with it.
      const next = await generateKeyPair('RS256');
      (own.jwks.keys as unknown[]).push({
        ...(await exportJWK(next.publicKey)),
        kid: 'rsa-2',
        alg: 'RS256',
        use: 'sig',
      });
      const before = own.fetches();
      const rotated = await own.sign({ sub: 'v' }, { kid: 'rsa-2', key: next.privateKey });
      await expect(verifier.verify(rotated)).resolves.toMatchObject({ extra: { sub: 'v' } });
      expect(own.fetches() - before).toBe(1);
    } finally {
      await own.close();
    }
  });

  it('a JWKS answering 200 with something that is no key set is a failed fetch: one fetch per cooldown', async () => {
    for (const body of ['not json', '{"keys":"none"}', '[]']) {
      let fetches = 0;
      const server = createServer((_req, res) => {
        fetches += 1;
        res.writeHead(200, { 'content-type': 'application/json' }).end(body);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const verifier = verifierFor({
          jwksUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`,
          jwksFailureCooldownMs: 600_000,
        });
        const token = await issuer.sign({ sub: 'u' });
        for (let i = 0; i < 5; i += 1) {
          await expect(verifier.verify(token)).rejects.toBeInstanceOf(AccessTokenUnavailableError);
        }
        expect(fetches).toBe(1);
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    }
  });
});

describe('with the SDK requireBearerAuth', () => {
  // The SDK middleware's own request/response shape (express), recorded.
  async function answer(verifier: ReturnType<typeof verifierFor>, authorization: string | undefined) {
    const out: {
      status?: number;
      headers: Record<string, string>;
      body?: unknown;
      next: boolean;
      auth?: unknown;
    } = { headers: {}, next: false };
    const req = { headers: authorization === undefined ? {} : { authorization } } as never;
    const res = {
      set(name: string, value: string) {
        out.headers[name.toLowerCase()] = value;
        return res;
      },
      status(code: number) {
        out.status = code;
        return res;
      },
      json(body: unknown) {
        out.body = body;
        return res;
      },
    };
    await requireBearerAuth({
      verifier,
      resourceMetadataUrl: 'https://orders.example.test/.well-known/oauth-protected-resource/mcp',
      expectedResource: new URL(RESOURCE),
    })(req, res as never, () => {
      out.next = true;
    });
    out.auth = (req as { auth?: unknown }).auth;
    return out;
  }

  it('passes a valid token through with its AuthInfo and answers a bad one with 401, a down JWKS with 500', async () => {
    const verifier = verifierFor();
    const ok = await answer(verifier, `Bearer ${await issuer.sign({ sub: 'u', scope: 'orders:read' })}`);
    expect([ok.next, ok.status, (ok.auth as { scopes: string[] }).scopes]).toEqual([
      true,
      undefined,
      ['orders:read'],
    ]);
    const expired = await answer(verifier, `Bearer ${await issuer.sign({ sub: 'u' }, { exp: now() - 60 })}`);
    expect(expired).toEqual({
      status: 401,
      headers: {
        'www-authenticate':
          'Bearer error="invalid_token", error_description="The token has expired.", resource_metadata="https://orders.example.test/.well-known/oauth-protected-resource/mcp"',
      },
      body: { error: 'invalid_token', error_description: 'The token has expired.' },
      next: false,
      auth: undefined,
    });
    const down = verifierFor({ jwksUrl: `${issuer.jwksUrl.replace('/jwks.json', '')}/missing.json` });
    const unavailable = await answer(down, `Bearer ${await issuer.sign({ sub: 'u' })}`);
    expect([unavailable.status, unavailable.next]).toEqual([500, false]);
  });

  it('writes every refusal as a well-formed WWW-Authenticate header (the SDK quotes messages as they are)', async () => {
    // RFC 9110 auth-params: a quoted-string holds no bare `"`; the SDK does not escape the message.
    const authParams = /^Bearer( [a-z_]+="[^"\\]*"(,|$))+$/;
    const cases: Array<[Partial<JwtVerifierOptions>, string, string]> = [
      [{}, await issuer.sign({ sub: 'u' }, { exp: false }), 'The token lacks the required exp claim.'],
      [
        { typ: 'at+jwt' },
        await issuer.sign({ sub: 'u' }, { header: { typ: 'JWT' } }),
        "The token's typ claim is not acceptable.",
      ],
    ];
    for (const [options, token, description] of cases) {
      const out = await answer(verifierFor(options), `Bearer ${token}`);
      const header = out.headers['www-authenticate']!;
      expect([out.status, header]).toEqual([
        401,
        `Bearer error="invalid_token", error_description="${description}", resource_metadata="https://orders.example.test/.well-known/oauth-protected-resource/mcp"`,
      ]);
      expect(header).toMatch(authParams);
    }
  });

  it('answers a token without the required scope with 403', async () => {
    const out = await answer(
      verifierFor({ requiredScopes: ['mcp'] }),
      `Bearer ${await issuer.sign({ sub: 'u', scope: 'orders:read' })}`,
    );
    expect([out.status, out.body]).toEqual([
      403,
      { error: 'insufficient_scope', error_description: 'The token lacks the scope(s) mcp.' },
    ]);
  });

  it('keeps the SDK error classes, so instanceof checks in the SDK hold', () => {
    expect(new AccessTokenInvalidError('x', 'expired')).toBeInstanceOf(InvalidTokenError);
    expect(new AccessTokenScopeError('x', ['a'])).toBeInstanceOf(InsufficientScopeError);
    expect(new AccessTokenUnavailableError('x')).toBeInstanceOf(ServerError);
  });
});

describe('createJwtVerifier against a hostile or broken key server', () => {
  /** A JWKS endpoint on loopback answering with the issuer's keys and `pad` characters of padding. */
  async function paddedJwks(pad: number, chunked: boolean) {
    const body = JSON.stringify({ keys: issuer.jwks.keys, pad: 'x'.repeat(pad) });
    const server = createServer((_req, res) => {
      if (chunked) {
        // No content-length: the size is known only by reading.
        res.writeHead(200, { 'content-type': 'application/json' });
        for (let at = 0; at < body.length; at += 65_536) res.write(body.slice(at, at + 65_536));
        res.end();
      } else {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length }).end(body);
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`,
      close: () => {
        // A refused body leaves its connection mid-response: end it rather than wait for it.
        server.closeAllConnections();
        return new Promise((resolve) => server.close(resolve));
      },
    };
  }

  it('refuses a JWKS larger than maxJwksBytes (declared or streamed) as unavailable, and accepts one within it', async () => {
    const token = await issuer.sign({ sub: 'u' });
    for (const chunked of [false, true]) {
      const huge = await paddedJwks(8 * 1024 * 1024, chunked);
      try {
        const error = await verifierFor({ jwksUrl: huge.url })
          .verify(token)
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(AccessTokenUnavailableError);
        expect(error).toMatchObject({ status: 503, message: 'The signing keys could not be fetched.' });
        expect(String((error as Error).cause)).toBe(
          'Error: The JWKS response is larger than maxJwksBytes (524288 bytes).',
        );
        // Raised for an authorization server that really publishes that much, the same JWKS is used.
        await expect(
          verifierFor({ jwksUrl: huge.url, maxJwksBytes: 16 * 1024 * 1024 }).verify(token),
        ).resolves.toMatchObject({ extra: { sub: 'u' } });
      } finally {
        await huge.close();
      }
      const padded = await paddedJwks(400 * 1024, chunked);
      try {
        await expect(verifierFor({ jwksUrl: padded.url }).verify(token)).resolves.toMatchObject({
          extra: { sub: 'u' },
        });
      } finally {
        await padded.close();
      }
    }
    expect(() => verifierFor({ maxJwksBytes: 0 })).toThrow(RangeError);
  });
});
