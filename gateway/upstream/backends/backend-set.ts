// The live set of Triton backends every plane picks from (docs/production.md). A target is `host:port`
// (one backend; the connection resolves the name) or `dns:///name:port` (every A/AAAA record is a
// backend, asked again every upstream.dnsRefreshMs and whenever a backend fails). Each backend
// has one state:
//   connecting — no health verdict yet;
//   ready      — grpc.health.v1.Health/Check answered SERVING (Triton: the server is ready);
//   unhealthy  — upstream.unhealthyThreshold consecutive checks failed, until
//                upstream.healthyThreshold consecutive ones pass;
//   ejected    — upstream.ejectAfterFailures consecutive calls failed on the connection or with
//                UNAVAILABLE (Envoy's outlier detection): out for ejectionBaseMs × ejections
//                (at most 10 ×, Envoy's 300 s max_ejection_time over its 30 s base), never more
//                than upstream.maxEjectionPercent of the set and never the last backend. The
//                multiplier falls by one per ejectionBaseMs the backend then stays in (Envoy
//                decrements it per interval without an ejection), so an old failure fades.
// Backends come in pools (upstream.pools; upstream.backends is the pool named "default"), each with
// its own targets and health settings, and a model table (upstream.models) sends each model's
// calls to one pool (the default one when no entry matches). Within the pool, a call for a model
// goes to the backends that have it ready: each backend's repository index is read every
// upstream.modelRefreshMs, and an answer that says the model is unknown there takes it off that
// backend at once. A backend whose index is not known yet counts as having every model; when no
// backend of the pool is known to have the model, any of them is picked, and Triton's own answer
// (404 for an unknown model) reaches the client as it would without the gateway.
// Picking (upstream.picking): "least-request" takes the next backend in round-robin order and one
// other at random, and sends the call to the one with fewer calls in flight from this process
// (the power of two choices, as Envoy's LEAST_REQUEST; with equal loads it is round robin);
// "round-robin" is round robin only.
// Round robin covers ready backends only. When none is ready, calls still go (Envoy's panic
// routing, narrowed) to the backends that are not known to be down: connecting ones (no verdict
// yet: a gateway started together with Triton forwards its first requests instead of refusing them
// while the first check is under way) and unhealthy ones whose failed checks all timed out (a
// check that times out proves nothing: under CPU load a working Triton, or the gateway's own
// event loop, can miss a 1-s check, and refusing every request then would turn a slow check into
// an outage). A backend known down — its checks refused, or answered NOT_SERVING — is never
// picked; when every backend is known down or ejected, calls fail at once
// (GW_ERR_UPSTREAM_NO_BACKEND). A check that times out while calls on the same backend keep
// getting answers does not count against it.
// A backend that leaves the DNS answer is drained: never picked again, its 'removed' event lets
// each plane close its connection once the calls on it are done. Checks of a backend that is not
// ready back off (100 ms doubling, at most 2 s or the check interval) with ±20 % jitter, so a
// returning Triton is noticed within about two seconds without hammering a dead address.
// The set never logs nor counts itself (upstream/ never imports telemetry): it emits events the
// gateway's wiring logs, and keeps the totals the metrics read.
import { EventEmitter } from 'node:events';
import { lookup } from 'node:dns/promises';
import type { Config } from '../../config/schema';
import { DEFAULT_POOL, type ModelRoute, POOL_KEYS, type PoolKeys, type PoolSpec } from '../../config/pools';
import { GatewayError } from '../../errors';

export const BACKEND_STATES = ['connecting', 'ready', 'unhealthy', 'ejected'] as const;
export type BackendState = (typeof BACKEND_STATES)[number];

/** The set's upstream.* keys (config/schema.ts documents each); retries are upstream/backends/retry.ts's. */
type SetKeys = 'dnsRefreshMs' | 'healthCheckIntervalMs' | 'healthyThreshold' | 'unhealthyThreshold' | 'ejectAfterFailures'
  | 'ejectionBaseMs' | 'maxEjectionPercent' | 'retries';

/** How a call's pool was chosen: its model's table entry (one pool, a split's draw, a header's pin), or no entry. */
export type RouteDecision = 'table' | 'split' | 'header' | 'default';
export const ROUTE_DECISIONS: readonly RouteDecision[] = ['table', 'split', 'header', 'default'];
/** What became of a mirrored copy: its answer came (and was discarded), it failed, or it was not sent. */
export type MirrorOutcome = 'answered' | 'failed' | 'dropped';
export const MIRROR_OUTCOMES: readonly MirrorOutcome[] = ['answered', 'failed', 'dropped'];

