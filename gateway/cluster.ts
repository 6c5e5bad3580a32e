// All cores (`workers` > 1): a node:cluster primary forks N workers, each a whole gateway with
// its own upstream sessions (h2 data plane, grpc-js control plane); the primary serves no
// inference. It owns the listening address, the --demo reference backend, /metrics summed over
// the workers, restarts and shutdown. workers = 1 never comes here (main.ts runs one process).
//
// Listening. Each worker binds its own socket with SO_REUSEPORT (net's `reusePort`; Linux, the
// BSDs, …) and the kernel spreads connections over them — no hand-off through the primary. To
// give every worker the same port when `server.port` is 0, and to keep the port
// while a worker is replaced, the primary binds a net.BoundSocket with SO_REUSEPORT on the
// address first: bound, never listening, so the kernel hands it no connection. Where that is not
// possible (no net.BoundSocket, a platform without SO_REUSEPORT, `server.reusePort: false`) the
// workers listen through cluster's shared handle: the primary accepts and passes connections
// round robin, and port 0 is one port for all of them (cluster keys the handle by address).
import cluster, { type Worker } from 'node:cluster';
import { lookup } from 'node:dns/promises';
import net from 'node:net';
import type { ConfigError } from './config/load';
import type { Config } from './config/schema';
import { EXIT_REQUESTS_CUT, remainingMs, settlesWithin, STOP_GRACE_MS } from './deadline';
import { type RunningGateway, startGateway, type WorkerRole } from './gateway';
import { listenError, listening } from './config/listen-error';
import { type ReferenceBackend, startReferenceBackend } from './reference-backend/server';
import { createClusterMetrics } from './telemetry/cluster-metrics';
import { createLogger } from './telemetry/logger';
import type { MetricsSnapshot } from './telemetry/metrics';

/** The primary hands each worker its role in this variable (JSON); nothing else sets it. */
const ROLE_ENV = 'TENSORGATE_WORKER_ROLE';
/** How long a scrape waits for a worker's snapshot before counting its previous one. */
const SNAPSHOT_TIMEOUT_MS = 1000;
/** Restart backoff: 100 ms, doubling while a worker keeps failing, at most 30 s. */
const RESTART_FIRST_MS = 100;
const RESTART_MAX_MS = 30_000;
/** A worker that served this long before dying restarts its slot's backoff from the start. */
const RESTART_STREAK_RESET_MS = 10_000;

type ToPrimary =
  | { readonly tg: 'listening'; readonly port: number }
  | { readonly tg: 'failed'; readonly problems: readonly string[] }
  | { readonly tg: 'metrics'; readonly id: number; readonly snapshot: MetricsSnapshot | null };
type ToWorker = { readonly tg: 'metrics'; readonly id: number };

/** This process's role when our primary forked it; undefined otherwise (also under another cluster manager). */
export function workerRole(env: Readonly<Record<string, string | undefined>>): WorkerRole | undefined {
  const text = env[ROLE_ENV];
  return cluster.isWorker && text !== undefined ? JSON.parse(text) as WorkerRole : undefined;
}

/** A worker: the gateway, answering the primary's metrics questions and telling it when it listens. */
export async function startWorker(config: Config, role: WorkerRole): Promise<RunningGateway> {
  const gateway = await startGateway(config, role);
  const send = (m: ToPrimary): void => { process.send?.(m); };
  process.on('message', (m: ToWorker) => {
    if (m?.tg !== 'metrics') return;
    gateway.telemetry.metrics.snapshot().then(
      (snapshot) => send({ tg: 'metrics', id: m.id, snapshot }),
      () => send({ tg: 'metrics', id: m.id, snapshot: null }),
    );
  });
  send({ tg: 'listening', port: gateway.port });
  return gateway;
}

/**
 * A worker that cannot start (a key file gone since the primary loaded the config, a port taken
 * with the shared handle) tells the primary and exits 2 without a word: every worker would say
 * the same, so the primary prints it once.
 */
export function reportStartFailure(err: ConfigError): void {
  const m: ToPrimary = { tg: 'failed', problems: err.problems };
  if (process.send === undefined) process.exit(2);
  process.send(m, () => process.exit(2));
}

/** The listening line's backends; with --demo, which configured backends the demo backend stands in for. */
export function backendText(backends: readonly string[], demo: boolean, config: Pick<Config, 'upstream'>): string {
  if (!demo) return backends.join(', ');
  const replaced = config.upstream.backends;
  return `${backends.join(', ')}, demo reference backend${replaced.length === 0 ? '' : ` in place of upstream.backends ${replaced.join(', ')}`}`;
}

