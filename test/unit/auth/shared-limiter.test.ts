// The shared limiter's own logic (gateway/auth/shared-limiter.ts) on an injected clock and a store
// that answers as told: no store call without a limit, the local lease of tokens, a refusal
// remembered until a lease has refilled, places given back once, and each storeFailure policy.
// The store itself (Redis, the scripts) is tested against a real redis-server in
// test/integration/shared-limits.test.ts.
import type { Grant } from '../../../gateway/auth/key-file';
import { type Limit, type LimitsConfig, type LimitVerdict, NO_LIMITS, type StoreFailure } from '../../../gateway/auth/limits';
import { type LimitsStore, type StoreAsk, StoreError, type StoreVerdict } from '../../../gateway/auth/limits-store';
import { leaseSize, SharedLimiter } from '../../../gateway/auth/shared-limiter';

const key = (subject: string, limits?: Limit): Grant => ({ subject, groups: new Set(), models: undefined, ...(limits === undefined ? {} : { limits }) });

/** A store that records the asks and answers with `answer`; releases recorded. */
function fakeStore(answer: (asks: readonly StoreAsk[]) => StoreVerdict | StoreError): { store: LimitsStore; asks: StoreAsk[][]; released: string[] } {
  const asks: StoreAsk[][] = [];
  const released: string[] = [];
  const store = {
    take: (a: readonly StoreAsk[]) => {
      asks.push([...a]);
      const v = answer(a);
      return v instanceof StoreError ? Promise.reject(v) : Promise.resolve(v);
    },
    release: (lease: string) => { released.push(lease); },
    close: () => {},
  } as unknown as LimitsStore;
  return { store, asks, released };
}

const granted = (asks: readonly StoreAsk[], lease?: string): StoreVerdict => ({ admitted: true, granted: asks.map((a) => a.want), lease });

function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => { t += ms; } };
}

const limiter = (store: LimitsStore, failure: StoreFailure = 'local', config: LimitsConfig = NO_LIMITS, now = clock().now): SharedLimiter =>
  new SharedLimiter(config, store, failure, now);

describe('the shared limiter', () => {
  test('an identity without a limit: admitted at once, no store call', () => {
    const f = fakeStore((a) => granted(a));
    const v = limiter(f.store).take(key('free'), 'key');
    expect(v).toMatchObject({ admitted: true });
    expect(v).not.toBeInstanceOf(Promise);
    expect(f.asks).toEqual([]);
  });

  test('a lease of 100 ms of the rate, spent locally: one store call per lease', async () => {
    const f = fakeStore((a) => granted(a));
    const l = limiter(f.store);
    const grant = key('k', { ratePerSecond: 20, burst: 20 });
    expect(leaseSize(grant.limits!)).toBe(2);
    expect(leaseSize({ ratePerSecond: 1000, burst: 50 })).toBe(50); // never more than the burst
    expect(leaseSize({ ratePerSecond: 0.5, burst: 1 })).toBe(1);
    const verdicts: LimitVerdict[] = [];
    for (let i = 0; i < 6; i++) verdicts.push(await l.take(grant, 'key'));
    expect(verdicts.every((v) => v.admitted)).toBe(true);
    expect(f.asks).toEqual([1, 2, 3].map(() => [{ id: 'key:k', ratePerSecond: 20, burst: 20, want: 2, concurrency: 0 }]));
  });

  test('leased tokens not spent within a second are dropped', async () => {
    const f = fakeStore((a) => granted(a));
    const c = clock();
    const l = limiter(f.store, 'local', NO_LIMITS, c.now);
    const grant = key('k', { ratePerSecond: 20, burst: 20 });
    await l.take(grant, 'key');
    c.advance(1000);
    await l.take(grant, 'key');
    expect(f.asks.length).toBe(2);
  });

  test('a rate refusal is told as the per-process limits tell it, and remembered until a lease has refilled', async () => {
    const c = clock();
    const f = fakeStore((a) => ({ admitted: false, tokens: a.map(() => 0.5), held: a.map(() => undefined) }));
    const l = limiter(f.store, 'local', NO_LIMITS, c.now);
    const grant = key('k', { ratePerSecond: 20, burst: 20 });
    expect(await l.take(grant, 'key')).toMatchObject({
      admitted: false, reason: 'rate', retryAfterS: 1, message: '\'k\' is over its rate of 20 requests per second (burst 20, the key\'s limits in auth.keysFile); retry after 1 s',
    });
    c.advance(74); // (2 - 0.5) tokens at 20/s: 75 ms
    expect(l.take(grant, 'key')).toMatchObject({ admitted: false, reason: 'rate' });
    expect(f.asks.length).toBe(1);
    c.advance(1);
    await l.take(grant, 'key');
    expect(f.asks.length).toBe(2);
  });

  test('a concurrency limit asks the store every time; its place is given back once', async () => {
    let n = 0;
    const f = fakeStore((a) => granted(a, `lease-${++n}`));
    const l = limiter(f.store);
    const grant = key('k', { concurrency: 4 });
    const v = await l.take(grant, 'key');
    const w = await l.take(grant, 'key');
    if (!v.admitted || !w.admitted) throw new Error('refused');
    v.release();
    v.release();
    expect(f.released).toEqual(['lease-1']);
    w.release();
    expect(f.released).toEqual(['lease-1', 'lease-2']);
    const refused = fakeStore((a) => ({ admitted: false, tokens: a.map(() => undefined), held: a.map(() => 4) }));
    expect(await limiter(refused.store).take(grant, 'key')).toMatchObject({
      admitted: false, reason: 'concurrency', message: '\'k\' already has 4 requests in flight, its concurrency limit (the key\'s limits in auth.keysFile); retry after 1 s',
    });
  });

  test.each([
    ['open', [true, true, true]],
    ['closed', [false, false, false]],
    ['local', [true, true, false]],
  ] as const)('the store failing, storeFailure %s', async (policy, admitted) => {
    const f = fakeStore(() => new StoreError('timeout', 'the store did not answer within 5 ms (auth.limits.storeTimeoutMs)'));
    const l = limiter(f.store, policy);
    const fallbacks: string[] = [];
    l.on('fallback', (p) => fallbacks.push(p));
    const grant = key('k', { ratePerSecond: 1, burst: 2, concurrency: 8 });
    const verdicts = [await l.take(grant, 'key'), await l.take(grant, 'key'), await l.take(grant, 'key')];
    expect(verdicts.map((v) => v.admitted)).toEqual(admitted);
    expect(fallbacks).toEqual([policy, policy, policy]);
    if (policy === 'closed') {
      expect(verdicts[0]).toEqual({
        admitted: false, reason: 'unavailable', label: 'store', retryAfterS: 1,
        message: 'the limits of these credentials cannot be judged now: the store did not answer within 5 ms (auth.limits.storeTimeoutMs); auth.limits.storeFailure is closed, retry after 1 s',
      });
    }
  });
});
