import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type AuthOptions, Authenticator, type ReloadEvent } from '../../../gateway/auth/authenticator';
import { jwksOf, makeIssuer } from '../../support/jwt';
import { nextEvent } from '../../support/wait';

const JWT = {
  jwksUrl: '', jwksFile: '', issuer: '', audience: '', algorithms: ['ES256'], clockToleranceS: 0,
  groupsClaim: 'scope', modelsClaim: '', fetchTimeoutMs: 1000, cacheMaxAgeMs: 1000, cooldownMs: 1000,
};
const KEY_A = 'key_a_0123456789abcdef';
const KEY_B = 'key_b_0123456789abcdef';
const keyFile = (...entries: [string, string][]): string =>
  `keys:\n${entries.map(([id, token]) => `  - { id: ${id}, token: ${token}, groups: [inference] }`).join('\n')}\n`;

const dirs: string[] = [];
function dir(): string {
  const d = mkdtempSync(join(tmpdir(), 'tg-auth-'));
  dirs.push(d);
  return d;
}
afterAll(() => { for (const d of dirs) rmSync(d, { recursive: true, force: true }); });

function authenticator(o: Partial<AuthOptions>): Authenticator {
  return new Authenticator({ enabled: true, keysFile: '', keyHeader: '', open: ['health'], jwt: JWT, ...o });
}

describe('credentials from the headers', () => {
  let auth: Authenticator;
  beforeAll(() => {
    const d = dir();
    writeFileSync(join(d, 'keys.yaml'), keyFile(['a', KEY_A]));
    auth = authenticator({ keysFile: join(d, 'keys.yaml'), keyHeader: 'X-API-Key' });
  });
  afterAll(() => auth.close());

  test.each([
    ['Bearer', { authorization: `Bearer ${KEY_A}` }, { kind: 'granted', method: 'key', header: 'authorization' }],
    ['the scheme in any case, extra spaces', { authorization: `bEARER   ${KEY_A}` }, { kind: 'granted', header: 'authorization' }],
    ['the key header', { 'x-api-key': KEY_A }, { kind: 'granted', method: 'key', header: 'x-api-key' }],
    ['Basic is no credential of ours', { authorization: 'Basic dXNlcjpwYXNz' }, { kind: 'missing' }],
    ['Basic, and the key header', { authorization: 'Basic dXNlcjpwYXNz', 'x-api-key': KEY_A }, { kind: 'granted', header: 'x-api-key' }],
    ['nothing', {}, { kind: 'missing' }],
    ['an empty bearer', { authorization: 'Bearer' }, { kind: 'invalid', method: 'none', reason: 'the token is empty' }],
    ['an unknown key', { authorization: `Bearer ${KEY_B}` }, { kind: 'invalid', method: 'key', reason: 'unknown API key' }],
    ['a JWT without JWT verification', { authorization: 'Bearer eyJh.eyJz.c2ln' }, { kind: 'invalid', method: 'key', reason: 'unknown API key' }],
  ])('%s', async (_, headers, expected) => {
    expect(await auth.authenticate(headers)).toMatchObject(expected);
  });

  test('the grant is the key\'s: its id, its groups', async () => {
    const a = await auth.authenticate({ authorization: `Bearer ${KEY_A}` });
    expect(a.kind === 'granted' && [a.grant.subject, [...a.grant.groups]]).toEqual(['a', ['inference']]);
  });
});

