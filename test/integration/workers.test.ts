// workers > 1 (docs/workers.md): the built CLI as a node:cluster primary with real worker
// processes, the demo reference backend in the primary, everything on 127.0.0.1.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { makePki, pemText } from '../support/certs';
import { prometheusSamples } from '../support/prometheus';
import { handshake, secretDir } from '../support/tls';
import { needs, OPENSSL } from '../support/tools';

const BIN = join(__dirname, '../../bin/tensorgate');
const BODY = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: Array(16).fill(1.5) }] });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

jest.setTimeout(120_000);

interface Cluster {
  readonly child: ChildProcess;
  readonly url: string;
  readonly metricsUrl: string;
  readonly workerPids: readonly number[];
  readonly listen: string;
  /** Every JSON log line so far. */
  logs(): Record<string, unknown>[];
  /** Waits for a log line. */
  waitFor(pred: (l: Record<string, unknown>) => boolean, what: string): Promise<Record<string, unknown>>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  stdout(): string;
}

async function startCluster(args: string[]): Promise<Cluster> {
  const child = spawn(BIN, ['--demo', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => { out += s; });
  child.stderr.setEncoding('utf8').on('data', (s: string) => { err += s; });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const logs = (): Record<string, unknown>[] => out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  const waitFor = async (pred: (l: Record<string, unknown>) => boolean, what: string): Promise<Record<string, unknown>> => {
    // Generous: the machines running these tests are small and shared.
    for (let i = 0; i < 2400; i++) {
      const l = logs().find(pred);
      if (l !== undefined) return l;
      if (child.exitCode !== null) break;
      await sleep(25);
    }
    throw new Error(`no ${what}; stdout:\n${out}\nstderr:\n${err}`);
  };
  const started = await waitFor((l) => l.msg === 'cluster started', 'cluster started line');
  const first = out.split('\n')[0]!;
  const m = /^tensorgate listening on (https?:\/\/127\.0\.0\.1:\d+) \(backend 127\.0\.0\.1:\d+, demo reference backend\)$/.exec(first);
  if (m === null) throw new Error(`first line is not the listening line: ${first}`);
  return {
    child,
    url: m[1]!,
    metricsUrl: started.metrics_url as string,
    workerPids: started.worker_pids as number[],
    listen: started.listen as string,
    logs,
    waitFor,
    stdout: () => out,
    async stop(signal = 'SIGTERM') {
      child.kill(signal);
      return exited;
    },
  };
}

/** Alive and not a zombie (a zombie still answers kill(pid, 0)). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

/** n inferences, each on a new connection so the kernel (or cluster) spreads them; 4 at a time. */
async function infer(url: string, n: number): Promise<number[]> {
  const statuses: number[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: 4 }, async () => {
    while (next < n) {
      next++;
      const agent = new Agent({ pipelining: 0 });
      try {
        const r = await request(`${url}/v2/models/identity_fp32/infer`, { method: 'POST', body: BODY, dispatcher: agent });
        await r.body.text();
        statuses.push(r.statusCode);
      } finally {
        await agent.close();
      }
    }
  }));
  return statuses;
}

async function scrape(url: string): Promise<Map<string, number>> {
  return prometheusSamples(await (await fetch(url)).text());
}

const sum = (m: Map<string, number>, prefix: string): number =>
  [...m].filter(([k]) => k.startsWith(prefix)).reduce((a, [, v]) => a + v, 0);
const INFER_COUNT = 'http_server_request_duration_count{http_route="infer",';
const INFER_IN_FLIGHT = 'tensorgate_requests_in_flight{http_route="infer"}';

/**
 * Polls /metrics until the infer count reaches n (records land when responses finish; no event
 * crosses the processes).
 */
async function metricsAt(url: string, n: number): Promise<Map<string, number>> {
  let m = await scrape(url);
  for (let i = 0; i < 100 && sum(m, INFER_COUNT) < n; i++) {
    await sleep(50);
    m = await scrape(url);
  }
  if (sum(m, INFER_COUNT) < n) throw new Error(`the infer count on /metrics stayed at ${sum(m, INFER_COUNT)} for 5 s, expected ${n}`);
  return m;
}

