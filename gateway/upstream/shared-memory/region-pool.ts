// The shared-memory sidecar mode (upstream.sharedMemory): a pool of system shared-memory regions,
// files under /dev/shm that Triton maps once at SystemSharedMemoryRegister (shm_open of the key,
// then mmap of offset..byte_size), leased to one request at a time. The tensor is written into
// the file (fs.writeSync: the page-cache pages are the ones Triton has mapped), and ModelInfer
// names the region instead of carrying the bytes. Triton 2.51 has no --allow-client-shm switch:
// registration is always allowed.
//
// File I/O rather than a mapping of our own: no mmap binding is among the dependencies, and
// writeSync of 64 KiB body chunks into a tmpfs file costs 2.9 ms per 16 MiB here against 1.3 ms
// for Buffer.copy into a reused buffer (bench/RESULTS.md, "Issue 16: shared-memory mode").
//
// Names are <prefix>-<pid>-<n>: a gateway killed with SIGKILL leaves its regions registered and
// its files behind; the next one (any process of the prefix) reclaims those whose process is gone.
import { closeSync, fchmodSync, ftruncateSync, openSync, readdirSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { remainingMs, settlesWithin } from '../../deadline';
import type { ControlPlane } from '../control/control-plane';

/** What the pool asks of Triton (the control plane's System* shared-memory calls). */
export interface RegionRegistry {
  register(name: string, key: string, byteSize: number, signal: AbortSignal): Promise<void>;
  unregister(name: string, signal: AbortSignal): Promise<void>;
  /** Names of the system regions Triton has registered. */
  registered(signal: AbortSignal): Promise<string[]>;
}

export interface SharedMemoryPoolOptions {
  readonly regions: number;
  readonly regionBytes: number;
  readonly prefix: string;
  readonly registry: RegionRegistry;
  /** Where the region files are: /dev/shm, where shm_open looks on Linux (tests: another folder, a fake registry). */
  readonly dir?: string;
  /** Whether a process lives (tests replace it). */
  readonly alive?: (pid: number) => boolean;
  /** A failed start is tried again on a lease no sooner than this after the last try. */
  readonly retryMs?: number;
}

/** Why a request went the normal way. */
export const SHM_FALLBACK_REASONS = ['exhausted', 'too_large', 'unregistered', 'ineligible'] as const;
export type ShmFallbackReason = (typeof SHM_FALLBACK_REASONS)[number];

export interface SharedMemoryStats {
  readonly regions: number;
  readonly inUse: number;
  readonly leases: number;
  readonly fallbacks: Readonly<Record<ShmFallbackReason, number>>;
  /** Tensor bytes written into regions (sent to Triton through shared memory instead of gRPC). */
  readonly bytes: number;
  /** Output bytes Triton wrote into regions, read from there into answers. */
  readonly outputBytes: number;
  readonly reclaimed: number;
}

export interface Region {
  readonly name: string;
  readonly fd: number;
  readonly byteSize: number;
}

/** One request's region; release() returns it (once; later calls do nothing). */
export interface Lease {
  readonly region: Region;
  /** Writes `chunk[from, to)` at `offset` of the region. */
  write(chunk: Buffer, from: number, to: number, offset: number): void;
  /** Fills `into` from `offset` of the region (an output Triton wrote there). */
  read(into: Buffer, offset: number): void;
  release(): void;
}

const REGION_NAME = /^(.+)-(\d+)-(\d+)$/;

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class SharedMemoryPool {
  readonly #o: Required<SharedMemoryPoolOptions>;
  readonly #free: Region[] = [];
  readonly #all: Region[] = [];
  #state: 'idle' | 'starting' | 'ready' | 'closed' = 'idle';
  #lastTry = 0;
  #starting: Promise<boolean> | undefined;
  #leases = 0;
  #bytes = 0;
  #outputBytes = 0;
  #reclaimed = 0;
  readonly #fallbacks: Record<ShmFallbackReason, number> = { exhausted: 0, too_large: 0, unregistered: 0, ineligible: 0 };
  /** Called with a start's failure (the gateway logs it; upstream/ does not import telemetry). */
  onError: (err: unknown) => void = () => undefined;

  constructor(options: SharedMemoryPoolOptions) {
    this.#o = { dir: '/dev/shm', alive: processAlive, retryMs: 1000, ...options };
  }

  get regionBytes(): number {
    return this.#o.regionBytes;
  }

  /**
   * Reclaims the regions of gone gateways of the prefix, then creates and registers this one's.
   * Resolves true when the pool is ready, false when Triton could not be reached within
   * `timeoutMs` (requests go the normal way; the next lease tries again).
   */
  start(timeoutMs: number): Promise<boolean> {
    if (this.#state === 'ready') return Promise.resolve(true);
    if (this.#state === 'closed') return Promise.resolve(false);
    this.#starting ??= this.#start(Date.now() + timeoutMs).finally(() => { this.#starting = undefined; });
    return this.#starting;
  }

  async #start(until: number): Promise<boolean> {
    this.#state = 'starting';
    this.#lastTry = Date.now();
    try {
      await this.#reclaim(until);
      for (let n = this.#all.length; n < this.#o.regions; n++) {
        const name = `${this.#o.prefix}-${process.pid}-${n}`;
        const fd = openSync(join(this.#o.dir, name), 'w+', 0o660);
        // Triton opens the key read-write (shm_open O_RDWR) and may run as another user of the
        // pod's fsGroup (README "Shared-memory mode"): group read-write whatever the umask.
        fchmodSync(fd, 0o660);
        ftruncateSync(fd, this.#o.regionBytes);
        const region = { name, fd, byteSize: this.#o.regionBytes };
        this.#all.push(region);
        await this.#o.registry.register(name, `/${name}`, this.#o.regionBytes, AbortSignal.timeout(Math.max(1, remainingMs(until))));
        if (this.#closed()) return false;
        this.#free.push(region);
      }
      this.#state = 'ready';
      return true;
    } catch (err) {
      if (this.#closed()) return false;
      this.#state = 'idle';
      this.onError(err);
      return false;
    }
  }

  /** Read through a call: close() may change the state while a start awaits Triton. */
  #closed(): boolean {
    return this.#state === 'closed';
  }

  /** Regions of the prefix whose process is gone, or that carry this pid (a restart in a fresh pid namespace). */
  #stale(name: string): boolean {
    const m = REGION_NAME.exec(name);
    if (m === null || m[1] !== this.#o.prefix) return false;
    const pid = Number(m[2]);
    const own = this.#all.some((r) => r.name === name);
    return !own && (pid === process.pid || !this.#o.alive(pid));
  }

  async #reclaim(until: number): Promise<void> {
    const names = await this.#o.registry.registered(AbortSignal.timeout(Math.max(1, remainingMs(until))));
    for (const name of names.filter((n) => this.#stale(n))) {
      await this.#o.registry.unregister(name, AbortSignal.timeout(Math.max(1, remainingMs(until))));
      this.#reclaimed++;
    }
    let files: string[] = [];
    try {
      files = readdirSync(this.#o.dir);
    } catch { /* no such folder: nothing to reclaim */ }
    for (const f of files.filter((n) => this.#stale(n))) {
      try {
        unlinkSync(join(this.#o.dir, f));
      } catch { /* gone meanwhile */ }
    }
  }

  /**
   * A region for `bytes` of tensors, or why not (the caller sends the request the normal way).
   * Before the pool is ready, a lease starts it again (at most once per retryMs).
   */
  lease(bytes: number): Lease | ShmFallbackReason {
    let reason: ShmFallbackReason | undefined;
    if (this.#state !== 'ready') {
      reason = 'unregistered';
      if (this.#state === 'idle' && Date.now() - this.#lastTry >= this.#o.retryMs) void this.start(5000);
    } else if (bytes > this.#o.regionBytes) {
      reason = 'too_large';
    } else if (this.#free.length === 0) {
      reason = 'exhausted';
    }
    if (reason !== undefined) {
      this.#fallbacks[reason]++;
      return reason;
    }
    const region = this.#free.pop()!;
    this.#leases++;
    let released = false;
    return {
      region,
      write: (chunk, from, to, offset) => {
        let at = from;
        while (at < to) at += writeSync(region.fd, chunk, at, to - at, offset + at - from);
        this.#bytes += to - from;
      },
      read: (into, offset) => {
        let at = 0;
        while (at < into.length) {
          const n = readSync(region.fd, into, at, into.length - at, offset + at);
          if (n === 0) throw new Error(`shared-memory region ${region.name} ends before ${offset + into.length} bytes`);
          at += n;
        }
        this.#outputBytes += into.length;
      },
      release: () => {
        if (released) return;
        released = true;
        if (this.#state !== 'closed') this.#free.push(region);
      },
    };
  }

  /** A request that could not use its region after all (counted as a fallback). */
  fellBack(reason: ShmFallbackReason): void {
    this.#fallbacks[reason]++;
  }

  /**
   * Triton no longer knows the regions (it restarted: ModelInfer says the region is not found):
   * they are registered again on the next lease.
   */
  lost(): void {
    if (this.#state !== 'ready') return;
    this.#state = 'idle';
    this.#lastTry = 0;
    for (const r of this.#all) {
      try {
        closeSync(r.fd);
        unlinkSync(join(this.#o.dir, r.name));
      } catch { /* already gone */ }
    }
    this.#all.length = 0;
    this.#free.length = 0;
  }

  stats(): SharedMemoryStats {
    return {
      regions: this.#state === 'ready' ? this.#all.length : 0,
      inUse: this.#state === 'ready' ? this.#all.length - this.#free.length : 0,
      leases: this.#leases,
      fallbacks: { ...this.#fallbacks },
      bytes: this.#bytes,
      outputBytes: this.#outputBytes,
      reclaimed: this.#reclaimed,
    };
  }

  /**
   * Unregisters every region at Triton (within `timeoutMs`; a Triton that is gone forgot them
   * anyway) and removes the files. Requests still holding a lease were cut before this runs.
   */
  async close(timeoutMs: number): Promise<void> {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    const until = Date.now() + timeoutMs;
    // A registration under way would otherwise land after the unregister below.
    if (this.#starting !== undefined) await settlesWithin(this.#starting, remainingMs(until));
    const regions = this.#all.splice(0);
    this.#free.length = 0;
    await Promise.allSettled(regions.map((r) => this.#o.registry.unregister(r.name, AbortSignal.timeout(Math.max(1, remainingMs(until))))));
    for (const r of regions) {
      try {
        closeSync(r.fd);
      } catch { /* closed */ }
      try {
        unlinkSync(join(this.#o.dir, r.name));
      } catch { /* gone */ }
    }
  }
}

/** The registry on Triton's gRPC control plane (System* shared-memory RPCs, docs/architecture.md#the-grpc-messages). */
export function tritonRegistry(control: ControlPlane): RegionRegistry {
  return {
    async register(name, key, byteSize, signal) {
      await control.call('SystemSharedMemoryRegister', { name, key, offset: 0, byte_size: byteSize }, signal);
    },
    async unregister(name, signal) {
      await control.call('SystemSharedMemoryUnregister', { name }, signal);
    },
    async registered(signal) {
      const status = await control.call('SystemSharedMemoryStatus', { name: '' }, signal);
      return Object.keys(status.regions ?? {});
    },
  };
}
