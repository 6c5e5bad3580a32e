// The backend set's state machine with an injected clock, resolver and health checker: health
// thresholds, passive ejection and its growth and cap, the share that may be ejected, picking,
// DNS changes, the jitter bounds of reconnects.
import { type Backend, BACKEND_STATES, type Clock, modelKey } from '../../../../gateway/upstream/backends/backend';
import { BackendSet, type BackendSetOptions } from '../../../../gateway/upstream/backends/backend-set';
import { ejectionMs } from '../../../../gateway/upstream/backends/ejection';
import { type CheckResult, type HealthChecker, reconnectDelayMs } from '../../../../gateway/upstream/backends/health';
import { type ModelKey, modelPattern } from '../../../../gateway/upstream/backends/pools';
import { mayRetry, withRetries } from '../../../../gateway/upstream/backends/retry';
import { notSent, upstreamError } from '../../../../gateway/upstream/status';
import { BACKEND_STATE_NAMES } from '../../../../gateway/telemetry/metrics';
import { isGatewayError } from '../../../../gateway/errors';

class FakeClock implements Clock {
  t = 0;
  #timers: { at: number; fn: () => void; id: number }[] = [];
  #id = 0;
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.#id;
    this.#timers.push({ at: this.t + ms, fn, id });
    return id;
  }
  clearTimeout(h: unknown): void {
    this.#timers = this.#timers.filter((x) => x.id !== h);
  }
  get pending(): number {
    return this.#timers.length;
  }
  /** Runs every timer due within `ms`, in order, letting the checks' promises settle between them. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await flush();
      const due = this.#timers.filter((x) => x.at <= end).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      this.#timers = this.#timers.filter((x) => x !== due);
      this.t = due.at;
      due.fn();
    }
    this.t = end;
    await flush();
  }
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

/** Answers each address as told (true SERVING, the default; false known down; or 'timeout'); counts checks. */
class FakeChecker implements HealthChecker {
  readonly up = new Map<string, boolean | 'timeout'>();
  /** Each address's ready models (modelKey entries) as its repository index gives them; absent: the index fails. */
  readonly index = new Map<string, string[]>();
  models(address: string): Promise<ReadonlySet<string> | undefined> {
    const m = this.index.get(address);
    return Promise.resolve(m === undefined ? undefined : new Set(m));
  }
  readonly checks = new Map<string, number>();
  readonly forgotten: string[] = [];
  closed = false;
  check(address: string): Promise<CheckResult> {
    this.checks.set(address, (this.checks.get(address) ?? 0) + 1);
    const up = this.up.get(address) ?? true;
    return Promise.resolve(up === 'timeout' ? 'timeout' : up ? 'serving' : 'down');
  }
  forget(address: string): void {
    this.forgotten.push(address);
  }
  close(): void {
    this.closed = true;
  }
}

const DEFAULTS = {
  dnsRefreshMs: 30_000, healthCheckIntervalMs: 5000, healthyThreshold: 2, unhealthyThreshold: 3, ejectAfterFailures: 5,
  ejectionBaseMs: 30_000, maxEjectionPercent: 50, retries: 1,
};

function setOf(targets: string[], extra: Partial<BackendSetOptions> = {}): { set: BackendSet; clock: FakeClock; checker: FakeChecker } {
  const clock = new FakeClock();
  const checker = new FakeChecker();
  const set = new BackendSet({ ...DEFAULTS, targets, clock, checker, random: () => 0.5, ...extra });
  return { set, clock, checker };
}

const states = (set: BackendSet): Record<string, string> => Object.fromEntries(set.all.map((b) => [b.address, b.state]));

test('the state names telemetry seeds are the set\'s own', () => {
  expect([...BACKEND_STATE_NAMES]).toEqual([...BACKEND_STATES]);
});

