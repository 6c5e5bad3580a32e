import { type JwtOptions, JwtVerifier, looksLikeJwt } from '../../../gateway/auth/jwt';
import { type Issuer, jwksOf, makeIssuer, serveJwks } from '../../support/jwt';

const OPTIONS: JwtOptions = {
  jwksUrl: '', jwksFile: 'jwks.json', issuer: 'https://idp.test', audience: 'tensorgate', algorithms: ['ES256', 'RS256'],
  clockToleranceS: 5, groupsClaim: 'scope', modelsClaim: 'models', fetchTimeoutMs: 1000, cacheMaxAgeMs: 600_000, cooldownMs: 30_000,
};
const GOOD = { iss: 'https://idp.test', aud: 'tensorgate', sub: 'alice', scope: 'inference metadata openid' };
const now = (): number => Math.floor(Date.now() / 1000);

let issuer: Issuer;
let other: Issuer;
beforeAll(async () => {
  issuer = await makeIssuer('k1');
  other = await makeIssuer('k2');
});

describe('JwtVerifier with a JWKS file', () => {
  let v: JwtVerifier;
  beforeAll(() => { v = new JwtVerifier(OPTIONS, jwksOf(issuer)); });

  test('a good token: its sub, the scope values that name API groups, its models', async () => {
    const r = await v.verify(await issuer.sign({ ...GOOD, models: ['simple', 'resnet'] }));
    expect(r).toEqual({ grant: { subject: 'alice', groups: new Set(['inference', 'metadata']), models: new Set(['simple', 'resnet']) } });
    // groups as a list; no models claim: every model
    const list = await v.verify(await issuer.sign({ ...GOOD, scope: ['statistics', 'x'] }));
    expect(list).toEqual({ grant: { subject: 'alice', groups: new Set(['statistics']), models: undefined } });
  });

  test('the groups of auth.limits.groupsClaim: a string or a list, names cut to 128 characters, at most 32', async () => {
    const g = new JwtVerifier(OPTIONS, jwksOf(issuer), 'teams');
    const groups = async (teams: unknown): Promise<unknown> => {
      const r = await g.verify(await issuer.sign({ ...GOOD, teams }));
      return (r as { grant: { limitGroups: unknown } }).grant.limitGroups;
    };
    expect(await groups('team-a  team-b')).toEqual(['team-a', 'team-b']);
    expect(await groups(['team-a', 7, ''])).toEqual(['team-a']);
    expect(await groups(undefined)).toEqual([]);
    expect(await groups('x'.repeat(300))).toEqual(['x'.repeat(128)]);
    expect(await groups(Array.from({ length: 100 }, (_, i) => `t${i}`))).toHaveLength(32);
  });

  test.each([
    ['expired', { exp: now() - 60 }, 'the token has expired'],
    ['expired within the clock tolerance is still good', { exp: now() - 2 }, undefined],
    ['not yet valid', { nbf: now() + 60 }, 'the token is not valid yet'],
    ['wrong audience', { aud: 'other' }, 'the token\'s audience is not the one expected (auth.jwt.audience)'],
    ['wrong issuer', { iss: 'https://evil.test' }, 'the token\'s issuer is not the one expected (auth.jwt.issuer)'],
    ['no exp', { exp: undefined }, 'the token has no "exp" claim'],
    ['models not a list', { models: 7 }, 'the token\'s "models" claim is not a list of model names'],
  ])('%s', async (_, claims, invalid) => {
    const r = await v.verify(await issuer.sign({ ...GOOD, ...claims }));
    expect(r).toEqual(invalid === undefined ? expect.objectContaining({ grant: expect.anything() }) : { invalid });
  });

  test('unknown kid, a key not in the JWKS, a forged signature, an algorithm not allowed, not a JWT', async () => {
    expect(await v.verify(await other.sign(GOOD))).toEqual({ invalid: 'no signing key of the JWKS matches the token (kid, alg)' });
    // right kid, wrong key
    expect(await v.verify(await other.sign(GOOD, { kid: 'k1' }))).toEqual({ invalid: 'the token\'s signature does not verify' });
    const good = await issuer.sign(GOOD);
    const [h, p] = good.split('.');
    expect(await v.verify(`${h}.${p}.${'A'.repeat(86)}`)).toEqual({ invalid: 'the token\'s signature does not verify' });
    const es384 = await makeIssuer('k1', 'ES384');
    expect(await new JwtVerifier(OPTIONS, jwksOf(es384)).verify(await es384.sign(GOOD))).toEqual({
      invalid: 'the token\'s algorithm is not allowed (auth.jwt.algorithms)',
    });
    expect(await v.verify('a.b.c')).toEqual({ invalid: 'the token is not a well-formed signed JWT' });
  });

  test('setKeys swaps the keys (file reload)', async () => {
    const w = new JwtVerifier(OPTIONS, jwksOf(issuer));
    const t = await other.sign(GOOD);
    expect(await w.verify(t)).toHaveProperty('invalid');
    w.setKeys(jwksOf(issuer, other));
    expect(await w.verify(t)).toHaveProperty('grant');
    expect(() => w.setKeys({ nope: 1 })).toThrow();
    expect(await w.verify(t)).toHaveProperty('grant');
  });

  test('looksLikeJwt: three base64url segments', () => {
    expect(looksLikeJwt('eyJh.eyJz.c2ln')).toBe(true);
    expect(looksLikeJwt('tok_live_0123456789abcdef')).toBe(false);
    expect(looksLikeJwt('a.b.c.d.e')).toBe(false);
  });
});

describe('JwtVerifier with a JWKS URL', () => {
  test('fetched once and cached; an unknown kid refetches within the cooldown only once; a JWKS that fails is unavailable', async () => {
    const server = await serveJwks(jwksOf(issuer));
    try {
      const v = new JwtVerifier({ ...OPTIONS, jwksFile: '', jwksUrl: server.url, cooldownMs: 60_000 });
      expect(await v.verify(await issuer.sign(GOOD))).toHaveProperty('grant');
      expect(await v.verify(await issuer.sign(GOOD))).toHaveProperty('grant');
      expect(server.fetches).toBe(1);
      // A new key appears at the IdP: a token with its kid is not served until the cooldown passes.
      server.answer = { status: 200, body: JSON.stringify(jwksOf(issuer, other)) };
      expect(await v.verify(await other.sign(GOOD))).toEqual({ invalid: 'no signing key of the JWKS matches the token (kid, alg)' });
      expect(server.fetches).toBe(1);
      const fresh = new JwtVerifier({ ...OPTIONS, jwksFile: '', jwksUrl: server.url, cooldownMs: 0 });
      expect(await fresh.verify(await other.sign(GOOD))).toHaveProperty('grant');

      server.answer = { status: 500, body: 'oops' };
      const down = new JwtVerifier({ ...OPTIONS, jwksFile: '', jwksUrl: server.url });
      expect(await down.verify(await issuer.sign(GOOD))).toEqual({
        unavailable: `the JWKS at ${server.url} could not be fetched: Expected 200 OK from the JSON Web Key Set HTTP response`,
      });
      server.answer = 'hang';
      const slow = new JwtVerifier({ ...OPTIONS, jwksFile: '', jwksUrl: server.url, fetchTimeoutMs: 100 });
      expect(await slow.verify(await issuer.sign(GOOD))).toEqual({
        unavailable: `the JWKS at ${server.url} did not answer within 100 ms (auth.jwt.fetchTimeoutMs)`,
      });
    } finally {
      await server.close();
    }
  });
});
