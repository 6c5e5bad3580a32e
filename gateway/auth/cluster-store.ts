// The shared limits counted by the node:cluster primary for its workers (workers > 1 without
// auth.limits.store; docs/production.md "Workers without a store"): one machine is exact without
// Redis. The primary is the store: PrimaryStore keeps what auth/limits-store.ts's scripts keep in
// Redis — a token bucket per rate limit, a lease per place held, the quotas' counters — and each
// worker's WorkerStore is a SharedStore that asks it over the cluster's IPC channel
// (process.send / the worker's 'message'), so auth/shared-limiter.ts judges the same way on either
// store: local leases of tokens in front of the primary's buckets, places taken with the check,
// quotas all or nothing, charges after the call. Each call waits at most auth.limits.storeTimeoutMs;
// then auth.limits.storeFailure applies, as with Redis.
//
// A place is a lease, as in Redis: the worker renews its leases every LEASE_TTL_MS / 3 while its
// requests run and gives each back when its request ends. A worker that dies gives nothing back:
// the primary drops its leases when it sees the worker exit, and a worker that hangs keeps its
// places only until its leases end (LEASE_TTL_MS). The primary's clock is the only one, so the
// buckets and windows need no TIME of their own.
import { EventEmitter } from 'node:events';
import { MAX_TRACKED } from './limits';
import { LEASE_TTL_MS, type LimitsStoreEvents, type SharedStore, type StoreAsk, StoreError, type StoreVerdict } from './limits-store';
import { LocalQuotaCounter, type QuotaCounter, type QuotaEntry, type QuotaTake } from './quotas';

/** A worker's call. release and renew want no answer. */
export type StoreCall =
  | { readonly op: 'take'; readonly asks: readonly StoreAsk[]; readonly member: string }
  | { readonly op: 'quotaTake' | 'quotaAdd'; readonly entries: readonly QuotaEntry[] }
  | { readonly op: 'read'; readonly keys: readonly string[] }
  | { readonly op: 'release' | 'renew'; readonly members: readonly string[] };

export type StoreReply = StoreVerdict | QuotaTake | readonly number[] | null;

/** The IPC messages: a call (id 0: no answer wanted) and its answer. */
export interface StoreCallMessage { readonly tg: 'store'; readonly id: number; readonly call: StoreCall }
export interface StoreReplyMessage { readonly tg: 'store'; readonly id: number; readonly reply: StoreReply }

/** The bound of a usage read (GET /usage/<id>): off the requests' path. */
const READ_TIMEOUT_MS = 1000;

/** One rate limit's bucket in the primary: its tokens as of `atMs`. */
interface Bucket { tokens: number; atMs: number }

/** A place's lease: whose, until when, and the limits it holds a place of. */
interface Lease { readonly owner: number; untilMs: number; readonly ids: readonly string[] }

/** The primary's side: the buckets, leases and quota counters of every worker, bounded as the per-process Limiter's. */
export class PrimaryStore {
  /** Least recently used first; a missing bucket is a full one. */
  readonly #buckets = new Map<string, Bucket>();
  /** member → its lease. */
  readonly #leases = new Map<string, Lease>();
  /** A limit's id → the members holding a place of it (deleted when empty). */
  readonly #inflight = new Map<string, Set<string>>();
  readonly #quotas = new LocalQuotaCounter(MAX_TRACKED);

  constructor(private readonly nowMs: () => number = () => performance.now()) {}

  /** A call of worker `owner` (cluster's worker id), answered at once; undefined: no answer wanted. */
  handle(owner: number, call: StoreCall): StoreReply | undefined {
    switch (call.op) {
      case 'take': return this.take(owner, call.asks, call.member);
      case 'quotaTake': return this.#quotas.take(call.entries);
      case 'quotaAdd': this.#quotas.add(call.entries); return null;
      case 'read': return this.#quotas.read(call.keys);
      case 'release': for (const m of call.members) this.#drop(m); return undefined;
      case 'renew': this.#renew(owner, call.members); return undefined;
    }
  }

