// The live backend set against reference backends on 127.0.0.1: a killed replica is retried
// around and ejected without a failed request, /readyz follows the set, a dns:/// name expands
// to its addresses.
import type { RunningGateway } from '../../gateway/gateway';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { gatewayFor } from '../support/gateway';
import { binaryBody, send } from '../support/http';
import { prometheusSamples } from '../support/prometheus';
import { RecordTap } from '../support/records';

const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1], data: [7] }] });
const infer = (gw: RunningGateway) => send(`${gw.url}/v2/models/identity_uint8/infer`, { body });
const portOf = (b: ReferenceBackend): number => Number(b.address.slice(b.address.lastIndexOf(':') + 1));

async function metrics(gw: RunningGateway): Promise<Map<string, number>> {
  return prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
}

/** Polls `probe` every 20 ms until it holds; throws naming `what` after `ms`. */
async function eventually(probe: () => Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await probe())) {
    if (Date.now() >= end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const readyz = async (gw: RunningGateway): Promise<number> => (await send(`${gw.url}/readyz`)).status;

describe('two backends, one killed', () => {
  test('refused calls are retried on the other and counted; after ejection no call goes to it; no request fails', async () => {
    const a = await startReferenceBackend({ host: '127.0.0.1' });
    const b = await startReferenceBackend({ host: '127.0.0.1' });
    // Checks slow enough that passive ejection, not the health check, takes b out.
    const gw = await gatewayFor(['--backend', a.address, '--backend', b.address, '--health-check-interval-ms', '60000', '--eject-after-failures', '2']);
    const tap = new RecordTap();
    tap.start();
    try {
      expect((await metrics(gw)).get('tensorgate_upstream_backends{state="ready"}')).toBe(2);
      for (let i = 0; i < 4; i++) expect((await infer(gw)).status).toBe(200);
      expect([a.stats.inferCalls, b.stats.inferCalls]).toEqual([2, 2]);
      await b.close(0);
      const statuses: number[] = [];
      for (let i = 0; i < 20; i++) statuses.push((await infer(gw)).status);
      expect(statuses).toEqual(Array(20).fill(200));
      expect(a.stats.inferCalls).toBe(22);
      await tap.until(24);
      const retries = tap.records.reduce((n, r) => n + (r.retries ?? 0), 0);
      const m = await metrics(gw);
      // b's first refused call and the next one (ejectAfterFailures 2) were retried on a; then b is out.
      expect(retries).toBe(2);
      expect(m.get('tensorgate_upstream_retries_total')).toBe(2);
      expect(m.get('tensorgate_upstream_ejections_total')).toBe(1);
      expect(m.get('tensorgate_upstream_backends{state="ejected"}')).toBe(1);
      expect(m.get('tensorgate_upstream_backends{state="ready"}')).toBe(1);
    } finally {
      tap.stop();
      await gw.close();
      await a.close();
    }
  });
});

describe('retries only what never reached Triton', () => {
  test('a cut-through request whose connection is refused is replayed on the other backend; a sequence request is not retried', async () => {
    const a = await startReferenceBackend({ host: '127.0.0.1' });
    const b = await startReferenceBackend({ host: '127.0.0.1' });
    // b stays in the rotation after it dies: no check before the test ends, no ejection.
    const gw = await gatewayFor(['--backend', a.address, '--backend', b.address, '--health-check-interval-ms', '60000', '--eject-after-failures', '100']);
    const tap = new RecordTap();
    tap.start();
    try {
      expect((await infer(gw)).status).toBe(200); // the config is cached: from now on every pick is an infer call
      const before = a.stats.inferCalls;
      await b.close(0);
      // Two in a row: one goes to b, whose connection is refused before any piece left, so its
      // pieces go to a.
      const bin = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 4], parameters: { binary_data_size: 4 } }] }, Buffer.from([1, 2, 3, 4]));
      for (let i = 0; i < 2; i++) expect((await send(`${gw.url}/v2/models/identity_uint8/infer`, { body: bin.body, headers: bin.headers })).status).toBe(200);
      // Sequence requests: every call of a sequence goes to the backend its key picks, and is
      // never retried — one on b fails rather than go elsewhere. Sequences 1..16 meet both backends
      // (all on one: a chance of 2 in 65,536).
      const answers = [];
      for (let id = 1; id <= 16; id++) {
        const seq = JSON.stringify({ parameters: { sequence_id: id, sequence_start: true }, inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 1], data: [7] }] });
        answers.push([(await send(`${gw.url}/v2/models/identity_uint8/infer`, { body: seq })).status, (await send(`${gw.url}/v2/models/identity_uint8/infer`, { body: seq })).status]);
      }
      expect(answers.filter(([x, y]) => x !== y)).toEqual([]); // both calls of a sequence met the same backend
      const onA = answers.filter(([x]) => x === 200).length;
      expect(answers.every(([x]) => x === 200 || x === 503)).toBe(true);
      expect([onA > 0, onA < 16]).toEqual([true, true]);
      await tap.until(35);
      const later = tap.records.slice(1);
      expect(later.slice(0, 2).map((r) => r.encoding)).toEqual(['binary', 'binary']);
      expect(later.slice(0, 2).map((r) => [r.status, r.retries ?? 0]).sort()).toEqual([[200, 0], [200, 1]]);
      expect(later.slice(2).every((r) => r.encoding === 'json' && r.retries === undefined)).toBe(true);
      expect(a.stats.inferCalls - before).toBe(2 + 2 * onA);
    } finally {
      tap.stop();
      await gw.close();
      await a.close();
    }
  });
});

