// Quotas over windows and usage (docs/production.md "Quotas and usage"): a real redis-server
// started here, the reference backend in this process, and the built CLI as three gateway
// processes counting in it. A requests quota refused exactly at its max across the three, with
// Retry-After at the window's end; a tokens quota spent by streamed completions across them,
// refused once spent, and a stream cut by its client charged for what was sent; a soft quota that
// warns; the usage endpoint's totals reconciled with the backend's statistics; the store failing
// under storeFailure closed; and without a store, a quota per process.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { curl } from '../support/curl';
import { freePort } from '../support/observed';
import { prometheusSamples } from '../support/prometheus';
import { type Gw, redisSuite } from '../support/redis-server';
import { CURL, needs, REDIS_SERVER } from '../support/tools';

const PASSWORD = 'quotas-test-pw';
const IDS = ['req', 'tok', 'cut', 'soft', 'bill', 'fail', 'local', 'free'] as const;
const token = (id: string): string => `${id}-quota-key-token-0123456789`;
const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
const QUOTAS: Record<(typeof IDS)[number], string> = {
  req: '[{ unit: requests, per: minute, max: 5 }]',
  tok: '[{ unit: tokens, per: month, max: 1000 }]',
  cut: '[{ unit: tokens, per: month, max: 100000 }]',
  soft: '[{ unit: requests, per: hour, max: 2, policy: soft }]',
  bill: '[{ unit: requests, per: day, max: 100000 }, { unit: inferences, per: day, max: 100000 }, { unit: outputBytes, per: day, max: 1000000000 }]',
  fail: '[{ unit: requests, per: day, max: 1000 }]',
  local: '[{ unit: requests, per: minute, max: 3 }]',
  free: '',
};
const KEYS = `keys:\n${IDS.map((id) => `  - { id: ${id}, token: ${sha(token(id))}, groups: "*"${QUOTAS[id] === '' ? '' : `, limits: { quotas: ${QUOTAS[id]} }`} }`).join('\n')}\n`;
const infer = (batch = 1): string => JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [batch, 4], data: Array.from({ length: 4 * batch }, (_, i) => i) }] });
const OPENAI_MODELS = JSON.stringify([{ id: 'tiny_llm', convention: 'vllm' }]);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

jest.setTimeout(90_000);

interface Answer { status: number; headers: Record<string, string | string[] | undefined>; text: string }

const agent = new Agent({ connections: 32 });

async function post(url: string, id: string, path: string, body: string): Promise<Answer> {
  const r = await request(`${url}${path}`, {
    method: 'POST', dispatcher: agent, headers: { authorization: `Bearer ${token(id)}`, 'content-type': 'application/json' }, body,
    headersTimeout: 10_000, bodyTimeout: 10_000,
  });
  return { status: r.statusCode, headers: r.headers, text: await r.body.text() };
}

const inferOn = (url: string, id: string, batch = 1): Promise<Answer> => post(url, id, '/v2/models/identity_fp32/infer', infer(batch));

/** A streamed completion of `prompt` (its words are its tokens) and `max` tokens, with the usage chunk. */
const complete = (url: string, id: string, prompt: string, max: number): Promise<Answer> =>
  post(url, id, '/openai/v1/completions', JSON.stringify({ model: 'tiny_llm', prompt, max_tokens: max, stream: true, stream_options: { include_usage: true } }));

/** total_tokens of a streamed answer's usage chunk. */
function totalTokens(a: Answer): number {
  const usage = a.text.split('\n\n').filter((e) => e.startsWith('data: {')).map((e) => JSON.parse(e.slice(6)) as { usage?: { total_tokens: number } | null }).at(-1)?.usage;
  if (usage === undefined || usage === null) throw new Error(`no usage in ${a.text}`);
  return usage.total_tokens;
}

interface QuotaState { unit: string; per: string; max: number; used: number; remaining: number; window: { start: string; end: string } }
interface UsageDoc { id: string; quotas: QuotaState[]; process: Record<string, Record<string, number>> }

async function usage(metricsPort: number, id: string): Promise<UsageDoc> {
  const r = await request(`http://127.0.0.1:${metricsPort}/usage/${encodeURIComponent(id)}`);
  const text = await r.body.text();
  if (r.statusCode !== 200) throw new Error(`${r.statusCode} ${text}`);
  return JSON.parse(text) as UsageDoc;
}

/** Seconds to the end of the current UTC minute, rounded up (a Retry-After told now). */
const toMinuteEnd = (): number => Math.ceil((60_000 - (Date.now() % 60_000)) / 1000);