  /** auth/limits-store.ts's TAKE: every ask judged, then all taken or none. */
  take(owner: number, asks: readonly StoreAsk[], member: string): StoreVerdict {
    const now = this.nowMs();
    const tokens = asks.map((a) => (a.want > 0 ? this.#tokens(a, now) : undefined));
    const held = asks.map((a) => (a.concurrency > 0 ? this.#held(a.id, now) : undefined));
    const ok = asks.every((a, i) => (tokens[i] === undefined || tokens[i] >= 1) && (held[i] === undefined || held[i] < a.concurrency));
    if (!ok) return { admitted: false, tokens, held };
    const granted = asks.map((a, i) => {
      if (tokens[i] === undefined) return 0;
      const n = Math.min(a.want, Math.floor(tokens[i]));
      this.#bucket(a.id).tokens = tokens[i] - n;
      return n;
    });
    const ids = asks.filter((a) => a.concurrency > 0).map((a) => a.id);
    if (ids.length === 0) return { admitted: true, granted, lease: undefined };
    this.#leases.set(member, { owner, untilMs: now + LEASE_TTL_MS, ids });
    for (const id of ids) {
      let s = this.#inflight.get(id);
      if (s === undefined) this.#inflight.set(id, (s = new Set()));
      s.add(member);
    }
    return { admitted: true, granted, lease: member };
  }

  /** A worker exited: every place it held comes back now. */
  gone(owner: number): void {
    for (const [m, l] of this.#leases) if (l.owner === owner) this.#drop(m);
  }

  /** Places held now (tests). */
  get leases(): number {
    return this.#leases.size;
  }

  /** A bucket's tokens now (refilled at the ask's rate up to its burst); the bucket is made (full) and stamped now. */
  #tokens(a: StoreAsk, now: number): number {
    const b = this.#buckets.get(a.id);
    const tokens = b === undefined ? a.burst : Math.min(a.burst, b.tokens + (Math.max(0, now - b.atMs) * a.ratePerSecond) / 1000);
    const mine = this.#bucket(a.id);
    mine.tokens = tokens;
    mine.atMs = now;
    return tokens;
  }

  /** A bucket, moved last; past MAX_TRACKED the least recently used is dropped (it starts full again). */
  #bucket(id: string): Bucket {
    let b = this.#buckets.get(id);
    if (b !== undefined) this.#buckets.delete(id);
    else {
      if (this.#buckets.size >= MAX_TRACKED) this.#buckets.delete(this.#buckets.keys().next().value!);
      b = { tokens: 0, atMs: 0 };
    }
    this.#buckets.set(id, b);
    return b;
  }

  /** Places of `id` held now; the leases ended are dropped first. */
  #held(id: string, now: number): number {
    const s = this.#inflight.get(id);
    if (s === undefined) return 0;
    for (const m of s) if (this.#leases.get(m)!.untilMs <= now) this.#drop(m);
    return s.size;
  }

  #drop(member: string): void {
    const l = this.#leases.get(member);
    if (l === undefined) return;
    this.#leases.delete(member);
    for (const id of l.ids) {
      const s = this.#inflight.get(id);
      s?.delete(member);
      if (s?.size === 0) this.#inflight.delete(id);
    }
  }

  #renew(owner: number, members: readonly string[]): void {
    const until = this.nowMs() + LEASE_TTL_MS;
    for (const m of members) {
      const l = this.#leases.get(m);
      if (l !== undefined && l.owner === owner) l.untilMs = until;
    }
  }
}

/** What a worker's process offers: node:process when forked by node:cluster. */
export interface Channel {
  readonly connected: boolean;
  send?(m: unknown): boolean;
  on(event: 'message', listener: (m: unknown) => void): unknown;
  off(event: 'message', listener: (m: unknown) => void): unknown;
}

/** A worker's side: the primary as a SharedStore, over the IPC channel. */
export class WorkerStore extends EventEmitter<LimitsStoreEvents> implements SharedStore {
  readonly where = 'the cluster primary';
  readonly #pending = new Map<number, { resolve: (r: StoreReply) => void; reject: (e: StoreError) => void; timer: NodeJS.Timeout; started: number }>();
  /** Every place this worker holds (renewed until released). */
  readonly #leases = new Set<string>();
  readonly #memberPrefix = `${process.pid}:`;
  #seq = 0;
  #renewer: NodeJS.Timeout | undefined;
  readonly #onMessage = (m: unknown): void => {
    const r = m as StoreReplyMessage | undefined;
    if (r?.tg !== 'store') return;
    const p = this.#pending.get(r.id);
    if (p === undefined) return; // answered after its timeout: dropped
    this.#pending.delete(r.id);
    clearTimeout(p.timer);
    this.emit('roundTrip', (performance.now() - p.started) / 1000);
    p.resolve(r.reply);
  };

  constructor(readonly timeoutMs: number, private readonly channel: Channel = process) {
    super();
    channel.on('message', this.#onMessage);
  }

  get up(): boolean {
    return this.channel.connected;
  }

  /** Nothing to connect: the channel is the worker's own. */
  start(): Promise<void> {
    this.#renewer ??= setInterval(() => {
      if (this.#leases.size > 0) this.#tell({ op: 'renew', members: [...this.#leases] });
    }, LEASE_TTL_MS / 3).unref();
    return Promise.resolve();
  }

  async take(asks: readonly StoreAsk[]): Promise<StoreVerdict> {
    const holds = asks.some((a) => a.concurrency > 0);
    const member = holds ? `${this.#memberPrefix}${++this.#seq}` : '';
    let v: StoreVerdict;
    try {
      v = await this.#call({ op: 'take', asks, member }) as StoreVerdict;
    } catch (err) {
      // A take that timed out may still have taken places: given back at once, not in LEASE_TTL_MS.
      if (holds) this.#tell({ op: 'release', members: [member] });
      throw err;
    }
    if (!v.admitted) {
      // JSON (the channel's serialization) made the undefined of an ask not judged that way null.
      return { admitted: false, tokens: v.tokens.map((t) => t ?? undefined), held: v.held.map((h) => h ?? undefined) };
    }
    if (v.lease !== undefined && v.lease !== null) this.#leases.add(v.lease);
    return { admitted: true, granted: v.granted, lease: v.lease ?? undefined };
  }

  readonly quotas: QuotaCounter = {
    take: async (entries) => await this.#call({ op: 'quotaTake', entries }) as QuotaTake,
    add: async (entries) => {
      if (entries.some((e) => e.add > 0)) await this.#call({ op: 'quotaAdd', entries });
    },
    read: async (keys) => (keys.length === 0 ? [] : await this.#call({ op: 'read', keys }, READ_TIMEOUT_MS) as number[]),
  };

  release(lease: string): void {
    if (this.#leases.delete(lease)) this.#tell({ op: 'release', members: [lease] });
  }

  /** A call with no answer wanted (lost with the channel: the lease ends by itself). */
  #tell(call: StoreCall): void {
    if (this.channel.connected) this.channel.send?.({ tg: 'store', id: 0, call } satisfies StoreCallMessage);
  }

  /** A call, answered within `timeoutMs` or a StoreError. */
  #call(call: StoreCall, timeoutMs = this.timeoutMs): Promise<StoreReply> {
    if (!this.channel.connected || this.channel.send === undefined) return Promise.reject(this.#failed('unavailable', 'the cluster primary is gone'));
    const id = ++this.#seq;
    return new Promise<StoreReply>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(this.#failed('timeout', `the cluster primary did not answer within ${timeoutMs} ms (auth.limits.storeTimeoutMs)`));
      }, timeoutMs);
      this.#pending.set(id, { resolve, reject, timer, started: performance.now() });
      this.channel.send!({ tg: 'store', id, call } satisfies StoreCallMessage);
    });
  }

  #failed(kind: 'timeout' | 'unavailable', message: string): StoreError {
    this.emit('failure', kind, message);
    return new StoreError(kind, message);
  }

  close(): void {
    clearInterval(this.#renewer);
    this.channel.off('message', this.#onMessage);
    for (const p of this.#pending.values()) {
      clearTimeout(p.timer);
      p.reject(new StoreError('unavailable', 'the limits are closing'));
    }
    this.#pending.clear();
  }
}
