// Shutdown waits with a bound (docs/production.md#drain). Each step of close() races
// its own end against what is left of the drain deadline (server.drainTimeoutMs), then forces.

/**
 * True when `p` settled within `ms`, false when the time ran out first (`p` keeps running; the
 * caller forces it). A rejection of `p` within the time rejects.
 */
export async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<false>((resolve) => { timer = setTimeout(resolve, Math.max(0, ms), false); });
  try {
    return await Promise.race([p.then(() => true), expired]);
  } finally {
    clearTimeout(timer);
  }
}

/** Milliseconds left until the absolute time `until` (Date.now() milliseconds), never negative. */
export function remainingMs(until: number): number {
  return Math.max(0, until - Date.now());
}

/**
 * The net under a bounded close(): a process still stopping this long after server.drainTimeoutMs
 * passed exits anyway (main.ts), and a cluster worker that has not exited by then is killed (cluster.ts).
 */
export const STOP_GRACE_MS = 5000;

/**
 * The exit code of a process stopped by a signal whose drain had to cut requests still running
 * at server.drainTimeoutMs (0: every request finished; 1: an error; 2: a configuration error).
 * A cluster primary exits with it when any worker did.
 */
export const EXIT_REQUESTS_CUT = 3;