describe('health checks', () => {
  test('a new backend is ready after one pass; unhealthy after unhealthyThreshold failures; ready again after healthyThreshold passes', async () => {
    const { set, clock, checker } = setOf(['a:1']);
    const seen: string[] = [];
    set.on('state', (e) => seen.push(`${e.from}>${e.to}`));
    expect(states(set)).toEqual({ 'a:1': 'connecting' });
    await clock.advance(0);
    expect(states(set)).toEqual({ 'a:1': 'ready' });
    checker.up.set('a:1', false);
    await clock.advance(5500 * 2); // two failed checks at the interval (±10 %)
    expect(states(set)).toEqual({ 'a:1': 'ready' });
    await clock.advance(5500);
    expect(states(set)).toEqual({ 'a:1': 'unhealthy' });
    checker.up.set('a:1', true);
    const before = checker.checks.get('a:1')!;
    await clock.advance(2000); // not ready: checked again after the reconnect backoff (≤ 2 s)
    expect(checker.checks.get('a:1')! - before).toBeGreaterThanOrEqual(2);
    expect(states(set)).toEqual({ 'a:1': 'ready' });
    expect(seen).toEqual(['connecting>ready', 'ready>unhealthy', 'unhealthy>ready']);
    set.close();
    expect(clock.pending).toBe(0);
    expect(checker.closed).toBe(true);
  });

  test('one pass between failures resets the count: no transition', async () => {
    const { set, clock, checker } = setOf(['a:1'], { healthCheckIntervalMs: 1000 });
    await clock.advance(0);
    for (const up of [false, false, true, false, false, true]) {
      checker.up.set('a:1', up);
      await clock.advance(1100);
    }
    expect(states(set)).toEqual({ 'a:1': 'ready' });
    set.close();
  });

  test('settled() waits for every first check, and is bounded', async () => {
    const { set, clock } = setOf(['a:1', 'b:2']);
    let done = false;
    void set.settled(1000).then(() => { done = true; });
    await flush();
    expect(done).toBe(false);
    await clock.advance(0);
    expect(done).toBe(true);
    set.close();
    const never = new BackendSet({ ...DEFAULTS, targets: ['a:1'], clock, checker: { check: () => new Promise(() => undefined), forget: () => undefined, close: () => undefined } });
    let bounded = false;
    void never.settled(1000).then(() => { bounded = true; });
    await clock.advance(999);
    expect(bounded).toBe(false);
    await clock.advance(1);
    expect(bounded).toBe(true);
    never.close();
  });
});