needs(REDIS_SERVER(), CURL()).describe('quotas over windows (auth.limits quotas)', () => {
  const suite = redisSuite('quotas', KEYS, PASSWORD);
  /** Gateways with a metrics port of their own (for GET /usage). */
  const start = async (store: boolean, more: Record<string, unknown> = {}, args: string[] = []): Promise<Gw & { metricsPort: number }> => {
    const metricsPort = await freePort();
    const limits = store ? { store: suite.store(), storeTimeoutMs: 200, ...more } : more;
    const g = await suite.gateway(['--metrics-port', String(metricsPort), '--auth-limits', JSON.stringify(limits), '--openai-models', OPENAI_MODELS, ...args]);
    return Object.assign(g, { metricsPort });
  };
  const three = (more: Record<string, unknown> = {}): Promise<(Gw & { metricsPort: number })[]> => Promise.all([0, 1, 2].map(() => start(true, more)));
  afterAll(() => agent.close());

  test('5 requests a minute across three gateways: 15 at once, exactly 5 admitted; Retry-After is the seconds to the minute\'s end', async () => {
    const gws = await three();
    // Not across a minute's end: its window would change under the test.
    if (toMinuteEnd() < 10) await sleep(toMinuteEnd() * 1000 + 100);
    const answers = await Promise.all(Array.from({ length: 15 }, (_, i) => inferOn(gws[i % 3]!.url, 'req')));
    const expected = toMinuteEnd();
    const refused = answers.filter((a) => a.status === 429);
    process.stdout.write(`requests quota: ${answers.map((a) => a.status).join(',')}; Retry-After ${String(refused[0]?.headers['retry-after'])} (expected ~${expected})\n`);
    expect(answers.filter((a) => a.status === 200).length).toBe(5);
    expect(refused.length).toBe(10);
    for (const r of refused) {
      expect(r.headers['x-tensorgate-error']).toBe('GW_ERR_AUTH_QUOTA_EXHAUSTED');
      expect(Math.abs(Number(r.headers['retry-after']) - expected)).toBeLessThanOrEqual(1);
      expect(JSON.parse(r.text)).toEqual({ error: expect.stringMatching(/^'req' has spent its quota of 5 requests per minute \(5 used, the key's limits in auth\.keysFile\); the window ends at \S+Z, retry after \d+ s$/) as unknown });
    }
    // curl, as a user sees it.
    const c = await curl('-s', '-X', 'POST', '-H', `Authorization: Bearer ${token('req')}`, '-H', 'Content-Type: application/json', '--data', infer(), `${gws[2]!.url}/v2/models/identity_fp32/infer`);
    expect([c.status, c.headers['x-tensorgate-error']]).toEqual([429, 'GW_ERR_AUTH_QUOTA_EXHAUSTED']);
    const doc = await usage(gws[0]!.metricsPort, 'key:req');
    expect(doc.quotas).toEqual([expect.objectContaining({ unit: 'requests', per: 'minute', max: 5, used: 5, remaining: 0 })]);
  });

  test('1,000 tokens a month spent by streamed completions across three gateways: refused once spent, exactly; what was charged is what was served', async () => {
    const gws = await three();
    const served: number[] = [];
    let refusal: Answer | undefined;
    // 4 prompt tokens + 16: 20 a completion, charged 16 as it streams and 4 at its end.
    for (let i = 0; i < 60 && refusal === undefined; i++) {
      const a = await complete(gws[i % 3]!.url, 'tok', 'one two three four', 16);
      if (a.status === 200) served.push(totalTokens(a));
      else refusal = a;
    }
    const total = served.reduce((n, t) => n + t, 0);
    process.stdout.write(`tokens quota: ${served.length} completions of ${served[0]} tokens served (${total}), then ${refusal?.status}\n`);
    expect(served.every((t) => t === 20)).toBe(true);
    // Admitted while the window had a token left; refused at the first request once 1,000 were spent.
    expect(served.length).toBe(50);
    expect(refusal?.status).toBe(429);
    expect((JSON.parse(refusal!.text) as { error: { message: string } }).error.message).toContain('has spent its quota of 1000 tokens per month (1000 used');
    const doc = await usage(gws[1]!.metricsPort, 'key:tok');
    expect(doc.quotas[0]).toEqual(expect.objectContaining({ unit: 'tokens', per: 'month', used: total, remaining: 0 }));
  });

  test('a stream its client cuts is charged for what was sent, never 0', async () => {
    const [gw] = await Promise.all([start(true)]);
    // `slowly`: a token every 50 ms; 4 prompt tokens, up to 40 generated.
    const r = await request(`${gw.url}/openai/v1/completions`, {
      method: 'POST', dispatcher: agent, headers: { authorization: `Bearer ${token('cut')}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny_llm', prompt: 'go on slowly now', max_tokens: 40, stream: true }),
    });
    let received = 0;
    for await (const chunk of r.body) {
      received += (String(chunk).match(/^data: \{/gm) ?? []).length;
      if (received >= 20) break; // leaves the loop: the body is destroyed, the connection closed
    }
    let used = 0;
    for (let i = 0; i < 50 && used < 4 + received; i++) {
      await sleep(100);
      used = (await usage(gw.metricsPort, 'key:cut')).quotas[0]!.used;
    }
    await sleep(300);
    used = (await usage(gw.metricsPort, 'key:cut')).quotas[0]!.used;
    process.stdout.write(`cut stream: ${received} chunks received, ${used} tokens charged (4 prompt + what was generated before the cut)\n`);
    expect(used).toBeGreaterThanOrEqual(4 + received);
    expect(used).toBeLessThan(4 + 40);
    expect(suite.backend.stats.streamCancellations).toBeGreaterThanOrEqual(1);
  });

  test('a soft quota warns and admits: X-Quota-Warning and tensorgate_auth_quota_warnings_total', async () => {
    const gw = await start(true);
    const answers: Answer[] = [];
    for (let i = 0; i < 4; i++) answers.push(await inferOn(gw.url, 'soft'));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(answers.map((a) => a.headers['x-quota-warning'])).toEqual([undefined, undefined,
      'requests quota of key:soft spent: 3 of 2 per hour (the key\'s limits in auth.keysFile)', 'requests quota of key:soft spent: 4 of 2 per hour (the key\'s limits in auth.keysFile)']);
    const m = await request(`http://127.0.0.1:${gw.metricsPort}/metrics`);
    const text = await m.body.text();
    const samples = prometheusSamples(text);
    expect(samples.get('tensorgate_auth_quota_warnings_total{limit="key:soft",unit="requests"}')).toBe(2);
    // The dashboard's store panels draw series a gateway with a store exports (prometheus.test.ts runs without one).
    expect(samples.get('tensorgate_auth_limits_store_up')).toBe(1);
    const dashboard = JSON.parse(readFileSync(join(__dirname, '../../deploy/grafana/tensorgate.json'), 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const names = dashboard.panels.filter((x) => x.title.startsWith('Limits store')).flatMap((x) => x.targets!.map((t) => /(tensorgate_\w+)\{/.exec(t.expr)![1]!));
    expect(names.length).toBe(5);
    const exported = new Set([...samples.keys()].map((k) => k.split('{')[0]!));
    // Errors and fallbacks are counted once they happen; their HELP is there before.
    for (const n of names) expect([n, exported.has(n) || new RegExp(`^# HELP ${n.replace(/_total$/, '')}`, 'm').test(text)]).toEqual([n, true]);
  });

  test('reconciliation: the usage over the replicas equals what the backend\'s statistics say ran', async () => {
    const gws = await three();
    const stats = async (): Promise<{ inference_count: number; execution_count: number }> => {
      const r = await request(`${gws[0]!.url}/v2/models/identity_fp32/stats`, { headers: { authorization: `Bearer ${token('free')}` } });
      return (JSON.parse(await r.body.text()) as { model_stats: { inference_count: number; execution_count: number }[] }).model_stats[0]!;
    };
    const before = await stats();
    const batches = Array.from({ length: 30 }, (_, i) => 1 + (i % 3));
    const answers = await Promise.all(batches.map((b, i) => inferOn(gws[i % 3]!.url, 'bill', b)));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const after = await stats();
    // What a request used is charged after its answer's end left (not awaited): read once it has landed.
    let docs: UsageDoc[] = [];
    for (let i = 0; i < 20 && docs[0]?.quotas.find((q) => q.unit === 'inferences')?.used !== 60; i++) {
      if (i > 0) await sleep(100);
      docs = await Promise.all(gws.map((g) => usage(g.metricsPort, 'key:bill')));
    }
    const sum = (unit: string): number => docs.reduce((n, d) => n + (d.process.identity_fp32?.[unit] ?? 0), 0);
    const shared = Object.fromEntries(docs[0]!.quotas.map((q) => [q.unit, q.used]));
    const bytes = answers.reduce((n, a) => n + Buffer.byteLength(a.text), 0);
    process.stdout.write(`reconciliation: backend ran ${after.execution_count - before.execution_count} executions, ${after.inference_count - before.inference_count} inferences; `
      + `usage over the replicas ${sum('requests')} requests, ${sum('inferences')} inferences, ${sum('outputBytes')} output bytes (clients read ${bytes}); store ${JSON.stringify(shared)}\n`);
    expect(sum('requests')).toBe(after.execution_count - before.execution_count);
    expect(sum('inferences')).toBe(after.inference_count - before.inference_count);
    expect(sum('inferences')).toBe(60);
    expect(shared).toEqual({ requests: 30, inferences: 60, outputBytes: bytes });
    expect(sum('outputBytes')).toBe(bytes);
    // /metrics: tensorgate_usage_total by key, model and unit, summed over the replicas.
    const scraped = await Promise.all(gws.map(async (g) => prometheusSamples(await (await request(`http://127.0.0.1:${g.metricsPort}/metrics`)).body.text())));
    const metric = (unit: string): number => scraped.reduce((n, s) => n + (s.get(`tensorgate_usage_total{key="key:bill",model="identity_fp32",unit="${unit}"}`) ?? 0), 0);
    expect([metric('requests'), metric('inferences')]).toEqual([30, 60]);
  });

  test('the store killed under storeFailure closed: a request with a quota gets 503 at once, and counting resumes once it is back', async () => {
    const gw = await start(true, { storeFailure: 'closed', storeTimeoutMs: 50 });
    expect((await inferOn(gw.url, 'fail')).status).toBe(200);
    await suite.redis.kill();
    try {
      const t0 = performance.now();
      const a = await inferOn(gw.url, 'fail');
      expect(performance.now() - t0).toBeLessThan(1000);
      expect([a.status, a.headers['retry-after'], a.headers['x-tensorgate-error']]).toEqual([503, '1', 'GW_ERR_AUTH_LIMITS_UNAVAILABLE']);
      expect(JSON.parse(a.text).error).toMatch(/^the quotas of these credentials cannot be judged now: .+; auth\.limits\.storeFailure is closed, retry after 1 s$/);
      // A key without a quota makes no store call: served.
      expect((await inferOn(gw.url, 'free')).status).toBe(200);
    } finally {
      await suite.redis.start();
    }
    let status = 0;
    for (let i = 0; i < 60 && status !== 200; i++) {
      await sleep(100);
      status = (await inferOn(gw.url, 'fail')).status;
    }
    expect(status).toBe(200);
    // A restarted Redis without persistence starts empty: counted from there.
    expect((await usage(gw.metricsPort, 'key:fail')).quotas[0]!.used).toBe(1);
  });

  test('without a store, a quota per process; each request\'s usage in the access line', async () => {
    const gw = await start(false, {}, ['--log-level', 'info']);
    if (toMinuteEnd() < 5) await sleep(toMinuteEnd() * 1000 + 100);
    const answers: Answer[] = [];
    for (let i = 0; i < 5; i++) answers.push(await inferOn(gw.url, 'local'));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429, 429]);
    expect((await usage(gw.metricsPort, 'key:local')).quotas[0]).toEqual(expect.objectContaining({ used: 3, remaining: 0 }));
    // An identity nothing configures, a method other than GET.
    const unknown = await curl('-s', `http://127.0.0.1:${gw.metricsPort}/usage/key%3Anobody`);
    expect([unknown.status, JSON.parse(unknown.body.toString())]).toEqual([404, { error: 'no limits configure \'key:nobody\': give key:<id>, jwt:<sub> or group:<name>' }]);
    expect((await curl('-s', '-X', 'POST', `http://127.0.0.1:${gw.metricsPort}/usage/key:local`)).status).toBe(405);
    await sleep(200);
    const lines = gw.out.split('\n').filter((l) => l.includes('"route":"infer"')).map((l) => JSON.parse(l) as { status: number; usage?: Record<string, number> });
    const served = lines.find((l) => l.status === 200)!;
    const bytes = { inputBytes: Buffer.byteLength(infer()), outputBytes: Buffer.byteLength(answers[0]!.text) };
    expect(served.usage).toEqual({ requests: 1, inferences: 1, ...bytes, tokens: 0 });
    expect(lines.find((l) => l.status === 429)?.usage).toBeUndefined();
  });
});
