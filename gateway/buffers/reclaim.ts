// Memory given back once a burst is over. A tensor body that stays in the gateway for a whole upload
// (a JSON or base64 body is read whole before it is decoded) outlives two scavenges, so its buffers
// are promoted and only a full collection frees them. V8 starts one when external memory has grown
// by some 64 MB since the last; traffic that stops before that leaves the dead buffers resident
// until traffic comes back: after 48 base64 requests of 4 MiB at c=8, 80–110 MB of ArrayBuffers
// that nothing referenced stayed for as long as the gateway was left idle (15 s measured, and V8's
// memory reducer, now off, did not collect them in that run; bench/RESULTS.md "Memory: 8 × 4 MiB
// in flight"). The JS heap does the same: the launchers' --initial-heap-size=64 (bin/tensorgate)
// lets the old generation fill to ~64 MB before its first full collection, so the parse trees and
// error texts of a burst of small bad requests (promoted, as every request of a busy burst outlives
// two scavenges) stayed as 40–70 MB of garbage, and the pages around them resident, with
// ArrayBuffer memory flat (bench/RESULTS.md "Memory after a burst of fuzz requests").
//
// So, once a second (an unref'd timer): the buffer pool drops the pages nobody asked for in the
// last POOL_IDLE_MS, and when the gateway is quiet — the level, the JS heap in use plus ArrayBuffer
// memory less what is kept for reuse on purpose (`keeps`), has stayed put since the last tick, and
// the process used under QUIET_CPU_US of CPU in it — one full collection runs if the level stands
// RECLAIM_SOON_BYTES above what the last full collection left, or RECLAIM_BYTES above it once the
// gateway has been quiet for LONG_QUIET_TICKS in a row. Under traffic V8's own heuristics are left
// alone. Both signs of quiet are needed: a steady stream of 4 MiB requests, its pages reused,
// holds the level within a MiB from one second to the next, and a trickle of requests to a slow
// model uses next to no CPU. Memory kept for reuse (idle pages, warm staging buffers) is live, so
// a collection could not lower it: counted, it made a collection follow every burst for nothing.
//
// The collection has a price beyond its own time, so whatever can be freed without it is freed at
// once instead (buffers/release.ts): the pool's idle pages, the idle read pages, the warm staging
// buffers. V8's optimised code holds some objects it was compiled against weakly (maps that may
// still change, closures' contexts, other heap objects it embeds), and it is thrown away when one
// of them dies. Objects that exist only while requests are in flight die in the one collection
// that finds the gateway quiet, and V8's own collections under load never find them dead: after
// each burst of 4 MiB requests that left the idle read pages to this collection, 13–45 functions
// of the request path (Node's stream and tick functions, the wire readers) lost their compiled
// code ("embedded weak objects cleared" in --trace-deopt), and the next burst's first 150
// requests paid ~1 ms each to compile them again (bench/RESULTS.md, "what a 4 MB cell
// measures"). Freed at once, the pages leave nothing for a quiet tick to find.
//
// What is still left to it (reads shared between requests, JSON and base64 bodies, the JS heap's
// garbage) is why the collection waits for a long quiet stretch unless there is much to give back.
// A gateway serving bursts a few seconds apart, every form in turn, reached RECLAIM_BYTES every
// 50–130 s; each collection, regular or last-resort alike, dropped the compiled code of 115–250
// functions, and the next 700 requests of each form cost 2–4× their CPU (64 B: 0.5–0.9 ms a
// request against 0.12–0.15). Below RECLAIM_SOON_BYTES, garbage kept a few seconds more is cheaper
// than that: V8 itself starts a full collection when external memory has grown by 64 MB, so the
// next burst collects it under load, where the code stays. After LONG_QUIET_TICKS idle the
// gateway is idle rather than between bursts (V8's memory reducer waits ~8 s for the same reason).
//
// The collection needs `gc`, which V8 gives only with --expose-gc; the flag is set at run time and
// the function taken from a fresh context, so no global `gc` appears for the rest of the code.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { BufferPool } from './pool';

/** A pooled page unused this long is dropped. */
export const POOL_IDLE_MS = 2000;
/** The level this far above what the last full collection left is worth a collection after LONG_QUIET_TICKS quiet. */
export const RECLAIM_BYTES = 16 * 1024 * 1024;
/** The level this far above it is worth a collection at the first quiet tick. */
export const RECLAIM_SOON_BYTES = 64 * 1024 * 1024;
/** Quiet ticks in a row after which the gateway counts as idle, not between bursts. */
export const LONG_QUIET_TICKS = 10;
/** Movement of the level within one tick that still counts as quiet (a probe, a scrape, a timer). */
const QUIET_BYTES = 1024 * 1024;
const TICK_MS = 1000;
/** CPU time within one tick that still counts as quiet, µs: 5 % of a core (a probe, a scrape). */
const QUIET_CPU_US = 50_000;

