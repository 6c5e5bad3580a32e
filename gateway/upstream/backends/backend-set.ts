// The live set of Triton backends every plane picks from (docs/architecture.md#the-backend-set): one
// list of backends, and the parts that each keep one concern of it — resolution.ts (targets, DNS),
// health.ts (active checks), ejection.ts (passive outlier detection), pools.ts (pools and the model
// table), model-index.ts (each backend's ready models), queue-metrics.ts (each Triton's queue),
// picking.ts and mirror.ts. The set never logs nor counts itself (upstream/ never imports
// telemetry): it emits events the gateway's wiring logs, and keeps the totals the metrics read.
import { EventEmitter } from 'node:events';
import type { Config } from '../../config/schema';
import { DEFAULT_POOL, type ModelRoute, type PoolSpec } from '../../config/pools';
import { GatewayError } from '../../errors';
import { Backend, BACKEND_STATES, type BackendState, type Clock, realClock, type SetContext } from './backend';
import { Ejection } from './ejection';
import { Health, type HealthChecker, type Verdicts } from './health';
import { Mirrors } from './mirror';
import { ModelIndex, type ModelsChanged } from './model-index';
import { Picking } from './picking';
import { type ModelKey, Pools } from './pools';
import { type QueueSource, QueueReads } from './queue-metrics';
import { Resolution, type Resolver } from './resolution';

/** The set's upstream.* keys (config/schema.ts documents each); retries are upstream/backends/retry.ts's. */
type SetKeys = 'dnsRefreshMs' | 'healthCheckIntervalMs' | 'healthyThreshold' | 'unhealthyThreshold' | 'ejectAfterFailures'
  | 'ejectionBaseMs' | 'maxEjectionPercent' | 'retries';

export interface BackendSetOptions extends Pick<Config['upstream'], SetKeys> {
  /** `host:port` or `dns:///name:port` entries (upstream.backends): the pool named "default". */
  readonly targets: readonly string[];
  /** The other pools (upstream.pools). */
  readonly pools?: readonly PoolSpec[];
  /** Which pool serves which model (upstream.models); unmatched models go to the default pool. */
  readonly models?: readonly ModelRoute[];
  /** upstream.picking; round robin by default here (unit tests), least-request from the config. */
  readonly picking?: 'least-request' | 'round-robin';
  /** upstream.modelRefreshMs: how often each backend's ready models are read; 0: never (each has every model). */
  readonly modelRefreshMs?: number;
  /** upstream.mirrorMaxInFlight: mirror calls running at once; past it, copies are dropped. */
  readonly mirrorMaxInFlight?: number;
  /**
   * upstream.queueMetrics: each backend's pending requests per model (Triton's metrics port, read
   * every `intervalMs`; upstream/backends/queue-metrics.ts), added to its calls in flight by least-request.
   */
  readonly queue?: QueueSource;
  /** Tests inject these; by default real (unref'd) timers, node:dns lookup and random. */
  readonly clock?: Clock;
  readonly resolve?: Resolver;
  readonly checker?: HealthChecker;
  readonly random?: () => number;
}

export interface BackendEvents {
  /** A backend changed state; `reason` says why (a check, calls failing, an ejection ending). */
  state: [{ readonly address: string; readonly from: BackendState; readonly to: BackendState; readonly reason: string }];
  /** A backend joined the set (start, or a new DNS record). */
  added: [Backend];
  /** A backend left the DNS answer: drained (never picked again; planes close its connection). */
  removed: [Backend];
  /** A call that never reached Triton on `address` was sent again on another backend. */
  retry: [{ readonly address: string; readonly reason: string }];
  /** A name could not be resolved; the backends it had stay. */
  resolveFailed: [{ readonly target: string; readonly message: string }];
  /** A backend's ready models changed (read from its repository index). */
  models: [ModelsChanged];
}

export class BackendSet extends EventEmitter<BackendEvents> {
  readonly #o: BackendSetOptions;
  readonly #set: SetContext;
  readonly #checker: HealthChecker | undefined;
  readonly #pools: Pools;
  readonly #health: Health | undefined;
  readonly #ejection: Ejection;
  readonly #index: ModelIndex;
  readonly #queue: QueueReads | undefined;
  readonly #picking: Picking;
  readonly #mirrors: Mirrors;
  readonly #resolution: Resolution;
  #backends: Backend[] = [];
  #closed = false;
  #settledWaiters: (() => void)[] = [];
  retriesTotal = 0;