/**
 * The model a call is for, when it names one: it picks the pool, and the backends that have it.
 * One object per call: the pool is chosen at its first pick and kept on it, so a retry stays in the
 * pool a split drew.
 */
export interface ModelKey {
  readonly name: string;
  /** '' or absent: any version. */
  readonly version?: string;
  /** The request's header, by lower-case name, for a table entry's `header` pin. */
  readonly header?: (name: string) => string | undefined;
  /** Told once, when the pool is chosen (the request's record, the span); `mirror`: where a copy goes too. */
  readonly routed?: (pool: string, decision: RouteDecision, mirror: string | undefined) => void;
  /** Set by BackendSet.poolOf. */
  pool?: string;
  /** Set by BackendSet.poolOf when a copy of this call goes to a mirror pool (upstream.models mirror). */
  mirror?: string;
}

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
  readonly queue?: { readonly intervalMs: number; read(address: string, timeoutMs: number): Promise<ReadonlyMap<string, number> | undefined> };
  /** Tests inject these; by default real (unref'd) timers, node:dns lookup and random. */
  readonly clock?: Clock;
  readonly resolve?: Resolver;
  readonly checker?: HealthChecker;
  readonly random?: () => number;
}

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Every address (IPv4 or IPv6, without brackets) a name has. */
export type Resolver = (name: string) => Promise<readonly string[]>;

/**
 * A health check's outcome: SERVING; known down (connection refused or reset, NOT_SERVING, any
 * other answer); or no answer within the timeout, which may only mean a busy machine.
 */
export type CheckResult = 'serving' | 'down' | 'timeout';

export interface HealthChecker {
  check(address: string, timeoutMs: number): Promise<CheckResult>;
  /** The backend left the set: its connection can go. */
  forget(address: string): void;
  close(): void;
  /** Why the address's last check failed, when the checker knows (TLS to Triton: the handshake's reason). */
  failure?(address: string): string | undefined;
  /**
   * The models the address has ready (its repository index): each READY entry's name, and its
   * name and version (modelKey); undefined when the index could not be read.
   */
  models?(address: string, timeoutMs: number): Promise<ReadonlySet<string> | undefined>;
}

/** A model's entry in a backend's set of ready models: the name alone, or with its version. */
export function modelKey(name: string, version = ''): string {
  return version === '' ? name : `${name}\u0000${version}`;
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
  /**
   * A backend's ready models changed (read from its repository index): the model names that came
   * and went (all of them at the first read), and how many it has now.
   */
  models: [{
    readonly address: string; readonly pool: string; readonly loaded: readonly string[]; readonly unloaded: readonly string[]; readonly count: number;
    /** The backend's first read: every model it has. */
    readonly first: boolean;
  }];
}

export const RECONNECT_BASE_MS = 100;
export const RECONNECT_MAX_MS = 2000;
/** Envoy's max_ejection_time (300 s) over its base (30 s). */
export const MAX_EJECTION_FACTOR = 10;
/** Bounds each read of a backend's metrics page (upstream.queueMetrics). */
const QUEUE_READ_TIMEOUT_MS = 1000;
/** A name is not asked again on failures more often than this. */
const MIN_RERESOLVE_MS = 1000;
/** Bounds a DNS lookup (node:dns has no timeout of its own). */
const RESOLVE_TIMEOUT_MS = 5000;

/**
 * The delay before checking again a backend that is not ready, after `failures` consecutive
 * failed checks (0: it is passing, on its way back): exponential, capped, with ±20 % jitter
 * (`random` in [0, 1)).
 */
export function reconnectDelayMs(failures: number, intervalMs: number, random: number): number {
  const cap = Math.min(intervalMs, RECONNECT_MAX_MS);
  const base = Math.min(cap, RECONNECT_BASE_MS * 2 ** Math.min(Math.max(failures - 1, 0), 20));
  return Math.round(base * (0.8 + 0.4 * random));
}

/** How long the `ejections`-th ejection lasts. */
export function ejectionMs(ejections: number, baseMs: number): number {
  return baseMs * Math.min(ejections, MAX_EJECTION_FACTOR);
}

type Target = { readonly kind: 'static'; readonly address: string; readonly pool: string }
  | { readonly kind: 'dns'; readonly name: string; readonly port: number; readonly text: string; readonly pool: string };

export function parseTarget(t: string, pool = DEFAULT_POOL): Target {
  const m = /^dns:\/\/\/(.+):(\d+)$/.exec(t);
  return m === null ? { kind: 'static', address: t, pool } : { kind: 'dns', name: m[1]!, port: Number(m[2]), text: t, pool };
}

