// The per-identity limits (gateway/auth/limits.ts) on an injected clock: the token bucket's burst,
// refill and Retry-After; the concurrency cap and its release; all-or-nothing over an identity's
// own limit and its groups'; the default per identity; the bound of identities kept; the checks
// of the key file's `limits` and of auth.limits.
import { parseKeyFile } from '../../../gateway/auth/key-file';
import type { Grant } from '../../../gateway/auth/key-file';
import { type Limit, Limiter, type LimitsConfig, type LimitVerdict, NO_LIMITS, parseLimit, parseLimits } from '../../../gateway/auth/limits';

const key = (subject: string, limits?: Limit): Grant => ({ subject, groups: new Set(), models: undefined, ...(limits === undefined ? {} : { limits }) });
const jwt = (subject: string, limitGroups: string[] = []): Grant => ({ subject, groups: new Set(), models: undefined, limitGroups });
const config = (o: Partial<LimitsConfig>): LimitsConfig => ({ ...NO_LIMITS, ...o });

/** A clock the test moves. */
function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 1_000_000;
  return { now: () => t, advance: (ms) => { t += ms; } };
}

function refused(v: LimitVerdict): Extract<LimitVerdict, { admitted: false }> {
  if (v.admitted) throw new Error('admitted');
  return v;
}

describe('the token bucket', () => {
  test('a burst at once, then one request per 1/rate; Retry-After rounded up from the refill', () => {
    const c = clock();
    const l = new Limiter(NO_LIMITS, c.now);
    const k = key('ci-bot', { ratePerSecond: 2, burst: 3 });
    for (let i = 0; i < 3; i++) expect(l.take(k, 'key').admitted).toBe(true);
    const r = refused(l.take(k, 'key'));
    expect(r).toMatchObject({ reason: 'rate', label: 'key:ci-bot', retryAfterS: 1 });
    expect(r.message).toBe('\'ci-bot\' is over its rate of 2 requests per second (burst 3, the key\'s limits in auth.keysFile); retry after 1 s');
    c.advance(499);
    expect(l.take(k, 'key').admitted).toBe(false);
    c.advance(1);
    expect(l.take(k, 'key').admitted).toBe(true); // 500 ms at 2/s: one token
    expect(l.take(k, 'key').admitted).toBe(false);
    // A long quiet time refills to the burst, not beyond.
    c.advance(60_000);
    for (let i = 0; i < 3; i++) expect(l.take(k, 'key').admitted).toBe(true);
    expect(l.take(k, 'key').admitted).toBe(false);
  });

  test('a slow rate says how many whole seconds until the next request', () => {
    const c = clock();
    const l = new Limiter(NO_LIMITS, c.now);
    const k = key('slow', { ratePerSecond: 0.1, burst: 1 });
    expect(l.take(k, 'key').admitted).toBe(true);
    expect(refused(l.take(k, 'key')).retryAfterS).toBe(10);
    c.advance(2_500);
    expect(refused(l.take(k, 'key')).retryAfterS).toBe(8); // 7.5 s left, rounded up
    c.advance(7_499);
    expect(refused(l.take(k, 'key')).retryAfterS).toBe(1);
    c.advance(1);
    expect(l.take(k, 'key').admitted).toBe(true);
  });

  test('a refused request takes no token: retrying at Retry-After succeeds', () => {
    const c = clock();
    const l = new Limiter(NO_LIMITS, c.now);
    const k = key('k', { ratePerSecond: 1, burst: 1 });
    expect(l.take(k, 'key').admitted).toBe(true);
    for (let i = 0; i < 100; i++) expect(l.take(k, 'key').admitted).toBe(false);
    c.advance(1000);
    expect(l.take(k, 'key').admitted).toBe(true);
  });

  test('the limit as the key file says now: a reload that lowers the burst clamps the bucket', () => {
    const c = clock();
    const l = new Limiter(NO_LIMITS, c.now);
    expect(l.take(key('k', { ratePerSecond: 1, burst: 10 }), 'key').admitted).toBe(true); // 9 left
    const lowered = key('k', { ratePerSecond: 1, burst: 2 });
    expect(l.take(lowered, 'key').admitted).toBe(true);
    expect(l.take(lowered, 'key').admitted).toBe(true);
    expect(l.take(lowered, 'key').admitted).toBe(false);
    // Limits removed from the key (and no default): not limited any more.
    expect(l.take(key('k'), 'key').admitted).toBe(true);
  });
});

