// Logs: pino, JSON lines. One access line per request at info; payloads are never logged.
import pino, { type Logger } from 'pino';
import { HOPS, hopRecord } from '../infer/ledger';
import type { RequestRecord } from './record';
import { RECENT_ID_CHARS } from './recent';

/** The hop being read (Ledger.read): one record for every request's hops, read one at a time. */
const HOP = hopRecord();

/**
 * pino to stdout through an asynchronous destination: the access line of each request must not
 * cost a synchronous write(2) on the request path (measured: bench/telemetry-cost.js). `flush`
 * empties the buffer at shutdown. `base` adds fields to every line (a cluster worker's number and pid).
 */
export function createLogger(level: string, base: Readonly<Record<string, unknown>> = {}): { log: Logger; flush: () => void } {
  const destination = pino.destination({ dest: 1, sync: false });
  const log = pino({ level, base: { service: 'tensorgate', ...base } }, destination);
  return {
    log,
    flush: () => {
      try {
        destination.flushSync();
      } catch {
        // not ready yet (nothing written): nothing to flush
      }
    },
  };
}

export function accessLine(log: Logger, r: RequestRecord): void {
  if (!log.isLevelEnabled('info')) return;
  const line: Record<string, unknown> = {
    route: r.route, method: r.method, status: r.status, duration_ms: (r.endNs - r.startNs) / 1e6,
  };
  if (r.protocol !== undefined) line.protocol = r.protocol;
  if (r.model !== undefined) line.model = r.model;
  if (r.version !== undefined && r.version !== '') line.version = r.version;
  if (r.encoding !== undefined) line.encoding_in = r.encoding;
  if (r.encodingOut !== undefined) line.encoding_out = r.encodingOut;
  if (r.errorCode !== undefined) line.error_code = r.errorCode;
  // Cut as on /dashboard (telemetry/recent.ts): a body's id may be as long as the body.
  if (r.requestId !== undefined) line.request_id = r.requestId.length > RECENT_ID_CHARS ? r.requestId.slice(0, RECENT_ID_CHARS) : r.requestId;
  if (r.retries !== undefined) line.retries = r.retries;
  // OpenAI API generations (docs/openai.md "Telemetry"): time to first token, per output token, tokens a second.
  if (r.firstTokenNs !== undefined) {
    const tokens = r.outputTokens ?? 0;
    line.ttft_ms = (r.firstTokenNs - r.startNs) / 1e6;
    line.output_tokens = tokens;
    if (tokens > 1 && r.lastTokenNs !== undefined && r.lastTokenNs > r.firstTokenNs) {
      const ms = (r.lastTokenNs - r.firstTokenNs) / 1e6;
      line.tpot_ms = ms / (tokens - 1);
      line.tokens_per_s = (tokens - 1) / (ms / 1e3);
    }
  }
  if (r.pool !== undefined) {
    line.pool = r.pool;
    line.route_decision = r.routeDecision;
    if (r.mirror !== undefined) line.mirror = r.mirror;
  }
  if (r.rpc !== undefined) {
    line.rpc = r.rpc;
    if (r.grpcStatus !== undefined) line.grpc_status = r.grpcStatus;
    if (r.backend !== undefined) line.backend = r.backend;
    line.bytes_in = r.bytesIn ?? 0;
    if (r.firstByteNs !== undefined && r.firstByteNs !== 0) line.first_byte_ms = (r.firstByteNs - r.startNs) / 1e6;
  }
  // Who, never with what: the key's id or the token's sub (auth/guard.ts), not the credential.
  if (r.auth !== undefined) {
    line.auth = r.auth.outcome;
    line.auth_method = r.auth.method;
    if (r.auth.subject !== undefined && r.auth.subject !== '') line.auth_subject = r.auth.subject;
  }
  if (r.limited !== undefined) {
    line.limited = r.limited.reason;
    line.limit = r.limited.limit;
  }
  // What the request used, in the units of quotas (auth/quotas.ts): what a bill is made of.
  if (r.usage !== undefined) line.usage = r.usage;
  if (r.ledger !== undefined) {
    const hops: Record<string, number> = {};
    const at: Record<string, number> = {};
    let copied = 0;
    let copies = 0;
    for (const hop of HOPS) {
      const h = r.ledger.read(hop, HOP);
      copied += h.bytesCopied;
      copies += h.copies;
      if (h.startNs !== 0 && h.endNs !== 0) {
        hops[hop] = (h.endNs - h.startNs) / 1e6;
        at[hop] = (h.startNs - r.startNs) / 1e6;
      }
    }
    line.bytes_in = r.ledger.bytesIn('ingress_read');
    line.bytes_copied = copied;
    line.copies = copies;
    if (r.ledger.sharedMemoryBytes > 0) line.bytes_shared_memory = r.ledger.sharedMemoryBytes;
    line.hops_ms = hops;
    // When each hop began: with cut-through, upstream_send starts before ingress_read ends.
    line.hops_at_ms = at;
  }
  // Every answer's, counted where it is written (REST) or forwarded (gRPC): streams and errors too.
  if (r.bytesOut !== undefined) line.bytes_out = r.bytesOut;
  if (r.incomplete === true) line.incomplete = true;
  log.info(line, 'request');
}
