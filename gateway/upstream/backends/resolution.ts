// The set's targets and their resolution (docs/production.md#backends-dns-health-retries): a
// `host:port` target is one backend (its connection resolves the name), as is a `unix:/path` one
// (config/address.ts); a `dns:///name:port` target
// is every A/AAAA record of the name, asked again every upstream.dnsRefreshMs and soon after a
// backend fails (at most once a second), each lookup bounded at 5 s. An address that leaves the
// answer is drained, a new one joins, and a failed lookup keeps the addresses the name had.
import { lookup } from 'node:dns/promises';
import type { Backend, SetContext } from './backend';

/** Every address (IPv4 or IPv6, without brackets) a name has. */
export type Resolver = (name: string) => Promise<readonly string[]>;

type Target = { readonly kind: 'static'; readonly address: string; readonly pool: string }
  | { readonly kind: 'dns'; readonly name: string; readonly port: number; readonly text: string; readonly pool: string };

/** A name is not asked again on failures more often than this. */
const MIN_RERESOLVE_MS = 1000;
/** Bounds a DNS lookup (node:dns has no timeout of its own). */
const RESOLVE_TIMEOUT_MS = 5000;

function parseTarget(t: string, pool: string): Target {
  const m = /^dns:\/\/\/(.+):(\d+)$/.exec(t);
  return m === null ? { kind: 'static', address: t, pool } : { kind: 'dns', name: m[1]!, port: Number(m[2]), text: t, pool };
}

/** host:port, with IPv6 addresses in brackets. */
function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

async function lookupAll(name: string): Promise<readonly string[]> {
  const records = await lookup(name, { all: true });
  return records.map((r) => r.address);
}

/** What resolution changes in the set, and tells it. */
export interface Membership {
  add(address: string, target: string, pool: string): void;
  /** Drains `b`: it left its name's answer. */
  remove(b: Backend): void;
  /** A name could not be resolved; the backends it had stay. */
  resolveFailed(target: string, message: string): void;
  /** Every name was resolved (or failed) once more. */
  resolved(): void;
}

export class Resolution {
  readonly #set: SetContext;
  readonly #members: Membership;
  readonly #resolve: Resolver;
  readonly #refreshMs: number;
  readonly #targets: readonly Target[];
  #resolving = false;
  #resolvedOnce = false;
  #lastResolve = -Infinity;
  #timer: unknown;

  /** `pools`: each pool's targets, by pool name (upstream.backends is the default pool's). */
  constructor(set: SetContext, members: Membership, o: {
    readonly pools: readonly { readonly name: string; readonly targets: readonly string[] }[];
    readonly dnsRefreshMs: number; readonly resolve: Resolver | undefined;
  }) {
    this.#set = set;
    this.#members = members;
    this.#resolve = o.resolve ?? lookupAll;
    this.#refreshMs = o.dnsRefreshMs;
    this.#targets = o.pools.flatMap((p) => p.targets.map((t) => parseTarget(t, p.name)));
  }

  /** Adds every `host:port` backend, then resolves the names. */
  start(): void {
    for (const t of this.#targets) if (t.kind === 'static') this.#members.add(t.address, t.address, t.pool);
    if (this.#targets.some((t) => t.kind === 'dns')) {
      void this.#resolveAll();
    } else {
      this.#resolvedOnce = true;
    }
  }

  /** Whether every name was resolved (or failed) once. */
  get resolvedOnce(): boolean {
    return this.#resolvedOnce;
  }

  /** A backend failed: its name may have moved, so the names are asked again (at most once a second). */
  soon(): void {
    if (this.#set.closed() || this.#resolving || !this.#targets.some((t) => t.kind === 'dns')) return;
    if (this.#set.clock.now() - this.#lastResolve < MIN_RERESOLVE_MS) return;
    void this.#resolveAll();
  }

  close(): void {
    this.#set.clock.clearTimeout(this.#timer);
  }

  async #resolveAll(): Promise<void> {
    const clock = this.#set.clock;
    this.#resolving = true;
    this.#lastResolve = clock.now();
    clock.clearTimeout(this.#timer);
    const answers = await Promise.all(this.#targets.map(async (t) => {
      if (t.kind === 'static') return undefined;
      try {
        const addresses = await this.#bounded(this.#resolve(t.name));
        if (addresses.length === 0) throw new Error('no A/AAAA records');
        return { t, addresses: [...new Set(addresses)].map((a) => joinHostPort(a, t.port)) };
      } catch (err) {
        if (!this.#set.closed()) this.#members.resolveFailed(t.text, (err as Error).message);
        return undefined;
      }
    }));
    this.#resolving = false;
    if (this.#set.closed()) return;
    for (const a of answers) if (a !== undefined) this.#apply(a.t.text, a.t.pool, a.addresses);
    this.#resolvedOnce = true;
    this.#timer = clock.setTimeout(() => void this.#resolveAll(), this.#refreshMs);
    this.#members.resolved();
  }

  /** The name `target` of `pool` now has `addresses`: the backends it no longer has go, new ones come. */
  #apply(target: string, pool: string, addresses: readonly string[]): void {
    const wanted = new Set(addresses);
    const mine = (x: Backend): boolean => x.target === target && x.pool === pool;
    for (const b of this.#set.backends().filter(mine)) if (!wanted.has(b.address)) this.#members.remove(b);
    const have = new Set(this.#set.backends().filter(mine).map((x) => x.address));
    for (const address of addresses) if (!have.has(address)) this.#members.add(address, target, pool);
  }

  #bounded<T>(p: Promise<T>): Promise<T> {
    const clock = this.#set.clock;
    return new Promise<T>((resolve, reject) => {
      const timer = clock.setTimeout(() => reject(new Error(`no answer within ${RESOLVE_TIMEOUT_MS} ms`)), RESOLVE_TIMEOUT_MS);
      p.then((v) => {
        clock.clearTimeout(timer);
        resolve(v);
      }, (err: unknown) => {
        clock.clearTimeout(timer);
        reject(err);
      });
    });
  }
}