/** A backend's least-request load: our calls in flight there, plus its Triton's queue for the model when read. */
function load(b: Backend, model: ModelKey | undefined): number {
  if (b.pending === undefined || model === undefined) return b.inFlight;
  return b.inFlight + (b.pending.get(modelKey(model.name, model.version)) ?? b.pending.get(model.name) ?? 0);
}

/** An upstream.models entry, with its split's smooth weighted round-robin state. */
interface TableEntry {
  readonly pattern: RegExp;
  readonly header: string | undefined;
  readonly split: { readonly pool: string; readonly weight: number; current: number }[];
  readonly total: number;
  /** The mirror, and its share so far (a call is mirrored each time it reaches 100). */
  readonly mirror: { readonly pool: string; readonly percent: number; credit: number } | undefined;
}

/**
 * The next pool of a split: smooth weighted round robin (nginx's), so that every run of `total`
 * calls has each pool's exact share, interleaved (90/10: one canary call in every ten).
 */
function draw(entry: TableEntry): string {
  if (entry.split.length === 1) return entry.split[0]!.pool;
  let best = entry.split[0]!;
  for (const s of entry.split) {
    s.current += s.weight;
    if (s.current > best.current) best = s;
  }
  best.current -= entry.total;
  return best.pool;
}

function pickPoolKeys(o: Pick<Config['upstream'], PoolKeys>): Pick<Config['upstream'], PoolKeys> {
  return Object.fromEntries(POOL_KEYS.map((k) => [k, o[k]])) as Pick<Config['upstream'], PoolKeys>;
}

