// What one finished HTTP request leaves behind for telemetry (metrics, access log, span), and
// the interface through which the ingress reports it. The ingress and the stages never import
// OpenTelemetry or pino: they fill this record; telemetry/telemetry.ts turns it into signals.
import { channel } from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import type { RequestUsage } from '../auth/quotas';
import type { Ledger } from '../infer/ledger';

export interface RequestRecord {
  /** Route name ("infer", "health_ready", …; "unmatched" for 404s). */
  route: string;
  method: string;
  /** network.protocol.version: "1.1" (or "1.0"), "2" for h2c and h2. */
  protocol?: string;
  /** Read and answered by the HTTP/1.1 fast path (ingress/http1/fast.ts), not node:http. */
  fastPath?: true;
  /** Served as a planned request (pipeline/infer-planned.ts): its body gathered whole, no handler chain. */
  planned?: true;
  /** Served by the compiled lane (ingress/http1/lane.ts): in C, from what an earlier request kept. */
  lane?: true;
  status: number;
  startNs: number;
  endNs: number;
  /** Content-Length of the request (0 when absent). */
  declaredBytes: number;
  /** Model named in the path, when the route has one. */
  model?: string;
  version?: string;
  /**
   * Request form of an inference: json | json_base64 | binary | raw | multipart | v1 | v1_base64 | declarative |
   * declarative_base64 | generate (a `_base64` form: some tensor bytes came from base64).
   */
  encoding?: string;
  /** Response form: json | binary. */
  encodingOut?: string;
  errorCode?: string;
  /** The hop ledger of an inference. */
  ledger?: Ledger;
  /** gRPC status of the upstream call, when one was made (0 = OK). */
  upstreamStatus?: number;
  upstreamDurationNs?: number;
  /**
   * Times the upstream call was sent again on another backend, having never reached the first
   * (upstream/backends/retry.ts).
   */
  retries?: number;
  /** The authentication decision (auth/guard.ts), on routes that need credentials. */
  auth?: AuthRecord;
  /** Refused by a per-identity limit (auth/limits.ts): which one (a bounded label) and why. */
  limited?: LimitedRecord;
  /** 'grpc': a call of the gRPC pass-through (passthrough/grpc-ingress.ts); absent: a REST request. */
  rpc?: 'grpc';
  /** gRPC pass-through: the status the client got (from Triton, or the gateway's own). */
  grpcStatus?: number;
  /** gRPC pass-through: message bytes (prefixes included) forwarded to Triton. */
  bytesIn?: number;
  /**
   * The answer's bytes handed to the client's connection: a REST answer's body, whatever wrote it
   * (ingress/counted-response.ts); a gRPC pass-through call's messages, prefixes included.
   */
  bytesOut?: number;
  /**
   * The connection or stream closed before the answer's end (the client went away mid-answer, or
   * the gateway cut it): the status is what was sent, or meant to be, not a complete answer.
   */
  incomplete?: true;
  /** gRPC pass-through: when the upstream's answer headers came (0: never). */
  firstByteNs?: number;
  /** gRPC pass-through: the backend the call went to. */
  backend?: string;
  /** The pool the call went to and why (upstream.models: the entry's pool, a split's draw, a header's pin, none). */
  pool?: string;
  routeDecision?: string;
  /** The pool a copy of the call was mirrored to (upstream.models mirror), when it was. */
  mirror?: string;
  /** The `id` of a V2 inference request's body, when it has one (logged; finds it on /dashboard). */
  requestId?: string;
  /** OpenAI API generations: when the first and the last response with tokens came, and the tokens generated. */
  firstTokenNs?: number | undefined;
  lastTokenNs?: number | undefined;
  outputTokens?: number;
  /** A V2 inference's batch size (auth/quotas.ts "inferences"), when its answer told it. */
  inferences?: number;
  /** What the request used (auth/usage.ts UsageMeter), once it is over: for the access line and tensorgate.usage. */
  usage?: RequestUsage;
  /** tensorgate.usage's bounded `key` label of the request's identity (auth/usage.ts UsageBook). */
  usageKey?: string;
  /** Charges what the request uses as it goes (auth/usage.ts UsageMeter): set at admission for credentials let in. */
  meter?: { tokens(total: number): void; charged(): Promise<void> } | undefined;
}

/** The route name of a gRPC pass-through call: this and the method (passthrough/grpc-ingress.ts). */
export const GRPC_ROUTE_PREFIX = 'grpc ';

/** Who a request was let in as, or why not. Never the credential itself. */
export interface AuthRecord {
  outcome: 'allowed' | 'missing' | 'invalid' | 'forbidden' | 'unavailable';
  method: 'key' | 'jwt' | 'none';
  /** The key's id or the token's `sub`, once the credential was valid. */
  subject?: string;
}

/** A request refused by a per-identity limit: `limit` is `key:<id>`, `subject:<sub>`, `group:<name>` or `default`. */
export interface LimitedRecord {
  limit: string;
  reason: 'rate' | 'concurrency' | 'quota';
}

export interface ObservedRequest {
  /** Trace context to forward to Triton as gRPC metadata (traceparent, tracestate). */
  readonly upstreamHeaders: Readonly<Record<string, string>>;
  /** The request is over (response finished or connection closed). */
  end(record: RequestRecord): void;
}

/** What telemetry reads of an arriving request: an HTTP/1.1 request, or an HTTP/2 stream's headers. */
export type RequestHead = Pick<IncomingMessage, 'headers' | 'method'>;

export interface RequestObserver {
  /** A request arrived and was routed (`route` is the route name, or "unmatched"). */
  start(req: RequestHead, startNs: number, route: string): ObservedRequest;
}

/** The trace context of a request that brought none: one object, never written (it is Readonly). */
const NO_TRACE_CONTEXT: Readonly<Record<string, string>> = Object.freeze({});

/** Forwards an incoming W3C trace context unchanged (what happens when tracing is off). */
export function passThroughTraceContext(req: RequestHead): Readonly<Record<string, string>> {
  const tp = req.headers.traceparent;
  const ts = req.headers.tracestate;
  if (typeof tp !== 'string' && typeof ts !== 'string') return NO_TRACE_CONTEXT;
  const out: Record<string, string> = {};
  if (typeof tp === 'string') out.traceparent = tp;
  if (typeof ts === 'string') out.tracestate = ts;
  return out;
}

/** Published once per HTTP request (a RequestRecord), only when someone listens — tests do. */
export const requestChannel = channel('tensorgate:request');
