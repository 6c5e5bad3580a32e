// JWTs for the auth tests: a signing key pair made with jose, its public JWKS, tokens with any
// claims, and a JWKS served over HTTP on 127.0.0.1 (closed by the test).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';

export interface Issuer {
  readonly kid: string;
  /** The public key as a JWK (with kid, alg, use). */
  readonly jwk: JWK;
  /** A token with `claims`; exp one hour ahead unless claims say otherwise. */
  sign(claims: JWTPayload, header?: { kid?: string; alg?: string }): Promise<string>;
}

export async function makeIssuer(kid: string, alg = 'ES256'): Promise<Issuer> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  return {
    kid,
    jwk,
    sign(claims, header = {}) {
      const now = Math.floor(Date.now() / 1000);
      return new SignJWT({ iat: now, exp: now + 3600, ...claims }).setProtectedHeader({ alg, kid: header.kid ?? kid }).sign(privateKey);
    },
  };
}

export const jwksOf = (...issuers: Issuer[]): { keys: JWK[] } => ({ keys: issuers.map((i) => i.jwk) });

export interface JwksServer {
  readonly url: string;
  /** Requests served so far. */
  readonly fetches: number;
  /** What the next requests get. */
  answer: { status: number; body: string } | 'hang';
  close(): Promise<void>;
}

export async function serveJwks(jwks: unknown): Promise<JwksServer> {
  let fetches = 0;
  const state: JwksServer = {
    url: '',
    get fetches() { return fetches; },
    answer: { status: 200, body: JSON.stringify(jwks) },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer((req, res) => {
    fetches++;
    const a = state.answer;
    if (a === 'hang') return; // closed by close()
    res.writeHead(a.status, { 'content-type': 'application/json' });
    res.end(a.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(state, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json` });
}