/** A model pattern of upstream.models as a RegExp: `*` is any run of characters, the rest literal. */
export function modelPattern(pattern: string): RegExp {
  return new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`, 's');
}

const FNV_OFFSET = 0x811c9dc5;

/** 32-bit FNV-1a of `s`'s UTF-16 code units, from `seed`, then mixed (murmur3's finaliser) so close inputs spread. */
function fnv1a(s: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** host:port, with IPv6 addresses in brackets. */
export function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

export class Backend {
  state: BackendState = 'connecting';
  /** False once it left the set. */
  member = true;
  /** The health checks' own verdict, kept while ejected. */
  verdict: 'unknown' | 'up' | 'down' = 'unknown';
  /**
   * Every check that failed since it was last healthy timed out: not known down, only unanswered.
   * A known-down backend is known down until healthyThreshold passes in a row.
   */
  onlyTimeouts = true;
  /** A call on it got an answer since its last check (a timed-out check then does not count). */
  answered = false;
  passes = 0;
  checkFailures = 0;
  /** Consecutive calls that failed on the connection or with UNAVAILABLE. */
  callFailures = 0;
  /** The ejection multiplier: ejections so far, less one per ejectionBaseMs spent back in the set. */
  ejections = 0;
  /** When its last ejection ended (clock.now()). */
  unejectedAt = 0;
  checked = false;
  timer: unknown;
  ejectionTimer: unknown;
  /** Calls this process has running on it (least-request picking). */
  inFlight = 0;
  /** Requests waiting in its Triton's queues, by modelKey (upstream.queueMetrics); undefined: not read. */
  pending: ReadonlyMap<string, number> | undefined;
  /** When `pending` was read (clock.now()). */
  pendingAt = 0;
  queueTimer: unknown;
  /** Its ready models (modelKey entries); undefined until its index was read (it then counts as having every model). */
  models: Set<string> | undefined;
  modelTimer: unknown;
  constructor(readonly address: string, readonly target: string, readonly pool: string = DEFAULT_POOL) {}

  /** Whether it is known to have the model ready (its index read, and the model in it). */
  has(model: ModelKey): boolean {
    return this.models !== undefined && this.models.has(modelKey(model.name, model.version));
  }
}

function isReady(b: Backend): boolean {
  return b.state === 'ready';
}

/** Not ready, but not known down either: no verdict yet, or every failed check only timed out. */
function mayBeUp(b: Backend): boolean {
  return b.state === 'connecting' || (b.state === 'unhealthy' && b.onlyTimeouts);
}

const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

async function lookupAll(name: string): Promise<readonly string[]> {
  const records = await lookup(name, { all: true });
  return records.map((r) => r.address);
}

export class BackendSet extends EventEmitter<BackendEvents> {
  readonly #o: BackendSetOptions;
  readonly #clock: Clock;
  readonly #resolve: Resolver;
  readonly #checker: HealthChecker | undefined;
  readonly #random: () => number;
  readonly #targets: readonly Target[];
  /** Each pool's settings: upstream.*'s, with what the pool sets itself over them. */
  readonly #pools = new Map<string, Pick<Config['upstream'], PoolKeys>>();
  readonly #routes: readonly TableEntry[];
  /** Calls routed, by pool and decision ("pool\u0000decision"), for the metrics. */
  readonly routed = new Map<string, number>();
  /** Mirrored calls by pool and outcome ("pool\u0000outcome"), for the metrics. */
  readonly mirrored = new Map<string, number>();
  /** Mirror calls running now, against upstream.mirrorMaxInFlight. */
  mirrorsInFlight = 0;
  readonly #leastRequest: boolean;
  readonly #modelRefreshMs: number;
  readonly #mirrorMax: number;
  #backends: Backend[] = [];
  #next = 0;
  #closed = false;
  #resolving = false;
  #resolvedOnce = false;
  #lastResolve = -Infinity;
  #dnsTimer: unknown;
  #settledWaiters: (() => void)[] = [];
  ejectionsTotal = 0;
  retriesTotal = 0;

  /** Without a checker, backends never leave 'connecting' by checks (unit tests drive them). */
  constructor(options: BackendSetOptions) {
    super();
    this.setMaxListeners(0); // every plane and the wiring listen
    this.#o = options;
    this.#clock = options.clock ?? realClock;
    this.#resolve = options.resolve ?? lookupAll;
    this.#checker = options.checker;
    this.#random = options.random ?? Math.random;
    this.#leastRequest = options.picking === 'least-request';
    this.#modelRefreshMs = options.modelRefreshMs ?? 0;
    this.#mirrorMax = options.mirrorMaxInFlight ?? 32;
    this.#pools.set(DEFAULT_POOL, options);
    for (const p of options.pools ?? []) this.#pools.set(p.name, { ...pickPoolKeys(options), ...p.settings });
    this.#routes = (options.models ?? []).map((r) => ({
      pattern: modelPattern(r.model), header: r.header, split: r.split.map((s) => ({ ...s, current: 0 })),
      total: r.split.reduce((a, s) => a + s.weight, 0), mirror: r.mirror === undefined ? undefined : { ...r.mirror, credit: 0 },
    }));
    this.#targets = [
      ...options.targets.map((t) => parseTarget(t)),
      ...(options.pools ?? []).flatMap((p) => p.targets.map((t) => parseTarget(t, p.name))),
    ];
    for (const t of this.#targets) if (t.kind === 'static') this.#add(t.address, t.address, t.pool);
    if (this.#targets.some((t) => t.kind === 'dns')) {
      void this.#resolveAll();
    } else {
      this.#resolvedOnce = true;
    }
  }

  get retries(): number {
    return this.#o.retries;
  }

  /** The backends currently in the set (drained ones are gone). */
  get all(): readonly Backend[] {
    return this.#backends;
  }

  counts(): Record<BackendState, number> {
    const c = { connecting: 0, ready: 0, unhealthy: 0, ejected: 0 };
    for (const b of this.#backends) c[b.state]++;
    return c;
  }

  anyReady(): boolean {
    return this.#backends.some((b) => b.state === 'ready');
  }

  /** The pool that serves `model`'s calls: the first upstream.models entry that matches, else the default pool. */
  poolOf(model: ModelKey | undefined): string {
    if (model === undefined) return DEFAULT_POOL;
    if (model.pool !== undefined) return model.pool;
    let pool = DEFAULT_POOL;
    let decision: RouteDecision = 'default';
    const entry = this.#routes.find((r) => r.pattern.test(model.name));
    if (entry !== undefined) {
      const pinned = entry.header === undefined ? undefined : model.header?.(entry.header);
      if (pinned !== undefined && entry.split.some((s) => s.pool === pinned)) {
        pool = pinned;
        decision = 'header';
      } else {
        pool = draw(entry);
        decision = entry.split.length === 1 ? 'table' : 'split';
      }
      // Mirrored: `percent` calls in every hundred, evenly spaced.
      const m = entry.mirror;
      if (m !== undefined && (m.credit += m.percent) >= 100) {
        m.credit -= 100;
        model.mirror = m.pool;
      }
    }
    model.pool = pool;
    const key = `${pool}\u0000${decision}`;
    this.routed.set(key, (this.routed.get(key) ?? 0) + 1);
    model.routed?.(pool, decision, model.mirror);
    return pool;
  }

  /** The backends of `pool` (of the default pool when not given). */
  inPool(pool: string = DEFAULT_POOL): Backend[] {
    return this.#backends.filter((b) => b.pool === pool);
  }

  /**
   * The backend for a call: in the pool that serves `model`, among the backends that have the
   * model ready when any is known to (see the top of this file); among the ready ones or, when
   * none is ready, among those not known to be down; skipping `exclude` (the one a retry leaves).
   * A sequence's key (`affinity`) picks by rendezvous hashing, other calls by least-request or
   * round robin. Undefined when there is none.
   */
  pick(exclude?: Backend, affinity?: string, model?: ModelKey): Backend | undefined {
    const pool = this.poolOf(model);
    const known = model !== undefined && this.#backends.some((b) => b.pool === pool && b.has(model));
    // A backend whose index is not known yet may have the model; one whose index lacks it does not.
    const fits = (b: Backend): boolean => b.pool === pool && b !== exclude && (!known || b.models === undefined || b.has(model));
    const ready = (b: Backend): boolean => fits(b) && isReady(b);
    const maybe = (b: Backend): boolean => fits(b) && mayBeUp(b);
    if (affinity !== undefined) return this.#rendezvous(affinity, ready) ?? this.#rendezvous(affinity, maybe);
    return this.#balanced(ready, model) ?? this.#balanced(maybe, model);
  }

  /**
   * The usable backend `key` ranks highest (rendezvous hashing): the same one for every call of
   * a key while the set does not change, and when it does only the keys of the backends that left
   * or came move. A Triton sequence (model and sequence_id) keeps its state on one server.
   */
  #rendezvous(key: string, usable: (b: Backend) => boolean): Backend | undefined {
    let best: Backend | undefined;
    let bestScore = -1;
    const k = fnv1a(key, FNV_OFFSET);
    for (const b of this.#backends) {
      if (!usable(b)) continue;
      const score = fnv1a(b.address, k);
      if (score > bestScore) {
        best = b;
        bestScore = score;
      }
    }
    return best;
  }

  /**
   * Round robin; with least-request, the round-robin choice is weighed against one other usable
   * backend drawn at random, and the one with the lower load wins (ties keep the round-robin
   * choice, so equal loads spread evenly). The load is the calls this process has in flight
   * there, plus, with upstream.queueMetrics, the requests waiting in that Triton's queue for the model.
   */
  #balanced(usable: (b: Backend) => boolean, model?: ModelKey): Backend | undefined {
    const list = this.#backends;
    const n = list.length;
    let first: Backend | undefined;
    for (let i = 0; i < n; i++) {
      const at = (this.#next + i) % n;
      const b = list[at]!;
      if (!usable(b)) continue;
      this.#next = at + 1;
      first = b;
      break;
    }
    if (first === undefined || !this.#leastRequest) return first;
    let others = 0;
    for (const b of list) if (b !== first && usable(b)) others++;
    if (others === 0) return first;
    let draw = Math.floor(this.#random() * others);
    for (const b of list) {
      if (b === first || !usable(b)) continue;
      if (draw-- === 0) return load(b, model) < load(first, model) ? b : first;
    }
    return first;
  }

  /**
   * A mirror call may start: a backend of `pool` that has the model, unless upstream.mirrorMaxInFlight
   * mirrors are running (then, or with no backend, the copy is dropped and counted). The caller
   * reports the mirror's end with mirrorEnded().
   */
  mirrorBackend(model: ModelKey, pool: string): Backend | undefined {
    if (this.mirrorsInFlight >= this.#mirrorMax) {
      this.mirrorOutcome(pool, 'dropped');
      return undefined;
    }
    const b = this.pick(undefined, undefined, { name: model.name, version: model.version, pool });
    if (b === undefined) {
      this.mirrorOutcome(pool, 'dropped');
      return undefined;
    }
    this.mirrorsInFlight++;
    return b;
  }

  /** A mirror call that started has ended: its answer came (ok) or it failed. */
  mirrorEnded(pool: string, ok: boolean): void {
    if (this.mirrorsInFlight > 0) this.mirrorsInFlight--;
    this.mirrorOutcome(pool, ok ? 'answered' : 'failed');
  }

  mirrorOutcome(pool: string, outcome: MirrorOutcome): void {
    const key = `${pool}\u0000${outcome}`;
    this.mirrored.set(key, (this.mirrored.get(key) ?? 0) + 1);
  }

  /** A call started on `b` (least-request counts it until ended()). */
  started(b: Backend): void {
    b.inFlight++;
  }

  /** A call on `b` has settled, however. */
  ended(b: Backend): void {
    if (b.inFlight > 0) b.inFlight--;
  }

  /**
   * `b` answered that it does not have `model` ready (NOT_FOUND, or UNAVAILABLE for a model not
   * ready): it gets no more of the model's calls until its index says otherwise.
   */
  lacks(b: Backend, model: ModelKey): void {
    if (b.models === undefined) b.models = new Set(this.#everyModelBut(model));
    else {
      b.models.delete(modelKey(model.name, model.version));
      if (model.version === undefined || model.version === '') for (const k of [...b.models]) if (k.startsWith(`${model.name}\u0000`)) b.models.delete(k);
    }
  }

  /** Whether a backend of the model's pool other than `but` is known to have it ready. */
  anotherHas(model: ModelKey, but: Backend): boolean {
    const pool = this.poolOf(model);
    return this.#backends.some((b) => b !== but && b.pool === pool && b.has(model) && (isReady(b) || mayBeUp(b)));
  }

  /**
   * A backend whose index was never read, told it lacks a model: its set starts as what the other
   * backends of its pool are known to have, so it keeps getting their calls until its own index comes.
   */
  #everyModelBut(model: ModelKey): string[] {
    const all = new Set<string>();
    for (const b of this.#backends) for (const k of b.models ?? []) all.add(k);
    all.delete(modelKey(model.name, model.version));
    return [...all];
  }

  /** pick(), or the error a call without a backend fails with. */
  pickOrFail(exclude?: Backend, affinity?: string, model?: ModelKey): Backend {
    const b = this.pick(exclude, affinity, model);
    if (b !== undefined) return b;
    const pool = this.poolOf(model);
    const members = this.inPool(pool);
    const c = { connecting: 0, ready: 0, unhealthy: 0, ejected: 0 };
    for (const x of members) c[x.state]++;
    const summary = BACKEND_STATES.filter((s) => c[s] > 0).map((s) => `${c[s]} ${s}`).join(', ') || 'none resolved';
    const why = members.map((x) => this.#checker?.failure?.(x.address)).find((r) => r !== undefined);
    const where = pool === DEFAULT_POOL ? 'upstream.backends' : `upstream.pools.${pool}`;
    throw new GatewayError('GW_ERR_UPSTREAM_NO_BACKEND', `no ready backend among ${where} (${summary})${why === undefined ? '' : `; ${why}`}`);
  }

  /** A call on `b` got an answer (whatever its gRPC status, UNAVAILABLE aside): the connection works. */
  succeeded(b: Backend): void {
    b.callFailures = 0;
    b.answered = true;
  }

  /** A call on `b` failed on the connection or with UNAVAILABLE (passive outlier detection). */
  failed(b: Backend): void {
    if (this.#closed || !b.member) return;
    b.callFailures++;
    this.#reresolveSoon();
    if (b.state !== 'ejected' && b.callFailures >= this.#of(b).ejectAfterFailures) this.#eject(b);
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
    return new Promise<void>((resolve) => {
      const done = (): void => {
        this.#clock.clearTimeout(timer);
        this.#settledWaiters = this.#settledWaiters.filter((w) => w !== done);
        resolve();
      };
      const timer = this.#clock.setTimeout(done, boundMs);
      this.#settledWaiters.push(done);
    });
  }

  /** Stops every timer and check; backends stay as they are (the planes close their connections). */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#clock.clearTimeout(this.#dnsTimer);
    for (const b of this.#backends) {
      this.#clock.clearTimeout(b.timer);
      this.#clock.clearTimeout(b.ejectionTimer);
      this.#clock.clearTimeout(b.modelTimer);
      this.#clock.clearTimeout(b.queueTimer);
    }
    this.#checker?.close();
    for (const w of [...this.#settledWaiters]) w();
  }

  #isSettled(): boolean {
    return this.#closed || (this.#resolvedOnce && (this.#checker === undefined || this.#backends.every((b) => b.checked)));
  }

  #maybeSettled(): void {
    if (this.#settledWaiters.length > 0 && this.#isSettled()) for (const w of [...this.#settledWaiters]) w();
  }

  #add(address: string, target: string, pool: string): void {
    const b = new Backend(address, target, pool);
    this.#backends.push(b);
    this.emit('added', b);
    if (this.#checker !== undefined) this.#schedule(b, 0);
  }

  /** upstream.*'s health and ejection settings as `b`'s pool sets them. */
  #of(b: Backend): Pick<Config['upstream'], PoolKeys> {
    return this.#pools.get(b.pool) ?? this.#o;
  }

  #scheduleQueue(b: Backend, ms: number): void {
    this.#clock.clearTimeout(b.queueTimer);
    b.queueTimer = this.#clock.setTimeout(() => void this.#readQueue(b), ms);
  }

  /**
   * Reads `b`'s queue (upstream.queueMetrics) on its interval, each read bounded at 1 s. A failed
   * read keeps the last one for three intervals, then forgets it (an old queue is worse than none).
   */
  async #readQueue(b: Backend): Promise<void> {
    const queue = this.#o.queue!;
    if (this.#closed || !b.member) return;
    let pending: ReadonlyMap<string, number> | undefined;
    try {
      pending = await queue.read(b.address, QUEUE_READ_TIMEOUT_MS);
    } catch {
      pending = undefined;
    }
    if (this.#closed || !b.member) return;
    const now = this.#clock.now();
    if (pending !== undefined) {
      b.pending = pending;
      b.pendingAt = now;
    } else if (now - b.pendingAt > 3 * queue.intervalMs) b.pending = undefined;
    this.#scheduleQueue(b, Math.round(queue.intervalMs * (0.9 + 0.2 * this.#random())));
  }

  #scheduleModels(b: Backend, ms: number): void {
    this.#clock.clearTimeout(b.modelTimer);
    b.modelTimer = this.#clock.setTimeout(() => void this.#readModels(b), ms);
  }

  /**
   * Reads `b`'s ready models (its repository index), then again every upstream.modelRefreshMs.
   * A backend known down is not asked; an index that cannot be read leaves what was known.
   */
  async #readModels(b: Backend): Promise<void> {
    if (this.#closed || !b.member) return;
    if (isReady(b) || mayBeUp(b)) {
      let models: ReadonlySet<string> | undefined;
      try {
        models = await this.#checker!.models!(b.address, Math.min(this.#modelRefreshMs, 5000));
      } catch {
        models = undefined;
      }
      if (this.#closed || !b.member) return;
      if (models !== undefined) {
        const first = b.models === undefined;
        const before = b.models ?? new Set<string>();
        b.models = new Set(models);
        const names = (from: ReadonlySet<string>, without: ReadonlySet<string>): string[] =>
          [...from].filter((k) => !without.has(k) && !k.includes('\u0000')).sort();
        const loaded = names(b.models, before);
        const unloaded = names(before, b.models);
        if (loaded.length > 0 || unloaded.length > 0) {
          this.emit('models', { address: b.address, pool: b.pool, loaded, unloaded, count: names(b.models, new Set()).length, first });
        }
      }
    }
    this.#scheduleModels(b, Math.round(this.#modelRefreshMs * (0.9 + 0.2 * this.#random())));
  }

  #remove(b: Backend): void {
    b.member = false;
    this.#clock.clearTimeout(b.timer);
    this.#clock.clearTimeout(b.modelTimer);
    this.#clock.clearTimeout(b.queueTimer);
    this.#clock.clearTimeout(b.ejectionTimer);
    this.#backends = this.#backends.filter((x) => x !== b);
    this.#checker?.forget(b.address);
    this.emit('removed', b);
  }

  #setState(b: Backend, to: BackendState, reason: string): void {
    const from = b.state;
    if (from === to) return;
    b.state = to;
    this.emit('state', { address: b.address, from, to, reason });
  }

  #schedule(b: Backend, ms: number): void {
    this.#clock.clearTimeout(b.timer);
    b.timer = this.#clock.setTimeout(() => void this.#check(b), ms);
  }

  async #check(b: Backend): Promise<void> {
    if (this.#closed || !b.member) return;
    const o = this.#of(b);
    const timeoutMs = Math.min(o.healthCheckIntervalMs, 1000);
    let result: CheckResult;
    try {
      result = await this.#checker!.check(b.address, timeoutMs);
    } catch {
      result = 'down';
    }
    if (this.#closed || !b.member) return;
    b.checked = true;
    const answered = b.answered;
    b.answered = false;
    if (result === 'serving') this.#checkPassed(b);
    else if (!(result === 'timeout' && answered)) this.#checkFailed(b, result);
    const next = b.state === 'ready' ? o.healthCheckIntervalMs * (0.9 + 0.2 * this.#random())
      : reconnectDelayMs(b.checkFailures, o.healthCheckIntervalMs, this.#random());
    this.#schedule(b, Math.round(next));
    this.#maybeSettled();
  }

  #checkPassed(b: Backend): void {
    b.checkFailures = 0;
    b.passes++;
    // A backend known down stays known down (never picked) until it is healthy again: one SERVING
    // between refusals — a restarting Triton on a busy machine — must not let calls through, only
    // to refuse them again at the next refused check.
    if (b.verdict !== 'down' || b.passes >= this.#of(b).healthyThreshold) b.onlyTimeouts = true;
    // A new backend needs one pass (Envoy does the same for hosts it has just learnt); one that
    // was found unhealthy needs healthyThreshold in a row.
    if (b.verdict === 'up' || (b.verdict === 'down' && b.passes < this.#of(b).healthyThreshold)) return;
    b.verdict = 'up';
    if (b.state !== 'ejected') this.#setState(b, 'ready', 'health check SERVING');
    // Its models are read as soon as it is up, then on their own interval.
    if (this.#modelRefreshMs > 0 && this.#checker?.models !== undefined && b.modelTimer === undefined) this.#scheduleModels(b, 0);
    if (this.#o.queue !== undefined && b.queueTimer === undefined) this.#scheduleQueue(b, 0);
  }

  #checkFailed(b: Backend, result: 'down' | 'timeout'): void {
    b.passes = 0;
    b.checkFailures++;
    if (result === 'down') b.onlyTimeouts = false;
    if (b.verdict !== 'down') this.#reresolveSoon();
    if (b.verdict === 'down' || b.checkFailures < this.#of(b).unhealthyThreshold) return;
    b.verdict = 'down';
    // The checker's reason when it has one (a name that does not resolve, a refused certificate).
    const why = this.#checker?.failure?.(b.address);
    if (b.state !== 'ejected') this.#setState(b, 'unhealthy', `${b.checkFailures} health checks failed${why === undefined ? '' : `: ${why}`}`);
  }

  #eject(b: Backend): void {
    const o = this.#of(b);
    const pool = this.inPool(b.pool);
    const n = pool.length;
    const ejected = pool.filter((x) => x.state === 'ejected').length;
    // Never more than the configured share of its pool, and never the pool's last backend standing.
    if ((ejected + 1) * 100 > o.maxEjectionPercent * n || ejected + 1 >= n) return;
    if (b.ejections > 0) b.ejections = Math.max(0, b.ejections - Math.floor((this.#clock.now() - b.unejectedAt) / o.ejectionBaseMs));
    b.ejections++;
    this.ejectionsTotal++;
    const ms = ejectionMs(b.ejections, o.ejectionBaseMs);
    this.#setState(b, 'ejected', `${b.callFailures} consecutive calls failed; ejected for ${ms} ms (ejection ${b.ejections})`);
    b.ejectionTimer = this.#clock.setTimeout(() => this.#uneject(b), ms);
  }

  #uneject(b: Backend): void {
    if (this.#closed || !b.member) return;
    b.callFailures = 0;
    b.unejectedAt = this.#clock.now();
    const to: BackendState = b.verdict === 'up' ? 'ready' : b.verdict === 'down' ? 'unhealthy' : 'connecting';
    this.#setState(b, to, 'ejection ended');
  }

  #reresolveSoon(): void {
    if (this.#closed || this.#resolving || !this.#targets.some((t) => t.kind === 'dns')) return;
    if (this.#clock.now() - this.#lastResolve < MIN_RERESOLVE_MS) return;
    void this.#resolveAll();
  }

  async #resolveAll(): Promise<void> {
    this.#resolving = true;
    this.#lastResolve = this.#clock.now();
    this.#clock.clearTimeout(this.#dnsTimer);
    const answers = await Promise.all(this.#targets.map(async (t) => {
      if (t.kind === 'static') return undefined;
      try {
        const addresses = await this.#bounded(this.#resolve(t.name));
        if (addresses.length === 0) throw new Error('no A/AAAA records');
        return { t, addresses: [...new Set(addresses)].map((a) => joinHostPort(a, t.port)) };
      } catch (err) {
        if (!this.#closed) this.emit('resolveFailed', { target: t.text, message: (err as Error).message });
        return undefined;
      }
    }));
    this.#resolving = false;
    if (this.#closed) return;
    for (const a of answers) {
      if (a === undefined) continue;
      const wanted = new Set(a.addresses);
      const mine = (x: Backend): boolean => x.target === a.t.text && x.pool === a.t.pool;
      for (const b of this.#backends.filter(mine)) if (!wanted.has(b.address)) this.#remove(b);
      const have = new Set(this.#backends.filter(mine).map((x) => x.address));
      for (const address of a.addresses) if (!have.has(address)) this.#add(address, a.t.text, a.t.pool);
    }
    this.#resolvedOnce = true;
    this.#dnsTimer = this.#clock.setTimeout(() => void this.#resolveAll(), this.#o.dnsRefreshMs);
    this.#maybeSettled();
  }

  #bounded<T>(p: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = this.#clock.setTimeout(() => reject(new Error(`no answer within ${RESOLVE_TIMEOUT_MS} ms`)), RESOLVE_TIMEOUT_MS);
      p.then((v) => {
        this.#clock.clearTimeout(timer);
        resolve(v);
      }, (err: unknown) => {
        this.#clock.clearTimeout(timer);
        reject(err);
      });
    });
  }
}
