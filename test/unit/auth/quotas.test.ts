// Quotas over windows (gateway/auth/quotas.ts, auth/usage.ts) on an injected clock, in this
// process (the Redis side: test/integration/quotas.test.ts): the checks of `quotas`, the UTC
// windows (a calendar month included), a hard quota refused exactly at its max with Retry-After at
// the window's end and open again in the next, a soft one warned, units known after the call
// charged when the request is over (tokens in batches), and the bounded key label of tensorgate.usage.
import type { Grant } from '../../../gateway/auth/key-file';
import { type Limit, NO_LIMITS, parseLimit } from '../../../gateway/auth/limits';
import { LocalQuotaCounter, parseQuotas, type Quota, TOKEN_BATCH, windowOf } from '../../../gateway/auth/quotas';
import { type MeteredRecord, type QuotaVerdict, Quotas, UsageBook, type UsageMeter } from '../../../gateway/auth/usage';

const key = (subject: string, limits: Limit): Grant => ({ subject, groups: new Set(), models: undefined, limits });
const quota = (q: Partial<Quota>): Limit => ({ quotas: [{ unit: 'requests', per: 'minute', max: 3, policy: 'hard', ...q }] });

function admitted(v: QuotaVerdict | Promise<QuotaVerdict>): Extract<QuotaVerdict, { admitted: true }> {
  if (v instanceof Promise || !v.admitted) throw new Error('not admitted at once');
  return v;
}

const record = (o: Partial<MeteredRecord> = {}): MeteredRecord => ({ route: 'infer', status: 200, declaredBytes: 0, ...o });

describe('checking quotas', () => {
  test('units, windows, max and policy named by their place', () => {
    expect(parseQuotas([{ unit: 'tokens', per: 'month', max: 1000 }], 'q')).toEqual([{ unit: 'tokens', per: 'month', max: 1000, policy: 'hard' }]);
    expect(parseQuotas([{ unit: 'token', per: 'week', max: 0, policy: 'maybe', extra: 1 }], 'q')).toEqual([
      'q[0].extra: unknown key (unit, per, max, policy)',
      'q[0].unit: must be one of requests, inferences, inputBytes, outputBytes, tokens, got "token"',
      'q[0].per: must be one of minute, hour, day, month (UTC; month: the calendar month), got "week"',
      'q[0].max: must be an integer of at least 1, got 0',
      'q[0].policy: must be hard (refuse once spent) or soft (warn), got "maybe"',
    ]);
    expect(parseQuotas({ unit: 'tokens' }, 'q')).toEqual(['q: must be a list of {unit, per, max, policy}']);
    // A limit may be quotas alone.
    expect(parseLimit({ quotas: [{ unit: 'requests', per: 'day', max: 5, policy: 'soft' }] }, 'x')).toEqual({
      quotas: [{ unit: 'requests', per: 'day', max: 5, policy: 'soft' }],
    });
    expect(parseLimit({ quotas: [{ unit: 'requests', per: 'day' }] }, 'keys[0].limits')).toEqual(['keys[0].limits.quotas[0].max: must be an integer of at least 1, got undefined']);
  });

  test('windows are UTC minutes, hours, days and calendar months', () => {
    const t = Date.UTC(2024, 1, 29, 23, 59, 30, 500); // a leap day
    expect(windowOf('minute', t)).toEqual({ start: Date.UTC(2024, 1, 29, 23, 59), end: Date.UTC(2024, 2, 1, 0, 0) });
    expect(windowOf('hour', t)).toEqual({ start: Date.UTC(2024, 1, 29, 23), end: Date.UTC(2024, 2, 1) });
    expect(windowOf('day', t)).toEqual({ start: Date.UTC(2024, 1, 29), end: Date.UTC(2024, 2, 1) });
    expect(windowOf('month', t)).toEqual({ start: Date.UTC(2024, 1, 1), end: Date.UTC(2024, 2, 1) });
    expect(windowOf('month', Date.UTC(2026, 11, 31, 12))).toEqual({ start: Date.UTC(2026, 11, 1), end: Date.UTC(2027, 0, 1) });
  });
});

