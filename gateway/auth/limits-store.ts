// The Redis side of the shared limits (docs/production.md "Shared limits on Redis"): one client
// per process (@redis/client, node-redis's core: kept by Redis itself, RESP3, reconnection with a
// strategy of ours, and an offline queue that can be turned off), two Lua scripts, and nothing
// that waits longer than auth.limits.storeTimeoutMs.
//
// Keys, under `tensorgate:limits:<id>:` where <id> is the limit's own (`key:<id>`, `jwt:<sub>`,
// `group:<name>`, auth/limits.ts Applied):
//   `rate`     a hash {tokens, at}: the token bucket as of `at` (Redis's own clock, TIME, so the
//              replicas' clocks do not matter). It expires once it would have refilled to its
//              burst: a missing bucket is a full one, so the expiry loses nothing and an identity
//              no longer used leaves nothing behind.
//   `inflight` a sorted set of leases: one member per request in flight, scored by the time its
//              lease ends. Taking a place first drops the expired ones; the holder renews its
//              leases every LEASE_TTL_MS / 3 while the request runs and removes its member when
//              it ends. A replica that crashed gives nothing back: its leases end within
//              LEASE_TTL_MS and their places come back then. The set expires with its last lease.
// A check-and-take is one EVALSHA of TAKE over every limit of the request (all or nothing, as the
// per-process Limiter), EVAL again on NOSCRIPT (a restarted Redis forgot the script).
//   `quota:<unit>:<per>:<window start>` a quota's counter (auth/quotas.ts), expiring at the
//              window's end (PEXPIREAT: a window's end is the same instant for every replica).
//              QUOTA_TAKE checks and takes a request's counters all or nothing; QUOTA_ADD charges
//              what is known after the call; usage is read with MGET. Windows are reckoned on the
//              gateways' clocks (UTC): replicas whose clocks differ by d may count a request in the
//              window before or after the boundary within d.
import { createHash, randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type * as Redis from '@redis/client';
import { redactedUrl } from './limits';
import type { QuotaCounter } from './quotas';

export const KEY_PREFIX = 'tensorgate:limits:';
/** A place's lease: the longest a crashed replica's place stays taken. */
export const LEASE_TTL_MS = 10_000;
/** The bound of the start-up check: connect, authenticate, load the scripts. */
export const START_TIMEOUT_MS = 3000;
/** The bound of a usage read (GET /usage/<id>). */
const READ_TIMEOUT_MS = 1000;
/** Consecutive timeouts after which the store is taken as down until a PING answers. */
const TIMEOUTS_TO_DOWN = 8;
const PROBE_INTERVAL_MS = 250;
/** Reconnection: 50 ms doubling to 1 s, with jitter so that replicas do not come back in step. */
const RECONNECT_MAX_MS = 1000;
/** Commands waiting to be written at most (a slow socket): more fail at once. */
const MAX_QUEUED = 1000;

/**
 * TAKE: KEYS = the rate and inflight keys of each limit; ARGV = the member, the lease in ms, then
 * rate, burst, want, concurrency of each limit. Returns ok, then granted or tokens × 1000, and places held, per limit.
 */
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local member, ttl = ARGV[1], tonumber(ARGV[2])
local n = #KEYS / 2
local ok, out, tokens = 1, {}, {}
for i = 1, n do
  local a = 2 + (i - 1) * 4
  local rate, burst, want, cap = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local milli, held = -1, -1
  if want > 0 then
    local h = redis.call('HMGET', KEYS[2 * i - 1], 'tokens', 'at')
    local tk = burst
    if h[1] then tk = math.min(burst, tonumber(h[1]) + math.max(0, now - tonumber(h[2])) * rate / 1000) end
    tokens[i] = tk
    milli = math.floor(tk * 1000)
    if tk < 1 then ok = 0 end
  end
  if cap > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[2 * i], '-inf', now)
    held = redis.call('ZCARD', KEYS[2 * i])
    if held >= cap then ok = 0 end
  end
  out[2 * i] = milli
  out[2 * i + 1] = held
