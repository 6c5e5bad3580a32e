// --workers 2 without a store: the cluster's primary counts the limits and quotas for its workers
// (auth/cluster-store.ts; docs/production.md "Workers without a store"). The built CLI as one
// gateway with two workers, the reference backend in this process, every request on a connection
// of its own so that the kernel spreads them over both workers. The rate's total (not twice it),
// the concurrency cap at the backend, a quota refused exactly at its max, GET /usage/<id> summed
// by the primary, no call to the primary for an identity without a limit (the store's round trips
// in /metrics), and the places of killed workers given back.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { curl } from '../support/curl';
import { freePort } from '../support/observed';
import { prometheusSamples } from '../support/prometheus';
import { cliGateway, type Gw } from '../support/redis-server';
import { CURL, needs } from '../support/tools';
import { waitUntil } from '../support/wait';

const IDS = { rate: '{ rate: 20 }', conc: '{ concurrency: 2 }', quota: '{ quotas: [{ unit: requests, per: minute, max: 5 }] }', free: '' };
const token = (id: string): string => `${id}-workers-key-token-0123456789`;
const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
const KEYS = `keys:\n${Object.entries(IDS).map(([id, l]) => `  - { id: ${id}, token: ${sha(token(id))}, groups: "*"${l === '' ? '' : `, limits: ${l}`} }`).join('\n')}\n`;
const INFER = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] });
const slow = (ms: number): string => JSON.stringify({ parameters: { delay_ms: ms }, inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1], data: [1] }] });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

jest.setTimeout(60_000);

interface Answer { status: number; text: string }

/** One call on a connection of its own (the kernel picks the worker). */
async function call(url: string, id: string, model = 'identity_fp32', body = INFER): Promise<Answer> {
  try {
    const r = await request(`${url}/v2/models/${model}/infer`, {
      method: 'POST', reset: true, headers: { authorization: `Bearer ${token(id)}`, 'content-type': 'application/json', connection: 'close' }, body,
      headersTimeout: 10_000, bodyTimeout: 10_000,
    });
    return { status: r.statusCode, text: await r.body.text() };
  } catch (err) {
    return { status: 0, text: String(err) };
  }
}

const count = (answers: readonly Answer[], status: number): number => answers.filter((a) => a.status === status).length;

async function metrics(port: number): Promise<Map<string, number>> {
  const r = await request(`http://127.0.0.1:${port}/metrics`);
  return prometheusSamples(await r.body.text());
}

const roundTrips = (m: Map<string, number>): number => m.get('tensorgate_auth_limits_store_round_trip_count') ?? 0;

