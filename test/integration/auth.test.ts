// Authentication through the real gateway on the reference backend: every API group, pass-through
// and declarative routes included, answered 401 without credentials, 403 with credentials that
// lack the group, and let through with ones that have it; model restriction; the refusal before the
// body is read; the credential kept from a pass-through upstream; the key file reloaded; JWTs from
// a JWKS file and a JWKS URL; the decisions in the metrics; per-identity limits of JWTs and keys.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { API_CATEGORIES, type ApiCategory } from '../../gateway/api-access';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';
import { type Issuer, jwksOf, makeIssuer, serveJwks } from '../support/jwt';
import { prometheusSamples } from '../support/prometheus';
import { RecordTap } from '../support/records';
import { accessLine } from '../../gateway/telemetry/logger';
import type { Logger } from 'pino';
import { nextEvent } from '../support/wait';

const ALL = 'all_groups_0123456789abcdef';
const IDLE = 'no_groups_0123456789abcdef';
const SIMPLE = 'simple_only_0123456789abcdef';
const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
const KEYS = [
  'keys:',
  `  - { id: all, token: "${sha(ALL)}", groups: "*" }`,
  `  - { id: idle, token: "${sha(IDLE)}", groups: [] }`,
  `  - { id: simple-only, token: ${SIMPLE}, groups: [inference, metadata], models: [simple] }`,
].join('\n');

const SIMPLE_INFER = '{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}';

type Target = ApiCategory | 'passthrough' | 'declarative';
/** One request per API group, a pass-through and a declarative route: method, path, body, status when let through. */
const PROBE: Record<Target, [string, string, string | undefined, number]> = {
  health: ['GET', '/v2/health/ready', undefined, 200],
  metadata: ['GET', '/v2/models/simple', undefined, 200],
  inference: ['POST', '/v2/models/simple/infer', SIMPLE_INFER, 200],
  'shared-memory': ['GET', '/v2/systemsharedmemory/status', undefined, 200],
  'model-config': ['GET', '/v2/models/simple/config', undefined, 200],
  'model-repository': ['POST', '/v2/repository/index', undefined, 200],
  statistics: ['GET', '/v2/models/stats', undefined, 200],
  trace: ['GET', '/v2/trace/setting', undefined, 200],
  logging: ['GET', '/v2/logging', undefined, 200],
  passthrough: ['POST', '/legacy/echo', '{"x":1}', 200],
  declarative: ['POST', '/api/text-length', '{"document":{"text":"hello"}}', 200],
};
const GROUP: Record<Target, ApiCategory> = { ...Object.fromEntries(API_CATEGORIES.map((c) => [c, c])) as Record<ApiCategory, ApiCategory>, passthrough: 'inference', declarative: 'inference' };

const dirs: string[] = [];
function file(name: string, text: string): string {
  const d = mkdtempSync(join(tmpdir(), 'tg-auth-it-'));
  dirs.push(d);
  const p = join(d, name);
  writeFileSync(p, text);
  return p;
}