describe('picking', () => {
  test('round robin over ready backends only; none ready fails with GW_ERR_UPSTREAM_NO_BACKEND', async () => {
    const { set, clock, checker } = setOf(['a:1', 'b:2', 'c:3'], { healthCheckIntervalMs: 1000 });
    // Before any backend was ready, connecting ones are picked (a gateway started with Triton).
    expect(set.pick()?.address).toBe('a:1');
    checker.up.set('b:2', false);
    await clock.advance(0);
    expect(states(set)).toEqual({ 'a:1': 'ready', 'b:2': 'connecting', 'c:3': 'ready' });
    // Once one was ready, a connecting backend is not picked.
    expect(Array.from({ length: 4 }, () => set.pick()!.address)).toEqual(['c:3', 'a:1', 'c:3', 'a:1']);
    expect(set.pick(set.all[0])?.address).toBe('c:3'); // a retry leaves the first one out
    checker.up.set('a:1', false);
    checker.up.set('c:3', false);
    await clock.advance(3300);
    expect(states(set)).toEqual({ 'a:1': 'unhealthy', 'b:2': 'unhealthy', 'c:3': 'unhealthy' });
    expect(set.anyReady()).toBe(false);
    let err: unknown;
    try {
      set.pickOrFail();
    } catch (e) {
      err = e;
    }
    expect(isGatewayError(err) && [err.code, err.status, err.message]).toEqual(['GW_ERR_UPSTREAM_NO_BACKEND', 503, 'no ready backend among upstream.backends (3 unhealthy)']);
    set.close();
  });

  test('a sequence key always picks the same usable backend; only the keys of a backend that leaves move', async () => {
    const { set, clock, checker } = setOf(['a:1', 'b:2', 'c:3'], { healthCheckIntervalMs: 1000 });
    await clock.advance(0);
    const keys = Array.from({ length: 300 }, (_, i) => `model\u0000n:${i}`);
    const first = new Map(keys.map((k) => [k, set.pick(undefined, k)!.address]));
    expect(keys.every((k) => set.pick(undefined, k)!.address === first.get(k))).toBe(true);
    const per = (m: Map<string, string>, a: string): number => [...m.values()].filter((x) => x === a).length;
    for (const a of ['a:1', 'b:2', 'c:3']) expect(per(first, a)).toBeGreaterThan(60); // spread: 100 each ± noise
    checker.up.set('b:2', false);
    await clock.advance(3300);
    expect(states(set)).toEqual({ 'a:1': 'ready', 'b:2': 'unhealthy', 'c:3': 'ready' });
    const after = new Map(keys.map((k) => [k, set.pick(undefined, k)!.address]));
    expect(keys.filter((k) => first.get(k) !== 'b:2' && after.get(k) !== first.get(k))).toEqual([]);
    expect(per(after, 'b:2')).toBe(0);
    // A retry's exclusion is honoured too (though sequence calls are never retried).
    const k = keys.find((x) => after.get(x) === 'a:1')!;
    expect(set.pick(set.all[0], k)?.address).toBe('c:3');
    set.close();
  });

  test('none ready: backends whose checks only timed out are still tried; known-down ones never are', async () => {
    const { set, clock, checker } = setOf(['a:1', 'b:2'], { healthCheckIntervalMs: 1000, unhealthyThreshold: 2 });
    await clock.advance(0);
    checker.up.set('a:1', 'timeout');
    checker.up.set('b:2', false);
    await clock.advance(2300);
    expect(states(set)).toEqual({ 'a:1': 'unhealthy', 'b:2': 'unhealthy' });
    expect(Array.from({ length: 3 }, () => set.pick()?.address)).toEqual(['a:1', 'a:1', 'a:1']);
    // One refused check makes it known down.
    checker.up.set('a:1', false);
    await clock.advance(2100);
    expect(set.pick()).toBeUndefined();
    // A ready backend is preferred to one that is only unanswered.
    checker.up.set('a:1', 'timeout');
    checker.up.set('b:2', true);
    await clock.advance(4100);
    expect(states(set)).toEqual({ 'a:1': 'unhealthy', 'b:2': 'ready' });
    expect(Array.from({ length: 2 }, () => set.pick()?.address)).toEqual(['b:2', 'b:2']);
    set.close();
  });

  // A restarting Triton on a busy machine: its checks refused, then one SERVING, then refused again
  // (the relapse a fault run once saw: a 200, then ~3 s of 503 "1 unhealthy" — the refusals' backoff
  // of 100, 200, 400, 800 and 1600 ms). One pass used to make a known-down backend pickable again.
  test('a known-down backend is not picked on one passing check: healthyThreshold passes in a row first', async () => {
    const { set, clock, checker } = setOf(['a:1'], { healthCheckIntervalMs: 1000, unhealthyThreshold: 2, healthyThreshold: 2 });
    const a = (): number => checker.checks.get('a:1') ?? 0;
    /** Advances in 10-ms steps until the backend has been checked `n` more times. */
    const checked = async (n: number): Promise<void> => {
      const target = a() + n;
      while (a() < target) await clock.advance(10);
    };
    await clock.advance(0);
    checker.up.set('a:1', false);
    await checked(2);
    expect(states(set)).toEqual({ 'a:1': 'unhealthy' });
    expect(set.pick()).toBeUndefined();
    checker.up.set('a:1', true);
    await checked(1);
    expect(states(set)).toEqual({ 'a:1': 'unhealthy' });
    expect(set.pick()).toBeUndefined(); // one pass: still known down
    checker.up.set('a:1', false);
    await checked(1);
    let refused: unknown;
    try {
      set.pickOrFail();
    } catch (err) {
      refused = err;
    }
    expect(isGatewayError(refused) && refused.message).toBe('no ready backend among upstream.backends (1 unhealthy)');
    checker.up.set('a:1', true);
    await checked(1);
    expect(set.pick()).toBeUndefined();
    await checked(1);
    expect(states(set)).toEqual({ 'a:1': 'ready' });
    expect(set.pick()?.address).toBe('a:1');
    set.close();
  });

  test('an unhealthy backend whose checks only timed out stays pickable through a pass and a timeout', async () => {
    const { set, clock, checker } = setOf(['a:1'], { healthCheckIntervalMs: 1000, unhealthyThreshold: 2, healthyThreshold: 2 });
    await clock.advance(0);
    checker.up.set('a:1', 'timeout');
    await clock.advance(2300);
    expect(states(set)).toEqual({ 'a:1': 'unhealthy' });
    for (const up of [true, 'timeout', true] as const) {
      checker.up.set('a:1', up);
      const n = checker.checks.get('a:1')!;
      while (checker.checks.get('a:1') === n) await clock.advance(10);
      expect(set.pick()?.address).toBe('a:1');
    }
    set.close();
  });

  test('a check that times out while calls get answers does not count against the backend', async () => {
    const { set, clock, checker } = setOf(['a:1'], { healthCheckIntervalMs: 1000, unhealthyThreshold: 2 });
    await clock.advance(0);
    checker.up.set('a:1', 'timeout');
    for (let i = 0; i < 4; i++) {
      set.succeeded(set.all[0]!);
      await clock.advance(1100);
    }
    expect(states(set)).toEqual({ 'a:1': 'ready' });
    // Without answers in between, the same timeouts do.
    await clock.advance(2200);
    expect(states(set)).toEqual({ 'a:1': 'unhealthy' });
    set.close();
  });
});