export interface ReclaimDeps {
  /**
   * What a full collection may lower, bytes: the JS heap in use plus ArrayBuffer (and Buffer)
   * memory, less what is kept for reuse on purpose (`keeps`).
   */
  readonly level: () => number;
  /** A full, synchronous garbage collection that also gives V8's free pages back. */
  readonly collect: () => void;
  /** CPU time the process has used, µs (only its growth matters); absent: never busy. */
  readonly cpu?: () => number;
}

/** The decision of one tick, apart from timers (the unit tests drive it). */
export class ReclaimState {
  /** The level after the last full collection (ours), or the lowest seen since. */
  #floor: number;
  #last: number;
  #lastCpu: number;
  /** Quiet ticks in a row, this one included. */
  #quietTicks = 0;
  collections = 0;

  constructor(private readonly deps: ReclaimDeps) {
    this.#floor = deps.level();
    this.#last = this.#floor;
    this.#lastCpu = deps.cpu?.() ?? 0;
  }

  /**
   * One tick: true when it collected. `dropped`: bytes let go of since the last tick (letGo),
   * garbage now although still counted until a collection.
   */
  tick(dropped = 0): boolean {
    this.#floor = Math.max(0, this.#floor - dropped);
    const now = this.deps.level();
    const cpu = this.deps.cpu?.() ?? 0;
    const quiet = Math.abs(now - this.#last) < QUIET_BYTES && cpu - this.#lastCpu < QUIET_CPU_US;
    this.#last = now;
    this.#lastCpu = cpu;
    this.#quietTicks = quiet ? this.#quietTicks + 1 : 0;
    if (now < this.#floor) this.#floor = now;
    const above = now - this.#floor;
    if (!quiet || above < RECLAIM_BYTES || (above < RECLAIM_SOON_BYTES && this.#quietTicks < LONG_QUIET_TICKS)) return false;
    this.deps.collect();
    this.collections++;
    this.#floor = this.#last = this.deps.level();
    this.#lastCpu = this.deps.cpu?.() ?? 0; // the collection's own time is not traffic
    return true;
  }
}

type Gc = (options?: { type?: 'major' | 'minor'; flavor?: 'regular' | 'last-resort' }) => void;
let gcFunction: Gc | undefined;

/** V8's gc(), without a global one. */
function fullCollection(): Gc {
  if (gcFunction === undefined) {
    setFlagsFromString('--expose-gc');
    gcFunction = runInNewContext('gc') as Gc;
  }
  return gcFunction;
}

/** Bytes let go outside the pool since the last tick (letGo). */
let lettingGo = 0;
/** Memory kept for reuse on purpose (`keeps`). */
const keepers: (() => number)[] = [];

/**
 * `bytes()` tells how much memory its owner keeps for reuse (live, held on purpose): left out of
 * the level, as a collection cannot lower it; once let go, it counts as garbage until collected.
 * Returns the function that ends the keeping (an owner that closes: the decode threads' pool).
 */
export function keeps(bytes: () => number): () => void {
  keepers.push(bytes);
  return () => {
    const i = keepers.indexOf(bytes);
    if (i >= 0) keepers.splice(i, 1);
  };
}

/** What every keeper (`keeps`) keeps now, bytes. */
export function keptBytes(): number {
  let kept = 0;
  for (const bytes of keepers) kept += bytes();
  return kept;
}

/**
 * Buffers that became garbage outside the pool: a cancelled upstream call's unread answer
 * (upstream/connections/h2-sessions.ts cancel()). Counted as the pool's dropped pages are: a
 * burst held still (a client that opens no window) looks quiet, so a tick collected while it was
 * held and took its level as the floor; once it is let go, nothing moves and nothing would
 * collect it (90 MB of answers stayed resident after their streams were cut).
 */
export function letGo(bytes: number): void {
  lettingGo += bytes;
}

/** Starts the once-a-second reclaim of `pool`'s idle pages, dead buffers and the heap's garbage; stop() ends it. */
export function startReclaim(pool: BufferPool): { stop(): void; readonly state: ReclaimState } {
  const collect = fullCollection();
  const unkeep = keeps(() => pool.stats().retainedBytes);
  const level = (): number => {
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers - keptBytes();
  };
  const cpu = (): number => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  const state = new ReclaimState({ level, cpu, collect: () => collect({ type: 'major', flavor: 'last-resort' }) });
  const timer = setInterval(() => {
    pool.dropIdle(POOL_IDLE_MS); // freed at once: nothing left for a collection
    const dropped = lettingGo;
    lettingGo = 0;
    state.tick(dropped);
  }, TICK_MS);
  timer.unref();
  return {
    stop: () => {
      clearInterval(timer);
      unkeep();
    },
    state,
  };
}
