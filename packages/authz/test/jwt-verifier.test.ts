import {
  InsufficientScopeError,
  InvalidTokenError,
  ServerError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { generateKeyPair } from 'jose';
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
      message: 'The token lacks the required "exp" claim.',
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