describe('passive ejection', () => {
  test('ejectAfterFailures consecutive failures eject for base × ejections, capped at 10 ×; a success resets the count', async () => {
    const { set, clock } = setOf(['a:1', 'b:2'], { ejectAfterFailures: 3, ejectionBaseMs: 1000, maxEjectionPercent: 50 });
    await clock.advance(0);
    const a = set.all[0]!;
    set.failed(a);
    set.failed(a);
    set.succeeded(a);
    set.failed(a);
    set.failed(a);
    expect(a.state).toBe('ready');
    set.failed(a);
    expect([a.state, set.ejectionsTotal]).toEqual(['ejected', 1]);
    expect(set.pick(undefined)?.address).toBe('b:2');
    await clock.advance(999);
    expect(a.state).toBe('ejected');
    await clock.advance(1);
    expect(a.state).toBe('ready');
    // The second ejection lasts twice as long.
    for (let i = 0; i < 3; i++) set.failed(a);
    await clock.advance(1999);
    expect(a.state).toBe('ejected');
    await clock.advance(1);
    expect(a.state).toBe('ready');
    expect([ejectionMs(3, 1000), ejectionMs(10, 1000), ejectionMs(50, 1000)]).toEqual([3000, 10_000, 10_000]);
    set.close();
  });

  test('the multiplier falls by one per ejectionBaseMs spent back in the set', async () => {
    const { set, clock } = setOf(['a:1', 'b:2'], { ejectAfterFailures: 1, ejectionBaseMs: 1000, maxEjectionPercent: 50 });
    await clock.advance(0);
    const a = set.all[0]!;
    const ejectFor = async (): Promise<number> => {
      set.failed(a);
      expect(a.state).toBe('ejected');
      let ms = 0;
      while (a.state === 'ejected') {
        await clock.advance(100);
        ms += 100;
      }
      return ms;
    };
    expect(await ejectFor()).toBe(1000);
    expect(await ejectFor()).toBe(2000);
    expect(await ejectFor()).toBe(3000); // back to back: 1×, 2×, 3×
    await clock.advance(2000); // two base periods in the set: 3 → 1
    expect(await ejectFor()).toBe(2000);
    await clock.advance(60_000); // long healthy: the multiplier is back to 0
    expect(await ejectFor()).toBe(1000);
    set.close();
  });

  test('never more than maxEjectionPercent of the set, never the last backend', async () => {
    const { set, clock } = setOf(['a:1', 'b:2', 'c:3', 'd:4'], { ejectAfterFailures: 1, maxEjectionPercent: 50 });
    await clock.advance(0);
    for (const b of set.all) set.failed(b);
    expect(set.counts()).toEqual({ connecting: 0, ready: 2, unhealthy: 0, ejected: 2 });
    set.close();
    const all = setOf(['a:1', 'b:2'], { ejectAfterFailures: 1, maxEjectionPercent: 100 });
    await all.clock.advance(0);
    for (const b of all.set.all) all.set.failed(b);
    expect(all.set.counts()).toEqual({ connecting: 0, ready: 1, unhealthy: 0, ejected: 1 });
    all.set.close();
    const one = setOf(['a:1'], { ejectAfterFailures: 1, maxEjectionPercent: 100 });
    await one.clock.advance(0);
    one.set.failed(one.set.all[0]!);
    expect(one.set.all[0]!.state).toBe('ready');
    one.set.close();
  });

  test('an ejected backend whose checks failed meanwhile comes back unhealthy', async () => {
    const { set, clock, checker } = setOf(['a:1', 'b:2'], { ejectAfterFailures: 1, ejectionBaseMs: 10_000, healthCheckIntervalMs: 1000 });
    await clock.advance(0);
    const a = set.all[0]!;
    checker.up.set('a:1', false);
    set.failed(a);
    await clock.advance(9000);
    expect(a.state).toBe('ejected');
    await clock.advance(1000);
    expect(a.state).toBe('unhealthy');
    set.close();
  });
});