  /** Without a checker, backends never leave 'connecting' by checks (unit tests drive them). */
  constructor(options: BackendSetOptions) {
    super();
    this.setMaxListeners(0); // every plane and the wiring listen
    this.#o = options;
    const checker = options.checker;
    this.#checker = checker;
    this.#set = { clock: options.clock ?? realClock, random: options.random ?? Math.random, backends: () => this.#backends, closed: () => this.#closed };
    this.#pools = new Pools(options, options.pools ?? [], options.models ?? []);
    const verdicts = this.#verdicts();
    this.#health = checker === undefined ? undefined : new Health(this.#set, checker, verdicts);
    this.#ejection = new Ejection(this.#set, verdicts);
    const refreshMs = options.modelRefreshMs ?? 0;
    this.#index = new ModelIndex(this.#set, (e) => this.emit('models', e),
      refreshMs > 0 && checker?.models !== undefined ? { refreshMs, read: (address, ms) => checker.models!(address, ms) } : undefined);
    this.#queue = options.queue === undefined ? undefined : new QueueReads(this.#set, options.queue);
    this.#picking = new Picking(options.picking === 'least-request', this.#set.random);
    this.#mirrors = new Mirrors(options.mirrorMaxInFlight ?? 32);
    this.#resolution = new Resolution(this.#set, {
      add: (address, target, pool) => this.#add(address, target, pool),
      remove: (b) => this.#remove(b),
      resolveFailed: (target, message) => this.emit('resolveFailed', { target, message }),
      resolved: () => this.#maybeSettled(),
    }, { pools: [{ name: DEFAULT_POOL, targets: options.targets }, ...options.pools ?? []], dnsRefreshMs: options.dnsRefreshMs, resolve: options.resolve });
    this.#resolution.start();
  }

  /** What health checks and ejections change in the set, and tell it. */
  #verdicts(): Verdicts {
    return {
      settings: (pool) => this.#pools.settings(pool),
      setState: (b, to, reason) => {
        const from = b.state;
        if (from === to) return;
        b.state = to;
        this.emit('state', { address: b.address, from, to, reason });
      },
      // Its models and queue are read as soon as it is up, then on their own intervals.
      up: (b) => {
        this.#index.watch(b);
        this.#queue?.watch(b);
      },
      suspect: () => this.#resolution.soon(),
      checked: () => this.#maybeSettled(),
    };
  }

  get retries(): number {
    return this.#o.retries;
  }

  /** The backends currently in the set (drained ones are gone). */
  get all(): readonly Backend[] {
    return this.#backends;
  }

  /** Calls routed, by pool and decision ("pool\u0000decision"), for the metrics. */
  get routed(): ReadonlyMap<string, number> {
    return this.#pools.routed;
  }

  /** Mirrored calls by pool and outcome ("pool\u0000outcome"), for the metrics. */
  get mirrored(): ReadonlyMap<string, number> {
    return this.#mirrors.counts;
  }

  /** Mirror calls running now, against upstream.mirrorMaxInFlight. */
  get mirrorsInFlight(): number {
    return this.#mirrors.inFlight;
  }

  get ejectionsTotal(): number {
    return this.#ejection.total;
  }

  counts(): Record<BackendState, number> {
    const c = { connecting: 0, ready: 0, unhealthy: 0, ejected: 0 };
    for (const b of this.#backends) c[b.state]++;
    return c;
  }

  anyReady(): boolean {
    return this.#backends.some((b) => b.state === 'ready');
  }

  /** The pool that serves `model`'s calls (pools.ts): the first upstream.models entry matching, else the default. */
  poolOf(model: ModelKey | undefined): string {
    return this.#pools.poolOf(model);
  }

  /** The backend for a call (picking.ts), in the pool that serves `model`; undefined when there is none. */
  pick(exclude?: Backend, affinity?: string, model?: ModelKey): Backend | undefined {
    return this.#picking.pick(this.#backends, this.poolOf(model), exclude, affinity, model);
  }

  /** pick(), or the error a call without a backend fails with. */
  pickOrFail(exclude?: Backend, affinity?: string, model?: ModelKey): Backend {
    const b = this.pick(exclude, affinity, model);
    if (b !== undefined) return b;
    const pool = this.poolOf(model);
    const members = this.#backends.filter((x) => x.pool === pool);
    const c = { connecting: 0, ready: 0, unhealthy: 0, ejected: 0 };
    for (const x of members) c[x.state]++;
    const summary = BACKEND_STATES.filter((s) => c[s] > 0).map((s) => `${c[s]} ${s}`).join(', ') || 'none resolved';
    const why = members.map((x) => this.#checker?.failure?.(x.address)).find((r) => r !== undefined);
    const where = pool === DEFAULT_POOL ? 'upstream.backends' : `upstream.pools.${pool}`;
    throw new GatewayError('GW_ERR_UPSTREAM_NO_BACKEND', `no ready backend among ${where} (${summary})${why === undefined ? '' : `; ${why}`}`);
  }

  /** A mirror call may start on the returned backend of `pool` (mirror.ts); report its end with mirrorEnded(). */
  mirrorBackend(model: ModelKey, pool: string): Backend | undefined {
    return this.#mirrors.backend(model, pool, (copy) => this.pick(undefined, undefined, copy));
  }

  /** A mirror call that started has ended: its answer came (ok) or it failed. */
  mirrorEnded(pool: string, ok: boolean): void {
    this.#mirrors.ended(pool, ok);
  }

  /** A call started on `b` (least-request counts it until ended()). */
  started(b: Backend): void {
    b.inFlight++;
  }

  /** A call on `b` has settled, however. */
  ended(b: Backend): void {
    if (b.inFlight > 0) b.inFlight--;
  }

  /** `b` answered that it lacks `model` (model-index.ts): none of the model's calls until its index says otherwise. */
  lacks(b: Backend, model: ModelKey): void {
    this.#index.lacks(b, model);
  }

  /** Whether a backend of the model's pool other than `but` is known to have it ready. */
  anotherHas(model: ModelKey, but: Backend): boolean {
    return this.#index.anotherHas(model, this.poolOf(model), but);
  }

  /** A call on `b` got an answer (whatever its gRPC status, UNAVAILABLE aside): the connection works. */
  succeeded(b: Backend): void {
    this.#ejection.succeeded(b);
    this.#health?.answered(b);
  }

  /** A call on `b` failed on the connection or with UNAVAILABLE (passive outlier detection). */
  failed(b: Backend): void {
    this.#ejection.failed(b);
  }

  /** A call that never reached Triton on `from` goes to another backend: counted and announced. */
  retried(from: Backend, reason: string): void {
    this.retriesTotal++;
    this.emit('retry', { address: from.address, reason });
  }

  /**
   * Resolves once every name was resolved once and every backend checked once, or after
   * `boundMs`: the gateway starts with its backends' first verdicts when they come quickly.
   */
  settled(boundMs: number): Promise<void> {
    if (this.#isSettled()) return Promise.resolve();
    const clock = this.#set.clock;
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clock.clearTimeout(timer);
        this.#settledWaiters = this.#settledWaiters.filter((w) => w !== done);
        resolve();
      };
      const timer = clock.setTimeout(done, boundMs);
      this.#settledWaiters.push(done);
    });
  }

  /** Stops every timer and check; backends stay as they are (the planes close their connections). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#resolution.close();
    for (const b of this.#backends) b.stop(this.#set.clock);
    this.#checker?.close();
    for (const w of [...this.#settledWaiters]) w();
  }

  #isSettled(): boolean {
    return this.#closed || (this.#resolution.resolvedOnce && (this.#checker === undefined || this.#backends.every((b) => b.checked)));
  }

  #maybeSettled(): void {
    if (this.#settledWaiters.length > 0 && this.#isSettled()) for (const w of [...this.#settledWaiters]) w();
  }

  #add(address: string, target: string, pool: string): void {
    const b = new Backend(address, target, pool);
    this.#backends.push(b);
    this.emit('added', b);
    this.#health?.watch(b);
  }

  /** Drains `b`: never picked again; on 'removed' each plane closes its connection when its calls are done. */
  #remove(b: Backend): void {
    b.member = false;
    b.stop(this.#set.clock);
    this.#backends = this.#backends.filter((x) => x !== b);
    this.#checker?.forget(b.address);
    this.emit('removed', b);
  }
}