/** The legacy service behind the pass-through: answers 200 with the headers it got. */
let legacy: Server;
let legacyHeaders: IncomingHttpHeaders = {};
beforeAll(async () => {
  legacy = createServer((req, res) => {
    legacyHeaders = req.headers;
    req.resume().on('end', () => res.end('legacy'));
  });
  await new Promise<void>((r) => legacy.listen(0, '127.0.0.1', r));
});
afterAll(async () => {
  legacy.closeAllConnections();
  await new Promise((r) => legacy.close(r));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const routesArgs = (): string[] => [
  '--routes', JSON.stringify([{ path: '/api/text-length', model: 'blob_len', inputs: { BLOB: { from: '/document/text', decode: 'text' } }, response: { map: { LEN: '/length' } } }]),
  '--passthrough', JSON.stringify([{ prefix: '/legacy', upstream: `http://127.0.0.1:${(legacy.address() as AddressInfo).port}` }]),
];

const call = (gw: RunningGateway, t: Target, headers: Record<string, string> = {}) => {
  const [method, path, body] = PROBE[t];
  return send(`${gw.url}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
};

async function metric(gw: RunningGateway, name: string): Promise<number> {
  return prometheusSamples(await (await fetch(gw.metricsUrl!)).text()).get(name) ?? NaN;
}

describe('static keys on every API group (auth.open: none)', () => {
  let gw: RunningGateway;
  let keysFile: string;
  beforeAll(async () => {
    keysFile = file('keys.yaml', KEYS);
    gw = await gatewayFor(['--demo', '--api-disabled', 'none', '--auth', '--auth-keys-file', keysFile, '--auth-open', 'none', '--auth-key-header', 'X-API-Key', ...routesArgs()]);
  });
  afterAll(() => gw.close());

  test.each(Object.keys(PROBE) as Target[])('%s: none → 401, unknown → 401, without the group → 403, with it → through', async (t) => {
    const group = GROUP[t];
    const missing = await call(gw, t);
    expect([missing.status, missing.headers['www-authenticate'], missing.headers['content-type'], missing.headers['x-tensorgate-error'], missing.body.toString()])
      .toEqual([401, 'Bearer realm="tensorgate"', 'application/json', 'GW_ERR_AUTH_MISSING',
        '{"error":"authentication required: send Authorization: Bearer <token> or X-API-Key: <key>"}']);
    const invalid = await call(gw, t, { Authorization: `Bearer ${ALL}x` });
    expect([invalid.status, invalid.headers['www-authenticate'], invalid.headers['x-tensorgate-error'], invalid.body.toString()])
      .toEqual([401, 'Bearer realm="tensorgate", error="invalid_token", error_description="unknown API key"', 'GW_ERR_AUTH_INVALID',
        '{"error":"the credentials are not valid: unknown API key"}']);
    const forbidden = await call(gw, t, { Authorization: `Bearer ${IDLE}` });
    expect([forbidden.status, forbidden.headers['www-authenticate'], forbidden.headers['x-tensorgate-error'], forbidden.body.toString()])
      .toEqual([403, `Bearer realm="tensorgate", error="insufficient_scope", scope="${group}"`, 'GW_ERR_AUTH_FORBIDDEN',
        `{"error":"'idle' may not use the '${group}' API group"}`]);
    const allowed = await call(gw, t, { Authorization: `Bearer ${ALL}` });
    expect(allowed.status).toBe(PROBE[t][3]);
    const byHeader = await call(gw, t, { 'X-API-Key': ALL });
    expect(byHeader.status).toBe(PROBE[t][3]);
  });

  test('the gateway\'s own probes need no credentials', async () => {
    expect((await send(`${gw.url}/healthz`)).status).toBe(200);
    expect((await send(`${gw.url}/readyz`)).status).toBe(200);
  });

  test('a key limited to some models: 403 for another model, on every route that names one', async () => {
    const h = { Authorization: `Bearer ${SIMPLE}` };
    expect((await call(gw, 'inference', h)).status).toBe(200);
    expect((await call(gw, 'metadata', h)).status).toBe(200);
    const other = await send(`${gw.url}/v2/models/identity_fp32`, { headers: h });
    expect([other.status, other.headers['www-authenticate'], other.headers['x-tensorgate-error'], other.body.toString()])
      .toEqual([403, 'Bearer realm="tensorgate", error="insufficient_scope"', 'GW_ERR_AUTH_FORBIDDEN', '{"error":"\'simple-only\' may not call model \'identity_fp32\'"}']);
    const infer = await send(`${gw.url}/v2/models/identity_fp32/versions/1/infer`, { headers: h, body: '{}' });
    expect(infer.status).toBe(403);
    const v1 = await send(`${gw.url}/v1/models/identity_fp32:predict`, { headers: h, body: '{}' });
    expect(v1.status).toBe(403);
    // The declarative route's model is blob_len.
    const declarative = await call(gw, 'declarative', h);
    expect([declarative.status, declarative.body.toString()]).toEqual([403, '{"error":"\'simple-only\' may not call model \'blob_len\'"}']);
    // Its groups still apply: no statistics.
    expect((await call(gw, 'statistics', h)).status).toBe(403);
  });

  test('the refusal comes before the body is read: a client that never sends its declared body gets its 401', async () => {
    const { hostname, port } = new URL(gw.url);
    const socket = connect(Number(port), hostname);
    try {
      socket.write(`POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: ${100 * 1024 * 1024}\r\n\r\n{"inputs":`);
      const head = await new Promise<string>((resolve, reject) => {
        let got = '';
        socket.setEncoding('latin1').on('data', (s: string) => {
          got += s;
          if (got.includes('\r\n\r\n')) resolve(got);
        });
        socket.once('error', reject);
        socket.setTimeout(5000, () => reject(new Error('no answer within 5 s')));
      });
      expect(head).toMatch(/^HTTP\/1\.1 401 Unauthorized\r\n/);
      expect(head.toLowerCase()).toContain('\r\nwww-authenticate: bearer realm="tensorgate"\r\n');
    } finally {
      socket.destroy();
    }
  });

  test('the credential is not handed on to a pass-through upstream', async () => {
    await call(gw, 'passthrough', { Authorization: `Bearer ${ALL}`, 'X-Other': 'kept' });
    expect(legacyHeaders.authorization).toBeUndefined();
    expect(legacyHeaders['x-other']).toBe('kept');
    // Every credential header goes, not only the one that was used: another scheme's Authorization too.
    await call(gw, 'passthrough', { 'X-API-Key': ALL, Authorization: 'Basic dXNlcjpwYXNz' });
    expect([legacyHeaders['x-api-key'], legacyHeaders.authorization]).toEqual([undefined, undefined]);
  });

  test('decisions are counted by outcome and method', async () => {
    const before = await metric(gw, 'tensorgate_auth_decisions_total{outcome="missing",method="none"}');
    await call(gw, 'metadata');
    expect(await metric(gw, 'tensorgate_auth_decisions_total{outcome="missing",method="none"}')).toBe(before + 1);
    const allowed = await metric(gw, 'tensorgate_auth_decisions_total{outcome="allowed",method="key"}');
    await call(gw, 'metadata', { Authorization: `Bearer ${ALL}` });
    expect(await metric(gw, 'tensorgate_auth_decisions_total{outcome="allowed",method="key"}')).toBe(allowed + 1);
    expect(await metric(gw, 'tensorgate_auth_decisions_total{outcome="forbidden",method="key"}')).toBeGreaterThan(0);
    expect(await metric(gw, 'tensorgate_auth_decisions_total{outcome="invalid",method="key"}')).toBeGreaterThan(0);
  });

  test('the key file reloads when it changes; a file that does not load keeps the keys, counted', async () => {
    const NEW = 'new_key_0123456789abcdef';
    writeFileSync(keysFile, `${KEYS}\n  - { id: new, token: ${NEW}, groups: [metadata] }\n`);
    await until(async () => (await call(gw, 'metadata', { Authorization: `Bearer ${NEW}` })).status === 200, 'the new key to work');
    expect(await metric(gw, 'tensorgate_auth_reloads_total{file="keys",result="ok"}')).toBe(1);
    writeFileSync(keysFile, 'keys: [ {');
    await until(async () => await metric(gw, 'tensorgate_auth_reloads_total{file="keys",result="failed"}') === 1, 'the failed reload to be counted');
    expect((await call(gw, 'metadata', { Authorization: `Bearer ${NEW}` })).status).toBe(200);
    writeFileSync(keysFile, KEYS);
    await until(async () => (await call(gw, 'metadata', { Authorization: `Bearer ${NEW}` })).status === 401, 'the removed key to stop working');
  });
});

/** Polls an asynchronous condition every 20 ms; fails naming `what` after `ms`. */
async function until(cond: () => Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() >= end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('defaults with auth on: health is open, as in Triton', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', '--auth', '--auth-keys-file', file('keys.yaml', KEYS)]);
  });
  afterAll(() => gw.close());

  test('Kubernetes probes of /v2/health/* and the gateway\'s own work without credentials; the rest does not', async () => {
    for (const path of ['/v2/health/live', '/v2/health/ready', '/healthz', '/readyz', '/v2/models/simple/ready']) expect([path, (await send(`${gw.url}${path}`)).status]).toEqual([path, 200]);
    expect((await call(gw, 'metadata')).status).toBe(401);
    // api.disabled still comes first (and answers as Triton does).
    expect((await call(gw, 'logging', { Authorization: `Bearer ${ALL}` })).headers['x-tensorgate-error']).toBe('GW_ERR_ROUTE_DISABLED');
  });
});

describe('JWTs', () => {
  const ISS = 'https://idp.test';
  const GOOD = { iss: ISS, aud: 'tensorgate', sub: 'alice', scope: 'openid inference metadata', models: 'simple' };
  let issuer: Issuer;
  let stranger: Issuer;
  beforeAll(async () => {
    issuer = await makeIssuer('k1');
    stranger = await makeIssuer('k9');
  });
  const jwtArgs = ['--auth-jwt-issuer', ISS, '--auth-jwt-audience', 'tensorgate', '--auth-jwt-models-claim', 'models', '--auth-jwt-clock-tolerance-s', '5'];
  const bearer = (t: string): Record<string, string> => ({ Authorization: `Bearer ${t}` });

  describe('from a JWKS file, next to static keys', () => {
    let gw: RunningGateway;
    beforeAll(async () => {
      gw = await gatewayFor(['--demo', '--auth', '--auth-keys-file', file('keys.yaml', KEYS), '--auth-jwks-file', file('jwks.json', JSON.stringify(jwksOf(issuer))), ...jwtArgs]);
    });
    afterAll(() => gw.close());

    test('a good token: its scope\'s groups, its models', async () => {
      const t = await issuer.sign(GOOD);
      expect((await call(gw, 'inference', bearer(t))).status).toBe(200);
      expect((await call(gw, 'metadata', bearer(t))).status).toBe(200);
      const stats = await call(gw, 'statistics', bearer(t));
      expect([stats.status, stats.body.toString()]).toEqual([403, '{"error":"\'alice\' may not use the \'statistics\' API group"}']);
      const other = await send(`${gw.url}/v2/models/identity_fp32`, { headers: bearer(t) });
      expect([other.status, other.body.toString()]).toEqual([403, '{"error":"\'alice\' may not call model \'identity_fp32\'"}']);
      // The static keys still work.
      expect((await call(gw, 'metadata', bearer(ALL))).status).toBe(200);
    });

    test.each([
      ['expired', { exp: Math.floor(Date.now() / 1000) - 60 }, 'the token has expired'],
      ['wrong audience', { aud: 'someone-else' }, 'the token\'s audience is not the one expected (auth.jwt.audience)'],
      ['wrong issuer', { iss: 'https://evil.test' }, 'the token\'s issuer is not the one expected (auth.jwt.issuer)'],
    ])('%s: 401 invalid_token, saying which check failed', async (_, claims, reason) => {
      const r = await call(gw, 'metadata', bearer(await issuer.sign({ ...GOOD, ...claims })));
      expect([r.status, r.headers['x-tensorgate-error'], r.body.toString()]).toEqual([401, 'GW_ERR_AUTH_INVALID', JSON.stringify({ error: `the credentials are not valid: ${reason}` })]);
      expect(r.headers['www-authenticate']).toBe(`Bearer realm="tensorgate", error="invalid_token", error_description="${reason.replace(/"/g, '')}"`);
    });

    test('unknown kid: 401', async () => {
      const r = await call(gw, 'metadata', bearer(await stranger.sign(GOOD)));
      expect([r.status, r.body.toString()]).toEqual([401, '{"error":"the credentials are not valid: no signing key of the JWKS matches the token (kid, alg)"}']);
    });

    test('decisions by JWT are counted with method=jwt', async () => {
      const samples = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
      expect(samples.get('tensorgate_auth_decisions_total{outcome="allowed",method="jwt"}')).toBeGreaterThan(0);
      expect(samples.get('tensorgate_auth_decisions_total{outcome="invalid",method="jwt"}')).toBeGreaterThan(0);
      expect(samples.get('tensorgate_auth_decisions_total{outcome="forbidden",method="jwt"}')).toBeGreaterThan(0);
    });
  });

  test('from a JWKS URL: fetched once for many requests; a JWKS that cannot be fetched is 503', async () => {
    const idp = await serveJwks(jwksOf(issuer));
    idp.answer = { status: 500, body: 'down' };
    const gw = await gatewayFor(['--demo', '--auth', '--auth-jwks-url', idp.url, '--auth-jwks-cooldown-ms', '0', ...jwtArgs]);
    try {
      const t = await issuer.sign(GOOD);
      const down = await call(gw, 'metadata', bearer(t));
      expect([down.status, down.headers['x-tensorgate-error'], down.body.toString()]).toEqual([503, 'GW_ERR_AUTH_UNAVAILABLE',
        JSON.stringify({ error: `the credentials cannot be checked now: the JWKS at ${idp.url} could not be fetched: Expected 200 OK from the JSON Web Key Set HTTP response` })]);
      idp.answer = { status: 200, body: JSON.stringify(jwksOf(issuer)) };
      const fetched = idp.fetches;
      for (let i = 0; i < 3; i++) expect((await call(gw, 'inference', bearer(t))).status).toBe(200);
      expect(idp.fetches).toBe(fetched + 1);
      expect((await call(gw, 'metadata', bearer(await stranger.sign(GOOD)))).status).toBe(401);
      const samples = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
      expect(samples.get('tensorgate_auth_decisions_total{outcome="unavailable",method="jwt"}')).toBe(1);
    } finally {
      await gw.close();
      await idp.close();
    }
  });
});

