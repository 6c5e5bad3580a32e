// Decode threads (limits.decodeThreads): a V2 infer body read whole and at least
// limits.decodeThreadMinBytes long is decoded on one of a few node:worker_threads, so the main
// thread keeps reading sockets and talking to Triton while a large JSON body's numbers are parsed
// (bench/RESULTS.md, "Issue 16: JSON at high concurrency"). Smaller bodies stay on the main thread:
// the hand-off (gathering the body, cloning the request back) costs more than their decode.
//
// Copies (docs/architecture.md#copies): the body is gathered once into a SharedArrayBuffer (one kept
// from an earlier job when one fits: SPARE_BODIES) — the gathering the main thread does anyway for
// a body of several chunks (decode/binary-extension.ts prefixBytes) — and the framed message comes
// back transferred, no copy. It is the thread's allocation, not a pooled page, and goes back to
// the thread (transferred again) once the request and its transport let go of it, for the
// thread's next message (worker.ts keepMessage). A thread that dies or overruns its bound fails no
// request: its jobs are decoded on the main thread from the same shared body, and a new thread is
// started for the next job.
//
// A thread idle for DECODE_THREAD_IDLE_MS is ended. While it lives its isolate keeps what its
// decodes grew — heap pages, and the shared bodies its heap still references until its own GC,
// which an idle isolate never runs — about 100 MB after a burst of 600 KB bodies, mutated or not,
// that a burst of bad requests then left in RSS for good (bench/mutate.js; bench/RESULTS.md,
// "Memory after a burst of bad requests"). Ending the thread returns all of it; the next large
// body starts a new one (tens of ms, once per burst).
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { RequestBuffers } from '../../buffers/pool';
import { keeps } from '../../buffers/reclaim';
import { Spares } from '../../buffers/warm';
import { type ErrorCode, GatewayError } from '../../errors';
import type { Frame } from '../../infer/framed-message';
import type { Ledger } from '../../infer/ledger';
import { type DecodedBody, decodeWholeBody, type WholeBodyOptions } from '../v2-body';
import type { inference } from '../../../proto/services';
import { DECODE_THREAD, type DecodeJob, type DecodeResult, type Recycled, type SerializedError } from './worker';

/** A body read whole, as the ingress hands it over: its chunks and their total length. */
interface WholeBody {
  readonly chunks: readonly Buffer[];
  readonly length: number;
}

/**
 * The compiled thread script: next to this file in dist/, and, when this file runs from its
 * TypeScript source (the test runner), the one `npm run build` wrote (tests build first).
 */
export const DECODE_WORKER_FILE = __filename.endsWith('.ts')
  ? resolve(__dirname, '../../../dist/gateway/decode/threads/worker.js')
  : join(__dirname, 'worker.js');

/** A job that runs longer than this is taken from its thread (ended) and decoded on the main thread. */
const JOB_TIMEOUT_MS = 60_000;

/** A thread without a job for this long is ended (see the top of the file). */
export const DECODE_THREAD_IDLE_MS = 5000;

/**
 * Shared bodies kept for the next job: at most SPARE_BODIES, each at most SPARE_BODY_MAX_BYTES,
 * dropped once none was taken for DECODE_THREAD_IDLE_MS. A fresh one is a fresh mmap whose every
 * page faults while the body is gathered into it: a 600 KB FP32 tensor's 860 KB of JSON cost more
 * in faults than in the copy (bench/RESULTS.md). One is taken again only for a body it fits
 * without wasting more than a quarter of it.
 */
export const SPARE_BODIES = 2;
export const SPARE_BODY_MAX_BYTES = 16 * 1024 * 1024;

export interface DecodePoolOptions {
  /** limits.decodeThreads: threads at most, started when first needed; 0: every body on the main thread. */
  readonly threads: number;
  /** limits.decodeThreadMinBytes: smaller bodies are decoded on the main thread. */
  readonly minBytes: number;
  /** The thread script (tests give one that fails). */
  readonly file?: string;
  readonly jobTimeoutMs?: number;
  readonly idleMs?: number;
}

interface Thread {
  readonly worker: Worker;
  readonly jobs: Set<number>;
  /** Ends the thread once it has had no job for idleMs; set while it has none. */
  idle?: NodeJS.Timeout;
}