describe('/readyz and the set', () => {
  test('503 while no backend is ready (calls fail fast with GW_ERR_UPSTREAM_NO_BACKEND), 200 again once one returns', async () => {
    let backend = await startReferenceBackend({ host: '127.0.0.1' });
    const port = portOf(backend);
    const gw = await gatewayFor(['--backend', backend.address, '--health-check-interval-ms', '100', '--unhealthy-threshold', '1', '--healthy-threshold', '1']);
    try {
      expect(await readyz(gw)).toBe(200);
      await backend.close(0);
      await eventually(async () => (await readyz(gw)) === 503, '/readyz 503');
      const started = Date.now();
      const r = await infer(gw);
      expect(Date.now() - started).toBeLessThan(1000);
      expect([r.status, r.headers['x-tensorgate-error'], JSON.parse(r.body.toString())]).toEqual([
        503, 'GW_ERR_UPSTREAM_NO_BACKEND', { error: 'no ready backend among upstream.backends (1 unhealthy)' },
      ]);
      backend = await startReferenceBackend({ host: '127.0.0.1', port });
      await eventually(async () => (await readyz(gw)) === 200, '/readyz 200 again');
      expect((await infer(gw)).status).toBe(200);
    } finally {
      await gw.close();
      await backend.close();
    }
  });
});

describe('dns:///', () => {
  test('dns:///localhost:PORT expands to localhost\'s addresses; the one listening is ready and serves', async () => {
    const backend = await startReferenceBackend({ host: '127.0.0.1' });
    const gw = await gatewayFor(['--backend', `dns:///localhost:${portOf(backend)}`, '--health-check-interval-ms', '200']);
    try {
      await eventually(async () => (await readyz(gw)) === 200, '/readyz 200');
      const m = await metrics(gw);
      expect(m.get('tensorgate_upstream_backends{state="ready"}')).toBe(1);
      // localhost may also resolve to ::1, where nothing listens: that backend is never picked.
      const total = ['connecting', 'ready', 'unhealthy', 'ejected'].reduce((n, s) => n + (m.get(`tensorgate_upstream_backends{state="${s}"}`) ?? 0), 0);
      expect(total).toBeGreaterThanOrEqual(1);
      for (let i = 0; i < 4; i++) expect((await infer(gw)).status).toBe(200);
      expect(backend.stats.inferCalls).toBe(4);
    } finally {
      await gw.close();
      await backend.close();
    }
  });
});