describe('reloads', () => {
  test('a changed key file replaces the keys; one that does not load keeps them', async () => {
    const d = dir();
    const path = join(d, 'keys.yaml');
    writeFileSync(path, keyFile(['a', KEY_A]));
    const auth = authenticator({ keysFile: path });
    try {
      let reloaded = nextEvent(auth, 'reload');
      writeFileSync(path, keyFile(['b', KEY_B]));
      expect((await reloaded)[0]).toEqual({ file: 'keys', path, ok: true, keys: 1, plain: ['b'] } satisfies ReloadEvent);
      expect(await auth.authenticate({ authorization: `Bearer ${KEY_B}` })).toMatchObject({ kind: 'granted' });
      expect(await auth.authenticate({ authorization: `Bearer ${KEY_A}` })).toMatchObject({ kind: 'invalid' });

      reloaded = nextEvent(auth, 'reload');
      writeFileSync(path, `keys:\n  - { id: c, token: "${KEY_A}, groups: [inference] }\n`);
      const failed = (await reloaded)[0] as ReloadEvent;
      expect(failed).toMatchObject({ file: 'keys', ok: false });
      expect(failed.problem).toMatch(/^not YAML/);
      expect(failed.problem).not.toContain(KEY_A);
      expect(await auth.authenticate({ authorization: `Bearer ${KEY_B}` })).toMatchObject({ kind: 'granted' });
    } finally {
      auth.close();
    }
  });

  test('a Kubernetes Secret update: the ..data symlink swapped under a file link', async () => {
    const d = dir();
    const v1 = join(d, '..v1');
    const v2 = join(d, '..v2');
    for (const [v, id, token] of [[v1, 'a', KEY_A], [v2, 'b', KEY_B]] as const) {
      rmSync(v, { recursive: true, force: true });
      mkdirSync(v);
      writeFileSync(join(v, 'keys.yaml'), keyFile([id, token]));
    }
    symlinkSync('..v1', join(d, '..data'));
    symlinkSync('..data/keys.yaml', join(d, 'keys.yaml'));
    const auth = authenticator({ keysFile: join(d, 'keys.yaml') });
    try {
      const reloaded = nextEvent(auth, 'reload');
      // What the kubelet does: a new link, renamed over ..data (atomic).
      symlinkSync('..v2', join(d, '..data_tmp'));
      renameSync(join(d, '..data_tmp'), join(d, '..data'));
      expect((await reloaded)[0]).toMatchObject({ ok: true, keys: 1 });
      expect(await auth.authenticate({ authorization: `Bearer ${KEY_B}` })).toMatchObject({ kind: 'granted', grant: { subject: 'b' } });
    } finally {
      auth.close();
    }
  });

  test('a JWKS file reloads too; one that is not JSON keeps the keys', async () => {
    const [k1, k2] = [await makeIssuer('k1'), await makeIssuer('k2')];
    const d = dir();
    const path = join(d, 'jwks.json');
    writeFileSync(path, JSON.stringify(jwksOf(k1)));
    const auth = authenticator({ jwt: { ...JWT, jwksFile: path } });
    try {
      const token = await k2.sign({ scope: 'inference' });
      expect(await auth.authenticate({ authorization: `Bearer ${token}` })).toMatchObject({ kind: 'invalid', method: 'jwt' });
      let reloaded = nextEvent(auth, 'reload');
      writeFileSync(path, JSON.stringify(jwksOf(k1, k2)));
      expect((await reloaded)[0]).toEqual({ file: 'jwks', path, ok: true, keys: 2 });
      expect(await auth.authenticate({ authorization: `Bearer ${token}` })).toMatchObject({ kind: 'granted', method: 'jwt' });
      reloaded = nextEvent(auth, 'reload');
      writeFileSync(path, '{"keys": [');
      expect((await reloaded)[0]).toEqual({ file: 'jwks', path, ok: false, problem: 'not JSON' });
      expect(await auth.authenticate({ authorization: `Bearer ${token}` })).toMatchObject({ kind: 'granted' });
    } finally {
      auth.close();
    }
  });

  test('files that cannot be used stop the start, naming the key and the file', () => {
    const d = dir();
    expect(() => authenticator({ keysFile: join(d, 'absent.yaml') })).toThrow(`auth.keysFile ${join(d, 'absent.yaml')}: cannot be read (ENOENT)`);
    writeFileSync(join(d, 'bad.yaml'), 'keys:\n  - { id: a, token: tooshort_secret, groups: [inference] }\n');
    expect(() => authenticator({ keysFile: join(d, 'bad.yaml') })).toThrow(`auth.keysFile ${join(d, 'bad.yaml')}: keys[0].token: a plain token must have at least 16 characters`);
    writeFileSync(join(d, 'jwks.json'), '{"keys": 1}');
    expect(() => authenticator({ jwt: { ...JWT, jwksFile: join(d, 'jwks.json') } })).toThrow(`auth.jwt.jwksFile ${join(d, 'jwks.json')}: not a JWKS (JSON Web Key Set malformed)`);
  });
});