end
out[1] = ok
if ok == 0 then return out end
for i = 1, n do
  local a = 2 + (i - 1) * 4
  local rate, burst, want, cap = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  if want > 0 then
    local granted = math.min(want, math.floor(tokens[i]))
    local left = tokens[i] - granted
    redis.call('HSET', KEYS[2 * i - 1], 'tokens', string.format('%.6f', left), 'at', now)
    redis.call('PEXPIRE', KEYS[2 * i - 1], math.ceil((burst - left) * 1000 / rate) + 1000)
    out[2 * i] = granted
  end
  if cap > 0 then
    redis.call('ZADD', KEYS[2 * i], now + ttl, member)
    redis.call('PEXPIRE', KEYS[2 * i], ttl)
  end
end
return out
`;

/** RENEW: KEYS = inflight keys; ARGV = the lease in ms, then each one's member. Re-adds what a restarted Redis lost */
const RENEW = `
local t = redis.call('TIME')
local ttl = tonumber(ARGV[1])
local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + ttl
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], at, ARGV[i + 1])
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return #KEYS
`;

/**
 * QUOTA_TAKE: KEYS = counters; ARGV = add, max, hard (1/0), window end (ms) per counter. Adds each
 * `add` unless a hard counter would pass its max (add 0: unless it is spent). Returns ok, then each counter's
 * value before.
 */
const QUOTA_TAKE = `
local ok, out = 1, {}
for i = 1, #KEYS do
  local a = (i - 1) * 4
  local add, max, hard = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), ARGV[a + 3]
  local used = tonumber(redis.call('GET', KEYS[i]) or '0')
  out[i + 1] = used
  if hard == '1' and ((add > 0 and used + add > max) or (add == 0 and used >= max)) then ok = 0 end
end
out[1] = ok
if ok == 0 then return out end
for i = 1, #KEYS do
  local a = (i - 1) * 4
  if tonumber(ARGV[a + 1]) > 0 then
    redis.call('INCRBY', KEYS[i], ARGV[a + 1])
    redis.call('PEXPIREAT', KEYS[i], ARGV[a + 4])
  end
end
return out
`;

/** QUOTA_ADD: KEYS = counters; ARGV = amount, window end (ms) per counter. */
const QUOTA_ADD = `
for i = 1, #KEYS do
  redis.call('INCRBY', KEYS[i], ARGV[2 * i - 1])
  redis.call('PEXPIREAT', KEYS[i], ARGV[2 * i])