describe('a key limited to some models and the global trace settings', () => {
  test('refused: they apply to every model; the key\'s own model\'s settings are not', async () => {
    const TRACE = 'trace_simple_0123456789abcdef';
    const gw = await gatewayFor(['--demo', '--api-disabled', 'none', '--auth', '--auth-keys-file',
      file('keys.yaml', `keys:\n  - { id: trace-simple, token: "${sha(TRACE)}", groups: [trace], models: [simple] }`)]);
    try {
      const h = { Authorization: `Bearer ${TRACE}` };
      const global = await send(`${gw.url}/v2/trace/setting`, { headers: h });
      expect([global.status, global.body.toString()]).toEqual([403, '{"error":"\'trace-simple\' may not make a call that applies to every model"}']);
      expect((await send(`${gw.url}/v2/trace/setting`, { method: 'POST', headers: h, body: '{"trace_level":["OFF"]}' })).status).toBe(403);
      expect((await send(`${gw.url}/v2/models/identity_fp32/trace/setting`, { headers: h })).status).toBe(403);
      expect((await send(`${gw.url}/v2/models/simple/trace/setting`, { headers: h })).status).not.toBe(403);
    } finally {
      await gw.close();
    }
  });
});

describe('a key limited to some models and the calls that reach past them', () => {
  // Regression: over REST as over gRPC (grpc-passthrough.test.ts), a key limited to `simple` could
  // list every model, read every model's statistics, change the server's logging, load `simple`
  // with a configuration or files (model code), unload its dependents, and drop every region.
  test('403 for the repository index, every model\'s statistics, logging, a load with parameters, unload_dependents, unregistering every region; the model\'s own calls are not', async () => {
    const LIMITED = 'limited_0123456789abcdef';
    const gw = await gatewayFor(['--demo', '--api-disabled', 'none', '--auth', '--auth-keys-file',
      file('keys.yaml', `keys:\n  - { id: limited, token: "${sha(LIMITED)}", groups: "*", models: [simple] }`)]);
    try {
      const h = { Authorization: `Bearer ${LIMITED}` };
      const every = '{"error":"\'limited\' may not make a call that applies to every model"}';
      const limited = (what: string): string => JSON.stringify({ error: `'limited' may not ${what}: they are limited to some models` });
      for (const [method, path, body, error] of [
        ['POST', '/v2/repository/index', '{}', every],
        ['GET', '/v2/models/stats', undefined, every],
        ['GET', '/v2/logging', undefined, every],
        ['POST', '/v2/logging', '{"log_verbose_level":1}', every],
        ['POST', '/v2/repository/models/simple/load', '{"parameters":{"config":"{\\"backend\\":\\"python\\"}"}}', limited('load a model with parameters (a configuration or files)')],
        ['POST', '/v2/repository/models/simple/load', '{"parameters":{"file:1/model.py":"aW1wb3J0IG9z"}}', limited('load a model with parameters (a configuration or files)')],
        ['POST', '/v2/repository/models/simple/unload', '{"parameters":{"unload_dependents":true}}', limited('unload a model with unload_dependents')],
        ['POST', '/v2/systemsharedmemory/unregister', '', limited('unregister every shared-memory region')],
        ['POST', '/v2/cudasharedmemory/unregister', '', limited('unregister every shared-memory region')],
      ] as const) {
        const r = await send(`${gw.url}${path}`, { method, headers: h, ...body === undefined ? {} : { body } });
        expect([path, body, r.status, r.headers['x-tensorgate-error'], r.body.toString()]).toEqual([path, body, 403, 'GW_ERR_AUTH_FORBIDDEN', error]);
      }
      expect((await send(`${gw.url}/v2/models/simple/stats`, { headers: h })).status).toBe(200);
      // The demo backend may not load or unload at all (501): what matters is the gateway let them through.
      expect((await send(`${gw.url}/v2/repository/models/simple/unload`, { method: 'POST', headers: h, body: '{"parameters":{"unload_dependents":false}}' })).status).not.toBe(403);
      expect((await send(`${gw.url}/v2/repository/models/simple/load`, { method: 'POST', headers: h, body: '{}' })).status).not.toBe(403);
      expect((await send(`${gw.url}/v2/systemsharedmemory/region/mine/unregister`, { method: 'POST', headers: h })).status).not.toBe(403);
    } finally {
      await gw.close();
    }
  });
});

