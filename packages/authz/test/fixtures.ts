import { createSign, KeyObject } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  exportJWK,
  generateKeyPair,
  type JWK,
  type JWSHeaderParameters,
  type JWTPayload,
  SignJWT,
} from 'jose';

export const ISSUER = 'https://auth.example.test';
export const RESOURCE = 'https://orders.example.test/mcp';

type Keys = Awaited<ReturnType<typeof generateKeyPair>>;

/** A real signing key and a JWKS served on loopback HTTP, counting fetches. */
export interface Issuer {
  readonly jwksUrl: string;
  readonly fetches: () => number;
  /** The published keys, as a client downloading the JWKS sees them. */
  readonly jwks: { readonly keys: readonly JWK[] };
  /** While down, the JWKS answers 500 (still counted as a fetch). */
  setDown(down: boolean): void;
  sign(
    payload: JWTPayload,
    options?: {
      kid?: string;
      alg?: string;
      key?: Keys['privateKey'];
      exp?: string | number | false;
      /** More protected header parameters (`typ`, `crit`, `jku`, `jwk`, ...). */
      header?: Partial<JWSHeaderParameters>;
    },
  ): Promise<string>;
  /**
   * A token whose payload is `payloadJson` as written (RS256, `rsa-1`), signed by hand: for payloads
   * JSON.stringify cannot write (thousands of levels deep).
   */
  signText(payloadJson: string): string;
  close(): Promise<void>;
}

export async function startIssuer(): Promise<Issuer> {
  const rsa = await generateKeyPair('RS256');
  const ec = await generateKeyPair('ES256');
  const jwks: { keys: JWK[] } = {
    keys: [
      { ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
      { ...(await exportJWK(ec.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' },
    ],
  };
  let fetches = 0;
  let down = false;
  const server: Server = createServer((req, res) => {
    if (req.url !== '/jwks.json') {
      res.writeHead(404).end();
      return;
    }
    fetches += 1;
    if (down) {
      res.writeHead(500).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    jwksUrl: `http://127.0.0.1:${port}/jwks.json`,
    fetches: () => fetches,
    jwks,
    setDown(value) {
      down = value;
    },
    async sign(payload, options = {}) {
      const alg = options.alg ?? 'RS256';
      const key = options.key ?? (alg === 'ES256' ? ec.privateKey : rsa.privateKey);
      const jwt = new SignJWT({ iss: ISSUER, aud: RESOURCE, ...payload })
        .setProtectedHeader({
          alg,
          kid: options.kid ?? (alg === 'ES256' ? 'ec-1' : 'rsa-1'),
          ...options.header,
        })
        .setIssuedAt();
      if (options.exp !== false) jwt.setExpirationTime(options.exp ?? '5m');
      // jose refuses to sign a `crit` it does not know unless told the extensions are understood.
      const crit = Object.fromEntries((options.header?.crit ?? []).map((name) => [name, true]));
      return jwt.sign(key, { crit });
    },
    signText(payloadJson) {
      const part = (text: string) => Buffer.from(text).toString('base64url');
      const signingInput = `${part(JSON.stringify({ alg: 'RS256', kid: 'rsa-1' }))}.${part(payloadJson)}`;
      const signature = createSign('RSA-SHA256').update(signingInput).sign(KeyObject.from(rsa.privateKey));
      return `${signingInput}.${signature.toString('base64url')}`;
    },
    close: () =>
      new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve()))),
  };
}

/** An unsigned token (`alg: none`), built by hand as an attacker would. */
export function unsignedToken(payload: JWTPayload): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT', kid: 'rsa-1' })}.${part(payload)}.`;
}