end
return #KEYS
`;

const sha1 = (s: string): string => createHash('sha1').update(s).digest('hex');
const SCRIPTS = {
  take: { text: TAKE, sha: sha1(TAKE) }, renew: { text: RENEW, sha: sha1(RENEW) },
  quotaTake: { text: QUOTA_TAKE, sha: sha1(QUOTA_TAKE) }, quotaAdd: { text: QUOTA_ADD, sha: sha1(QUOTA_ADD) },
} as const;

/** What one limit of a request asks of the store. */
export interface StoreAsk {
  /** The limit's id (auth/limits.ts Applied.id). */
  readonly id: string;
  /** 0: no rate. */
  readonly ratePerSecond: number;
  readonly burst: number;
  /** Tokens to take from the shared bucket (a lease spent locally); 0: none asked (spent from a lease held). */
  readonly want: number;
  /** 0: no concurrency limit. */
  readonly concurrency: number;
}

/**
 * The store's verdict. Admitted: tokens granted per ask, and the lease of its places (undefined
 * when it holds none). Refused: per ask the bucket's tokens (undefined: not asked) and the places
 * held (undefined: no concurrency limit).
 */
export type StoreVerdict =
  | { readonly admitted: true; readonly granted: readonly number[]; readonly lease: string | undefined }
  | { readonly admitted: false; readonly tokens: readonly (number | undefined)[]; readonly held: readonly (number | undefined)[] };

/** Why the store did not answer: no answer within the bound, not connected, or an error reply. */
export type StoreFailureKind = 'timeout' | 'unavailable' | 'error';
export const STORE_FAILURE_KINDS: readonly StoreFailureKind[] = ['timeout', 'unavailable', 'error'];

export class StoreError extends Error {
  constructor(readonly kind: StoreFailureKind, message: string) {
    super(message);
  }
}

export interface LimitsStoreEvents {
  /** A call answered, in seconds. */
  roundTrip: [seconds: number];
  /** A call failed. */
  failure: [kind: StoreFailureKind, message: string];
  /** Connected and usable, or not. */
  state: [up: boolean];
}

/**
 * Where the shared limits are counted (auth/shared-limiter.ts): Redis (LimitsStore, below) for
 * every worker and replica, or the node:cluster primary for its workers (auth/cluster-store.ts).
 */
export interface SharedStore extends EventEmitter<LimitsStoreEvents> {
  /** Whether the store is connected and answering. */
  readonly up: boolean;
  /** Where it is, for the log (never a password). */
  readonly where: string;
  /** Ready to count, within its start-up bound; throws why not. */
  start(): Promise<void>;
  /** One check-and-take of every ask, all or nothing. Throws StoreError. */
  take(asks: readonly StoreAsk[]): Promise<StoreVerdict>;
  /** The quotas' counters kept there (auth/quotas.ts); each call throws StoreError. */
  readonly quotas: QuotaCounter;
  /** Gives a lease's places back (not awaited: should it fail, the lease ends by itself). */
  release(lease: string): void;
  close(): void;
}

type Client = ReturnType<typeof Redis.createClient>;

export class LimitsStore extends EventEmitter<LimitsStoreEvents> implements SharedStore {
  readonly #client: Client;
  readonly #url: string;
  /** Every place this process holds: member → its inflight keys (renewed until released). */
  readonly #leases = new Map<string, readonly string[]>();
  readonly #memberPrefix = `${randomUUID().slice(0, 8)}:${process.pid}:`;
  #seq = 0;
  #started = false;
  #closed = false;
  #timeouts = 0;
  #down = false;
  #up = false;
  /** What 'state' last told. */
  #told = false;
  #renewer: NodeJS.Timeout | undefined;
  #prober: NodeJS.Timeout | undefined;

  constructor(url: string, readonly timeoutMs: number) {
    super();
    this.#url = url;
    // Loaded here, not with the module: the client costs ~100 ms at every start, and a gateway
    // without a store never needs it.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { createClient } = require('@redis/client') as typeof Redis;
    this.#client = createClient({
      url,
      RESP: 3,
      // A request never waits for a connection: without one, a call fails at once (policy applies).
      disableOfflineQueue: true,
      commandsQueueMaxLength: MAX_QUEUED,
      socket: {
        connectTimeout: START_TIMEOUT_MS,
        // At start a failure is the operator's to fix (exit 2); later, reconnect for ever.
        reconnectStrategy: (retries) => (this.#started && !this.#closed ? Math.min(50 * 2 ** retries, RECONNECT_MAX_MS) * (0.5 + Math.random() / 2) : false),
      },
    });
    // node-redis emits every socket error (and each failed reconnection); unheard, one would crash the process.
    this.#client.on('error', (err: Error) => this.emit('failure', 'unavailable', err.message));
    this.#client.on('ready', () => this.#connected(true));
    this.#client.on('end', () => this.#connected(false));
    this.#client.on('reconnecting', () => this.#connected(false));
  }

  /** Whether the store is connected and answering. */
  get up(): boolean {
    return this.#up && !this.#down;
  }

  /** The URL without its password. */
  get where(): string {
    return redactedUrl(this.#url);
  }

  /** Connects, authenticates and loads the scripts within START_TIMEOUT_MS; throws why not. */
  async start(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
    });
    try {
      await Promise.race([this.#connect(), bound]);
    } catch (err) {
      this.#client.destroy();
      throw new Error(String((err as Error).message ?? err).split('\n')[0]!.trim().replace(/\.$/, ''), { cause: err });
    } finally {
      clearTimeout(timer);
    }
    this.#started = true;
    this.#renewer = setInterval(() => this.#renew(), LEASE_TTL_MS / 3).unref();
  }

  async #connect(): Promise<void> {
    await this.#client.connect();
    for (const script of Object.values(SCRIPTS)) await this.#client.sendCommand(['SCRIPT', 'LOAD', script.text]);
  }

  /** One check-and-take of every ask, all or nothing. Throws StoreError. */
  async take(asks: readonly StoreAsk[]): Promise<StoreVerdict> {
    const holds = asks.some((a) => a.concurrency > 0);
    const member = holds ? `${this.#memberPrefix}${++this.#seq}` : '';
    const keys = asks.flatMap((a) => [`${KEY_PREFIX}${a.id}:rate`, `${KEY_PREFIX}${a.id}:inflight`]);
    const args = [member, String(LEASE_TTL_MS), ...asks.flatMap((a) => [String(a.ratePerSecond), String(a.burst), String(a.want), String(a.concurrency)])];
    let reply: unknown;
    try {
      reply = await this.#script('take', keys, args);
    } catch (err) {
      // A take that timed out may still have taken places: given back at once, not in LEASE_TTL_MS.
      if (holds && (err as StoreError).kind === 'timeout') this.#remove(member, keys.filter((_, i) => i % 2 === 1));
      throw err;
    }
    const out = (reply as number[]).map(Number);
    if (out[0] !== 1) {
      return {
        admitted: false,
        tokens: asks.map((_, i) => (out[1 + 2 * i]! < 0 ? undefined : out[1 + 2 * i]! / 1000)),
        held: asks.map((_, i) => (out[2 + 2 * i]! < 0 ? undefined : out[2 + 2 * i]!)),
      };
    }
    if (holds) this.#leases.set(member, asks.filter((a) => a.concurrency > 0).map((a) => `${KEY_PREFIX}${a.id}:inflight`));
    return { admitted: true, granted: asks.map((_, i) => Math.max(0, out[1 + 2 * i]!)), lease: holds ? member : undefined };
  }

  /** The quotas' counters kept here (auth/quotas.ts); each call throws StoreError. */
  readonly quotas: QuotaCounter = {
    take: async (entries) => {
      const args = entries.flatMap((e) => [String(e.add), String(e.max), e.hard ? '1' : '0', String(e.endMs)]);
      const out = ((await this.#script('quotaTake', entries.map((e) => KEY_PREFIX + e.key), args)) as unknown[]).map(Number);
      return { ok: out[0] === 1, used: out.slice(1) };
    },
    add: async (entries) => {
      const live = entries.filter((e) => e.add > 0);
      if (live.length > 0) await this.#script('quotaAdd', live.map((e) => KEY_PREFIX + e.key), live.flatMap((e) => [String(e.add), String(e.endMs)]));
    },
    // Off the requests' path (GET /usage): a read may take longer than storeTimeoutMs.
    read: async (keys) => (keys.length === 0 ? [] : ((await this.#send(['MGET', ...keys.map((k) => KEY_PREFIX + k)], READ_TIMEOUT_MS)) as unknown[]).map((v) => Number(v ?? 0))),
  };

  /** Gives a lease's places back (not awaited: should it fail, the lease ends by itself). */
  release(lease: string): void {
    const keys = this.#leases.get(lease);
    if (keys === undefined) return;
    this.#leases.delete(lease);
    this.#remove(lease, keys);
  }

  #remove(member: string, keys: readonly string[]): void {
    if (!this.up) return;
    for (const k of keys) this.#send(['ZREM', k, member]).catch(() => {});
  }

  /** Every lease held, renewed in one call; re-added where a restarted Redis lost them. */
  #renew(): void {
    if (this.#leases.size === 0 || !this.up) return;
    const keys: string[] = [];
    const members: string[] = [];
    for (const [m, ks] of this.#leases) {
      for (const k of ks) {
        keys.push(k);
        members.push(m);
      }
    }
    this.#script('renew', keys, [String(LEASE_TTL_MS), ...members]).catch(() => {});
  }

  /** EVALSHA, EVAL on NOSCRIPT; the whole bounded by timeoutMs. */
  async #script(name: keyof typeof SCRIPTS, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    const s = SCRIPTS[name];
    const started = performance.now();
    try {
      return await this.#send(['EVALSHA', s.sha, String(keys.length), ...keys, ...args]);
    } catch (err) {
      if (!(err instanceof StoreError) || err.kind !== 'error' || !err.message.startsWith('NOSCRIPT')) throw err;
      const left = Math.max(1, this.timeoutMs - (performance.now() - started));
      return this.#send(['EVAL', s.text, String(keys.length), ...keys, ...args], left);
    }
  }

  /** One command, bounded: StoreError of its kind when it fails, the round trip when it answers. */
  async #send(args: string[], timeoutMs = this.timeoutMs): Promise<unknown> {
    if (!this.up) {
      const e = new StoreError('unavailable', `the store at ${this.where} is ${this.#down ? 'not answering' : 'not connected'}`);
      this.emit('failure', e.kind, e.message);
      throw e;
    }
    const started = performance.now();
    try {
      const reply = await within(this.#client.sendCommand(args), timeoutMs);
      this.#timeouts = 0;
      this.emit('roundTrip', (performance.now() - started) / 1000);
      return reply;
    } catch (err) {
      const e = storeError(err, timeoutMs);
      if (e.kind === 'timeout' && ++this.#timeouts >= TIMEOUTS_TO_DOWN) this.#markDown();
      this.emit('failure', e.kind, e.message);
      throw e;
    }
  }

  /** Too many timeouts in a row: calls fail at once until a PING answers (nothing piles up on a silent socket). */
  #markDown(): void {
    if (this.#down) return;
    this.#down = true;
    this.#tell();
    const probe = (): void => {
      within(this.#client.sendCommand(['PING']), Math.max(this.timeoutMs, PROBE_INTERVAL_MS)).then(() => {
        this.#down = false;
        this.#timeouts = 0;
        this.#prober = undefined;
        this.#tell();
      }, () => {
        if (!this.#closed) this.#prober = setTimeout(probe, PROBE_INTERVAL_MS).unref();
      });
    };
    probe();
  }

  #connected(up: boolean): void {
    if (this.#up === up) return;
    this.#up = up;
    // A restarted Redis has forgotten the scripts: loaded again now rather than on a request's NOSCRIPT.
    if (up && this.#started) for (const s of Object.values(SCRIPTS)) this.#client.sendCommand(['SCRIPT', 'LOAD', s.text]).catch(() => {});
    this.#tell();
  }

  /** 'state' when `up` changed since last told. */
  #tell(): void {
    if (this.up === this.#told) return;
    this.#told = this.up;
    this.emit('state', this.#told);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#renewer);
    clearTimeout(this.#prober);
    this.#client.destroy();
  }
}

/**
 * `p`, or a TimeoutError after `ms`. node-redis's own command timeout stops only at the write: a
 * command written to a server that stopped answering would wait for ever (its late reply is dropped).
 */
function within<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeoutError()), ms);
    p.then((v) => {
      clearTimeout(timer);
      resolve(v);
    }, (err: unknown) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

class TimeoutError extends Error {}

function storeError(err: unknown, timeoutMs: number): StoreError {
  // node-redis's errors set no `name`: their class tells (jest's realms make instanceof unreliable).
  const name = (err as Error | undefined)?.constructor?.name ?? '';
  const message = String((err as Error).message ?? err);
  if (name.endsWith('TimeoutError')) return new StoreError('timeout', `the store did not answer within ${timeoutMs} ms (auth.limits.storeTimeoutMs)`);
  if (name === 'ClientOfflineError' || name === 'ClientClosedError' || name === 'SocketClosedUnexpectedlyError') return new StoreError('unavailable', message);
  return new StoreError('error', message);
}
