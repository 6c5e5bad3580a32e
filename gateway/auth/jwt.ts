// JWT verification (auth.jwt.*) with jose: the signing keys come from a JWKS URL (fetched with a
// timeout, cached for cacheMaxAgeMs, refetched at most once per cooldownMs when a token names an
// unknown `kid`: jose's createRemoteJWKSet) or from a JWKS file (reloaded on change by the
// authenticator). Issuer, audience, allowed algorithms and clock tolerance are checked by
// jwtVerify; `exp` is required, so no token is valid forever. The token's API groups and models
// come from configured claims, and so do its groups for per-group limits (auth.limits.groupsClaim).
import { createLocalJWKSet, createRemoteJWKSet, type JSONWebKeySet, type JWTPayload, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { type ApiCategory, isApiCategory } from '../api-access';
import type { Config } from '../config/schema';
import type { Grant } from './key-file';
import { claimGroups } from './limits';

/** auth.jwt (config/schema.ts documents each key): '' turns a check off, or means "none". */
export type JwtOptions = Config['auth']['jwt'];

/** A verification's result: the grant, a token that is not valid (401), or keys that could not be had (503). */
export type JwtResult = { readonly grant: Grant } | { readonly invalid: string } | { readonly unavailable: string };

/** Groups of a token read for auth.limits.groups at most (the rest are ignored). */
const MAX_LIMIT_GROUPS = 32;

/** Three base64url segments: a JWS in compact form (RFC 7515 §7.1). Anything else is not tried as a JWT. */
export const looksLikeJwt = (token: string): boolean => /^[\w-]+\.[\w-]+\.[\w-]+$/.test(token);

export class JwtVerifier {
  private keys: JWTVerifyGetKey;

  /**
   * `jwks`: the file's parsed content when the keys come from a file. `limitGroupsClaim`: the
   * claim naming the token's groups for auth.limits.groups ('' = none).
   */
  constructor(private readonly o: JwtOptions, jwks?: unknown, private readonly limitGroupsClaim = '') {
    this.keys = o.jwksUrl !== ''
      ? createRemoteJWKSet(new URL(o.jwksUrl), { timeoutDuration: o.fetchTimeoutMs, cacheMaxAge: o.cacheMaxAgeMs, cooldownDuration: o.cooldownMs })
      : createLocalJWKSet(jwks as JSONWebKeySet);
  }

  /** Replaces the keys of a JWKS file (throws, keeping the old ones, when `jwks` is not a JWKS). */
  setKeys(jwks: unknown): void {
    this.keys = createLocalJWKSet(jwks as JSONWebKeySet);
  }

  async verify(token: string): Promise<JwtResult> {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, this.keys, {
        algorithms: [...this.o.algorithms],
        clockTolerance: this.o.clockToleranceS,
        requiredClaims: ['exp'],
        ...(this.o.issuer === '' ? {} : { issuer: this.o.issuer }),
        ...(this.o.audience === '' ? {} : { audience: this.o.audience }),
      }));
    } catch (err) {
      return this.failure(err);
    }
    return grantOf(payload, this.o, this.limitGroupsClaim);
  }

  /** jose's error codes as reasons a client may read: they never quote the token. */
  private failure(err: unknown): JwtResult {
    const e = err as { code?: string; claim?: string; reason?: string; message?: string };
    switch (e.code) {
      case 'ERR_JWT_EXPIRED':
        return { invalid: 'the token has expired' };
      case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
        if (e.claim === 'iss') return { invalid: 'the token\'s issuer is not the one expected (auth.jwt.issuer)' };
        if (e.claim === 'aud') return { invalid: 'the token\'s audience is not the one expected (auth.jwt.audience)' };
        if (e.claim === 'nbf' || e.claim === 'iat') return { invalid: 'the token is not valid yet' };
        if (e.reason === 'missing') return { invalid: `the token has no "${e.claim}" claim` };
        return { invalid: `the token's "${e.claim}" claim is not valid` };
      case 'ERR_JOSE_ALG_NOT_ALLOWED':
        return { invalid: 'the token\'s algorithm is not allowed (auth.jwt.algorithms)' };
      case 'ERR_JWKS_NO_MATCHING_KEY':
      case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
        return { invalid: 'no signing key of the JWKS matches the token (kid, alg)' };
      case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
        return { invalid: 'the token\'s signature does not verify' };
      case 'ERR_JWS_INVALID':
      case 'ERR_JWT_INVALID':
      case 'ERR_JOSE_NOT_SUPPORTED':
        return { invalid: 'the token is not a well-formed signed JWT' };
      case 'ERR_JWKS_TIMEOUT':
        return { unavailable: `the JWKS at ${this.o.jwksUrl} did not answer within ${this.o.fetchTimeoutMs} ms (auth.jwt.fetchTimeoutMs)` };
      default:
        // The remote JWKS: refused, not 200, not a JWKS. A file's keys were checked when read.
        if (this.o.jwksUrl !== '') return { unavailable: `the JWKS at ${this.o.jwksUrl} could not be fetched: ${e.message ?? String(err)}` };
        return { invalid: 'the token does not verify' };
    }
  }
}

/** The claim's values: a space-separated string (OAuth 2.0 `scope`, RFC 8693 §4.2) or a list of strings. */
function claimValues(v: unknown): string[] | undefined {
  if (typeof v === 'string') return v.split(' ').filter((s) => s !== '');
  if (Array.isArray(v) && v.every((x) => typeof x === 'string')) return v;
  return undefined;
}

function grantOf(payload: JWTPayload, o: JwtOptions, limitGroupsClaim: string): JwtResult {
  const groups = new Set<ApiCategory>();
  // Values that name no API group (other scopes of the same issuer) are not this gateway's.
  for (const g of claimValues(payload[o.groupsClaim]) ?? []) if (isApiCategory(g)) groups.add(g);
  let models: ReadonlySet<string> | undefined;
  if (o.modelsClaim !== '' && payload[o.modelsClaim] !== undefined) {
    const list = claimValues(payload[o.modelsClaim]);
    if (list === undefined) return { invalid: `the token's "${o.modelsClaim}" claim is not a list of model names` };
    models = new Set(list);
  }
  const subject = typeof payload.sub === 'string' ? payload.sub.slice(0, 128) : '';
  if (limitGroupsClaim === '') return { grant: { subject, groups, models } };
  // Bounded as the subject is: a token is no place to make the gateway keep thousands of names.
  const limitGroups = claimGroups(payload[limitGroupsClaim]).slice(0, MAX_LIMIT_GROUPS).map((g) => g.slice(0, 128));
  return { grant: { subject, groups, models, limitGroups } };
}
