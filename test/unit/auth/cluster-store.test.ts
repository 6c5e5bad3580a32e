// The primary as the workers' store (gateway/auth/cluster-store.ts): PrimaryStore's buckets,
// leases and quotas on an injected clock, and WorkerStore talking to it through a channel that
// serializes as node:cluster's does (JSON) and answers on a later turn, under the shared limiter.
// The cluster itself (--workers 2, a worker killed) is in test/integration/workers-limits.test.ts.
import { type Channel, PrimaryStore, type StoreCallMessage, WorkerStore } from '../../../gateway/auth/cluster-store';
import type { Grant } from '../../../gateway/auth/key-file';
import { NO_LIMITS } from '../../../gateway/auth/limits';
import { LEASE_TTL_MS, StoreError, type StoreAsk } from '../../../gateway/auth/limits-store';
import { SharedLimiter } from '../../../gateway/auth/shared-limiter';

const ask = (id: string, o: Partial<StoreAsk>): StoreAsk => ({ id, ratePerSecond: 0, burst: 0, want: 0, concurrency: 0, ...o });

function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => { t += ms; } };
}

/** A worker's end of the IPC channel to `primary` (worker id `owner`); `silent`: the primary never answers. */
function channel(primary: PrimaryStore, owner: number, silent = false): Channel & { sent: StoreCallMessage[] } {
  const listeners = new Set<(m: unknown) => void>();
  const sent: StoreCallMessage[] = [];
  return {
    connected: true, sent,
    send(m: unknown) {
      const msg = JSON.parse(JSON.stringify(m)) as StoreCallMessage;
      sent.push(msg);
      const reply = primary.handle(owner, msg.call);
      if (!silent && msg.id !== 0 && reply !== undefined) {
        const out = JSON.parse(JSON.stringify({ tg: 'store', id: msg.id, reply })) as unknown;
        setImmediate(() => { for (const l of listeners) l(out); });
      }
      return true;
    },
    on(_e, l) { listeners.add(l); },
    off(_e, l) { listeners.delete(l); },
  };
}

const key = (subject: string, limits: Grant['limits']): Grant => ({ subject, groups: new Set(), models: undefined, limits });

describe('PrimaryStore', () => {
  test('a rate: the burst at first, then the rate; a lease is granted whole or what is left; a refusal tells the tokens', () => {
    const c = clock();
    const p = new PrimaryStore(c.now);
    const a = ask('key:r', { ratePerSecond: 20, burst: 3, want: 2 });
    expect(p.take(1, [a], '')).toEqual({ admitted: true, granted: [2], lease: undefined });
    expect(p.take(2, [a], '')).toEqual({ admitted: true, granted: [1], lease: undefined });
    expect(p.take(1, [a], '')).toEqual({ admitted: false, tokens: [0], held: [undefined] });
    c.advance(100); // 2 tokens at 20/s
    expect(p.take(1, [a], '')).toEqual({ admitted: true, granted: [2], lease: undefined });
  });

  test('places: all or nothing over the asks; given back on release, when their worker is gone, or when their lease ends', () => {
    const c = clock();
    const p = new PrimaryStore(c.now);
    const own = ask('key:c', { concurrency: 2 });
    const group = ask('group:g', { concurrency: 3 });
    expect(p.take(1, [own, group], 'a')).toMatchObject({ admitted: true, lease: 'a' });
    expect(p.take(2, [own, group], 'b')).toMatchObject({ admitted: true, lease: 'b' });
    // key:c is full: group:g's place is not taken either.
    expect(p.take(2, [own, group], 'c')).toEqual({ admitted: false, tokens: [undefined, undefined], held: [2, 2] });
    p.handle(1, { op: 'release', members: ['a'] });
    expect(p.take(2, [own], 'd')).toMatchObject({ admitted: true });
    p.gone(2);
    expect(p.leases).toBe(0);
    expect(p.take(3, [own], 'e')).toMatchObject({ admitted: true });
    // A hung worker's lease: kept while renewed, gone once it ends.
    c.advance(LEASE_TTL_MS - 1);
    p.handle(3, { op: 'renew', members: ['e'] });
    c.advance(LEASE_TTL_MS - 1);
    expect(p.take(4, [own], 'f')).toMatchObject({ admitted: true });
    expect(p.take(4, [own], 'g')).toMatchObject({ admitted: false, held: [2] });
    c.advance(2);
    expect(p.take(4, [own], 'h')).toMatchObject({ admitted: true });
    expect(p.leases).toBe(2);
  });

  test('quotas: checked and taken all or nothing, charged, read', () => {
    const p = new PrimaryStore();
    const e = { key: 'key:q:quota:requests:minute:x', add: 1, max: 2, hard: true, endMs: Date.now() + 60_000 };
    expect(p.handle(1, { op: 'quotaTake', entries: [e] })).toEqual({ ok: true, used: [0] });
    expect(p.handle(2, { op: 'quotaTake', entries: [e] })).toEqual({ ok: true, used: [1] });
    expect(p.handle(1, { op: 'quotaTake', entries: [e] })).toEqual({ ok: false, used: [2] });
    expect(p.handle(1, { op: 'quotaAdd', entries: [{ ...e, add: 5 }] })).toBeNull();
    expect(p.handle(2, { op: 'read', keys: [e.key, 'other'] })).toEqual([7, 0]);
  });
});