describe('no credential reaches a pass-through upstream, in every auth mode', () => {
  const ISS = 'https://idp.test';
  let issuer: Issuer;
  beforeAll(async () => {
    issuer = await makeIssuer('k1');
  });
  // The restricted-API secret guards the pass-through's group; a second one guards another group.
  const common = (): string[] => ['--demo', '--api-disabled', 'none', '--api-restricted', 'inference:X-Admin=s3cret', '--auth-key-header', 'X-API-Key', ...routesArgs()];
  const modes: [string, () => string[], () => Promise<string>][] = [
    ['auth off', () => common(), () => Promise.resolve('anything')],
    ['static keys', () => [...common(), '--auth', '--auth-keys-file', file('keys.yaml', KEYS), '--auth-open', 'none'], () => Promise.resolve(ALL)],
    ['JWT', () => [...common(), '--auth', '--auth-jwks-file', file('jwks.json', JSON.stringify(jwksOf(issuer))), '--auth-jwt-issuer', ISS, '--auth-open', 'none'],
      () => issuer.sign({ iss: ISS, sub: 'alice', scope: 'inference' })],
    ['an open group (auth.open: inference)', () => [...common(), '--auth', '--auth-keys-file', file('keys.yaml', KEYS), '--auth-open', 'inference'], () => Promise.resolve(ALL)],
  ];
  test.each(modes)('%s', async (_mode, args, token) => {
    const gw = await gatewayFor(args());
    try {
      const t = await token();
      const headers = {
        Authorization: `Bearer ${t}`, 'X-API-Key': ALL, 'X-Admin': 's3cret', 'Triton-Grpc-Protocol-X-Admin': 's3cret', 'X-Other': 'kept',
      };
      const r = await call(gw, 'passthrough', headers);
      expect(r.status).toBe(200);
      expect([legacyHeaders.authorization, legacyHeaders['x-api-key'], legacyHeaders['x-admin'], legacyHeaders['triton-grpc-protocol-x-admin'], legacyHeaders['x-other']])
        .toEqual([undefined, undefined, undefined, undefined, 'kept']);
      // The key header alone (the one auth reads when there is no Authorization).
      expect((await call(gw, 'passthrough', { 'X-API-Key': t, 'X-Admin': 's3cret', 'X-Other': 'again' })).status).toBe(200);
      expect([legacyHeaders['x-api-key'], legacyHeaders['x-admin'], legacyHeaders['x-other']]).toEqual([undefined, undefined, 'again']);
    } finally {
      await gw.close();
    }
  });
});

