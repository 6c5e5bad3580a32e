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
import { PrimaryStore, type StoreCallMessage, type StoreReplyMessage } from './auth/cluster-store';
import type { ConfigError } from './config/load';
import type { Config } from './config/schema';
import { EXIT_REQUESTS_CUT, remainingMs, settlesWithin, STOP_GRACE_MS } from './deadline';
import { type RunningGateway, startGateway, type WorkerRole } from './gateway';
import { listenError, listening } from './config/listen-error';
import { type ReferenceBackend, startReferenceBackend } from './reference-backend/server';
import { type ClusterMetrics, createClusterMetrics } from './telemetry/cluster-metrics';
import { createLogger } from './telemetry/logger';
import type { MetricsSnapshot } from './telemetry/metrics';
import { dashboardPages, type RecentAnswer } from './telemetry/dashboard';
import type { RecentQuery } from './telemetry/recent';
import { sumUsage, type UsageDoc, usagePage } from './telemetry/usage-page';

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
  | { readonly tg: 'metrics'; readonly id: number; readonly snapshot: MetricsSnapshot | null }
  | { readonly tg: 'recent'; readonly id: number; readonly answer: RecentAnswer | null }
  | { readonly tg: 'usage'; readonly id: number; readonly answer: UsageAnswer }
  | StoreCallMessage;
type ToWorker =
  | { readonly tg: 'metrics'; readonly id: number } | { readonly tg: 'recent'; readonly id: number; readonly query: RecentQuery }
  | { readonly tg: 'usage'; readonly id: number; readonly identity: string } | StoreReplyMessage;
/** A worker's GET /usage/<id>: its document, none (`{}`: nothing configures the identity), or why it failed. */
interface UsageAnswer { readonly doc?: UsageDoc; readonly error?: string }

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
    if (m?.tg === 'usage') {
      Promise.resolve(gateway.telemetry.usage?.(m.identity)).then(
        (doc) => send({ tg: 'usage', id: m.id, answer: doc === undefined ? {} : { doc: doc as UsageDoc } }),
        (err: unknown) => send({ tg: 'usage', id: m.id, answer: { error: (err as Error).message } }),
      );
      return;
    }
    if (m?.tg === 'recent') {
      send({ tg: 'recent', id: m.id, answer: gateway.telemetry.recent?.(m.query) ?? null });
      return;
    }
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
  const primary = new Primary(config);
  process.on('SIGTERM', () => primary.stop());
  process.on('SIGINT', () => primary.stop());
  await primary.start();
  await primary.supervise();
  await primary.exit();
}

/** The primary's state as fields and its events (signals, workers' messages and exits) as methods. */
class Primary {
  readonly #log: ReturnType<typeof createLogger>['log'];
  readonly #flush: () => void;
  readonly #slots: Slot[];
  #stopping = false;
  #started = false;
  #failed = false;
  /** The first worker's start-up problems (reportStartFailure): printed once, exit 2. */
  #startProblems: readonly string[] | undefined;
  /** Set by supervise(): ends it once the primary is stopping and every worker has exited. */
  #finish: () => void = () => {};
  /** Set by stop(): the workers drain until then (server.drainTimeoutMs), and so does the primary's own close. */
  #until = 0;
  #killTimer: NodeJS.Timeout | undefined;
  /** Why the workers share the primary's socket instead of SO_REUSEPORT, when they do. */
  #sharedBecause: string | undefined;
  #listen!: Listen;
  #demo: ReferenceBackend | undefined;
  #backends!: readonly string[];
  #metrics!: ClusterMetrics;
  /** Questions to the workers (metrics, recent requests, usage) not answered yet, by id. */
  readonly #pending = new Map<number, { worker: Worker; resolve: (answer: unknown) => void }>();
  /** The workers' limits without auth.limits.store (auth/cluster-store.ts). */
  readonly #store = new PrimaryStore();
  #nextQuestion = 1;
  #exitCode = 0;
  /** The port the workers report: the reserved one, or with the shared handle the one cluster picked for port 0. */
  #port = 0;
  readonly #host: string;

