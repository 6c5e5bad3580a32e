// Usage that reconciles with what real Triton ran (docs/production.md "Quotas and usage"): three
// gateway processes sharing a real redis-server (auth.limits.store) in front of the suite's Triton,
// batches of different sizes spread over them. The sum over the three of GET /usage/<id>'s
// `process`, and the shared quota counters, equal what Triton's own statistics
// (/v2/models/<m>/stats) say ran: requests = success.count, inferences = inference_count.
// identity_uint16 is a model no other conformance file calls, so its statistics are this file's.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { freePort } from '../support/observed';
import { cliGateway, type Gw, RedisServer } from '../support/redis-server';
import { needs, REDIS_SERVER } from '../support/tools';

const MODEL = 'identity_uint16';
const TOKEN = 'bill-triton-key-token-0123456789';
const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
const KEYS = `keys:\n  - { id: bill, token: ${sha(TOKEN)}, groups: "*", limits: { quotas: [`
  + '{ unit: requests, per: day, max: 1000000 }, { unit: inferences, per: day, max: 1000000 }] } }\n';
const BATCHES = [1, 2, 3, 5, 8];
const infer = (batch: number): string => JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT16', shape: [batch, 3], data: Array.from({ length: 3 * batch }, (_, i) => i) }] });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

jest.setTimeout(120_000);

interface Stats { inference_count: number; execution_count: number; success: number }

async function tritonStats(): Promise<Stats> {
  const r = await request(`http://${process.env.TRITON_HTTP}/v2/models/${MODEL}/stats`);
  type ModelStats = { inference_count: number; execution_count: number; inference_stats: { success: { count: number } } };
  const s = (await r.body.json() as { model_stats: ModelStats[] }).model_stats[0]!;
  return { inference_count: s.inference_count, execution_count: s.execution_count, success: s.inference_stats.success.count };
}

interface UsageDoc { quotas: { unit: string; used: number }[]; process: Record<string, { requests: number; inferences: number }> }

async function usage(metricsPort: number): Promise<UsageDoc> {
  const r = await request(`http://127.0.0.1:${metricsPort}/usage/key:bill`);
  return await r.body.json() as UsageDoc;
}

needs(REDIS_SERVER()).describe('usage reconciled with real Triton\'s statistics (three gateways, one redis-server)', () => {
  let dir: string;
  let redis: RedisServer;
  const gws: (Gw & { metricsPort: number })[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tg-usage-triton-'));
    writeFileSync(join(dir, 'keys.yaml'), KEYS);
    redis = new RedisServer(await freePort(), 'usage-triton-pw');
    await redis.start();
    const limits = JSON.stringify({ store: `redis://:usage-triton-pw@127.0.0.1:${redis.port}`, storeTimeoutMs: 200 });
    for (let i = 0; i < 3; i++) {
      const metricsPort = await freePort();
      const g = await cliGateway(dir, ['--backend', process.env.TRITON_GRPC!, '--metrics-port', String(metricsPort), '--auth-limits', limits]);
      gws.push(Object.assign(g, { metricsPort }));
    }
  });

  afterAll(async () => {
    await Promise.all(gws.map((g) => g.stop()));
    await redis?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  test('requests and inferences (batch sizes 1–8) summed over the gateways equal Triton\'s success count and inference_count', async () => {
    const before = await tritonStats();
    let sent = 0;
    // 30 calls, 6 at a time, each gateway in turn, batch sizes cycling.
    for (let round = 0; round < 5; round++) {
      const answers = await Promise.all(Array.from({ length: 6 }, async (_, j) => {
        const i = round * 6 + j;
        const batch = BATCHES[i % BATCHES.length]!;
        sent += batch;
        const r = await request(`${gws[i % 3]!.url}/v2/models/${MODEL}/infer`, {
          method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: infer(batch),
        });
        await r.body.dump();
        return r.statusCode;
      }));
      expect(answers).toEqual([200, 200, 200, 200, 200, 200]);
    }
    // Triton records a request's statistics when it releases the request, which can come after its
    // answer has left: read them until every request is in, or for 5 s (a CI run beside a busy loop
    // read 29 of 30 right after the 30th answer).
    let after = await tritonStats();
    for (let i = 0; i < 50 && after.success - before.success < 30; i++) {
      await sleep(100);
      after = await tritonStats();
    }
    const ran = { requests: after.success - before.success, inferences: after.inference_count - before.inference_count };
    // The charges after the call are not awaited by the answer: read until they are in.
    let counted = { requests: 0, inferences: 0 };
    let shared: Record<string, number> = {};
    for (let i = 0; i < 50; i++) {
      const docs = await Promise.all(gws.map((g) => usage(g.metricsPort)));
      counted = {
        requests: docs.reduce((t, d) => t + (d.process[MODEL]?.requests ?? 0), 0),
        inferences: docs.reduce((t, d) => t + (d.process[MODEL]?.inferences ?? 0), 0),
      };
      shared = Object.fromEntries(docs[0]!.quotas.map((q) => [q.unit, q.used]));
      if (shared.inferences === ran.inferences && counted.inferences === ran.inferences) break;
      await sleep(100);
    }
    process.stdout.write(`usage vs Triton: sent ${sent} inferences in 30 requests; Triton ran ${ran.requests} requests, ${ran.inferences} inferences `
      + `in ${after.execution_count - before.execution_count} executions; gateways counted ${JSON.stringify(counted)}, the store ${JSON.stringify(shared)}\n`);
    expect(ran).toEqual({ requests: 30, inferences: sent });
    expect(counted).toEqual(ran);
    expect(shared).toEqual(ran);
  });
});
