// Triton's own queue, per model, for least-request picking (upstream.queueMetrics): each backend's
// metrics port (Triton's --metrics-port, 8002 by default, plain HTTP) is read on an interval, and
// nv_inference_pending_request_count — a gauge of the requests waiting in a model's queue, the
// executing ones not counted — is added to the calls this process has in flight there. That sees
// the load other clients and other gateway replicas put on a replica, which this process's own
// counts cannot. The series of a model that is not loaded are absent, and read as 0.
import { request } from 'node:http';
import { type Backend, modelKey, type SetContext } from './backend';
import { hostAndPort, socketPath } from '../../config/address';

const PENDING = 'nv_inference_pending_request_count';
/** Bounds each read of a backend's metrics page. */
const QUEUE_READ_TIMEOUT_MS = 1000;
/** A metrics page larger than this is not read (Triton's is a few hundred KB for thousands of models). */
export const MAX_METRICS_BYTES = 8 * 1024 * 1024;

/**
 * The pending requests of each model in a Prometheus text page: by modelKey(name) (all versions)
 * and modelKey(name, version). Other families, comments and malformed lines are skipped.
 */
export function pendingByModel(text: string): Map<string, number> {
  const out = new Map<string, number>();
  let at = text.indexOf(PENDING);
  while (at >= 0) {
    const end = text.indexOf('\n', at);
    const line = text.slice(at, end < 0 ? text.length : end);
    const m = /^nv_inference_pending_request_count\{([^}]*)\}\s+([0-9.eE+-]+)\s*$/.exec(line);
    if (m !== null && (at === 0 || text[at - 1] === '\n')) {
      const labels = new Map([...m[1]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
      const model = labels.get('model');
      const value = Number(m[2]);
      if (model !== undefined && Number.isFinite(value)) {
        out.set(modelKey(model), (out.get(modelKey(model)) ?? 0) + value);
        const version = labels.get('version');
        if (version !== undefined && version !== '') out.set(modelKey(model, version), value);
      }
    }
    at = text.indexOf(PENDING, at + PENDING.length);
  }
  return out;
}

/**
 * `host:port` (or `[v6]:port`) with another port; a socket's Triton is this host's (a sidecar's):
 * its metrics are read on 127.0.0.1.
 */
export function withPort(address: string, port: number): string {
  return socketPath(address) === undefined ? address.replace(/:\d+$/, `:${port}`) : `127.0.0.1:${port}`;
}

/**
 * Reads one backend's pending counts from its metrics port: undefined when the page cannot be
 * read in `timeoutMs`, is not 200, or is larger than MAX_METRICS_BYTES.
 */
export function readPending(address: string, port: number, timeoutMs: number): Promise<Map<string, number> | undefined> {
  const { host } = hostAndPort(withPort(address, port));
  return new Promise((resolve) => {
    const req = request({ host, port, path: '/metrics', agent: false, timeout: timeoutMs }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        resolve(undefined);
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_METRICS_BYTES) {
          req.destroy();
          resolve(undefined);
          return;
        }
        chunks.push(c);
      });
      res.on('end', () => resolve(pendingByModel(Buffer.concat(chunks).toString('utf8'))));
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

/** upstream.queueMetrics: a backend's pending counts by model (readPending on its metrics port), every `intervalMs`. */
export interface QueueSource {
  readonly intervalMs: number;
  read(address: string, timeoutMs: number): Promise<ReadonlyMap<string, number> | undefined>;
}

/** Keeps each backend's queue (Backend.pending) read from its Triton, for least-request (picking.ts). */
export class QueueReads {
  readonly #set: SetContext;
  readonly #queue: QueueSource;

  constructor(set: SetContext, queue: QueueSource) {
    this.#set = set;
    this.#queue = queue;
  }

  /** `b` is up: its queue is read now, then on its interval (once started, the reads go on). */
  watch(b: Backend): void {
    if (b.queueTimer === undefined) this.#schedule(b, 0);
  }

  #schedule(b: Backend, ms: number): void {
    this.#set.clock.clearTimeout(b.queueTimer);
    b.queueTimer = this.#set.clock.setTimeout(() => void this.#read(b), ms);
  }

  /**
   * Reads `b`'s queue on its interval, each read bounded at 1 s. A failed read keeps the last one
   * for three intervals, then forgets it (an old queue is worse than none).
   */
  async #read(b: Backend): Promise<void> {
    const queue = this.#queue;
    if (this.#set.closed() || !b.member) return;
    let pending: ReadonlyMap<string, number> | undefined;
    try {
      pending = await queue.read(b.address, QUEUE_READ_TIMEOUT_MS);
    } catch {
      pending = undefined;
    }
    if (this.#set.closed() || !b.member) return;
    const now = this.#set.clock.now();
    if (pending !== undefined) {
      b.pending = pending;
      b.pendingAt = now;
    } else if (now - b.pendingAt > 3 * queue.intervalMs) b.pending = undefined;
    this.#schedule(b, Math.round(queue.intervalMs * (0.9 + 0.2 * this.#set.random())));
  }
}