describe('WorkerStore under the shared limiter', () => {
  test('two workers share one bucket and one cap through the primary; a rate refusal is told as one (JSON nulls made undefined)', async () => {
    const primary = new PrimaryStore();
    const stores = [new WorkerStore(1000, channel(primary, 1)), new WorkerStore(1000, channel(primary, 2))];
    const limiters = stores.map((s) => new SharedLimiter(NO_LIMITS, s, 'closed'));
    const rate = key('r', { ratePerSecond: 0.001, burst: 3 });
    const verdicts = [];
    for (let i = 0; i < 8; i++) verdicts.push(await limiters[i % 2]!.take(rate, 'key'));
    expect(verdicts.filter((v) => v.admitted)).toHaveLength(3);
    expect(verdicts.at(-1)).toMatchObject({ admitted: false, reason: 'rate' });
    const conc = key('c', { concurrency: 2 });
    const held = [await limiters[0]!.take(conc, 'key'), await limiters[1]!.take(conc, 'key')];
    expect(await limiters[0]!.take(conc, 'key')).toMatchObject({ admitted: false, reason: 'concurrency' });
    for (const v of held) if (v.admitted) v.release();
    expect(primary.leases).toBe(0);
    expect(await limiters[1]!.take(conc, 'key')).toMatchObject({ admitted: true });
    for (const s of stores) s.close();
  });

  test('a primary that does not answer: a StoreError timeout within the bound, the place asked for given back, the policy applies', async () => {
    const primary = new PrimaryStore();
    const ch = channel(primary, 1, true);
    const store = new WorkerStore(20, ch);
    const failures: string[] = [];
    store.on('failure', (kind) => failures.push(kind));
    const started = performance.now();
    await expect(store.take([ask('key:c', { concurrency: 1 })])).rejects.toEqual(expect.any(StoreError));
    expect(performance.now() - started).toBeLessThan(500);
    expect(failures).toEqual(['timeout']);
    // The primary took the place; the worker gave it back after its timeout.
    expect(ch.sent.map((m) => m.call.op)).toEqual(['take', 'release']);
    expect(primary.leases).toBe(0);
    const v = await new SharedLimiter(NO_LIMITS, store, 'closed').take(key('c', { concurrency: 1 }), 'key');
    expect(v).toMatchObject({ admitted: false, reason: 'unavailable' });
    store.close();
  });

  test('an identity without a limit: no call to the primary', async () => {
    const ch = channel(new PrimaryStore(), 1);
    const store = new WorkerStore(1000, ch);
    const v = new SharedLimiter(NO_LIMITS, store, 'local').take({ subject: 'free', groups: new Set(), models: undefined } as Grant, 'key');
    expect(v).toMatchObject({ admitted: true });
    await new Promise((r) => setImmediate(r));
    expect(ch.sent).toEqual([]);
    store.close();
  });
});