  constructor(private readonly config: Config) {
    const { log, flush } = createLogger(config.telemetry.logLevel, { cluster: 'primary', pid: process.pid });
    this.#log = log;
    this.#flush = flush;
    this.#slots = Array.from({ length: config.workers },
      (_, i) => ({ n: i + 1, worker: undefined, listeningSince: undefined, streak: 0, restart: undefined }));
    this.#host = config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host;
  }

  stop(): void {
    const slots = this.#slots;
    if (this.#stopping) {
      // A second signal: passed on, it ends the workers' grace (server.drainGraceMs) early.
      for (const s of slots) s.worker?.process.kill('SIGTERM');
      return;
    }
    this.#stopping = true;
    const { drainGraceMs, drainTimeoutMs } = this.config.server;
    this.#until = Date.now() + drainGraceMs + drainTimeoutMs;
    for (const s of slots) clearTimeout(s.restart);
    for (const s of slots) s.worker?.process.kill('SIGTERM');
    // Each worker's close() is bounded by the deadline; a worker still there long after it is stuck.
    this.#killTimer = setTimeout(() => {
      for (const s of slots) {
        if (s.worker === undefined) continue;
        this.#log.error({ worker: s.n, worker_pid: s.worker.process.pid, drain_grace_ms: drainGraceMs, drain_timeout_ms: drainTimeoutMs }, 'worker did not stop after the drain deadline; killing it');
        s.worker.process.kill('SIGKILL');
      }
    }, drainGraceMs + drainTimeoutMs + STOP_GRACE_MS);
    this.#finish();
  }

  /** The address reserved, the demo backend and /metrics started. */
  async start(): Promise<void> {
    const config = this.config;
    // Nothing is logged before the listening line: tools read it as the first line of stdout.
    this.#listen = await reserveAddress(config, (reason) => { this.#sharedBecause = reason; });
    this.#demo = config.demo ? await startReferenceBackend({ host: '127.0.0.1' }) : undefined;
    this.#backends = this.#demo ? [this.#demo.address] : config.upstream.backends;
    const dashboard = config.telemetry.recent.size === 0 ? undefined : dashboardPages({
      recent: (q) => this.#recent(q),
      summary: async () => ({ scopes: await this.#metrics.snapshot(), backends: (await this.#recent({ limit: 0 })).backends }),
    });
    const usage = config.auth.enabled ? usagePage((id) => this.#usage(id)) : undefined;
    this.#metrics = createClusterMetrics({
      host: config.server.host,
      port: config.server.metricsPort,
      serviceName: config.telemetry.serviceName,
      ask: () => this.#askAll<MetricsSnapshot>((id) => ({ tg: 'metrics', id })).map(({ worker, answer }) => ({ id: worker.id, snapshot: answer })),
      pages: usage === undefined || dashboard === undefined ? usage ?? dashboard : (req, res) => usage(req, res) || dashboard(req, res),
    });
    await listening(this.#metrics.server, 'server.metricsPort', config.server.host, config.server.metricsPort);
    this.#port = this.#listen.port;
  }

  /** Forks the workers and replaces those that die, until stopped and every worker has exited. */
  supervise(): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#finish = () => {
        if (this.#stopping && this.#slots.every((s) => s.worker === undefined)) resolve();
      };
      if (this.#stopping) { this.#finish(); return; }
      for (const s of this.#slots) this.#fork(s);
    });
  }

  /** What is left closed within the deadline; the start-up problems printed, or the cluster's exit code. */
  async exit(): Promise<void> {
    clearTimeout(this.#killTimer);
    await settlesWithin(this.#metrics.close(), remainingMs(this.#until));
    await this.#demo?.close(remainingMs(this.#until));
    this.#listen.reservation?.close();
    if (this.#startProblems !== undefined) {
      process.stderr.write(this.#startProblems.map((p) => `tensorgate: ${p}\n`).join(''));
      process.exit(2);
    }
    const code = this.#failed ? 1 : this.#exitCode;
    this.#log.info({ exit_code: code }, 'cluster stopped');
    this.#flush();
    process.exit(code);
  }

  /** One question to each listening worker; its answer, or undefined when none came within SNAPSHOT_TIMEOUT_MS. */
  #askAll<T>(question: (id: number) => ToWorker): { slot: Slot; worker: Worker; answer: Promise<T | undefined> }[] {
    return this.#slots.flatMap((slot) => {
      const worker = slot.worker;
      if (worker === undefined || slot.listeningSince === undefined) return [];
      const id = this.#nextQuestion++;
      const answer = new Promise<T | undefined>((resolve) => {
        const timer = setTimeout(() => this.#answer(id, undefined), SNAPSHOT_TIMEOUT_MS);
        this.#pending.set(id, { worker, resolve: (x) => { clearTimeout(timer); resolve(x as T | undefined); } });
        worker.send(question(id), (err) => { if (err !== null && err !== undefined) this.#answer(id, undefined); });
      });
      return [{ slot, worker, answer }];
    });
  }

  /**
   * /dashboard's recent requests: every listening worker's (each its own ring), merged newest first;
   * a worker that does not answer within the snapshot timeout is left out.
   */
  async #recent(q: RecentQuery): Promise<RecentAnswer> {
    const asked = this.#askAll<RecentAnswer>((id) => ({ tg: 'recent', id, query: q })).map(({ slot, answer }) => answer.then((a) => ({ n: slot.n, a })));
    const got = (await Promise.all(asked)).filter((x): x is { n: number; a: RecentAnswer } => x.a !== undefined);
    const requests = got.flatMap(({ n, a }) => a.requests.map((r) => ({ ...r, worker: n })))
      .sort((x, y) => y.start_ms - x.start_ms).slice(0, q.limit);
    return {
      size: got.reduce((t, { a }) => t + a.size, 0), perSecond: got.reduce((t, { a }) => t + a.perSecond, 0), requests,
      backends: got[0]?.a.backends ?? [],
    };
  }

  #answer(id: number, answer: unknown): void {
    const p = this.#pending.get(id);
    this.#pending.delete(id);
    p?.resolve(answer);
  }

  /**
   * GET /usage/<id>: every listening worker's document summed (telemetry/usage-page.ts); their
   * quotas are all read from the same store. A worker whose read failed fails the page (500).
   */
  async #usage(identity: string): Promise<object | undefined> {
    const answers = await Promise.all(this.#askAll<UsageAnswer>((id) => ({ tg: 'usage', id, identity })).map((q) => q.answer));
    const failed = answers.find((a) => a?.error !== undefined);
    if (failed !== undefined) throw new Error(failed.error);
    if (answers.every((a) => a === undefined)) throw new Error('no worker answered');
    return sumUsage(answers.flatMap((a) => (a?.doc === undefined ? [] : [a.doc])));
  }

  #allListening(): void {
    if (this.#started || !this.#slots.every((s) => s.listeningSince !== undefined)) return;
    this.#started = true;
    const config = this.config;
    const listen = this.#listen;
    const host = this.#host;
    const port = this.#port;
    const scheme = config.server.tls.cert === '' ? 'http' : 'https'; // each worker serves TLS itself (and reloads its certificate)
    const grpc = config.server.grpc.enabled ? `; gRPC port ${config.server.grpc.port}` : '';
    process.stdout.write(`tensorgate listening on ${scheme}://${host}:${port} (backend ${backendText(this.#backends, this.#demo !== undefined, config)})${grpc}\n`);
    const metricsPort = (this.#metrics.server.address() as net.AddressInfo).port;
    this.#log.info({ workers: config.workers, listen: listen.reusePort ? 'reuseport' : 'shared', port,
      metrics_url: `http://${host}:${metricsPort}/metrics`, worker_pids: this.#slots.map((s) => s.worker?.process.pid) }, 'cluster started');
    if (this.#sharedBecause !== undefined) this.#log.warn({ reason: this.#sharedBecause }, 'SO_REUSEPORT not available: the workers share the primary\'s socket');
  }

  #fork(slot: Slot): void {
    slot.restart = undefined;
    const listen = this.#listen;
    const role: WorkerRole = { worker: slot.n, listen: { host: listen.host, port: listen.port, reusePort: listen.reusePort }, backends: this.#backends };
    const worker = cluster.fork({ [ROLE_ENV]: JSON.stringify(role) });
    slot.worker = worker;
    slot.listeningSince = undefined;
    worker.on('message', (m: ToPrimary) => this.#onMessage(slot, worker, m));
    worker.on('exit', (code, signal) => this.#onExit(slot, worker, code, signal));
  }

  #onMessage(slot: Slot, worker: Worker, m: ToPrimary): void {
    if (m?.tg === 'store') {
      const reply = this.#store.handle(worker.id, m.call);
      const answer: ToWorker | undefined = m.id === 0 || reply === undefined ? undefined : { tg: 'store', id: m.id, reply };
      if (answer !== undefined) worker.send(answer, () => {});
    } else if (m?.tg === 'metrics') this.#answer(m.id, m.snapshot ?? undefined);
    else if (m?.tg === 'recent' || m?.tg === 'usage') this.#answer(m.id, m.answer ?? undefined);
    else if (m?.tg === 'failed') {
      // Before the start, the primary prints it once; a replacement that cannot start is logged, and tried again.
      if (!this.#started) this.#startProblems ??= m.problems;
      else this.#log.error({ worker: slot.n, worker_pid: worker.process.pid, problems: m.problems }, 'a replacement worker could not start');
    } else if (m?.tg === 'listening') {
      slot.listeningSince = Date.now();
      this.#port = m.port;
      this.#metrics.workerListening();
      if (this.#started) this.#log.info({ worker: slot.n, worker_pid: worker.process.pid }, 'worker listening');
      else this.#allListening();
    }
  }

  #onExit(slot: Slot, worker: Worker, code: number, signal: string): void {
    const wasListening = slot.listeningSince !== undefined;
    const lived = wasListening ? Date.now() - slot.listeningSince! : 0;
    slot.worker = undefined;
    slot.listeningSince = undefined;
    for (const [id, p] of this.#pending) if (p.worker === worker) this.#answer(id, undefined);
    // Its places come back now, not when their leases end.
    this.#store.gone(worker.id);
    this.#metrics.workerExited(worker.id, wasListening, this.#started && !this.#stopping);
    if (this.#stopping) {
      // Stopped by us: a clean drain ends with 0; killed by the signal before its handlers existed is fine too.
      // A worker that had to cut requests makes the cluster's exit say so, unless another failed.
      if (code === EXIT_REQUESTS_CUT) this.#exitCode = this.#exitCode === 1 ? 1 : EXIT_REQUESTS_CUT;
      else if (code !== 0 && signal !== 'SIGTERM' && signal !== 'SIGINT') this.#exitCode = 1;
      this.#finish();
      return;
    }
    if (!this.#started) {
      // A worker that cannot start (port taken, bad backend address…) would fail again: give up.
      this.#failed = true;
      if (this.#startProblems === undefined) this.#log.error({ worker: slot.n, worker_pid: worker.process.pid, code, signal }, 'worker exited before the cluster started');
      this.stop();
      return;
    }
    slot.streak = lived >= RESTART_STREAK_RESET_MS ? 1 : slot.streak + 1;
    const delayMs = Math.min(RESTART_FIRST_MS * 2 ** (slot.streak - 1), RESTART_MAX_MS);
    this.#log.error({ worker: slot.n, worker_pid: worker.process.pid, code, signal, restart_in_ms: delayMs }, 'worker exited unexpectedly; replacing it');
    slot.restart = setTimeout(() => this.#fork(slot), delayMs);
  }
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