describe('workers: 2', () => {
  test.each([
    ['reuseport', []],
    ['shared', ['--reuse-port=false']],
  ])('%s: both workers serve, /metrics is their exact sum, SIGTERM stops every process', async (listen, extra) => {
    const c = await startCluster(['--workers', '2', ...extra]);
    const pids = [c.child.pid!, ...c.workerPids];
    try {
      expect(c.listen).toBe(listen);
      expect(c.workerPids).toHaveLength(2);
      expect(new Set(pids).size).toBe(3);
      expect(c.stdout().match(/tensorgate listening on/g)).toHaveLength(1);

      const N = 40;
      expect(await infer(c.url, N)).toEqual(Array(N).fill(200));
      // Each worker's access lines carry its number and pid.
      await c.waitFor(() => c.logs().filter((l) => l.route === 'infer').length === N, `${N} access lines`);
      const served = new Set(c.logs().filter((l) => l.route === 'infer').map((l) => l.pid));
      expect([...served].sort()).toEqual([...c.workerPids].sort());

      const m = await metricsAt(c.metricsUrl, N);
      expect(sum(m, INFER_COUNT)).toBe(N);
      expect(m.get(INFER_IN_FLIGHT)).toBe(0);
      expect(m.get('tensorgate_cluster_workers')).toBe(2);
      // A single process's names: no per-worker label.
      expect([...m.keys()].some((k) => k.includes('worker='))).toBe(false);
      // The workers do not open the metrics port themselves: one scrape, one sum.
      expect(sum(await scrape(c.metricsUrl), INFER_COUNT)).toBe(N);

      expect(await c.stop()).toBe(0);
      expect(c.logs().at(-1)).toMatchObject({ msg: 'cluster stopped', exit_code: 0 });
      expect(pids.filter(alive)).toEqual([]);
    } finally {
      for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL');
    }
  });

  needs(OPENSSL()).test.each([
    ['reuseport', []],
    ['shared', ['--reuse-port=false']],
  ])('TLS, %s: every worker serves HTTPS and reloads the certificate when the Secret is swapped', async (listen, extra) => {
    const pki = makePki();
    const secret = secretDir(pki.server.cert, pki.server.key);
    const ca = pemText(pki.ca.cert);
    const c = await startCluster(['--workers', '2', '--tls-cert', secret.cert, '--tls-key', secret.key, ...extra]);
    const pids = [c.child.pid!, ...c.workerPids];
    /** n inferences, each on a new connection (a handshake each, spread over the workers). */
    const inferTls = (n: number): Promise<number[]> => Promise.all(Array.from({ length: n }, () => new Promise<number>((resolve, reject) => {
      const req = httpsRequest(`${c.url}/v2/models/identity_fp32/infer`, { method: 'POST', ca, servername: 'localhost', agent: false }, (res) => {
        res.resume().on('end', () => resolve(res.statusCode!));
      });
      req.on('error', reject);
      req.end(BODY);
    })));
    try {
      expect(c.url).toMatch(/^https:/);
      expect(c.listen).toBe(listen);
      expect(await inferTls(20)).toEqual(Array(20).fill(200));
      await c.waitFor(() => new Set(c.logs().filter((l) => l.route === 'infer').map((l) => l.pid)).size === 2, 'both workers serving');

      const next = pki.issue('server-next');
      secret.publish(next.cert, next.key);
      const reloaded = (): Set<unknown> => new Set(c.logs().filter((l) => l.msg === 'TLS certificate reloaded').map((l) => l.pid));
      await c.waitFor(() => reloaded().size === 2, 'a reload line from each worker');
      expect([...reloaded()].sort()).toEqual([...c.workerPids].sort());
      const want = new X509Certificate(pemText(next.cert)).serialNumber;
      for (let i = 0; i < 10; i++) expect((await handshake(Number(new URL(c.url).port), { ca })).serial).toBe(want);
      const m = await scrape(c.metricsUrl);
      expect(m.get('tensorgate_tls_reloads_total{result="ok"}')).toBe(2);
      expect(m.get('tensorgate_tls_reloads_total{result="failed"}')).toBe(0);
      expect(await c.stop()).toBe(0);
    } finally {
      for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL');
      secret.remove();
      pki.remove();
    }
  });

  test('a killed worker is replaced; its counters stay in /metrics and the gateway keeps serving', async () => {
    const c = await startCluster(['--workers', '2']);
    const pids = [c.child.pid!, ...c.workerPids];
    try {
      expect(await infer(c.url, 20)).toEqual(Array(20).fill(200));
      expect(sum(await metricsAt(c.metricsUrl, 20), INFER_COUNT)).toBe(20);

      const victim = c.workerPids[0]!;
      process.kill(victim, 'SIGKILL');
      const died = await c.waitFor((l) => l.msg === 'worker exited unexpectedly; replacing it', 'exit line');
      expect(died).toMatchObject({ worker: 1, worker_pid: victim, signal: 'SIGKILL', restart_in_ms: 100 });
      const back = await c.waitFor((l) => l.msg === 'worker listening', 'replacement');
      expect(back.worker).toBe(1);
      const replacement = back.worker_pid as number;
      pids.push(replacement);
      expect(pids.slice(1, 3)).not.toContain(replacement);
      expect(alive(victim)).toBe(false);

      expect(await infer(c.url, 20)).toEqual(Array(20).fill(200));
      const m = await metricsAt(c.metricsUrl, 40);
      // Scraped before the kill, so nothing of the victim's is lost.
      expect(sum(m, INFER_COUNT)).toBe(40);
      expect(m.get(INFER_IN_FLIGHT)).toBe(0);
      expect(m.get('tensorgate_cluster_workers')).toBe(2);
      expect(m.get('tensorgate_cluster_worker_restarts_total')).toBe(1);

      expect(await c.stop('SIGINT')).toBe(0);
      expect(pids.filter(alive)).toEqual([]);
    } finally {
      for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL');
    }
  });

  test('SIGTERM while a client holds an upload open: the worker cuts it at server.drainTimeoutMs and the primary exits 3', async () => {
    const c = await startCluster(['--workers', '2', '--drain-timeout-ms', '500']);
    const pids = [c.child.pid!, ...c.workerPids];
    try {
      // 100-continue: the worker's answer proves it has the request before the test signals.
      const req = httpRequest(`${c.url}/v2/models/identity_uint8/infer`, {
        method: 'POST', headers: { 'Content-Length': 1 << 20, 'Inference-Header-Content-Length': 0, Expect: '100-continue' },
      });
      const cut = new Promise<string | undefined>((resolve) => req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code)));
      req.flushHeaders();
      await new Promise((resolve) => req.once('continue', resolve));
      req.write(Buffer.alloc(1000)); // and never the rest
      expect(await c.stop('SIGTERM')).toBe(3);
      expect(await cut).toBe('ECONNRESET');
      expect(pids.filter(alive)).toEqual([]);
    } finally {
      for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL');
    }
  });

  test.each([
    ['reuseport', []],
    ['shared', ['--reuse-port=false']],
  ])('%s: a port already taken fails the start with one line and exit 2, no process left', async (_listen, extra) => {
    const taken = createServer().listen(0, '127.0.0.1');
    await new Promise((r) => taken.once('listening', r));
    const port = (taken.address() as { port: number }).port;
    try {
      const child = spawn(BIN, ['--demo', '--workers', '2', '--host', '127.0.0.1', '--port', String(port), '--metrics-port', '0', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      child.stdout.setEncoding('utf8').on('data', (s: string) => { out += s; });
      child.stderr.setEncoding('utf8').on('data', (s: string) => { err += s; });
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      // The primary reports it once, whether it found the port taken itself (reuseport) or its workers did (shared).
      expect([code, out, err]).toEqual([2, '', `tensorgate: server.port: 127.0.0.1:${port} is already in use (EADDRINUSE); stop what listens there or choose another port (--port)\n`]);
      // Workers run with the primary's arguments: none is left with this port in its command line.
      const left = spawnSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' }).stdout.split('\n')
        .filter((l) => l.includes('dist/gateway/main.js') && l.includes(`--port ${port} `));
      expect(left).toEqual([]);
    } finally {
      taken.close();
    }
  });

  test('workers: 0, negative or garbage is a configuration error (exit 2) listed with the others', () => {
    const r = spawnSync(BIN, ['--demo', '--workers', '0', '--port', 'x'], { encoding: 'utf8', env: { PATH: process.env.PATH, TENSORGATE_WORKERS: 'many' } });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--workers: must be auto or an integer in [1, 256], got "0"');
    expect(r.stderr).toContain('TENSORGATE_WORKERS: must be auto or an integer in [1, 256], got "many"');
    expect(r.stderr).toContain('--port: must be an integer in [0, 65535], got "x"');
    expect(spawnSync(BIN, ['--demo', '--workers', '-1'], { encoding: 'utf8' }).status).toBe(2);
  });
});