describe('credentials never reach the log (the built CLI, bin/tensorgate)', () => {
  test('access lines, warnings and reload failures name the key, never the token', async () => {
    const PLAIN = 'plain_in_file_0123456789abcdef';
    const keysFile = file('keys.yaml', `${KEYS}\n  - { id: plain, token: ${PLAIN}, groups: [metadata] }\n`);
    const child = spawn(join(__dirname, '../../bin/tensorgate'), ['--demo', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0',
      '--log-level', 'debug', '--auth', '--auth-keys-file', keysFile, '--auth-key-header', 'X-API-Key'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const lines = (): Record<string, unknown>[] => out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    child.stdout.setEncoding('utf8').on('data', (s: string) => { out += s; });
    child.stderr.setEncoding('utf8').on('data', (s: string) => { out += s; });
    try {
      await until(async () => /tensorgate listening on (\S+) /.test(out), 'the listening line', 10_000);
      const url = /tensorgate listening on (\S+) /.exec(out)![1]!;
      const get = (headers: Record<string, string>) => send(`${url}/v2/models/simple`, { headers });
      expect((await get({ Authorization: `Bearer ${ALL}` })).status).toBe(200);
      expect((await get({ 'X-API-Key': PLAIN })).status).toBe(200);
      expect((await get({ Authorization: `Bearer ${IDLE}` })).status).toBe(403);
      expect((await get({ Authorization: `Bearer ${ALL}-wrong` })).status).toBe(401);
      expect((await get({ Authorization: 'Bearer eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl' })).status).toBe(401);
      // A reload that fails on a line holding a plain token.
      writeFileSync(keysFile, `keys:\n  - { id: broken, token: "${SIMPLE}, groups: [metadata] }\n`);
      await until(async () => lines().some((l) => l.msg === 'auth keys not reloaded; the previous ones stay'), 'the failed reload in the log');
      await until(async () => lines().filter((l) => l.msg === 'request').length === 5, 'five access lines');
      const exited = nextEvent(child, 'exit', 10_000);
      child.kill('SIGTERM');
      await exited;

      const all = lines();
      expect(all.find((l) => l.msg === 'auth.keysFile holds these tokens in plain text; store sha256:<hex> of each instead')).toMatchObject({ keys: ['simple-only', 'plain'] });
      expect(all.filter((l) => l.msg === 'request').map((l) => [l.status, l.auth, l.auth_method, l.auth_subject])).toEqual([
        [200, 'allowed', 'key', 'all'], [200, 'allowed', 'key', 'plain'], [403, 'forbidden', 'key', 'idle'], [401, 'invalid', 'key', undefined], [401, 'invalid', 'key', undefined],
      ]);
      expect(all.find((l) => l.msg === 'auth keys not reloaded; the previous ones stay')?.reason).toMatch(/^not YAML \(\w+ at line \d+, column \d+\)$/);
      for (const secret of [ALL, IDLE, PLAIN, SIMPLE, 'eyJhbGciOiJFUzI1NiJ9', sha(ALL).slice(7)]) expect(out).not.toContain(secret);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

describe('per-identity limits (auth.limits, a key\'s limits in the key file)', () => {
  const ISS = 'https://idp.test';
  let issuer: Issuer;
  beforeAll(async () => { issuer = await makeIssuer('k1'); });
  const bearer = (t: string): Record<string, string> => ({ Authorization: `Bearer ${t}` });
  const metadata = (gw: RunningGateway, token: string) => send(`${gw.url}/v2/models/simple`, { headers: bearer(token) });

  test('JWTs: the default per subject, a subject\'s own, a group\'s shared by its members; each refusal labelled and recorded', async () => {
    const limits = {
      default: { rate: 0.1, burst: 1 }, subjects: { bob: { rate: 0.1, burst: 3 }, dave: { rate: 100 }, erin: { rate: 100 } },
      groupsClaim: 'teams', groups: { 'team-a': { rate: 0.1, burst: 2 } },
    };
    const gw = await gatewayFor(['--demo', '--auth', '--auth-jwks-file', file('jwks.json', JSON.stringify(jwksOf(issuer))), '--auth-jwt-issuer', ISS,
      '--auth-limits', JSON.stringify(limits)]);
    const tap = new RecordTap();
    tap.start();
    try {
      const token = (sub: string, teams?: string[]) => issuer.sign({ iss: ISS, sub, scope: 'metadata', ...(teams === undefined ? {} : { teams }) });
      const [alice, carol, bob, dave, erin] = await Promise.all([token('alice'), token('carol'), token('bob'), token('dave', ['team-a']), token('erin', ['team-a', 'team-b'])]);
      // The default: a bucket of one per subject.
      expect((await metadata(gw, alice)).status).toBe(200);
      const r = await metadata(gw, alice);
      expect([r.status, r.headers['x-tensorgate-error'], Number(r.headers['retry-after']) >= 9]).toEqual([429, 'GW_ERR_AUTH_RATE_LIMITED', true]);
      expect(r.body.toString()).toMatch(/^\{"error":"'alice' is over its rate of 0\.1 requests per second \(burst 1, auth\.limits\.default\); retry after (9|10) s"\}$/);
      expect((await metadata(gw, carol)).status).toBe(200);
      // A subject's own: three, then refused.
      for (let i = 0; i < 3; i++) expect((await metadata(gw, bob)).status).toBe(200);
      expect((await metadata(gw, bob)).status).toBe(429);
      // A group's bucket is shared: dave and erin take its two, then both are refused.
      expect((await metadata(gw, dave)).status).toBe(200);
      expect((await metadata(gw, erin)).status).toBe(200);
      const group = await metadata(gw, dave);
      expect(group.status).toBe(429);
      expect(JSON.parse(group.body.toString()).error).toMatch(/^group 'team-a' is over its rate of 0\.1 requests per second \(burst 2, auth\.limits\.groups\.team-a\)/);
      expect((await metadata(gw, erin)).status).toBe(429);
      await tap.until(11);
      expect(tap.records.filter((x) => x.limited !== undefined).map((x) => [x.auth?.subject, x.limited])).toEqual([
        ['alice', { limit: 'default', reason: 'rate' }], ['bob', { limit: 'subject:bob', reason: 'rate' }],
        ['dave', { limit: 'group:team-a', reason: 'rate' }], ['erin', { limit: 'group:team-a', reason: 'rate' }],
      ]);
      // The access line says so (telemetry/logger.ts).
      let line: Record<string, unknown> = {};
      const log = { isLevelEnabled: () => true, info: (l: Record<string, unknown>) => { line = l; } } as unknown as Logger;
      accessLine(log, tap.records.find((x) => x.limited !== undefined)!);
      expect(line).toMatchObject({ status: 429, error_code: 'GW_ERR_AUTH_RATE_LIMITED', auth: 'allowed', auth_subject: 'alice', limited: 'rate', limit: 'default' });
      const samples = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
      expect([
        samples.get('tensorgate_auth_limited_total{limit="default",exceeded="rate"}'),
        samples.get('tensorgate_auth_limited_total{limit="subject:bob",exceeded="rate"}'),
        samples.get('tensorgate_auth_limited_total{limit="group:team-a",exceeded="rate"}'),
      ]).toEqual([1, 1, 2]);
    } finally {
      tap.stop();
      await gw.close();
    }
  });

  test('a key\'s limits reload with the key file; a file with a bad limit keeps the previous keys', async () => {
    const TOKEN = 'limited_key_0123456789abcdef';
    const keysFile = file('keys.yaml', `keys:\n  - { id: k, token: ${TOKEN}, groups: "*", limits: { rate: 0.1, burst: 1 } }\n`);
    const gw = await gatewayFor(['--demo', '--auth', '--auth-keys-file', keysFile]);
    try {
      expect((await metadata(gw, TOKEN)).status).toBe(200);
      expect((await metadata(gw, TOKEN)).status).toBe(429);
      writeFileSync(keysFile, `keys:\n  - { id: k, token: ${TOKEN}, groups: "*", limits: { rate: 0 } }\n`);
      await until(async () => await metric(gw, 'tensorgate_auth_reloads_total{file="keys",result="failed"}') === 1, 'the failed reload to be counted');
      expect((await metadata(gw, TOKEN)).status).toBe(429);
      writeFileSync(keysFile, `keys:\n  - { id: k, token: ${TOKEN}, groups: "*", limits: { rate: 1000, burst: 1000 } }\n`);
      await until(async () => (await metadata(gw, TOKEN)).status === 200, 'the raised rate to apply');
      for (let i = 0; i < 20; i++) expect((await metadata(gw, TOKEN)).status).toBe(200);
    } finally {
      await gw.close();
    }
  });
});