describe('DNS', () => {
  test('a name expands to every address; it is asked again on the interval and on failure; gone addresses are drained, new ones join', async () => {
    let answer = ['10.0.0.1', '10.0.0.2', '10.0.0.2'];
    const asked: string[] = [];
    const { set, clock, checker } = setOf(['dns:///triton:8001', 'static:9'], {
      resolve: (name) => {
        asked.push(name);
        return Promise.resolve(answer);
      },
    });
    const removed: string[] = [];
    set.on('removed', (b) => removed.push(b.address));
    await clock.advance(0);
    expect(states(set)).toEqual({ 'static:9': 'ready', '10.0.0.1:8001': 'ready', '10.0.0.2:8001': 'ready' });
    answer = ['10.0.0.2', '::1'];
    await clock.advance(30_000);
    expect(asked).toEqual(['triton', 'triton']);
    expect(removed).toEqual(['10.0.0.1:8001']);
    expect(checker.forgotten).toEqual(['10.0.0.1:8001']);
    expect(Object.keys(states(set)).sort()).toEqual(['10.0.0.2:8001', '[::1]:8001', 'static:9']);
    expect(set.all.find((b) => b.address === '10.0.0.1:8001')).toBeUndefined();
    // A failing backend asks again (not more often than once a second).
    answer = ['10.0.0.3'];
    await clock.advance(1000);
    set.failed(set.all.find((b) => b.address === '10.0.0.2:8001')!);
    set.failed(set.all.find((b) => b.address === 'static:9')!);
    await clock.advance(0);
    expect(asked).toHaveLength(3);
    expect(Object.keys(states(set)).sort()).toEqual(['10.0.0.3:8001', 'static:9']);
    set.close();
    expect(clock.pending).toBe(0);
  });

  test('a failed resolution keeps the backends the name had', async () => {
    let fail = false;
    const { set, clock } = setOf(['dns:///triton:8001'], {
      resolve: () => (fail ? Promise.reject(new Error('ENOTFOUND triton')) : Promise.resolve(['10.0.0.1'])),
    });
    const failures: string[] = [];
    set.on('resolveFailed', (e) => failures.push(`${e.target}: ${e.message}`));
    await clock.advance(0);
    fail = true;
    await clock.advance(30_000);
    expect(failures).toEqual(['dns:///triton:8001: ENOTFOUND triton']);
    expect(states(set)).toEqual({ '10.0.0.1:8001': 'ready' });
    set.close();
  });
});

test('reconnect delays double from 100 ms up to min(2 s, interval), within ±20 % jitter', () => {
  const cases: [number, number, number][] = [
    [0, 5000, 100], [1, 5000, 100], [2, 5000, 200], [3, 5000, 400], [6, 5000, 2000], [40, 5000, 2000], [6, 1000, 1000],
  ];
  for (const [failures, interval, base] of cases) {
    expect(reconnectDelayMs(failures, interval, 0)).toBe(Math.round(base * 0.8));
    expect(reconnectDelayMs(failures, interval, 0.5)).toBe(base);
    expect(reconnectDelayMs(failures, interval, 0.999999)).toBeLessThanOrEqual(Math.round(base * 1.2));
  }
});