describe('the concurrency cap', () => {
  test('refused past the cap, a place back on release, release counted once', () => {
    const l = new Limiter(NO_LIMITS, clock().now);
    const k = key('batch', { concurrency: 2 });
    const a = l.take(k, 'key');
    const b = l.take(k, 'key');
    if (!a.admitted || !b.admitted) throw new Error('refused');
    const r = refused(l.take(k, 'key'));
    expect(r).toMatchObject({ reason: 'concurrency', label: 'key:batch', retryAfterS: 1 });
    expect(r.message).toBe('\'batch\' already has 2 requests in flight, its concurrency limit (the key\'s limits in auth.keysFile); retry after 1 s');
    a.release();
    a.release(); // twice: still one place
    const c = l.take(k, 'key');
    expect(c.admitted).toBe(true);
    expect(l.take(k, 'key').admitted).toBe(false);
  });

  test('a thousand requests taken and released leave the key its whole cap (no leak)', () => {
    const l = new Limiter(NO_LIMITS, clock().now);
    const k = key('k', { concurrency: 3 });
    for (let i = 0; i < 1000; i++) {
      const v = l.take(k, 'key');
      if (!v.admitted) throw new Error(`refused at ${i}`);
      v.release();
    }
    const held = [l.take(k, 'key'), l.take(k, 'key'), l.take(k, 'key')];
    expect(held.every((v) => v.admitted)).toBe(true);
    expect(l.take(k, 'key').admitted).toBe(false);
  });
});

describe('whose limits apply', () => {
  test('a JWT passes its own limit and each group\'s; refused by one, it takes from none', () => {
    const c = clock();
    const l = new Limiter(config({
      subjects: new Map([['alice', { ratePerSecond: 0.01, burst: 3 }]]),
      groupsClaim: 'groups',
      groups: new Map([['team-a', { ratePerSecond: 1, burst: 2 }]]),
    }), c.now);
    const alice = jwt('alice', ['team-a', 'unknown-group']);
    const bob = jwt('bob', ['team-a']);
    expect(l.take(alice, 'jwt').admitted).toBe(true);
    expect(l.take(bob, 'jwt').admitted).toBe(true); // the group's bucket is shared: now empty
    const r = refused(l.take(alice, 'jwt'));
    expect(r).toMatchObject({ reason: 'rate', label: 'group:team-a' });
    expect(r.message).toBe('group \'team-a\' is over its rate of 1 request per second (burst 2, auth.limits.groups.team-a); retry after 1 s');
    // alice's own bucket lost nothing to the refusals: 2 left once the group refills.
    for (let i = 0; i < 20; i++) expect(l.take(alice, 'jwt').admitted).toBe(false);
    for (let i = 0; i < 2; i++) {
      c.advance(1000);
      expect(l.take(alice, 'jwt').admitted).toBe(true);
    }
    c.advance(1000);
    expect(refused(l.take(alice, 'jwt')).label).toBe('subject:alice');
  });

  test('refused by several limits, the one with the longest wait is told', () => {
    const c = clock();
    const l = new Limiter(config({
      subjects: new Map([['alice', { ratePerSecond: 0.01, burst: 1 }]]),
      groupsClaim: 'groups',
      groups: new Map([['team-a', { ratePerSecond: 1, burst: 1, concurrency: 1 }]]),
    }), c.now);
    const alice = jwt('alice', ['team-a']);
    expect(l.take(alice, 'jwt').admitted).toBe(true); // both buckets empty, the group's place held
    expect(refused(l.take(alice, 'jwt'))).toMatchObject({ label: 'subject:alice', reason: 'rate', retryAfterS: 100 });
    expect(refused(l.take(jwt('bob', ['team-a']), 'jwt'))).toMatchObject({ label: 'group:team-a', reason: 'rate', retryAfterS: 1 });
    c.advance(1000);
    expect(refused(l.take(jwt('bob', ['team-a']), 'jwt'))).toMatchObject({ label: 'group:team-a', reason: 'concurrency', retryAfterS: 1 });
  });

  test('the default gives each identity a bucket of its own, labelled `default`', () => {
    const l = new Limiter(config({ default: { ratePerSecond: 1, burst: 1 } }), clock().now);
    expect(l.take(jwt('a'), 'jwt').admitted).toBe(true);
    expect(l.take(jwt('b'), 'jwt').admitted).toBe(true);
    expect(l.take(key('a'), 'key').admitted).toBe(true); // key a is not JWT a
    const r = refused(l.take(jwt('a'), 'jwt'));
    expect(r.label).toBe('default');
    expect(r.message).toContain('auth.limits.default');
    // A key with limits of its own is not under the default.
    const own = key('own', { ratePerSecond: 100, burst: 100 });
    for (let i = 0; i < 50; i++) expect(l.take(own, 'key').admitted).toBe(true);
  });

  test('auth.limits.subjects names JWT subjects only: a key of the same id is not under it', () => {
    const l = new Limiter(config({ subjects: new Map([['ci-bot', { concurrency: 1 }]]) }), clock().now);
    expect(l.take(jwt('ci-bot'), 'jwt').admitted).toBe(true);
    expect(l.take(jwt('ci-bot'), 'jwt').admitted).toBe(false);
    expect(l.take(key('ci-bot'), 'key').admitted).toBe(true);
    expect(l.take(key('ci-bot'), 'key').admitted).toBe(true);
  });

  test('no limits configured: nothing kept', () => {
    const l = new Limiter(NO_LIMITS, clock().now);
    for (let i = 0; i < 100; i++) expect(l.take(jwt(`s${i}`), 'jwt').admitted).toBe(true);
    expect(l.tracked).toBe(0);
  });
});