needs(CURL()).describe('--workers 2 without a store: the primary counts the limits', () => {
  let dir: string;
  let backend: ReferenceBackend;
  let gw: Gw;
  let metricsPort: number;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tg-workers-limits-'));
    writeFileSync(join(dir, 'keys.yaml'), KEYS);
    backend = await startReferenceBackend({ host: '127.0.0.1' });
    metricsPort = await freePort();
    gw = await cliGateway(dir, ['--backend', backend.address, '--workers', '2', '--metrics-port', String(metricsPort), '--log-level', 'info',
      '--auth-limits', JSON.stringify({ storeTimeoutMs: 200 })]);
  });

  afterAll(async () => {
    await gw?.stop();
    await backend.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a key limited to 20 req/s (burst 20), driven at 100 req/s for 5 s over both workers: the total admitted is within 10 % of 120, not twice it', async () => {
    const answers: Promise<Answer>[] = [];
    const t0 = performance.now();
    for (let i = 0; i < 500; i++) {
      const wait = t0 + i * 10 - performance.now();
      if (wait > 0) await sleep(wait);
      answers.push(call(gw.url, 'rate'));
    }
    const done = await Promise.all(answers);
    const seconds = (performance.now() - t0) / 1000;
    const expected = 20 + 20 * seconds;
    const admitted = count(done, 200);
    process.stdout.write(`workers rate: ${done.length} requests in ${seconds.toFixed(2)} s, admitted ${admitted} (expected ${expected.toFixed(0)}), refused ${count(done, 429)}\n`);
    expect(count(done, 200) + count(done, 429)).toBe(500);
    expect(admitted).toBeGreaterThanOrEqual(Math.floor(expected * 0.9));
    expect(admitted).toBeLessThanOrEqual(Math.ceil(expected * 1.1));
  });

  test('a concurrency cap of 2 over both workers: never more than 2 in flight at the backend', async () => {
    backend.stats.slowMaxInFlight = 0;
    const answers: Answer[] = [];
    const until = performance.now() + 3000;
    await Promise.all(Array.from({ length: 6 }, async () => {
      while (performance.now() < until) {
        const a = await call(gw.url, 'conc', 'slow', slow(200));
        answers.push(a);
        if (a.status !== 200) await sleep(20);
      }
    }));
    process.stdout.write(`workers concurrency: ${answers.length} requests, admitted ${count(answers, 200)}, most in flight at the backend ${backend.stats.slowMaxInFlight}\n`);
    expect(backend.stats.slowMaxInFlight).toBe(2);
    expect(count(answers, 200) + count(answers, 429)).toBe(answers.length);
    expect(answers.find((a) => a.status === 429)?.text).toMatch(/'conc' already has 2 requests in flight, its concurrency limit/);
  });

  test('5 requests a minute: 15 at once over both workers, exactly 5 admitted; GET /usage/<id> on the primary sums the workers', async () => {
    const toMinuteEnd = (): number => 60_000 - (Date.now() % 60_000);
    if (toMinuteEnd() < 10_000) await sleep(toMinuteEnd() + 100);
    const answers = await Promise.all(Array.from({ length: 15 }, () => call(gw.url, 'quota')));
    expect(count(answers, 200)).toBe(5);
    expect(count(answers, 429)).toBe(10);
    const c = await curl('-s', '-X', 'POST', '-H', `Authorization: Bearer ${token('quota')}`, '-H', 'Content-Type: application/json', '--data', INFER,
      `${gw.url}/v2/models/identity_fp32/infer`);
    expect([c.status, c.headers['x-tensorgate-error']]).toEqual([429, 'GW_ERR_AUTH_QUOTA_EXHAUSTED']);
    const u = await curl('-s', `http://127.0.0.1:${metricsPort}/usage/key:quota`);
    const doc = JSON.parse(u.body.toString()) as { quotas: unknown[]; process: Record<string, { requests: number }>; workers: number };
    process.stdout.write(`workers usage: ${u.body.toString()}\n`);
    expect(u.status).toBe(200);
    expect(doc.workers).toBe(2);
    expect(doc.quotas).toEqual([expect.objectContaining({ unit: 'requests', per: 'minute', max: 5, used: 5, remaining: 0 })]);
    expect(doc.process.identity_fp32?.requests).toBe(5);
    expect((await curl('-s', `http://127.0.0.1:${metricsPort}/usage/key:nobody`)).status).toBe(404);
  });

  test('an identity without a limit makes no call to the primary', async () => {
    const before = roundTrips(await metrics(metricsPort));
    for (let i = 0; i < 30; i++) expect((await call(gw.url, 'free')).status).toBe(200);
    expect(roundTrips(await metrics(metricsPort))).toBe(before);
    // And one with a limit does (the count is able to see calls).
    expect((await call(gw.url, 'conc')).status).toBe(200);
    expect(roundTrips(await metrics(metricsPort))).toBeGreaterThan(before);
  });

  test('workers killed while they hold every place: the primary replaces them and the places come back', async () => {
    const pids = (/"worker_pids":\[(\d+),(\d+)\]/.exec(gw.out) ?? []).slice(1).map(Number);
    expect(pids).toHaveLength(2);
    // Both places held by calls that would last 30 s; a third refused.
    const held = [call(gw.url, 'conc', 'slow', slow(30_000)), call(gw.url, 'conc', 'slow', slow(30_000))];
    // Both running at the backend: both places are held (a fixed sleep was too short on a loaded machine).
    await waitUntil(() => backend.stats.slowInFlight >= 2, 'both slow calls running at the backend', 10_000);
    expect((await call(gw.url, 'conc', 'slow', slow(10))).status).toBe(429);
    const listening = (): number => gw.out.split('"worker listening"').length - 1;
    const before = listening();
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    expect((await Promise.all(held)).map((a) => a.status)).toEqual([0, 0]); // cut with their workers
    const t0 = performance.now();
    while (listening() < before + 2 && performance.now() - t0 < 10_000) await sleep(50);
    expect(listening()).toBe(before + 2);
    const again = await Promise.all([call(gw.url, 'conc', 'slow', slow(300)), call(gw.url, 'conc', 'slow', slow(300))]);
    process.stdout.write(`workers killed: replaced in ${(performance.now() - t0).toFixed(0)} ms; then ${again.map((a) => a.status).join(',')}\n`);
    expect(again.map((a) => a.status)).toEqual([200, 200]);
  });
});