describe('quotas in one process', () => {
  test('a hard quota of 3 requests a minute: refused exactly at the 4th, Retry-After at the minute\'s end, open again in the next', () => {
    let now = Date.UTC(2026, 10, 29, 7, 0, 15);
    const q = new Quotas(NO_LIMITS, undefined, 'local', () => now);
    const k = key('alice', quota({}));
    for (let i = 0; i < 3; i++) admitted(q.admit(k, 'key', 0)).meter.finish(record());
    const v = q.admit(k, 'key', 0);
    if (v instanceof Promise || v.admitted) throw new Error('admitted');
    expect(v.refusal.reason).toBe('quota');
    expect(v.refusal.retryAfterS).toBe(45);
    expect(v.refusal.message).toBe('\'alice\' has spent its quota of 3 requests per minute (3 used, the key\'s limits in auth.keysFile); '
      + 'the window ends at 2026-11-29T07:01:00.000Z, retry after 45 s');
    now += 45_000;
    admitted(q.admit(k, 'key', 0));
  });

  test('a soft quota lets in past its max, with a warning', async () => {
    const q = new Quotas(NO_LIMITS, undefined, 'local', () => Date.UTC(2026, 10, 29));
    const warned: string[] = [];
    q.on('warning', (limit, unit) => warned.push(`${limit} ${unit}`));
    const k = key('bob', quota({ max: 1, policy: 'soft' }));
    expect(admitted(q.admit(k, 'key', 0)).warning).toBeUndefined();
    expect(admitted(q.admit(k, 'key', 0)).warning).toBe('requests quota of key:bob spent: 2 of 1 per minute (the key\'s limits in auth.keysFile)');
    expect(warned).toEqual(['key:bob requests']);
    // A unit charged after the call warns once its window is spent (as a hard one would refuse).
    const t = key('tom', quota({ unit: 'tokens', max: 5, policy: 'soft' }));
    const m = admitted(q.admit(t, 'key', 0)).meter;
    m.tokens(5);
    await m.charged();
    m.finish(record());
    expect(admitted(q.admit(t, 'key', 0)).warning).toBe('tokens quota of key:tom spent: 5 of 5 per minute (the key\'s limits in auth.keysFile)');
  });

  test('tokens: charged in batches as they stream and the rest at the end; a spent window refuses the next request only', () => {
    const q = new Quotas(NO_LIMITS, undefined, 'local', () => Date.UTC(2026, 10, 29));
    const k = key('carol', quota({ unit: 'tokens', per: 'month', max: 40 }));
    const m: UsageMeter = admitted(q.admit(k, 'key', 0)).meter;
    const used = async (): Promise<number> => (await q.state([{ id: 'key:carol', label: 'key:carol', limit: k.limits! }]))[0]!.used;
    return (async () => {
      for (let t = 1; t < TOKEN_BATCH; t++) m.tokens(t);
      expect(await used()).toBe(0);
      m.tokens(TOKEN_BATCH);
      expect(await used()).toBe(TOKEN_BATCH);
      m.tokens(45);
      // Cut here: what was sent is charged when the request is over, past the max (the overshoot bound).
      const r = record({ bytesOut: 100 });
      m.finish(r);
      expect(await used()).toBe(45);
      expect(r.usage).toEqual({ requests: 1, inferences: 0, inputBytes: 0, outputBytes: 100, tokens: 45 });
      const v = q.admit(k, 'key', 0);
      expect(v instanceof Promise || v.admitted).toBe(false);
    })();
  });

  test('inputBytes: the declared body taken at admission, all or nothing with requests', () => {
    const q = new Quotas(NO_LIMITS, undefined, 'local', () => Date.UTC(2026, 10, 29));
    const k = key('dan', { quotas: [{ unit: 'requests', per: 'day', max: 10, policy: 'hard' }, { unit: 'inputBytes', per: 'day', max: 100, policy: 'hard' }] });
    admitted(q.admit(k, 'key', 60));
    const v = q.admit(k, 'key', 60);
    expect(v instanceof Promise || v.admitted).toBe(false);
    return q.state([{ id: 'key:dan', label: 'key:dan', limit: k.limits! }]).then((s) => {
      // The refused request took nothing.
      expect(s.map((x) => [x.unit, x.used, x.remaining])).toEqual([['requests', 1, 9], ['inputBytes', 60, 40]]);
    });
  });

  test('the local counters are bounded: ended windows go first, then the oldest', () => {
    let now = 0;
    const c = new LocalQuotaCounter(2, () => now);
    c.add([{ key: 'a', add: 1, max: 9, hard: true, endMs: 10 }, { key: 'b', add: 1, max: 9, hard: true, endMs: 100 }]);
    now = 20;
    c.add([{ key: 'c', add: 1, max: 9, hard: true, endMs: 100 }]);
    expect(c.read(['a', 'b', 'c'])).toEqual([0, 1, 1]);
    c.add([{ key: 'd', add: 1, max: 9, hard: true, endMs: 100 }]);
    expect(c.read(['b', 'c', 'd'])).toEqual([0, 1, 1]);
  });
});

describe('the key label of tensorgate.usage', () => {
  test('the top N identities by requests have their own, the rest `other`; one that climbs takes the place of the least', () => {
    const b = new UsageBook(2);
    const u = { requests: 1, inferences: 1, inputBytes: 1, outputBytes: 1, tokens: 0 };
    expect(b.add('key:a', 'm', u)).toBe('key:a');
    expect(b.add('key:a', 'm', u)).toBe('key:a');
    expect(b.add('key:b', 'm', u)).toBe('key:b');
    expect(b.add('key:c', 'm', u)).toBe('other');
    expect(b.add('key:c', 'm', u)).toBe('key:c'); // 2 requests, more than b's 1
    expect(b.add('key:b', 'm', u)).toBe('other');
    expect(b.of('key:a')).toEqual({ m: { requests: 2, inferences: 2, inputBytes: 2, outputBytes: 2, tokens: 0 } });
  });
});