describe('the bound of identities kept', () => {
  test('past it the least recently used idle identity is dropped; ones with requests in flight are kept', () => {
    const l = new Limiter(config({ default: { concurrency: 1 } }), clock().now, 3);
    const held = l.take(jwt('first'), 'jwt'); // in flight: never dropped
    expect(held.admitted).toBe(true);
    const second = l.take(jwt('second'), 'jwt');
    if (second.admitted) second.release();
    for (let i = 0; i < 1000; i++) {
      const v = l.take(jwt(`s${i}`), 'jwt');
      if (v.admitted) v.release();
    }
    expect(l.tracked).toBeLessThanOrEqual(3);
    // 'first' still holds its place: its cap still counts it.
    expect(refused(l.take(jwt('first'), 'jwt')).reason).toBe('concurrency');
    if (held.admitted) held.release();
  });
});

describe('checking limits', () => {
  test('a limit: rate, burst (default: the rate rounded up) and concurrency', () => {
    expect(parseLimit({ rate: 2.5 }, 'x')).toEqual({ ratePerSecond: 2.5, burst: 3 });
    expect(parseLimit({ rate: 0.2 }, 'x')).toEqual({ ratePerSecond: 0.2, burst: 1 });
    expect(parseLimit({ rate: 5, burst: 20, concurrency: 4 }, 'x')).toEqual({ ratePerSecond: 5, burst: 20, concurrency: 4 });
    expect(parseLimit({ concurrency: 1 }, 'x')).toEqual({ concurrency: 1 });
  });

  test('every problem named by its place', () => {
    expect(parseLimit({ rate: 0, burst: 1.5, concurrency: 0, extra: 1 }, 'keys[2].limits')).toEqual([
      'keys[2].limits.extra: unknown key (rate, burst, concurrency, quotas)',
      'keys[2].limits.rate: must be requests per second, a number above 0 (0.5 = one every 2 s), got 0',
      'keys[2].limits.burst: must be an integer of at least 1, got 1.5',
      'keys[2].limits.concurrency: must be an integer of at least 1, got 0',
    ]);
    expect(parseLimit({}, 'x')).toEqual(['x: give a rate, a concurrency, quotas or some of them']);
    expect(parseLimit({ burst: 3, concurrency: 1 }, 'x')).toEqual(['x.burst: needs a rate']);
    expect(parseLimit('10/s', 'x')).toEqual(['x: must be a mapping {rate, burst, concurrency, quotas}']);
  });

  test('the key file: a key\'s limits, and their problems by key', () => {
    const r = parseKeyFile([
      'keys:',
      '  - { id: ci-bot, token: tok_live_0123456789abcdef, groups: [inference], limits: { rate: 5, burst: 10, concurrency: 2 } }',
      '  - { id: other, token: tok_live_fedcba9876543210, groups: [inference] }',
    ].join('\n'));
    if ('problems' in r) throw new Error(r.problems.join('; '));
    expect(r.keys.map((k) => [k.subject, k.limits])).toEqual([['ci-bot', { ratePerSecond: 5, burst: 10, concurrency: 2 }], ['other', undefined]]);
    expect(parseKeyFile('keys:\n  - { id: a, token: tok_live_0123456789abcdef, groups: [inference], limits: { rate: -1 } }')).toEqual({
      problems: ['keys[0].limits.rate: must be requests per second, a number above 0 (0.5 = one every 2 s), got -1'],
    });
  });

  test('auth.limits: default, subjects, groups and their claim', () => {
    const r = parseLimits({ default: { rate: 1 }, subjects: { alice: { concurrency: 2 } }, groupsClaim: 'groups', groups: { 'team-a': { rate: 10, burst: 20 } } });
    if ('problem' in r) throw new Error(r.problem.join('; '));
    expect(r.value.default).toEqual({ ratePerSecond: 1, burst: 1 });
    expect([...r.value.subjects]).toEqual([['alice', { concurrency: 2 }]]);
    expect([...r.value.groups]).toEqual([['team-a', { ratePerSecond: 10, burst: 20 }]]);
    expect(r.value.groupsClaim).toBe('groups');
    expect(parseLimits(undefined)).toEqual({ value: NO_LIMITS });
    expect(parseLimits({ groups: { a: { rate: 1 } }, subjects: [], defaults: {} })).toEqual({ problem: [
      'auth.limits.defaults: unknown key (default, subjects, groupsClaim, groups, store, storeFailure, storeTimeoutMs, usageKeys)',
      'auth.limits.subjects: must be a mapping of names to {rate, burst, concurrency, quotas}',
      'auth.limits.groups: needs auth.limits.groupsClaim, the JWT claim that names a token\'s groups',
    ] });
  });

  test('auth.limits.store: a redis:// or rediss:// URL, its policy and timeout; the password never in a problem', () => {
    expect(parseLimits({ default: { rate: 1 }, store: 'rediss://:pw@redis.example:6380/2', storeFailure: 'closed', storeTimeoutMs: 20 }))
      .toMatchObject({ value: { store: { url: 'rediss://:pw@redis.example:6380/2', failure: 'closed', timeoutMs: 20 } } });
    expect(parseLimits({ store: 'redis://127.0.0.1' })).toMatchObject({ value: { store: { failure: 'local', timeoutMs: 5 } } });
    expect(parseLimits({ store: 'http://:secret@x:1', storeFailure: 'maybe', storeTimeoutMs: 0 })).toEqual({ problem: [
      'auth.limits.storeFailure: must be one of open, closed, local, got "maybe"',
      'auth.limits.storeTimeoutMs: must be an integer of milliseconds in [1, 1000], got 0',
      'auth.limits.store: "http://***@x:1" is not a redis:// or rediss:// URL; give redis://[[user]:password@]host[:port][/db], or rediss:// for TLS',
    ] });
    expect(parseLimits({ store: 'redis://:secret@host:6379/x' })).toEqual({ problem: [
      'auth.limits.store: redis://***@host:6379/x: the path must be a database number (/0); give redis://[[user]:password@]host[:port][/db], or rediss:// for TLS',
    ] });
    // Without a store they are the cluster primary's (workers > 1).
    expect(parseLimits({ storeFailure: 'open' })).toEqual({ value: expect.objectContaining({ store: { failure: 'open', timeoutMs: 5 } }) as unknown });
  });
});
