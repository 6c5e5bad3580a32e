// Least-request with Triton's own queue (upstream.queueMetrics) against two real Tritons serving
// the zoo's `slow` (one instance: one request executes, the others wait): a queue that other
// clients built on one replica — invisible to the gateway's own in-flight counts — steers the
// gateway's calls to the other replica; without the option they are shared. Each Triton is
// reached at its own loopback address (127.0.0.2, 127.0.0.3) through small forwarders, so that
// both metrics pages sit on the same port, as they do in a cluster (upstream.queueMetrics.port
// names one port for every backend's host). Which replica answered is Triton's own count.
import { type AddressInfo, connect, createServer, type Server } from 'node:net';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';
import { prometheusSamples } from '../support/prometheus';
import { slowBody } from '../support/load';
import { type RunningTriton, startTritons } from '../support/triton';
import { modelSample, modelSuccesses, successesGrownBy, tritonMetrics } from '../support/triton-repository';
import { needsFile, PYTHON } from '../support/tools';

needsFile(PYTHON()); // real Triton (test/support/triton.ts)

let a: RunningTriton;
let b: RunningTriton;
const forwarders: Server[] = [];

/** A TCP forwarder on host:port (port 0: a free one) to 127.0.0.1:to; resolves with its port. */
async function forward(host: string, port: number, to: number): Promise<number> {
  const server = createServer((client) => {
    const up = connect(to, '127.0.0.1');
    client.pipe(up).pipe(client);
    const end = (): void => { client.destroy(); up.destroy(); };
    client.on('error', end).on('close', end);
    up.on('error', end).on('close', end);
  });
  forwarders.push(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return (server.address() as AddressInfo).port;
}

beforeAll(async () => {
  [a, b] = await startTritons([{ models: ['slow'] }, { models: ['slow'] }]) as [RunningTriton, RunningTriton];
}, 400_000);

afterAll(async () => {
  for (const f of forwarders) f.close();
  await Promise.all([a?.stop(), b?.stop()]);
}, 90_000);

/**
 * Until both of `gw`'s backends have passed a health check: before that, calls go to the one that
 * passed first, and the comparison below needs both in the round robin.
 */
async function bothReady(gw: RunningGateway): Promise<void> {
  const end = Date.now() + 20_000;
  for (;;) {
    const r = await send(gw.metricsUrl!, { method: 'GET' });
    if (prometheusSamples(r.body.toString()).get('tensorgate_upstream_backends{state="ready"}') === 2) return;
    if (Date.now() > end) throw new Error('the gateway never had both backends ready');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** One call of `slow` (delay_ms) through the gateway: its status. */
const slowCall = (gw: RunningGateway, ms: number): Promise<number> =>
  send(`${gw.url}/v2/models/slow/infer`, { body: slowBody(ms), headers: { 'Content-Type': 'application/json' } }).then((r) => r.status);

test('a queue other clients built on one replica sends the gateway\'s calls to the other; without the option they are shared', async () => {
  // Both metrics pages on one port: A's at 127.0.0.2:P, B's at 127.0.0.3:P; their gRPC beside them.
  const metricsPort = await forward('127.0.0.2', 0, a.metrics);
  await forward('127.0.0.3', metricsPort, b.metrics);
  const grpcA = `127.0.0.2:${await forward('127.0.0.2', 0, a.grpc)}`;
  const grpcB = `127.0.0.3:${await forward('127.0.0.3', 0, b.grpc)}`;
  const withQueue = await gatewayFor(['--backend', grpcA, '--backend', grpcB, '--queue-metrics-port', String(metricsPort), '--queue-metrics-interval-ms', '200']);
  const without = await gatewayFor(['--backend', grpcA, '--backend', grpcB]);
  try {
    await Promise.all([bothReady(withQueue), bothReady(without)]);
    // The model's configuration cached on the gateway without the option: the calls compared below
    // pick their backends by load alone (a first call's configuration fetch picks one too).
    expect(await slowCall(without, 10)).toBe(200);
    // Another client queues four 4-s requests on A directly: one executes, three wait (~16 s in all).
    const direct = Array.from({ length: 4 }, () => send(`http://127.0.0.1:${a.http}/v2/models/slow/infer`,
      { body: slowBody(4000), headers: { 'Content-Type': 'application/json' } }));
    const end = Date.now() + 20_000;
    while ((modelSample(await tritonMetrics(a), 'nv_inference_pending_request_count', 'slow') ?? 0) < 3) {
      if (Date.now() > end) throw new Error('A never had 3 requests waiting');
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 600)); // the gateway has read A's queue since
    const beforeB = (await modelSuccesses(b, 'slow')) ?? 0;
    // Eight short calls, one at a time: all on B, none waits behind A's queue.
    const t0 = Date.now();
    for (let i = 0; i < 8; i++) expect(await slowCall(withQueue, 10)).toBe(200);
    const tookMs = Date.now() - t0;
    expect(await successesGrownBy([b], 'slow', [beforeB], 8)).toEqual([8]); // Triton counts a moment after the answer
    // The same without the queue metric: the gateway's own in-flight counts, round robin, some on A
    // (behind its queue). Four at once: a call that ends before the next is picked (a loaded
    // machine) still leaves the others to share.
    const t1 = Date.now();
    const shared = await Promise.all(Array.from({ length: 4 }, () => slowCall(without, 10)));
    const sharedMs = Date.now() - t1;
    expect(shared).toEqual([200, 200, 200, 200]);
    process.stdout.write(`[faults] queue metrics: 8 calls with A's queue read took ${tookMs} ms, all on B; `
      + `4 calls without it took ${sharedMs} ms (some waited behind A's queue)\n`);
    expect(sharedMs).toBeGreaterThan(2000);
    expect((await Promise.all(direct)).map((r) => r.status)).toEqual([200, 200, 200, 200]);
  } finally {
    await Promise.all([withQueue.close(), without.close()]);
  }
}, 120_000);
