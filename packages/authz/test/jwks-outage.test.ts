// During a JWKS outage the verifier answers from the keys it holds; this proves it does so without
// rebuilding (and re-importing) that key set on every request, which a flood would turn into CPU.
import * as jose from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AccessTokenUnavailableError, createJwtVerifier } from '../src/index.js';
import { ISSUER, type Issuer, RESOURCE, startIssuer } from './fixtures.js';

vi.mock('jose', async (importOriginal) => {
  const original = await importOriginal<typeof import('jose')>();
  return { ...original, createLocalJWKSet: vi.fn(original.createLocalJWKSet) };
});

let issuer: Issuer;
beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(() => issuer.close());

describe('createJwtVerifier during a JWKS outage', () => {
  it('builds the held key set once per failed fetch, not once per request', async () => {
    const verifier = createJwtVerifier({
      jwksUrl: issuer.jwksUrl,
      issuer: ISSUER,
      resource: RESOURCE,
      jwksCooldownMs: 0,
      jwksFailureCooldownMs: 60_000,
    });
    const token = await issuer.sign({ sub: 'u' });
    await expect(verifier.verify(token)).resolves.toMatchObject({ extra: { sub: 'u' } });
    issuer.setDown(true);
    const stranger = await issuer.sign({ sub: 'x' }, { header: { kid: 'no-such-key' } });
    await expect(verifier.verify(stranger)).rejects.toBeInstanceOf(AccessTokenUnavailableError);
    const built = vi.mocked(jose.createLocalJWKSet);
    built.mockClear();
    for (let i = 0; i < 50; i += 1) {
      await expect(verifier.verify(token)).resolves.toMatchObject({ extra: { sub: 'u' } });
      await expect(verifier.verify(stranger)).rejects.toBeInstanceOf(AccessTokenUnavailableError);
    }
    expect(built).toHaveBeenCalledTimes(1);
    issuer.setDown(false);
  });
});
