// The bounded waits shutdown is built from (gateway/deadline.ts).
import { remainingMs, settlesWithin } from '../../gateway/deadline';

describe('settlesWithin', () => {
  test('true when the promise settles in time', async () => {
    expect(await settlesWithin(Promise.resolve(), 1000)).toBe(true);
  });

  test('false once the time has run out, without waiting for the promise', async () => {
    const never = new Promise<void>(() => undefined);
    const t0 = performance.now();
    expect(await settlesWithin(never, 20)).toBe(false);
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  test('0 ms: a promise settled already still counts', async () => {
    expect(await settlesWithin(Promise.resolve(), 0)).toBe(true);
  });

  test('a rejection in time rejects', async () => {
    await expect(settlesWithin(Promise.reject(new Error('boom')), 1000)).rejects.toThrow('boom');
  });
});

test('remainingMs is never negative', () => {
  expect(remainingMs(Date.now() - 5)).toBe(0);
  expect(remainingMs(Date.now() + 60_000)).toBeGreaterThan(59_000);
});