interface Slot {
  /** 1..N, kept by replacements. */
  readonly n: number;
  worker: Worker | undefined;
  listeningSince: number | undefined;
  /** Consecutive early deaths: the restart backoff's exponent. */
  streak: number;
  restart: NodeJS.Timeout | undefined;
}

/** The primary: forks config.workers workers, prints the listening line once all listen, runs until SIGTERM/SIGINT. */
export async function runPrimary(config: Config): Promise<void> {
  const { log, flush } = createLogger(config.telemetry.logLevel, { cluster: 'primary', pid: process.pid });
  const slots: Slot[] = Array.from({ length: config.workers },
    (_, i) => ({ n: i + 1, worker: undefined, listeningSince: undefined, streak: 0, restart: undefined }));
  let stopping = false;
  let started = false;
  let failed = false;
  /** The first worker's start-up problems (reportStartFailure): printed once, exit 2. */
  let startProblems: readonly string[] | undefined;
  let finish: () => void = () => {};
  /** Set by stop(): the workers drain until then (server.drainTimeoutMs), and so does the primary's own close. */
  let until = 0;
  let killTimer: NodeJS.Timeout | undefined;
  const stop = (): void => {
    if (stopping) {
      // A second signal: passed on, it ends the workers' grace (server.drainGraceMs) early.
      for (const s of slots) s.worker?.process.kill('SIGTERM');
      return;
    }
    stopping = true;
    const { drainGraceMs, drainTimeoutMs } = config.server;
    until = Date.now() + drainGraceMs + drainTimeoutMs;
    for (const s of slots) clearTimeout(s.restart);
    for (const s of slots) s.worker?.process.kill('SIGTERM');
    // Each worker's close() is bounded by the deadline; a worker still there long after it is stuck.
    killTimer = setTimeout(() => {
      for (const s of slots) {
        if (s.worker === undefined) continue;
        log.error({ worker: s.n, worker_pid: s.worker.process.pid, drain_grace_ms: drainGraceMs, drain_timeout_ms: drainTimeoutMs }, 'worker did not stop after the drain deadline; killing it');
        s.worker.process.kill('SIGKILL');
      }
    }, drainGraceMs + drainTimeoutMs + STOP_GRACE_MS);
    finish();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  // Nothing is logged before the listening line: tools read it as the first line of stdout.
  let sharedBecause: string | undefined;
  const listen = await reserveAddress(config, (reason) => { sharedBecause = reason; });
  const demo: ReferenceBackend | undefined = config.demo ? await startReferenceBackend({ host: '127.0.0.1' }) : undefined;
  const backends = demo ? [demo.address] : config.upstream.backends;

  const pending = new Map<number, { worker: Worker; resolve: (s: MetricsSnapshot | undefined) => void }>();
  let nextQuestion = 1;
  const answer = (id: number, s: MetricsSnapshot | undefined): void => {
    const p = pending.get(id);
    pending.delete(id);
    p?.resolve(s);
  };

  const metrics = createClusterMetrics({
    host: config.server.host,
    port: config.server.metricsPort,
    serviceName: config.telemetry.serviceName,
    ask: () => slots.flatMap((s) => {
      const worker = s.worker;
      if (worker === undefined || s.listeningSince === undefined) return [];
      const id = nextQuestion++;
      const snapshot = new Promise<MetricsSnapshot | undefined>((resolve) => {
        const timer = setTimeout(() => answer(id, undefined), SNAPSHOT_TIMEOUT_MS);
        pending.set(id, { worker, resolve: (x) => { clearTimeout(timer); resolve(x); } });
        const question: ToWorker = { tg: 'metrics', id };
        worker.send(question, (err) => { if (err !== null && err !== undefined) answer(id, undefined); });
      });
      return [{ id: worker.id, snapshot }];
    }),
  });
  await listening(metrics.server, 'server.metricsPort', config.server.host, config.server.metricsPort);

  let exitCode = 0;
  /** The port the workers report: the reserved one, or with the shared handle the one cluster picked for port 0. */
  let port = listen.port;
  const host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
  const allListening = (): void => {
    if (started || !slots.every((s) => s.listeningSince !== undefined)) return;
    started = true;
    const scheme = config.server.tls.cert === '' ? 'http' : 'https'; // each worker serves TLS itself (and reloads its certificate)
    process.stdout.write(`tensorgate listening on ${scheme}://${host}:${port} (backend ${backendText(backends, demo !== undefined, config)})\n`);
    const metricsPort = (metrics.server.address() as net.AddressInfo).port;
    log.info({ workers: config.workers, listen: listen.reusePort ? 'reuseport' : 'shared', port,
      metrics_url: `http://${host}:${metricsPort}/metrics`, worker_pids: slots.map((s) => s.worker?.process.pid) }, 'cluster started');
    if (sharedBecause !== undefined) log.warn({ reason: sharedBecause }, 'SO_REUSEPORT not available: the workers share the primary\'s socket');
  };

  const fork = (slot: Slot): void => {
    slot.restart = undefined;
    const role: WorkerRole = { worker: slot.n, listen: { host: listen.host, port: listen.port, reusePort: listen.reusePort }, backends };
    const worker = cluster.fork({ [ROLE_ENV]: JSON.stringify(role) });
    slot.worker = worker;
    slot.listeningSince = undefined;
    worker.on('message', (m: ToPrimary) => {
      if (m?.tg === 'metrics') answer(m.id, m.snapshot ?? undefined);
      else if (m?.tg === 'failed') {
        // Before the start, the primary prints it once; a replacement that cannot start is logged, and tried again.
        if (!started) startProblems ??= m.problems;
        else log.error({ worker: slot.n, worker_pid: worker.process.pid, problems: m.problems }, 'a replacement worker could not start');
      } else if (m?.tg === 'listening') {
        slot.listeningSince = Date.now();
        port = m.port;
        metrics.workerListening();
        if (started) log.info({ worker: slot.n, worker_pid: worker.process.pid }, 'worker listening');
        else allListening();
      }
    });
    worker.on('exit', (code, signal) => {
      const wasListening = slot.listeningSince !== undefined;
      const lived = wasListening ? Date.now() - slot.listeningSince! : 0;
      slot.worker = undefined;
      slot.listeningSince = undefined;
      for (const [id, p] of pending) if (p.worker === worker) answer(id, undefined);
      metrics.workerExited(worker.id, wasListening, started && !stopping);
      if (stopping) {
        // Stopped by us: a clean drain ends with 0; killed by the signal before its handlers existed is fine too.
        // A worker that had to cut requests makes the cluster's exit say so, unless another failed.
        if (code === EXIT_REQUESTS_CUT) exitCode = exitCode === 1 ? 1 : EXIT_REQUESTS_CUT;
        else if (code !== 0 && signal !== 'SIGTERM' && signal !== 'SIGINT') exitCode = 1;
        finish();
        return;
      }
      if (!started) {
        // A worker that cannot start (port taken, bad backend address…) would fail again: give up.
        failed = true;
        if (startProblems === undefined) log.error({ worker: slot.n, worker_pid: worker.process.pid, code, signal }, 'worker exited before the cluster started');
        stop();
        return;
      }
      slot.streak = lived >= RESTART_STREAK_RESET_MS ? 1 : slot.streak + 1;
      const delayMs = Math.min(RESTART_FIRST_MS * 2 ** (slot.streak - 1), RESTART_MAX_MS);
      log.error({ worker: slot.n, worker_pid: worker.process.pid, code, signal, restart_in_ms: delayMs }, 'worker exited unexpectedly; replacing it');
      slot.restart = setTimeout(() => fork(slot), delayMs);
    });
  };

  await new Promise<void>((resolve) => {
    finish = () => {
      if (stopping && slots.every((s) => s.worker === undefined)) resolve();
    };
    if (stopping) { finish(); return; }
    for (const s of slots) fork(s);
  });

  clearTimeout(killTimer);
  await settlesWithin(metrics.close(), remainingMs(until));
  await demo?.close(remainingMs(until));
  listen.reservation?.close();
  if (startProblems !== undefined) {
    process.stderr.write(startProblems.map((p) => `tensorgate: ${p}\n`).join(''));
    process.exit(2);
  }
  log.info({ exit_code: failed ? 1 : exitCode }, 'cluster stopped');
  flush();
  process.exit(failed ? 1 : exitCode);
}

type Listen = WorkerRole['listen'] & { readonly reservation?: { close(): void } };

/**
 * The address every worker listens on. With SO_REUSEPORT: the resolved IP (net.Server would
 * bind the first address of a name too) and a concrete port held by a bound, non-listening
 * socket. EADDRINUSE and friends are reported here, once.
 */
async function reserveAddress(config: Config, fallback: (reason: string) => void): Promise<Listen> {
  const shared = { host: config.server.host, port: config.server.port, reusePort: false };
  if (!config.server.reusePort) return shared;
  // net.BoundSocket is newer than our oldest supported Node (22.15).
  const Bound = (net as { BoundSocket?: typeof net.BoundSocket }).BoundSocket;
  if (Bound === undefined) {
    fallback('net.BoundSocket is missing (older Node)');
    return shared;
  }
  let host = config.server.host;
  try {
    if (net.isIP(host) === 0) host = (await lookup(host)).address;
    const bound = new Bound({ host, port: config.server.port, reusePort: true });
    return { host, port: bound.address().port, reusePort: true, reservation: bound };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOTSUP') throw listenError(err, 'server.port', config.server.host, config.server.port);
    fallback(String(err));
    return shared;
  }
}
