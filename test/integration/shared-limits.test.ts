// Limits shared across processes on Redis (auth.limits.store; docs/production.md "Shared limits on
// Redis"): a real redis-server started here on a free port, the reference backend in this process,
// and the built CLI as three gateway processes sharing both (one with --workers 2). The rate's
// total over the three, the concurrency cap at the backend, Redis stopped, killed and restarted
// under each storeFailure policy, the start-up errors, and no store call for an identity without
// a limit (counted by Redis's own INFO commandstats).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { curl } from '../support/curl';
import { type Gw, redisSuite, storeCalls } from '../support/redis-server';
import { CURL, needs, REDIS_SERVER } from '../support/tools';

const BIN = join(__dirname, '../../bin/tensorgate');
const PASSWORD = 'shared-limits-test-pw';
const TOKENS = {
  rate: 'rate-key-token-0123456789', conc: 'conc-key-token-0123456789', both: 'both-key-token-0123456789', work: 'work-key-token-0123456789',
  free: 'free-key-token-0123456789',
};
const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
const KEYS = `keys:
  - { id: rate, token: ${sha(TOKENS.rate)}, groups: "*", limits: { rate: 20, burst: 2 } }
  - { id: conc, token: ${sha(TOKENS.conc)}, groups: "*", limits: { concurrency: 4 } }
  - { id: both, token: ${sha(TOKENS.both)}, groups: "*", limits: { rate: 2, burst: 2, concurrency: 8 } }
  - { id: work, token: ${sha(TOKENS.work)}, groups: "*", limits: { rate: 1, burst: 4 } }
  - { id: free, token: ${sha(TOKENS.free)}, groups: "*" }
`;
const INFER = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] });
const SLOW = JSON.stringify({ parameters: { delay_ms: 200 }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

jest.setTimeout(60_000);

const limits = (port: number, more: Record<string, unknown> = {}): string[] =>
  ['--auth-limits', JSON.stringify({ store: `redis://:${PASSWORD}@127.0.0.1:${port}`, storeTimeoutMs: 200, ...more })];

interface Answer { status: number; error?: string; retryAfter?: string; ms: number }

const agent = new Agent({ connections: 64 });

async function call(url: string, token: string, model = 'identity_fp32', body = INFER): Promise<Answer> {
  const started = performance.now();
  const r = await request(`${url}/v2/models/${model}/infer`, {
    method: 'POST', dispatcher: agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body,
    headersTimeout: 10_000, bodyTimeout: 10_000,
  });
  const text = await r.body.text();
  const ms = performance.now() - started;
  const retryAfter = r.headers['retry-after'] as string | undefined;
  return { status: r.statusCode, ms, ...(r.statusCode === 200 ? {} : { error: text }), ...(retryAfter === undefined ? {} : { retryAfter }) };
}

const count = (answers: readonly Answer[], status: number): number => answers.filter((a) => a.status === status).length;

needs(REDIS_SERVER(), CURL()).describe('limits shared on Redis (auth.limits.store)', () => {
  const suite = redisSuite('shared-limits', KEYS, PASSWORD);
  const start = (args: string[]): Promise<Gw> => suite.gateway(args);
  afterAll(() => agent.close());

  test('a key limited to 20 req/s (burst 2), driven at ~100 req/s over three gateways for 10 s: the total admitted is within 10 % of 200', async () => {
    const gws = await Promise.all([0, 1, 2].map(() => start(limits(suite.redis.port))));
    const before = await suite.redis.calls();
    const answers: Promise<Answer>[] = [];
    const t0 = performance.now();
    // 1000 requests, one every 10 ms, in turn to each gateway; the clock decides, not the answers.
    for (let i = 0; i < 1000; i++) {
      const due = t0 + i * 10;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      answers.push(call(gws[i % 3]!.url, TOKENS.rate));
    }
    const done = await Promise.all(answers);
    const seconds = (performance.now() - t0) / 1000;
    const admitted = count(done, 200);
    const after = await suite.redis.calls();
    const trips = storeCalls(after) - storeCalls(before);
    process.stdout.write(`shared rate: ${done.length} requests in ${seconds.toFixed(2)} s (${(done.length / seconds).toFixed(0)}/s), admitted ${admitted} `
      + `(expected ${(2 + 20 * seconds).toFixed(0)}: burst 2 + 20/s), refused 429 ${count(done, 429)}; store calls ${trips} `
      + `(${(trips / done.length).toFixed(2)} per request, ${(trips / admitted).toFixed(2)} per admitted)\n`);
    expect(count(done, 200) + count(done, 429)).toBe(1000);
    const expected = 2 + 20 * seconds;
    expect(admitted).toBeGreaterThanOrEqual(Math.floor(expected * 0.9));
    expect(admitted).toBeLessThanOrEqual(Math.ceil(expected * 1.1));
    // The local lease (2 tokens) and the remembered refusals: well below a round trip per request.
    expect(trips / done.length).toBeLessThan(0.5);
    expect(done.find((a) => a.status === 429)?.error).toMatch(/^\{"error":"'rate' is over its rate of 20 requests per second \(burst 2, the key's limits in auth\.keysFile\); retry after 1 s"\}$/);
    // The bucket expires once it would be full again (2 tokens at 20/s, plus 1 s): nothing left behind.
    const pttl = Number(spawnSync('redis-cli', ['-p', String(suite.redis.port), '-a', PASSWORD, '--no-auth-warning', 'PTTL', 'tensorgate:limits:key:rate:rate'], { encoding: 'utf8' }).stdout);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(1100);
  });

  test('a concurrency cap of 4 across three gateways: never more than 4 in flight at the backend; every place comes back', async () => {
    const gws = await Promise.all([0, 1, 2].map(() => start(limits(suite.redis.port))));
    suite.backend.stats.slowMaxInFlight = 0;
    const answers: Answer[] = [];
    const until = performance.now() + 3000;
    // 12 clients (4 per gateway), each calling again as soon as answered (20 ms after a refusal), for 3 s.
    await Promise.all(Array.from({ length: 12 }, async (_, i) => {
      while (performance.now() < until) {
        const a = await call(gws[i % 3]!.url, TOKENS.conc, 'slow', SLOW);
        answers.push(a);
        if (a.status !== 200) await sleep(20);
      }
    }));
    process.stdout.write(`shared concurrency: ${answers.length} requests, admitted ${count(answers, 200)}, refused 429 ${count(answers, 429)}, `
      + `most in flight at the backend ${suite.backend.stats.slowMaxInFlight}\n`);
    expect(suite.backend.stats.slowMaxInFlight).toBe(4);
    expect(count(answers, 200)).toBeGreaterThanOrEqual(4 * (3000 / 200) * 0.5);
    expect(answers.find((a) => a.status === 429)?.error).toMatch(/^\{"error":"'conc' already has 4 requests in flight, its concurrency limit \(the key's limits in auth\.keysFile\); retry after 1 s"\}$/);
    expect(count(answers, 200) + count(answers, 429)).toBe(answers.length);
    // Every lease removed when its request ended: the set is gone.
    const exists = spawnSync('redis-cli', ['-p', String(suite.redis.port), '-a', PASSWORD, '--no-auth-warning', 'EXISTS', 'tensorgate:limits:key:conc:inflight'], { encoding: 'utf8' });
    expect(exists.stdout.trim()).toBe('0');
  });

  test('an identity without a limit makes no store call', async () => {
    const gw = await start(limits(suite.redis.port));
    const before = await suite.redis.calls();
    for (let i = 0; i < 30; i++) expect((await call(gw.url, TOKENS.free)).status).toBe(200);
    expect(storeCalls(await suite.redis.calls())).toBe(storeCalls(before));
    // And one with a limit does (the check is able to see calls).
    expect((await call(gw.url, TOKENS.both)).status).toBe(200);
    expect(storeCalls(await suite.redis.calls())).toBeGreaterThan(storeCalls(before));
  });

  test('Redis stopped, killed and restarted: open lets in, closed answers 503, local keeps per-process limits; no request waits past the bound; counting resumes', async () => {
    const policies = ['open', 'closed', 'local'] as const;
    const gws = await Promise.all(policies.map((p) => start(limits(suite.redis.port, { storeFailure: p, storeTimeoutMs: 50 }))));
    const burst = async (g: Gw): Promise<Answer[]> => {
      const out: Answer[] = [];
      for (let i = 0; i < 6; i++) out.push(await call(g.url, TOKENS.both));
      return out;
    };
    // Up: 2 admitted (burst 2 shared by the three: the first gateway takes it), then 429s.
    const up = await Promise.all(gws.map(burst));
    expect(up.flat().filter((a) => a.status === 200).length).toBeLessThanOrEqual(3);
    const check = async (what: string): Promise<void> => {
      await sleep(1100); // the shared bucket refills 2 tokens; leases held expire
      const [open, closed, local] = await Promise.all(gws.map(burst));
      const statuses = (as: readonly Answer[]): string => as.map((a) => a.status).join(',');
      process.stdout.write(`${what}: open ${statuses(open!)}, closed ${statuses(closed!)}, local ${statuses(local!)}; `
        + `slowest ${Math.max(...[open!, closed!, local!].flat().map((a) => a.ms)).toFixed(0)} ms\n`);
      expect(open!.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200]);
      expect(closed!.map((a) => a.status)).toEqual([503, 503, 503, 503, 503, 503]);
      expect(closed![0]!.error).toMatch(/^\{"error":"the limits of these credentials cannot be judged now: .+; auth\.limits\.storeFailure is closed, retry after 1 s"\}$/);
      expect(closed![0]!.retryAfter).toBe('1');
      // The per-process bucket of 2: 2 admitted, then refused by this process's own count.
      expect(local!.map((a) => a.status)).toEqual([200, 200, 429, 429, 429, 429]);
      // storeTimeoutMs 50: nobody waits for the store much longer than that (a loaded machine's slack).
      for (const a of [open!, closed!, local!].flat()) expect(a.ms).toBeLessThan(1000);
    };
    // Stopped: connected, no answer (timeouts, then taken as down).
    suite.redis.child!.kill('SIGSTOP');
    try {
      await check('Redis stopped');
    } finally {
      suite.redis.child!.kill('SIGCONT');
    }
    await suite.redis.kill();
    await check('Redis killed');
    // curl, as a user sees the closed policy's answer.
    const c = await curl('-s', '-X', 'POST', '-H', `Authorization: Bearer ${TOKENS.both}`, '-H', 'Content-Type: application/json', '--data', INFER,
      `${gws[1]!.url}/v2/models/identity_fp32/infer`);
    expect([c.status, c.headers['retry-after'], c.headers['content-type'], c.headers['x-tensorgate-error']])
      .toEqual([503, '1', 'application/json', 'GW_ERR_AUTH_LIMITS_UNAVAILABLE']);
    expect(JSON.parse(c.body.toString())).toEqual({ error: expect.stringContaining('auth.limits.storeFailure is closed') as unknown });
    await suite.redis.start();
    // Reconnected (at most ~1 s of backoff): counted in Redis again, by every gateway.
    let statuses: number[] = [];
    for (let i = 0; i < 60 && !statuses.includes(200); i++) {
      await sleep(100);
      statuses = [(await call(gws[1]!.url, TOKENS.both)).status];
    }
    expect(statuses).toEqual([200]);
    await sleep(1100);
    const after = await Promise.all(gws.map(burst));
    process.stdout.write(`Redis restarted: ${after.map((a) => a.map((x) => x.status).join(',')).join(' | ')}\n`);
    // One shared bucket of 2 again: 2 admitted over the three together (a third if a token refilled meanwhile).
    expect(after.flat().filter((a) => a.status === 200).length).toBeGreaterThanOrEqual(2);
    expect(after.flat().filter((a) => a.status === 200).length).toBeLessThanOrEqual(3);
    expect(after.flat().every((a) => a.status === 200 || a.status === 429)).toBe(true);
    for (const g of gws) expect([g.child.exitCode, g.child.signalCode]).toEqual([null, null]);
  });

  test('--workers 2 with a store: both workers count in it', async () => {
    const gw = await start(['--workers', '2', ...limits(suite.redis.port)]);
    // Each request on a new connection: the kernel spreads them over both workers.
    const done: Answer[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await request(`${gw.url}/v2/models/identity_fp32/infer`, {
        method: 'POST', headers: { authorization: `Bearer ${TOKENS.work}`, connection: 'close' }, body: INFER, reset: true,
      });
      await r.body.dump();
      done.push({ status: r.statusCode, ms: 0 });
    }
    const info = spawnSync('redis-cli', ['-p', String(suite.redis.port), '-a', PASSWORD, '--no-auth-warning', 'CLIENT', 'LIST'], { encoding: 'utf8' }).stdout;
    // Burst 4 for the whole cluster (per process, 4 per worker: 8 here without a store); a fifth if a token refilled.
    expect(count(done, 200)).toBeGreaterThanOrEqual(4);
    expect(count(done, 200)).toBeLessThanOrEqual(5);
    // Two workers connected (plus redis-cli itself).
    expect(info.trim().split('\n').length).toBeGreaterThanOrEqual(3);
  });

  describe('a store that cannot be used at start: one line naming the key, exit 2', () => {
    let silent: Server;
    beforeAll(async () => {
      silent = createServer(() => {}).listen(0, '127.0.0.1');
      await once(silent, 'listening');
    });
    afterAll(() => new Promise<void>((r) => {
      silent.close(() => r());
    }));
    const run = (store: string): { status: number | null; stdout: string; stderr: string[] } => {
      const r = spawnSync(BIN, ['--demo', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--auth', '--auth-keys-file', join(suite.dir, 'keys.yaml'),
        '--auth-limits', JSON.stringify({ store })], { encoding: 'utf8', env: { PATH: process.env.PATH }, timeout: 20_000 });
      return { status: r.status, stdout: r.stdout, stderr: r.stderr.split('\n').slice(0, -1) };
    };
    test.each([
      ['a wrong password', () => `redis://:wrong@127.0.0.1:${suite.redis.port}`,
        () => `tensorgate: auth.limits.store: cannot use redis://***@127.0.0.1:${suite.redis.port}: WRONGPASS invalid username-password pair or user is disabled; check the URL, its password and that Redis answers there`],
      ['no password where one is needed', () => `redis://127.0.0.1:${suite.redis.port}`,
        () => expect.stringMatching(new RegExp(`^tensorgate: auth\\.limits\\.store: cannot use redis://127\\.0\\.0\\.1:${suite.redis.port}: NOAUTH .+; check the URL, its password and that Redis answers there$`))],
      ['a URL that does not parse', () => 'redis//:pw@nowhere',
        () => 'tensorgate: auth.limits.store: "redis//***@nowhere" is not a redis:// or rediss:// URL; give redis://[[user]:password@]host[:port][/db], or rediss:// for TLS (--auth-limits)'],
      ['a store that never answers', () => `redis://:pw@127.0.0.1:${(silent.address() as AddressInfo).port}`,
        () => `tensorgate: auth.limits.store: cannot use redis://***@127.0.0.1:${(silent.address() as AddressInfo).port}: no answer within 3000 ms; check the URL, its password and that Redis answers there`],
    ])('%s', (_name, store, line) => {
      expect(run(store())).toEqual({ status: 2, stdout: '', stderr: [line()] });
    });
  });
});