interface Pending {
  readonly thread: Thread;
  readonly timer: NodeJS.Timeout;
  readonly ledger: Ledger;
  readonly resolve: (d: DecodedBody) => void;
  readonly reject: (err: unknown) => void;
  /** The same decode on the main thread, from the shared body: when the thread is lost. */
  readonly fallback: () => DecodedBody;
  /** The job's shared body: kept for the next job once the thread answered (it reads it no more). */
  readonly body: SharedArrayBuffer;
  readonly owner: RequestBuffers | undefined;
}

export class DecodePool {
  readonly #threads: Thread[] = [];
  readonly #jobs = new Map<number, Pending>();
  readonly #file: string;
  readonly #timeoutMs: number;
  /** The script exists (not when the sources run unbuilt): otherwise every body stays on the main thread. */
  readonly #available: boolean;
  readonly #idleMs: number;
  readonly #spare: Spares<SharedArrayBuffer>;
  /** Ends the reclaim's count of the spare bodies as kept (buffers/reclaim.ts keeps). */
  readonly #unkeep: () => void;
  #nextId = 0;
  #closed = false;
  /** Jobs decoded on the main thread because their thread was lost (tests read it). */
  fallbacks = 0;
  /** Threads ended for being idle (tests read it). */
  retired = 0;
  /** Messages whose memory went back to their thread (tests read it). */
  recycled = 0;

  constructor(private readonly o: DecodePoolOptions) {
    this.#file = o.file ?? DECODE_WORKER_FILE;
    this.#timeoutMs = o.jobTimeoutMs ?? JOB_TIMEOUT_MS;
    this.#idleMs = o.idleMs ?? DECODE_THREAD_IDLE_MS;
    this.#spare = new Spares<SharedArrayBuffer>(SPARE_BODIES, this.#idleMs);
    // Live while kept; once dropped (a SharedArrayBuffer cannot be detached) they are garbage, and
    // the level rises by them for the reclaim's quiet-time collection to find.
    this.#unkeep = keeps(() => this.#spare.bytes);
    this.#available = o.threads > 0 && existsSync(this.#file);
  }

  /**
   * Whether a body goes to a thread: a JSON body (no Inference-Header-Content-Length) of at least
   * minBytes. Never an empty one: that is a raw request, which reads the model's inputs.
   */
  wants(bodyBytes: number, ihcl: string | string[] | undefined): boolean {
    return this.#available && ihcl === undefined && bodyBytes > 0 && bodyBytes >= this.o.minBytes && !this.#closed;
  }