describe('pools, the model table and the models each backend has', () => {
  const pools = [
    { name: 'gpu', targets: ['g1:1', 'g2:2'], settings: { healthCheckIntervalMs: 1000, unhealthyThreshold: 1 } },
    { name: 'cpu', targets: ['c1:1'] },
  ];
  const models = [{ model: 'det*', split: [{ pool: 'gpu', weight: 1 }] }, { model: 'small', split: [{ pool: 'cpu', weight: 1 }] }];

  test('a model pattern: * is any run, everything else literal', () => {
    expect(['det', 'detector', 'det.v2'].every((m) => modelPattern('det*').test(m))).toBe(true);
    expect(modelPattern('det*').test('xdet')).toBe(false);
    expect(modelPattern('a.b').test('axb')).toBe(false);
    expect(modelPattern('*').test('anything')).toBe(true);
  });

  test('each model goes to its pool; others to the default pool; the first match wins; a pool\'s own health settings apply', async () => {
    const { set, clock, checker } = setOf(['d:1'], { pools, models });
    await clock.advance(0);
    expect(set.all.map((b) => `${b.address}@${b.pool}`)).toEqual(['d:1@default', 'g1:1@gpu', 'g2:2@gpu', 'c1:1@cpu']);
    const picks = (name: string): string[] => Array.from({ length: 4 }, () => set.pick(undefined, undefined, { name })!.address);
    expect(new Set(picks('detector'))).toEqual(new Set(['g1:1', 'g2:2']));
    expect(picks('small')).toEqual(['c1:1', 'c1:1', 'c1:1', 'c1:1']);
    expect(picks('other')).toEqual(['d:1', 'd:1', 'd:1', 'd:1']);
    expect(set.pick()!.address).toBe('d:1'); // a call naming no model: the default pool
    // gpu's unhealthyThreshold 1 and 1-s interval: one failed check makes g1 unhealthy; the default pool's 3 do not.
    checker.up.set('g1:1', false);
    checker.up.set('d:1', false);
    await clock.advance(1100);
    expect(states(set)).toMatchObject({ 'g1:1': 'unhealthy', 'd:1': 'ready' });
    expect(picks('detector')).toEqual(['g2:2', 'g2:2', 'g2:2', 'g2:2']);
    // No backend of the pool: the error names the pool, not upstream.backends.
    checker.up.set('c1:1', false);
    await clock.advance(20_000);
    expect(() => set.pickOrFail(undefined, undefined, { name: 'small' })).toThrow('no ready backend among upstream.pools.cpu (1 unhealthy)');
    set.close();
  });

  test('a model goes only to the backends whose index has it ready; loaded or unloaded at runtime, within one refresh', async () => {
    const { set, clock, checker } = setOf(['a:1', 'b:2', 'c:3'], { modelRefreshMs: 5000 });
    checker.index.set('a:1', [modelKey('m'), modelKey('m', '1'), modelKey('n')]);
    checker.index.set('b:2', [modelKey('n')]);
    // c:3's index cannot be read: it counts as having every model until it can.
    await clock.advance(0);
    const seen = (name: string, version?: string): Set<string> =>
      new Set(Array.from({ length: 12 }, () => set.pick(undefined, undefined, { name, version })!.address));
    expect(seen('m')).toEqual(new Set(['a:1', 'c:3']));
    expect(seen('m', '1')).toEqual(new Set(['a:1', 'c:3']));
    expect(seen('n')).toEqual(new Set(['a:1', 'b:2', 'c:3']));
    // Known to no backend: any backend (Triton's own 404 reaches the client).
    expect(seen('nowhere')).toEqual(new Set(['a:1', 'b:2', 'c:3']));
    const changes: string[] = [];
    set.on('models', (e) => changes.push(`${e.address}: +${e.loaded.join(',')} -${e.unloaded.join(',')} (${e.count})`));
    checker.index.set('b:2', [modelKey('n'), modelKey('m')]); // loaded on b
    checker.index.set('a:1', [modelKey('n')]); // unloaded from a
    checker.index.set('c:3', [modelKey('n')]);
    await clock.advance(5500);
    expect(changes.sort()).toEqual(['a:1: + -m (1)', 'b:2: +m - (2)', 'c:3: +n - (1)']);
    expect(seen('m')).toEqual(new Set(['b:2']));
    set.close();
    expect(clock.pending).toBe(0);
  });

  test('an answer that the model is unknown takes it off that backend at once, and the call may go to one that has it', async () => {
    const { set, clock, checker } = setOf(['a:1', 'b:2'], { modelRefreshMs: 60_000 });
    checker.index.set('a:1', [modelKey('m')]);
    checker.index.set('b:2', [modelKey('m')]);
    await clock.advance(0);
    const [a, b] = set.all;
    const unknown = upstreamError(5, "Request for unknown model: 'm' is not found", false);
    const o = { deadline: Date.now() + 60_000, model: { name: 'm' } };
    expect(mayRetry(set, a!, unknown, 0, o)).toBe(true); // b has it: a retry there is safe (Triton ran nothing)
    expect(Array.from({ length: 4 }, () => set.pick(undefined, undefined, { name: 'm' })!.address)).toEqual(['b:2', 'b:2', 'b:2', 'b:2']);
    expect(mayRetry(set, b!, unknown, 0, o)).toBe(false); // nobody left with it
    expect(states(set)).toEqual({ 'a:1': 'ready', 'b:2': 'ready' }); // not a fault of the backends: no ejection count
    expect(a!.callFailures + b!.callFailures).toBe(0);
    set.close();
  });

  test('least-request: the round-robin choice loses to a random other backend with fewer calls in flight; equal loads stay round robin', async () => {
    let r = 0;
    const { set, clock } = setOf(['a:1', 'b:2', 'c:3'], { picking: 'least-request', random: () => r });
    await clock.advance(0);
    const [a, b, c] = set.all;
    expect(Array.from({ length: 6 }, () => set.pick()!.address)).toEqual(['a:1', 'b:2', 'c:3', 'a:1', 'b:2', 'c:3']);
    for (let i = 0; i < 5; i++) set.started(a!); // a is busy
    set.started(b!);
    r = 0; // the draw takes the first other usable backend
    expect(set.pick()!.address).toBe('b:2'); // round robin says a (5 in flight), drawn b (1): b
    expect(set.pick()!.address).toBe('b:2'); // round robin says b (1), drawn a (5): b
    r = 0.99; // the draw takes the last other usable backend
    expect(set.pick()!.address).toBe('c:3'); // round robin says c (0), drawn b (1): c
    expect(set.pick()!.address).toBe('c:3'); // round robin says a (5), drawn c (0): c
    for (let i = 0; i < 5; i++) set.ended(a!);
    set.ended(b!);
    set.ended(b!); // never below zero
    expect([a!.inFlight, b!.inFlight, c!.inFlight]).toEqual([0, 0, 0]);
    set.close();
  });

  test('a split sends each pool its exact share, interleaved; a header pins a request to a pool of the entry; each decision is counted', async () => {
    const { set, clock } = setOf(['d:1'], {
      pools: [{ name: 'stable', targets: ['s:1'] }, { name: 'canary', targets: ['c:1'] }],
      models: [{ model: 'resnet', split: [{ pool: 'stable', weight: 90 }, { pool: 'canary', weight: 10 }], header: 'x-variant' }],
    });
    await clock.advance(0);
    const decisions: string[] = [];
    const call = (variant?: string): string => set.pick(undefined, undefined, {
      name: 'resnet', header: (h) => (h === 'x-variant' ? variant : undefined), routed: (p, d) => decisions.push(`${p}:${d}`),
    })!.pool;
    const pools = Array.from({ length: 2000 }, () => call());
    expect(pools.filter((p) => p === 'canary').length).toBe(200);
    for (let i = 0; i < 2000; i += 10) expect(pools.slice(i, i + 10).filter((p) => p === 'canary').length).toBe(1);
    expect(call('canary')).toBe('canary');
    expect(call('stable')).toBe('stable');
    expect(call('default')).not.toBe('default'); // not one of the entry's pools: the split decides
    const model = { name: 'resnet' };
    const first = set.pick(undefined, undefined, model)!.pool;
    expect(set.pick(undefined, undefined, model)!.pool).toBe(first); // one decision per call: a retry stays
    expect(set.pick(undefined, undefined, { name: 'other' })!.pool).toBe('default');
    expect(decisions.slice(-3)).toEqual(['canary:header', 'stable:header', expect.stringMatching(/:split$/)]);
    expect(Object.fromEntries(set.routed)).toEqual({
      'stable\u0000split': 1800 + 1 + (first === 'stable' ? 1 : 0), 'canary\u0000split': 200 + (first === 'canary' ? 1 : 0),
      'canary\u0000header': 1, 'stable\u0000header': 1, 'default\u0000default': 1,
    });
    set.close();
  });

  test('withRetries counts each attempt in flight on its own backend, and lets go of it whatever the outcome', async () => {
    const { set, clock } = setOf(['a:1', 'b:2'], { picking: 'least-request' });
    await clock.advance(0);
    const [a, b] = set.all as [Backend, Backend];
    const seen: string[] = [];
    const refused = notSent(upstreamError(14, 'connection refused', true));
    const value = await withRetries(set, { deadline: Date.now() + 60_000 }, (x) => {
      seen.push(`${x.address} ${a.inFlight}/${b.inFlight}`);
      return x === a ? Promise.reject(refused) : Promise.resolve('ok');
    });
    expect([value, seen]).toEqual(['ok', ['a:1 1/0', 'b:2 0/1']]);
    expect([a.inFlight, b.inFlight]).toEqual([0, 0]);
    await expect(withRetries(set, { deadline: Date.now() + 60_000 }, () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    expect([a.inFlight, b.inFlight]).toEqual([0, 0]);
    set.close();
  });

  test('a mirror takes percent calls in every hundred, evenly spaced; past upstream.mirrorMaxInFlight or with no backend a copy is dropped and counted', async () => {
    const { set, clock } = setOf(['d:1'], {
      pools: [{ name: 'shadow', targets: ['s:1'] }, { name: 'empty', targets: [] }],
      models: [{ model: 'm', split: [{ pool: 'default', weight: 1 }], mirror: { pool: 'shadow', percent: 25 } },
        { model: 'n', split: [{ pool: 'default', weight: 1 }], mirror: { pool: 'empty', percent: 100 } }],
      mirrorMaxInFlight: 2,
    });
    await clock.advance(0);
    const mirrored = Array.from({ length: 100 }, () => {
      const k: ModelKey = { name: 'm' };
      set.pick(undefined, undefined, k);
      return k.mirror;
    });
    expect(mirrored.filter((p) => p === 'shadow').length).toBe(25);
    expect(mirrored.slice(0, 8)).toEqual([undefined, undefined, undefined, 'shadow', undefined, undefined, undefined, 'shadow']);
    const k: ModelKey = { name: 'm', mirror: 'shadow' };
    expect(set.mirrorBackend(k, 'shadow')?.address).toBe('s:1');
    expect(set.mirrorBackend(k, 'shadow')?.address).toBe('s:1');
    expect(set.mirrorBackend(k, 'shadow')).toBeUndefined(); // two running: the third is dropped
    set.mirrorEnded('shadow', true);
    set.mirrorEnded('shadow', false);
    expect(set.mirrorBackend({ name: 'n' }, 'empty')).toBeUndefined(); // a pool with no backend
    expect(Object.fromEntries(set.mirrored)).toEqual({
      'shadow\u0000dropped': 1, 'shadow\u0000answered': 1, 'shadow\u0000failed': 1, 'empty\u0000dropped': 1,
    });
    expect(set.mirrorsInFlight).toBe(0);
    set.close();
  });

  test('with Triton\'s queue read (upstream.queueMetrics), least-request adds each backend\'s pending requests for the model', async () => {
    const pending = new Map<string, Map<string, number>>([['a:1', new Map([[modelKey('m'), 6]])], ['b:2', new Map()]]);
    const { set, clock } = setOf(['a:1', 'b:2'], {
      picking: 'least-request', random: () => 0, modelRefreshMs: 500, // both timers run side by side
      queue: { intervalMs: 1000, read: (address) => Promise.resolve(pending.get(address)) },
    });
    await clock.advance(0);
    // a's Triton has 6 waiting for m: b wins even when round robin says a and b has 3 of ours.
    for (let i = 0; i < 3; i++) set.started(set.all[1]!);
    expect(Array.from({ length: 4 }, () => set.pick(undefined, undefined, { name: 'm' })!.address)).toEqual(['b:2', 'b:2', 'b:2', 'b:2']);
    // Another model has no queue on a: plain in-flight counts (a has 0, b 3).
    expect(set.pick(undefined, undefined, { name: 'other' })!.address).toBe('a:1');
    // Its queue drains: read again on the interval.
    pending.set('a:1', new Map());
    await clock.advance(1200);
    expect(set.pick(undefined, undefined, { name: 'm' })!.address).toBe('a:1');
    set.close();
    expect(clock.pending).toBe(0);
  });
});