  /**
   * decodeWholeBody on a thread; `frame` frames the message if it falls back to the main thread.
   * `owner`: the request's buffers, which adopt the thread's message, so that its memory goes back
   * to the thread for another message once nothing reads it (buffers/pool.ts).
   */
  decode(body: WholeBody, ihcl: string | string[] | undefined, options: WholeBodyOptions, frame: Frame, ledger: Ledger,
    owner?: RequestBuffers): Promise<DecodedBody> {
    const spare = this.#spare.take(body.length);
    const shared = spare ?? new SharedArrayBuffer(body.length);
    const view = Buffer.from(shared, 0, body.length);
    let at = 0;
    for (const c of body.chunks) at += c.copy(view, at);
    ledger.copied('decode', body.length);
    if (spare === undefined) ledger.allocated('decode');
    // Only what decoding a JSON body reads of the model's configuration (refuseBytesClassification;
    // raw bodies, which read the inputs, are not sent here): the rest need not be cloned.
    const output = options.config.output.map((x) => ({ name: x.name, data_type: x.data_type }));
    const slim: WholeBodyOptions = { ...options, config: { output } as unknown as inference.ModelConfig };
    const fallback = (): DecodedBody => decodeWholeBody([view], body.length, ihcl, options, frame, ledger);
    if (this.#closed) return Promise.resolve().then(fallback);
    const thread = this.#pick();
    const id = this.#nextId++;
    const job: DecodeJob = { id, body: shared, length: body.length, ihcl, options: slim };
    return new Promise<DecodedBody>((resolve, reject) => {
      const timer = setTimeout(() => void thread.worker.terminate(), this.#timeoutMs).unref();
      this.#jobs.set(id, { thread, timer, ledger, resolve, reject, fallback, body: shared, owner });
      clearTimeout(thread.idle);
      thread.idle = undefined;
      thread.jobs.add(id);
      thread.worker.postMessage(job);
    });
  }

  /** Ends every thread; their jobs still running are decoded on the main thread. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#spare.clear();
    this.#unkeep();
    await Promise.allSettled(this.#threads.map((t) => t.worker.terminate()));
  }

  /** Keeps a body no job reads any more for the next one (within SPARE_BODIES and SPARE_BODY_MAX_BYTES). */
  #giveBody(s: SharedArrayBuffer): void {
    if (s.byteLength <= SPARE_BODY_MAX_BYTES && !this.#closed) this.#spare.keep(s);
  }

  /** Shared bodies kept for the next job (tests read it). */
  get spareBodies(): number {
    return this.#spare.count;
  }

  /** The thread with the fewest jobs, or a new one while fewer than `threads` run and none is idle. */
  #pick(): Thread {
    let best: Thread | undefined;
    for (const t of this.#threads) if (best === undefined || t.jobs.size < best.jobs.size) best = t;
    if (best !== undefined && (best.jobs.size === 0 || this.#threads.length >= this.o.threads)) return best;
    const worker = new Worker(this.#file, { workerData: DECODE_THREAD });
    // The thread never keeps the process alive: a request waiting for it is held by its server.
    worker.unref();
    const thread: Thread = { worker, jobs: new Set() };
    worker.on('message', (r: DecodeResult) => this.#settle(thread, r));
    // An uncaught error ends the thread: 'exit' follows and takes its jobs back.
    worker.on('error', () => undefined);
    worker.on('exit', () => this.#lost(thread));
    this.#threads.push(thread);
    return thread;
  }

  #settle(thread: Thread, r: DecodeResult): void {
    const job = this.#jobs.get(r.id);
    if (job === undefined) return;
    this.#jobs.delete(r.id);
    thread.jobs.delete(r.id);
    clearTimeout(job.timer);
    if (thread.jobs.size === 0) thread.idle = setTimeout(() => this.#retire(thread), this.#idleMs).unref();
    // The thread answered: it read the body and holds nothing of it (the request came back cloned).
    this.#giveBody(job.body);
    if ('error' in r) {
      job.reject(rebuildError(r.error));
      return;
    }
    job.ledger.copied('decode', r.copied, r.copies);
    job.ledger.allocated('decode', r.allocations);
    const message = Buffer.from(r.message, 0, r.messageBytes);
    job.owner?.adopt(message, () => this.#recycle(thread, r.message));
    job.resolve({ request: r.request, message, encoding: r.encoding });
  }

  /** A message's memory nothing reads any more: back to its thread (moved, not copied), if it lives. */
  #recycle(thread: Thread, memory: ArrayBuffer): void {
    if (this.#closed || !this.#threads.includes(thread) || memory.byteLength > SPARE_BODY_MAX_BYTES) return;
    const back: Recycled = { recycle: memory };
    thread.worker.postMessage(back, [memory]);
    this.recycled++;
  }

  /** Ends an idle thread; taken out of the pool first, so no job is given to it meanwhile. */
  #retire(thread: Thread): void {
    if (thread.jobs.size > 0) return;
    const i = this.#threads.indexOf(thread);
    if (i < 0) return;
    this.#threads.splice(i, 1);
    this.retired++;
    void thread.worker.terminate();
  }

  /** A thread ended (crash, timeout, close): its jobs are decoded here; the next job starts a new one. */
  #lost(thread: Thread): void {
    clearTimeout(thread.idle);
    const i = this.#threads.indexOf(thread);
    if (i >= 0) this.#threads.splice(i, 1);
    for (const id of thread.jobs) {
      const job = this.#jobs.get(id)!;
      this.#jobs.delete(id);
      clearTimeout(job.timer);
      this.fallbacks++;
      try {
        job.resolve(job.fallback());
      } catch (err) {
        job.reject(err);
      }
    }
    thread.jobs.clear();
  }
}

/** The error decoding threw in the thread, as the main thread would have thrown it. */
function rebuildError(e: SerializedError): Error {
  if (e.code !== undefined) return new GatewayError(e.code as ErrorCode, e.message, { status: e.status, plain: e.plain });
  const err = new Error(e.message);
  err.name = e.name;
  return err;
}
