// The configuration schema: one table of options. Each option has a dotted key (its place in
// the YAML file), a type, a default, and is reachable as a flag and a TENSORGATE_* variable
// derived from the key. --help, validation and docs/config-options.md (renderConfigDoc) come from here.
import { availableParallelism } from 'node:os';
import { parse as parseYaml } from 'yaml';
import { type DeclarativeRoute, type PassthroughRoute, parsePassthrough, parseRoutes } from './routes';
import { API_CATEGORIES, type ApiCategory, isApiCategory, parseRestriction, type Restriction } from '../api-access';
import { type ModelRoute, parseModelRoutes, parsePools, type PoolSpec } from './pools';
import { addressProblem } from './address';
import { type LimitsConfig, NO_LIMITS, parseLimits } from '../auth/limits';
import { type OpenAiModel, parseOpenAiModels } from './openai';

export interface Config {
  readonly server: {
    readonly host: string;
    readonly port: number;
    readonly metricsPort: number;
    readonly corsOrigin: string;
    /** workers > 1: each worker binds its own SO_REUSEPORT socket (else the cluster's shared handle). */
    readonly reusePort: boolean;
    /** How long close() (SIGTERM, SIGINT) lets requests in flight finish before it cuts them. */
    readonly drainTimeoutMs: number;
    /** SIGTERM/SIGINT: how long /readyz says 503 while everything is still served, before the drain. */
    readonly drainGraceMs: number;
    /** Node's headersTimeout: the request line and headers must arrive within this (408). */
    readonly headersTimeoutMs: number;
    /** Node's requestTimeout: the whole request (headers and body) must arrive within this; 0 = none. */
    readonly requestTimeoutMs: number;
    /** Node's keepAliveTimeout: an idle keep-alive connection is closed after this. */
    readonly keepAliveTimeoutMs: number;
    /** An answer given before the body was read drains at most this much of the rest ... */
    readonly discardBodyBytes: number;
    /** ... for at most this long, then the connection is closed (ingress/body.ts discardRest). */
    readonly discardBodyMs: number;
    /** Node's maxHeaderSize: the request line and headers together; past it, 431. */
    readonly maxHeaderBytes: number;
    /** Header fields per request; past it, 431 (older Node's own maxHeadersCount dropped the rest silently). */
    readonly maxHeaderCount: number;
    /** Request target (path and query); past it, 414. */
    readonly maxUrlBytes: number;
    /** Cleartext HTTP/1.1 requests of the hot inference routes served by our own loop (ingress/http1/fast.ts). */
    readonly fastPath: boolean;
    /** Small V2 infer requests served as planned requests (pipeline/infer-planned.ts). */
    readonly plannedInfer: boolean;
    /** Planned requests that repeat served by the compiled lane (ingress/http1/lane.ts, gateway/native/lane.c). */
    readonly compiledLane: boolean;
    /** HTTPS on server.port when cert and key are set (ingress/tls.ts); '' = plain HTTP. */
    readonly tls: TlsConfig;
    /** The gRPC port: HTTP/2 and gRPC only, on framing of our own (ingress/grpc-port/). */
    readonly grpc: {
      readonly enabled: boolean;
      readonly port: number;
    };
    /** HTTP/2 on server.port (h2c by prior knowledge, h2 by ALPN): the session limits (ingress/h2.ts). */
    readonly h2: {
      readonly maxConcurrentStreams: number;
      readonly maxSessionMemoryMb: number;
      readonly streamWindowBytes: number;
      readonly connectionWindowBytes: number;
      readonly maxResetsPerSecond: number;
      readonly maxUnreadAnswerBytes: number;
      readonly unreadAnswerMs: number;
    };
  };
  /** Gateway processes (node:cluster); 1 = a single process, no cluster. `auto` is resolved at load. */
  readonly workers: number;
  readonly upstream: {
    readonly backends: readonly string[];
    readonly transport: 'h2' | 'grpc-js';
    readonly http2Client: 'node' | 'own';
    readonly cutThrough: boolean;
    readonly timeoutMs: number;
    /** Triton's own --grpc-restricted-protocol groups: their header goes along as triton-grpc-protocol-<key>. */
    readonly restricted: readonly Restriction[];
    // The live backend set (upstream/backends/backend-set.ts) and safe retries (upstream/backends/retry.ts).
    readonly dnsRefreshMs: number;
    readonly healthCheckIntervalMs: number;
    readonly healthyThreshold: number;
    readonly unhealthyThreshold: number;
    readonly ejectAfterFailures: number;
    readonly ejectionBaseMs: number;
    readonly maxEjectionPercent: number;
    readonly retries: number;
    /** More backend sets beside upstream.backends (the "default" pool), and the models they serve (config/pools.ts). */
    readonly pools: readonly PoolSpec[];
    readonly models: readonly ModelRoute[];
    readonly picking: 'least-request' | 'round-robin';
    readonly modelRefreshMs: number;
    readonly mirrorMaxInFlight: number;
    /** Triton's queue per model for least-request (upstream/backends/queue-metrics.ts); port 0: off. */
    readonly queueMetrics: { readonly port: number; readonly intervalMs: number };
    /** TLS to Triton (upstream/connections/tls.ts); '' = unset. TLS is on when `ca` is set. */
    readonly tls: {
      readonly ca: string;
      readonly cert: string;
      readonly key: string;
      readonly serverName: string;
    };
    /** Tensors handed to Triton through system shared memory (upstream/shared-memory/region-pool.ts); sidecar only. */
    readonly sharedMemory: {
      readonly enabled: boolean;
      readonly regions: number;
      readonly regionBytes: number;
      readonly prefix: string;
    };
  };
  readonly api: {
    readonly restricted: readonly Restriction[];
    readonly disabled: readonly ApiCategory[];
  };
  /** Authentication (gateway/auth/): static keys and JWTs, each granting API groups and models. Off by default. */
  readonly auth: {
    readonly enabled: boolean;
    readonly keysFile: string;
    readonly keyHeader: string;
    readonly open: readonly ApiCategory[];
    readonly jwt: {
      readonly jwksUrl: string;
      readonly jwksFile: string;
      readonly issuer: string;
      readonly audience: string;
      readonly algorithms: readonly string[];
      readonly clockToleranceS: number;
      readonly groupsClaim: string;
      readonly modelsClaim: string;
      readonly fetchTimeoutMs: number;
      readonly cacheMaxAgeMs: number;
      readonly cooldownMs: number;
    };
    /** Per-identity rate and concurrency limits (auth/limits.ts); a key's own are in the key file. */
    readonly limits: LimitsConfig;
  };
  readonly limits: {
    readonly maxInputSizeBytes: number;
    readonly maxBodyBytes: number;
    readonly growYoungGeneration: boolean;
    /** Requests being served at once by this process (probes apart); past it, 503 GW_ERR_REQUEST_OVERLOADED. */
    readonly maxInFlightRequests: number;
    /** Sum of the Content-Length of the requests being served; past it, 503 GW_ERR_REQUEST_OVERLOADED. */
    readonly maxInFlightBodyBytes: number;
    /** Threads that decode large V2 JSON bodies off the main thread (decode/threads/pool.ts); 0: none. */
    readonly decodeThreads: number;
    /** Bodies read whole at least this long go to a decode thread. */
    readonly decodeThreadMinBytes: number;
    /** Parts a multipart/form-data upload may have (decode/multipart.ts). */
    readonly multipartMaxParts: number;
  };
  readonly telemetry: {
    readonly serverTiming: boolean;
    readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
    readonly tracing: boolean;
    readonly traceExporter: 'otlp' | 'console';
    readonly otlpEndpoint: string;
    readonly serviceName: string;
    /** The ring of recent requests behind the metrics port's /dashboard (telemetry/recent.ts). */
    readonly recent: { readonly size: number; readonly perSecond: number };
  };
  readonly v1: {
    readonly statusFormat: 'tfserving' | 'kserve';
  };
  /** TorchServe's inference API (routes/torchserve.ts). */
  readonly torchserve: {
    readonly enabled: boolean;
  };
  readonly binary: {
    readonly headerless: boolean;
  };
  /** Triton's SageMaker frontend shapes (routes/sagemaker.ts), off unless enabled. */
  readonly sagemaker: {
    readonly enabled: boolean;
    readonly defaultModel: string;
    readonly inferenceType: 'infer' | 'generate' | 'generate_stream';
    readonly pingMode: 'ready' | 'live';
  };
  /** Triton's Vertex AI frontend shapes (routes/vertex-ai.ts), off unless enabled. */
  readonly vertexAi: {
    readonly enabled: boolean;
    readonly predictRoute: string;
    readonly healthRoute: string;
    readonly defaultModel: string;
  };
  readonly buffers: {
    /** Idle bytes the message buffer pool keeps for reuse at most; 0 disables it (buffers/pool.ts). */
    readonly poolBytes: number;
  };
  /** The OpenAI-compatible API (routes/openai.ts, gateway/config/openai.ts). */
  readonly openai: {
    readonly enabled: boolean;
    readonly prefix: string;
    readonly timeoutMs: number;
    readonly models: readonly OpenAiModel[];
  };
  /** Declarative routes for hand-rolled REST clients (gateway/config/routes.ts). */
  readonly routes: readonly DeclarativeRoute[];
  /** Pass-through routes to HTTP upstreams. */
  readonly passthrough: readonly PassthroughRoute[];
  readonly demo: boolean;
}

export interface TlsConfig {
  /** PEM certificate chain file; '' = no TLS. */
  readonly cert: string;
  /** PEM private key file of `cert`. */
  readonly key: string;
  /** PEM CA bundle: set, every client must present a certificate it signed (mTLS). */
  readonly clientCa: string;
  readonly minVersion: 'TLSv1.2' | 'TLSv1.3';
  /** OpenSSL cipher list; '' = forward-secret suites only (config/tls.ts DEFAULT_TLS_CIPHERS). */
  readonly ciphers: string;
}

type Kind =
  | { type: 'string'; allowEmpty?: boolean }
  | { type: 'port' }
  | { type: 'int'; min: number; max: number }
  | { type: 'workers'; max: number }
  | { type: 'bool' }
  | { type: 'enum'; values: readonly string[] }
  | { type: 'addresses' }
  | { type: 'categories' }
  | { type: 'names'; values: readonly string[] }
  | { type: 'restrictions' }
  | { type: 'routes' }
  | { type: 'passthrough' }
  | { type: 'pools' }
  | { type: 'modelRoutes' }
  | { type: 'openaiModels' }
  | { type: 'limits' };

/** Kinds that are lists: the flag is repeatable and every occurrence counts. */
export function isListKind(k: Kind): boolean {
  return k.type === 'addresses' || k.type === 'categories' || k.type === 'names' || k.type === 'restrictions';
}

export interface OptionSpec {
  readonly key: string;
  readonly kind: Kind;
  readonly default: unknown;
  /** Long flag name without dashes; repeatable for lists. */
  readonly flag: string;
  readonly doc: string;
}

/** JWS algorithms with a public key (RFC 7518 §3.1, RFC 8037): what auth.jwt.algorithms may list. */
const JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

export const OPTIONS: readonly OptionSpec[] = [
  { key: 'server.host', kind: { type: 'string' }, default: '0.0.0.0', flag: 'host',
    doc: 'Address the HTTP server binds.' },
  { key: 'server.port', kind: { type: 'port' }, default: 8000, flag: 'port',
    doc: 'HTTP port for clients (Triton\'s HTTP default): HTTP/1.1 and HTTP/2 with prior knowledge (h2c) on the same port, or h2 and HTTP/1.1 by ALPN with `server.tls.cert`. 0 picks a free port.' },
  { key: 'server.metricsPort', kind: { type: 'port' }, default: 8002, flag: 'metrics-port',
    doc: 'Port of the Prometheus endpoint `/metrics` (Triton\'s default). 0 picks a free port.' },
  { key: 'server.corsOrigin', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'cors-origin',
    doc: 'Empty: no CORS. Set: answers carry `Access-Control-Allow-Origin` with this value and expose `Server-Timing` and `Inference-Header-Content-Length`; preflights are answered.' },
  { key: 'server.fastPath', kind: { type: 'bool' }, default: true, flag: 'fast-path',
    doc: 'Cleartext HTTP/1.1 requests to V2 infer (`POST /v2/models/{m}[/versions/{v}]/infer`, every body form) are read and answered by the gateway\'s own HTTP/1.1 loop instead of node:http: a strict head parser, the body pushed from the socket\'s reads to the decoders, the answer written in one `writev`. Any other request, and any head outside the parser\'s strict subset (docs/architecture.md "The HTTP/1.1 fast path"), hands its connection to node:http, which keeps it. Same answers, limits, timeouts, auth and drain either way; HTTPS and HTTP/2 are not affected. `false` (`--fast-path=false`): node:http reads every request.' },
  { key: 'server.plannedInfer', kind: { type: 'bool' }, default: true, flag: 'planned-infer',
    doc: 'With `server.fastPath`: a V2 infer request with a body of at most 1 MiB (8 MiB where `server.compiledLane` serves and the model\'s outputs are all FP32 or integers: their repeats are C\'s) — raw, binary extension or JSON (base64 staged as the handler stages it) — is served as a planned request — its body gathered by reference as it is read, then decoded, sent to Triton whole and answered without node:http-like request and response objects nor the route\'s chain of steps — when its model\'s configuration is cached, is not decoupled and bounds its outputs to 64 KiB, and the request asks for no compression nor `grpc-timeout`; so is a V1 predict (TF-Serving / KServe-V1) of at most as much asking for neither, once its model\'s metadata is cached (docs/architecture.md "Planned requests"). Same answers, records, hops, limits and drain as the route\'s handler; routes behind `auth` are never planned. `false`: every request takes the handler.' },
  { key: 'server.compiledLane', kind: { type: 'bool' }, default: true, flag: 'compiled-lane',
    doc: 'With `server.fastPath` and `server.plannedInfer`: a planned request whose HTTP head, binary-extension header and answer repeat, byte for byte, ones served before is served by the compiled lane (`gateway/native/lane.c`, built by `npm run build` where there is a C compiler and libuv\'s `uv.h`) — read, sent to Triton over HTTP/2 and answered in C from what was kept of the first, with the same answer bytes, records and hops — and anything else is given back to the fast path on the same connection (docs/architecture.md "What a planned request costs, and the layer below it"). Used only where the configuration decides every such request the same way: one backend given as an IPv4 address and port, cleartext, no pools, no model table, no restricted protocols, no shared memory, no tracing, no CORS, and the `h2` transport; otherwise, or where the lane was not built, the fast path serves as before. `false`: the fast path serves every request.' },
  { key: 'server.reusePort', kind: { type: 'bool' }, default: true, flag: 'reuse-port',
    doc: 'With `workers` > 1: every worker binds its own socket with `SO_REUSEPORT` and the kernel spreads connections over them. `false`, or a platform without `SO_REUSEPORT`: the workers share the primary\'s socket (node:cluster round robin). See docs/workers.md.' },
  { key: 'server.drainTimeoutMs', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 10_000, flag: 'drain-timeout-ms',
    doc: 'Shutdown (SIGTERM, SIGINT, close()): the gateway stops accepting, closes idle keep-alive connections at once and lets requests in flight finish for this long; then it closes the connections still open and cancels their upstream calls, so a client that never finishes its upload cannot hold the process. 10 s fits in Kubernetes\' default 30 s grace period; answers that take longer (upstream.timeoutMs) are cut. 0 cuts at once. A process stopped by a signal exits 0 when nothing had to be cut, 3 when requests were (docs/production.md).' },
  { key: 'server.drainGraceMs', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 0, flag: 'drain-grace-ms',
    doc: 'Shutdown by signal (SIGTERM, SIGINT): `/readyz` answers 503 at once, and for this long everything else goes on as before — open connections and new ones are served — so load balancers that route by readiness or lag behind Kubernetes\' endpoint removal stop sending first; then the drain of `server.drainTimeoutMs` begins. A second signal ends the grace early. 0 (as Traefik\'s `requestAcceptGraceTimeout`) drains at once; on Kubernetes 5000 or more, with `terminationGracePeriodSeconds` above grace + drain + 5 s (docs/production.md).' },
  { key: 'server.headersTimeoutMs', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 10_000, flag: 'headers-timeout-ms',
    doc: 'A client must send the request line and all headers within this (Node\'s `headersTimeout`, checked every min(1 s, a quarter of it)); else it gets 408 `GW_ERR_REQUEST_TIMEOUT` and the connection is closed. 10 s is Envoy\'s edge recommendation (`request_headers_timeout`); Node\'s own 60 s let slow-header connections hold the gateway for up to 90 s. Must not exceed `server.requestTimeoutMs`. With TLS (`server.tls.cert`) it also bounds the handshake. See docs/production.md.' },
  { key: 'server.requestTimeoutMs', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 300_000, flag: 'request-timeout-ms',
    doc: 'A client must send the whole request, headers and body, within this (Node\'s `requestTimeout`); else it gets 408 `GW_ERR_REQUEST_TIMEOUT` (when no answer has begun) and the connection is closed. The answer\'s time is not counted (that is `upstream.timeoutMs`). 300 s is both Node\'s default and Envoy\'s edge `request_timeout`; a 2 GiB upload needs about 60 Mbit/s to fit. 0 turns it off.' },
  { key: 'server.keepAliveTimeoutMs', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 65_000, flag: 'keep-alive-timeout-ms',
    doc: 'An idle keep-alive connection is closed after this (Node\'s `keepAliveTimeout`). 65 s outlasts the common load balancers\' idle timeouts (AWS ALB 60 s), so the gateway never closes a connection a balancer in front of it is about to reuse (the 502 race Node\'s documentation describes); facing clients directly, Node\'s 5 s frees descriptors sooner. A drain closes idle connections at once whatever this is.' },
  { key: 'server.discardBodyBytes', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 16 * 1024 * 1024, flag: 'discard-body-bytes',
    doc: 'An answer given before the body was read (413, 503, 401, 404, …) reads and drops at most this many more body bytes, so the client can see the answer before the connection closes (a close with unread data is a TCP reset that may destroy the answer on the client side); past it the connection is closed. A declared rest within it keeps the connection alive; a larger or chunked one is answered with `Connection: close`. 16 MiB: a client that sent a tensor of ordinary size to a mistyped model still reads its 404 instead of a reset (HTTP clients such as undici report the failed upload, not the answer); never the gigabyte a client declared.' },
  { key: 'server.discardBodyMs', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 5000, flag: 'discard-body-ms',
    doc: 'The time bound of the same drain: the connection is closed this long after the early answer, whatever was read. 5 s is nginx\'s `lingering_timeout`; an idle keep-alive connection may stay far longer (`server.keepAliveTimeoutMs`).' },
  { key: 'server.maxHeaderBytes', kind: { type: 'int', min: 1024, max: 1024 * 1024 }, default: 16 * 1024, flag: 'max-header-bytes',
    doc: 'Bytes of the request line and all header fields together (Node\'s `maxHeaderSize`, whose default this is); past it the request gets 431 `GW_ERR_REQUEST_HEADERS_TOO_LARGE` and the connection is closed. A URL longer than this is refused by this bound too. See docs/production.md, "HTTP limits".' },
  { key: 'server.maxHeaderCount', kind: { type: 'int', min: 1, max: 10_000 }, default: 100, flag: 'max-header-count',
    doc: 'Header fields per request; more is 431 `GW_ERR_REQUEST_HEADERS_TOO_LARGE` and the connection is closed. 100 is Envoy\'s `max_headers_count` default. (Older Node releases drop the fields past their `maxHeadersCount` without a word; the gateway enforces its bound itself on every release.)' },
  { key: 'server.maxUrlBytes', kind: { type: 'int', min: 64, max: 1024 * 1024 }, default: 8192, flag: 'max-url-bytes',
    doc: 'Length of the request target (path and query); longer is 414 `GW_ERR_REQUEST_URL_TOO_LONG`. 8 KiB is nginx\'s `large_client_header_buffers` line bound; inference URLs are short.' },
  { key: 'server.tls.cert', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'tls-cert',
    doc: 'PEM certificate chain file: set with `server.tls.key`, the gateway serves HTTPS (ALPN `h2` and `http/1.1`) on `server.port` instead of plain HTTP. The files are read again when their directory changes (a Kubernetes Secret swapping its `..data` symlink, a renewal) and the new certificate serves new connections without a restart; a reload that fails keeps the old one and is logged and counted (`tensorgate_tls_reloads_total`). See docs/production.md, "TLS".' },
  { key: 'server.tls.key', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'tls-key',
    doc: 'PEM private key file of `server.tls.cert` (unencrypted).' },
  { key: 'server.tls.clientCa', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'tls-client-ca',
    doc: 'PEM CA bundle: set, every client must present a certificate signed by one of these CAs, or the handshake is refused (mutual TLS). Reloaded like the certificate.' },
  { key: 'server.tls.minVersion', kind: { type: 'enum', values: ['TLSv1.2', 'TLSv1.3'] }, default: 'TLSv1.2', flag: 'tls-min-version',
    doc: 'Oldest TLS version accepted; older clients are refused in the handshake. TLS 1.0 and 1.1 are deprecated (RFC 8996) and cannot be chosen.' },
  { key: 'server.tls.ciphers', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'tls-ciphers',
    doc: 'OpenSSL cipher list (`ECDHE-ECDSA-AES128-GCM-SHA256:…`, TLS 1.3 suites by their `TLS_AES_…` names). Empty: forward secrecy only — at TLS 1.2 ECDHE with AES-GCM or ChaCha20-Poly1305, TLS 1.3\'s suites as they are (docs/production.md "TLS"); set it for a compliance profile, naming TLS 1.3 suites too or TLS 1.3 is off.' },
  { key: 'server.grpc.enabled', kind: { type: 'bool' }, default: false, flag: 'grpc-port-enabled',
    doc: 'Opens `server.grpc.port`: a port for gRPC clients alone (as Triton\'s own gRPC port), HTTP/2 on the gateway\'s own framing instead of node:http2\'s server, which costs a pass-through call about half its CPU (docs/architecture.md "The gRPC port"). Its calls are the gRPC pass-through\'s, with the same auth, limits, records and drain as on `server.port`, and the same HTTP/2 bounds (`server.h2.*`, `server.maxHeaderBytes`, `server.maxHeaderCount`); with `server.tls.cert` it is h2 over TLS (ALPN `h2`), else h2c with prior knowledge. A request that is not gRPC gets 415. `server.port` goes on serving gRPC next to REST either way.' },
  { key: 'server.grpc.port', kind: { type: 'port' }, default: 8001, flag: 'grpc-port',
    doc: 'Port of `server.grpc.enabled` (Triton\'s gRPC default). 0 picks a free port.' },
  { key: 'server.h2.maxConcurrentStreams', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 100, flag: 'h2-max-concurrent-streams',
    doc: 'HTTP/2 (h2c and h2 share `server.port` with HTTP/1.1): streams one client connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS); more are refused with RST_STREAM REFUSED_STREAM, which clients retry. 100 is Envoy\'s default and RFC 9113 §6.5.2\'s advised minimum. Every stream is also a request for `limits.maxInFlightRequests`. See docs/production.md, "HTTP/2".' },
  { key: 'server.h2.maxSessionMemoryMb', kind: { type: 'int', min: 1, max: 4096 }, default: 32, flag: 'h2-max-session-memory-mb',
    doc: 'Memory one HTTP/2 connection may hold in Node\'s HTTP/2 layer (header tables, frames queued to send; Node\'s `maxSessionMemory`, whose default is 10); past it new streams are refused with ENHANCE_YOUR_CALM until it falls. 32 MiB leaves room for answers of a few MB queued on several streams.' },
  { key: 'server.h2.streamWindowBytes', kind: { type: 'int', min: 65_535, max: 2 ** 31 - 1 }, default: 1024 * 1024, flag: 'h2-stream-window-bytes',
    doc: 'HTTP/2 flow control: request body bytes a client may send on one stream before the gateway has read them (SETTINGS_INITIAL_WINDOW_SIZE). HTTP/2\'s 64 KiB default needs a round trip per 64 KiB, slow for tensors of MBs over any distance; 1 MiB, with the connection window below, bounds what one connection can make the gateway buffer.' },
  { key: 'server.h2.connectionWindowBytes', kind: { type: 'int', min: 65_535, max: 2 ** 31 - 1 }, default: 8 * 1024 * 1024, flag: 'h2-connection-window-bytes',
    doc: 'HTTP/2 flow control: body bytes all streams of one connection may have sent and the gateway not yet read (the connection window). 8 MiB: eight streams uploading at full speed.' },
  { key: 'server.h2.maxResetsPerSecond', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 200, flag: 'h2-max-resets-per-second',
    doc: 'Rapid reset (CVE-2023-44487): an HTTP/2 connection on which more streams than this end in a reset (RST_STREAM with an error code, either side) within one second gets GOAWAY ENHANCE_YOUR_CALM and is closed. Clients cancel a few calls, not hundreds a second. Node\'s own bound (nghttp2\'s reset rate limit) stays on below it: measured on Node 24.21, a client resetting streams in a loop got GOAWAY INTERNAL_ERROR after about 1000 of them.' },
  { key: 'server.h2.maxUnreadAnswerBytes', kind: { type: 'int', min: 65_535, max: 2 ** 31 - 1 }, default: 32 * 1024 * 1024, flag: 'h2-max-unread-answer-bytes',
    doc: 'Slow readers: answer bytes one HTTP/2 connection\'s streams may hold for a client that is not reading them (its flow-control window closed): an answer built whole counts its size less what the client took; an answer streamed from Triton (binary outputs) what is queued plus what its paused upstream call has buffered (at most the upstream stream window, 1 MiB; Triton holds the rest). While they hold more, the newest stream holding anything is reset (RST_STREAM CANCEL), its upstream call cancelled, and logged and counted as `GW_ERR_REQUEST_ANSWER_UNREAD`; the only stream holding anything is never reset for it, so one answer of any size still goes out. 32 MiB keeps 3 connections × 30 streams that open no window under 150 MB of RSS. See docs/production.md, "HTTP/2".' },
  { key: 'server.h2.unreadAnswerMs', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 30_000, flag: 'h2-unread-answer-ms',
    doc: 'Slow readers: an HTTP/2 stream whose queued answer has not moved (no byte taken by the client) for this long is reset (RST_STREAM CANCEL) and logged and counted as `GW_ERR_REQUEST_ANSWER_UNREAD`. 0: no bound.' },
  { key: 'workers', kind: { type: 'workers', max: 256 }, default: 1, flag: 'workers',
    doc: 'Gateway processes: `auto` (one per core, `os.availableParallelism()`) or N. 1 is a single process, no cluster; more starts a node:cluster primary that forks N workers, each with its own upstream sessions, and serves `/metrics` summed over them (docs/workers.md).' },
  { key: 'upstream.backends', kind: { type: 'addresses' }, default: [], flag: 'backend',
    doc: 'Triton gRPC addresses: `host:port` (one backend), `dns:///name:port` (every A/AAAA record of the name is a backend, resolved again every `upstream.dnsRefreshMs` and when a backend fails; a Kubernetes headless service), or `unix:/path` (a sidecar\'s Triton on a Unix domain socket: Triton started with `--grpc-address unix:/run/triton/grpc.sock` listens on that path with `:<its gRPC port>` appended, so `unix:/run/triton/grpc.sock:8001`; docs/production.md). Repeat the flag; comma-separated in the variable. Requests go round robin over the ready ones (docs/production.md).' },
  { key: 'upstream.dnsRefreshMs', kind: { type: 'int', min: 100, max: 2 ** 31 - 1 }, default: 30_000, flag: 'dns-refresh-ms',
    doc: 'How often `dns:///` backends are resolved again; addresses that left the answer are drained (no new calls, running ones finish), new ones join.' },
  { key: 'upstream.healthCheckIntervalMs', kind: { type: 'int', min: 100, max: 2 ** 31 - 1 }, default: 5000, flag: 'health-check-interval-ms',
    doc: 'Interval of the active health check of each ready backend (`grpc.health.v1.Health/Check`, SERVING when Triton is ready; timeout min(interval, 1 s)). A backend that is not ready is checked again sooner: 100 ms doubling up to 2 s (or this interval), ±20 % jitter.' },
  { key: 'upstream.healthyThreshold', kind: { type: 'int', min: 1, max: 100 }, default: 2, flag: 'healthy-threshold',
    doc: 'Consecutive passed checks that bring an unhealthy backend back to ready (a new backend needs one).' },
  { key: 'upstream.unhealthyThreshold', kind: { type: 'int', min: 1, max: 100 }, default: 3, flag: 'unhealthy-threshold',
    doc: 'Consecutive failed checks that make a backend unhealthy (no more calls until it passes `upstream.healthyThreshold`).' },
  { key: 'upstream.ejectAfterFailures', kind: { type: 'int', min: 1, max: 10_000 }, default: 5, flag: 'eject-after-failures',
    doc: 'Consecutive calls failing on the connection or with UNAVAILABLE that eject a backend (passive outlier detection, Envoy\'s default 5).' },
  { key: 'upstream.ejectionBaseMs', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 30_000, flag: 'ejection-base-ms',
    doc: 'An ejection lasts this × the backend\'s number of ejections, at most 10 × (Envoy: 30 s base, 300 s max).' },
  { key: 'upstream.maxEjectionPercent', kind: { type: 'int', min: 0, max: 100 }, default: 50, flag: 'max-ejection-percent',
    doc: 'Most backends ejected at once, in percent of the set; the last backend is never ejected.' },
  { key: 'upstream.retries', kind: { type: 'int', min: 0, max: 5 }, default: 1, flag: 'upstream-retries',
    doc: 'A call that never reached Triton (connection refused, stream refused or GOAWAY before it was accepted, backend gone before the call started) is sent again on another ready backend this many times, within the request\'s deadline; never after a cut-through request\'s first DATA frame, never for a sequence request (`sequence_id`). 0 disables.' },
  { key: 'upstream.pools', kind: { type: 'pools' }, default: [], flag: 'pools',
    doc: 'More backend sets beside `upstream.backends` (which is the pool named `default`): a mapping of pool name → `{backends: [host:port | dns:///name:port | unix:/path, …]}`, each pool optionally with its own `healthCheckIntervalMs`, `healthyThreshold`, `unhealthyThreshold`, `ejectAfterFailures`, `ejectionBaseMs` and `maxEjectionPercent` (else `upstream.*`\'s). `upstream.models` says which models a pool serves. A backend belongs to one pool. As a flag or variable: the mapping in YAML/JSON flow syntax. See docs/production.md, "Pools and the model table".' },
  { key: 'upstream.models', kind: { type: 'modelRoutes' }, default: [], flag: 'models',
    doc: 'The model table: a list of `{model, pool}` or `{model, split: {<pool>: <weight>, …}}`, each optionally with `header: <name>` and `mirror: {pool, percent}`. Calls for a model whose name matches `model` (a name, or a pattern where `*` is any run of characters) go to that pool, or to the split\'s pools in proportion to their weights (smooth weighted round robin: every run of calls has each pool\'s exact share, interleaved); a request whose `header` names one of the entry\'s pools goes there (a client pinned to a variant); with `mirror`, a copy of `percent` % of the calls (evenly spaced) also goes to that pool, its answer discarded, never delaying nor changing the client\'s (bounded by `upstream.mirrorMaxInFlight`; the h2 transport and the gRPC pass-through). The first match wins; other models go to the `default` pool. REST, generate, the control routes and the gRPC pass-through all follow it; each decision is in the access log (`pool`, `route_decision`), the span and `tensorgate_upstream_routed_total`. As a flag or variable: the list in YAML/JSON flow syntax.' },
  { key: 'upstream.picking', kind: { type: 'enum', values: ['least-request', 'round-robin'] }, default: 'least-request', flag: 'picking',
    doc: 'How a call\'s backend is chosen among the ready ones of its pool that have its model: `least-request` weighs the round-robin choice against one other backend drawn at random and takes the one with fewer calls in flight from this process (the power of two choices; with equal loads it is round robin); `round-robin` ignores load. Sequence requests always go to the backend their key picks.' },
  { key: 'upstream.mirrorMaxInFlight', kind: { type: 'int', min: 1, max: 100_000 }, default: 32, flag: 'mirror-max-in-flight',
    doc: 'Mirror calls (`upstream.models` `mirror`) running at once in this process; a copy that would pass it is dropped, not queued, and counted (`tensorgate_upstream_mirrored_total{outcome="dropped"}`), so a slow or dead mirror pool never holds the primary calls nor grows memory past this many copies of a request.' },
  { key: 'upstream.queueMetrics.port', kind: { type: 'port' }, default: 0, flag: 'queue-metrics-port',
    doc: 'Triton\'s metrics port (its `--metrics-port`, 8002 by default) on every backend\'s host; set, least-request picking adds the requests waiting in that Triton\'s queue for the call\'s model (`nv_inference_pending_request_count`) to the calls this process has in flight there, so it sees the load of other clients and other gateway replicas. Read every `upstream.queueMetrics.intervalMs`; a backend whose page has not been read for three intervals counts only this process\'s calls. 0: off.' },
  { key: 'upstream.queueMetrics.intervalMs', kind: { type: 'int', min: 100, max: 60_000 }, default: 1000, flag: 'queue-metrics-interval-ms',
    doc: 'How often each backend\'s metrics page is read for `upstream.queueMetrics.port`; each read is bounded at 1 s, and a page that cannot be read keeps the last one read for three intervals.' },
  { key: 'upstream.modelRefreshMs', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 5000, flag: 'model-refresh-ms',
    doc: 'How often each backend\'s ready models are read (Triton\'s repository index, `ready` only): a call goes only to backends that have its model ready, so a model loaded on one replica at runtime becomes routable within this interval, and an answer that a model is unknown on a backend takes it off that backend at once. A backend whose index has not been read yet counts as having every model; when no backend of the pool is known to have the model, any is asked (Triton\'s own 404 then reaches the client). 0: never read (every backend serves every model).' },
  { key: 'upstream.transport', kind: { type: 'enum', values: ['h2', 'grpc-js'] }, default: 'h2', flag: 'transport',
    doc: 'Data plane for inference calls: `h2`, our own gRPC on node:http2 (no extra copies, carries every Triton message), or `grpc-js` (@grpc/grpc-js).' },
  { key: 'upstream.http2Client', kind: { type: 'enum', values: ['node', 'own'] }, default: 'own', flag: 'http2-client',
    doc: 'The HTTP/2 client under every gRPC call to Triton on the `h2` transport and the gRPC pass-through: `node` (node:http2) or `own`, the gateway\'s own HTTP/2 framing on a socket (gateway/upstream/h2/: HPACK, flow control per RFC 9113, no Duplex stream per call), which costs less CPU per call. Both behave alike: retries, deadlines, TLS, GOAWAY, resets. See docs/architecture.md#the-upstream-http2-client.' },
  { key: 'upstream.cutThrough', kind: { type: 'bool' }, default: true, flag: 'cut-through',
    doc: 'Forward binary-extension and raw bodies that have a Content-Length to Triton as they arrive (h2 transport): the call starts once the JSON header is decoded and body chunks go upstream by reference, so the gateway holds O(chunk) per request. `--cut-through=false` buffers each request whole first (compressed and chunked bodies always are). See docs/cut-through.md.' },
  { key: 'upstream.timeoutMs', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 60_000, flag: 'upstream-timeout-ms',
    doc: 'Deadline of each upstream call, sent to Triton as `grpc-timeout`.' },
  { key: 'upstream.tls.ca', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'upstream-tls-ca',
    doc: 'PEM file of the CA that signs Triton\'s gRPC server certificate. Set: every connection to Triton (inference, control and stream calls, health checks) uses TLS and verifies Triton\'s certificate against it (tritonserver `--grpc-use-ssl`); empty: plaintext. Reloaded when the file changes (docs/production.md "TLS to Triton").' },
  { key: 'upstream.tls.cert', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'upstream-tls-cert',
    doc: 'PEM file of the client certificate sent to Triton, for `--grpc-use-ssl-mutual` (with `upstream.tls.key`; needs `upstream.tls.ca`). Reloaded when it changes: its directory is watched (a Kubernetes Secret\'s `..data` swap included), new connections use the new certificate, open ones keep theirs; a reload that fails keeps the old one, logged and counted (`tensorgate_upstream_tls_reload_failures_total`).' },
  { key: 'upstream.tls.key', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'upstream-tls-key',
    doc: 'PEM file of the private key of `upstream.tls.cert`; reloaded with it.' },
  { key: 'upstream.tls.serverName', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'upstream-tls-server-name',
    doc: 'The name Triton\'s certificate is checked against and sent as SNI and `:authority`, instead of the backend\'s host (gRPC\'s `ssl_target_name_override`): for backends addressed by IP or by a name the certificate does not carry.' },
  // Shared-memory sidecar mode (README "Shared-memory mode"): off by default.
  { key: 'upstream.sharedMemory.enabled', kind: { type: 'bool' }, default: false, flag: 'shared-memory',
    doc: 'Sidecar only, Triton on the same host or pod sharing `/dev/shm`: binary-extension and raw tensors are written from the client\'s socket into system shared-memory regions the gateway registers with Triton (`SystemSharedMemoryRegister`), and `ModelInfer` carries only the region, offset and byte size of each such input, so Triton reads the tensor from memory instead of a gRPC message. Outputs of a size the model config fixes, asked for as binary, are placed after the inputs: Triton writes them there and the answer is read from the region. A request finds no free region, or its tensors do not fit one: it goes the normal way (counted in `tensorgate_shared_memory_fallbacks_total`). Regions are unregistered and removed on shutdown; those a killed gateway left are reclaimed by name at start. Needs one `host:port` backend, the `h2` transport and `upstream.cutThrough`.' },
  { key: 'upstream.sharedMemory.regions', kind: { type: 'int', min: 1, max: 1024 }, default: 8, flag: 'shared-memory-regions',
    doc: 'Regions in the pool: how many requests may use shared memory at once (each holds one region from its first tensor byte to Triton\'s answer, or, with outputs in it, until the answer is written).' },
  { key: 'upstream.sharedMemory.regionBytes', kind: { type: 'int', min: 4096, max: 2 ** 31 - 1 }, default: 32 * 1024 * 1024, flag: 'shared-memory-region-bytes',
    doc: 'Size of each region: the largest sum of a request\'s binary tensors sent through shared memory (outputs that do not fit after the inputs come back the normal way). A region is a sparse file under `/dev/shm`: it takes memory only as far as tensors have filled it, but keeps that memory until shutdown, so the pool may hold up to `regions` × this (count it against the pod\'s memory limit, `/dev/shm` being an `emptyDir` of medium `Memory`).' },
  { key: 'upstream.sharedMemory.prefix', kind: { type: 'string' }, default: 'tensorgate', flag: 'shared-memory-prefix',
    doc: 'Region names are `<prefix>-<pid>-<n>` (the same for the file under `/dev/shm` and the name registered with Triton). At start, regions of this prefix whose process is gone (a gateway killed with SIGKILL) are unregistered at Triton and their files removed. Gateways sharing one Triton and one `/dev/shm` from different pid namespaces need different prefixes.' },
  { key: 'upstream.restricted', kind: { type: 'restrictions' }, default: [], flag: 'upstream-restricted',
    doc: 'Triton\'s own `--grpc-restricted-protocol` groups, same syntax as `api.restricted`: calls of those categories carry the gRPC metadata `triton-grpc-protocol-<key>: <value>`.' },
  { key: 'api.restricted', kind: { type: 'restrictions' }, default: [], flag: 'api-restricted',
    doc: 'Restricted API groups in Triton\'s `--http-restricted-api` syntax `<category>[,<category>...]:<key>=<value>`: requests need header `<key>` with exactly `<value>`, else 403 `This API is restricted, expecting header \'<key>\'`. Repeat the flag; entries are `;`-separated in the variable. A category in two entries or an unknown one is a configuration error; naming a category here enables it even if `api.disabled` lists it.' },
  { key: 'api.disabled', kind: { type: 'categories' }, default: ['model-repository', 'shared-memory', 'trace', 'logging'], flag: 'api-disabled',
    doc: `API groups answered with 403 whatever the headers (categories: ${API_CATEGORIES.join(', ')}); \`none\` enables all. An edge gateway keeps the administrative groups off until configured.` },
  // Authentication (docs/production.md "Authentication"): off by default, for a sidecar on localhost.
  { key: 'auth.enabled', kind: { type: 'bool' }, default: false, flag: 'auth',
    doc: 'Require credentials on every route whose API group is not in `auth.open`: a static key of `auth.keysFile` or a JWT (`auth.jwt.*`), sent as `Authorization: Bearer <token>` (or in `auth.keyHeader`). Missing or invalid credentials: 401 with `WWW-Authenticate: Bearer realm="tensorgate"`; valid ones without the group or the model: 403 (`GW_ERR_AUTH_*`, docs/errors.md). Needs `auth.keysFile` or a JWKS; off, those keys are a configuration error. Off by default: a sidecar on localhost trusts its pod.' },
  { key: 'auth.keysFile', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'auth-keys-file',
    doc: 'YAML file of static keys: `keys: [{id, token, groups, models?}]`; `token` is `sha256:<hex>` of the token (preferred: `printf %s "$TOKEN" | sha256sum`) or the token itself (at least 16 characters); `groups` lists API groups or is `"*"`; `models`, when given, are the only models the key may call. Held as SHA-256 digests and compared in constant time. Reloaded when its directory changes (a Kubernetes Secret\'s `..data` swap included); a file that does not load keeps the previous keys, logged and counted (`tensorgate_auth_reloads_total`).' },
  { key: 'auth.keyHeader', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'auth-key-header',
    doc: 'A header that may carry the key instead of `Authorization: Bearer` (e.g. `X-API-Key`); empty: only `Authorization`. The credential\'s header is removed once checked, so a pass-through upstream never sees it.' },
  { key: 'auth.open', kind: { type: 'categories' }, default: ['health'], flag: 'auth-open',
    doc: `API groups served without credentials when auth is on (categories: ${API_CATEGORIES.join(', ')}); \`none\` guards them all. \`health\` by default, as Triton keeps health outside its restricted groups by default: Kubernetes probes of \`/v2/health/*\` carry no credentials. \`/healthz\`, \`/readyz\` and the metrics port are always open.` },
  { key: 'auth.jwt.jwksUrl', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'auth-jwks-url',
    doc: 'Verify bearer tokens that are JWTs against the JSON Web Key Set at this http(s) URL (your identity provider\'s `jwks_uri`), fetched when first needed, cached for `auth.jwt.cacheMaxAgeMs` and fetched again for an unknown `kid` at most once per `auth.jwt.cooldownMs`. A JWKS that cannot be fetched answers 503 `GW_ERR_AUTH_UNAVAILABLE`.' },
  { key: 'auth.jwt.jwksFile', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'auth-jwks-file',
    doc: 'Verify JWTs against the JSON Web Key Set in this file instead (reloaded when its directory changes, as `auth.keysFile`). Give `auth.jwt.jwksUrl` or this, not both.' },
  { key: 'auth.jwt.issuer', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'auth-jwt-issuer',
    doc: 'Required `iss` of a JWT; empty: not checked.' },
  { key: 'auth.jwt.audience', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'auth-jwt-audience',
    doc: 'Required `aud` of a JWT (one of its values); empty: not checked. Set it when the issuer signs tokens for other services too.' },
  { key: 'auth.jwt.algorithms', kind: { type: 'names', values: JWT_ALGORITHMS }, default: ['RS256', 'PS256', 'ES256', 'ES384', 'EdDSA'], flag: 'auth-jwt-algorithms',
    doc: `Signature algorithms a JWT may use (of ${JWT_ALGORITHMS.join(', ')}); asymmetric only, so a public JWKS cannot be used to forge tokens.` },
  { key: 'auth.jwt.clockToleranceS', kind: { type: 'int', min: 0, max: 3600 }, default: 60, flag: 'auth-jwt-clock-tolerance-s',
    doc: 'Clock skew allowed when checking a JWT\'s `exp`, `nbf` and `iat`, in seconds (Envoy\'s jwt_authn default is 60). A JWT must have an `exp`.' },
  { key: 'auth.jwt.groupsClaim', kind: { type: 'string' }, default: 'scope', flag: 'auth-jwt-groups-claim',
    doc: 'Claim whose values name the API groups a JWT may use: a space-separated string (OAuth 2.0 `scope`) or a list; values that name no API group are ignored.' },
  { key: 'auth.jwt.modelsClaim', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'auth-jwt-models-claim',
    doc: 'Claim listing the models a JWT may call (space-separated string or list); a token without it may call every model. Empty: tokens are not restricted by model.' },
  { key: 'auth.limits', kind: { type: 'limits' }, default: NO_LIMITS, flag: 'auth-limits',
    doc: 'Rate and concurrency limits of JWTs, and the default of every identity without its own (an API key\'s own are its `limits` in `auth.keysFile`): a mapping `{default?, subjects?: {<sub>: L}, groupsClaim?, groups?: {<group>: L}}`, each `L` being `{rate?, burst?, concurrency?, quotas?}` — `rate` requests per second refilled continuously (0.5 = one every 2 s), `burst` the bucket\'s size (default: the rate rounded up), `concurrency` requests in flight, `quotas` a list of `{unit, per, max, policy?}`: at most `max` `requests`, `inferences` (batch size), `inputBytes`, `outputBytes` or `tokens` (OpenAI generations: prompt + completion) per UTC `minute`, `hour`, `day` or calendar `month`; `policy` `hard` (default: 429 `GW_ERR_AUTH_QUOTA_EXHAUSTED` with `Retry-After` at the window\'s end) or `soft` (let in with `X-Quota-Warning`; docs/production.md "Quotas and usage"). `usageKeys` (default 20): identities with a `key` label of their own in `tensorgate.usage`, the rest `other`. A request must pass its own limit (the key\'s, its `sub`\'s, or `default`, each identity a bucket of its own) and that of each group its `groupsClaim` claim names (one bucket shared by the group). Past one: 429 `GW_ERR_AUTH_RATE_LIMITED` with `Retry-After`, or `GW_ERR_AUTH_CONCURRENCY_LIMITED`; gRPC RESOURCE_EXHAUSTED; before the body is read. Without a store, limits are counted per gateway: by the process, or with `workers` > 1 by the cluster\'s primary for all its workers; M replicas let through M times as much (docs/production.md "Workers without a store"). `store: redis://[[user]:password@]host[:port][/db]` (`rediss://` for TLS) counts them in Redis for every worker and replica (docs/production.md "Shared limits on Redis"); checked at start (a wrong password, no answer within 3 s: exit 2). `storeFailure` (`open`, `closed`, `local`; default `local`) says what a request with limits meets while the store does not answer: let in, 503 `GW_ERR_AUTH_LIMITS_UNAVAILABLE`, or this process\'s own limits; `storeTimeoutMs` (default 5, at most 1000) is the longest a request waits for the store. Without a store, `storeFailure` and `storeTimeoutMs` apply to the cluster\'s primary (`workers` > 1). As a flag or variable: the mapping in YAML/JSON flow syntax.' },
  { key: 'auth.jwt.fetchTimeoutMs', kind: { type: 'int', min: 1, max: 60_000 }, default: 5000, flag: 'auth-jwks-timeout-ms',
    doc: 'Time allowed for fetching `auth.jwt.jwksUrl` (jose\'s `timeoutDuration`).' },
  { key: 'auth.jwt.cacheMaxAgeMs', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 600_000, flag: 'auth-jwks-cache-ms',
    doc: 'How long fetched keys are used before the JWKS is fetched again (jose\'s `cacheMaxAge`).' },
  { key: 'auth.jwt.cooldownMs', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 30_000, flag: 'auth-jwks-cooldown-ms',
    doc: 'Least time between two fetches of the JWKS caused by tokens with an unknown `kid` (jose\'s `cooldownDuration`): a client cannot make the gateway hammer the identity provider.' },
  { key: 'limits.maxInputSizeBytes', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 64 * 1024 * 1024, flag: 'max-input-size',
    doc: 'Byte budget (Triton\'s `--http-max-input-size`) for the JSON header, each JSON-decoded input, raw and decompressed bodies; also the limit of administrative request bodies and of the control plane\'s gRPC messages.' },
  { key: 'limits.maxBodyBytes', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 2 ** 31 - 1, flag: 'max-body-size',
    doc: 'Largest request body accepted at all (binary tensors included); larger bodies get 413 before they are read.' },
  { key: 'limits.multipartMaxParts', kind: { type: 'int', min: 1, max: 10_000 }, default: 64, flag: 'multipart-max-parts',
    doc: 'Parts (files and text fields) a `multipart/form-data` upload may have; one more is 400 `GW_ERR_DECODE_MULTIPART_INVALID`. Each file part is capped by `limits.maxInputSizeBytes`, all of them together too, and the body as sent by `limits.maxBodyBytes` (docs/dialects.md "Uploads").' },
  { key: 'limits.growYoungGeneration', kind: { type: 'bool' }, default: false, flag: 'grow-young-generation',
    doc: 'Let V8 grow its young generation under load, as Node does by default. Off: it stays at its initial size (V8\'s semi-space growth factor 1, set at start-up), so the many short-lived 64 KiB body buffers, whose memory lives outside the JS heap, are freed by frequent cheap scavenges instead of full collections forced by external-memory pressure: less RSS and CPU for tensor traffic (bench/RESULTS.md, "Young generation").' },
  { key: 'limits.maxInFlightRequests', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 2048, flag: 'max-in-flight-requests',
    doc: 'Requests this process serves at once; one more is answered 503 `GW_ERR_REQUEST_OVERLOADED` with `Retry-After: 1` before its body is read. Probes (`/healthz`, `/readyz`, `/v2/health/*`) are neither shed nor counted. 2048: twice Envoy\'s circuit-breaker default (1024 requests) and twice the 1,000 keep-alive connections of the soak test; an in-flight small request costs tens of KB, so the count bounds memory when bodies are small (docs/production.md).' },
  { key: 'limits.maxInFlightBodyBytes', kind: { type: 'int', min: 1, max: 2 ** 53 - 1 }, default: 1024 * 1024 * 1024, flag: 'max-in-flight-body-bytes',
    doc: 'Sum of the declared `Content-Length` of the requests this process serves at once; a request that would pass it is answered 503 `GW_ERR_REQUEST_OVERLOADED` with `Retry-After: 1` before its body is read. A request larger than the whole bound is still served when no other body is in flight (it is capped by `limits.maxBodyBytes`). A buffered body costs about twice its size (the chunks and the framed message), so 1 GiB keeps bodies under ~2 GiB of memory; set it to about a third of the container\'s memory limit. Chunked bodies declare nothing and count 0 (docs/production.md).' },
  { key: 'limits.decodeThreads', kind: { type: 'int', min: 0, max: 64 }, default: 1, flag: 'decode-threads',
    doc: 'Threads (node:worker_threads, started when first needed) that decode V2 infer bodies read whole — JSON — of at least `limits.decodeThreadMinBytes`, so the main thread keeps serving sockets and Triton while the numbers of a large JSON body are parsed. The body is gathered once into shared memory, the framed message comes back without a copy; a thread that dies fails no request (its bodies are decoded on the main thread, a new thread is started). 0: every body is decoded on the main thread. See docs/production.md, "Decode threads".' },
  { key: 'limits.decodeThreadMinBytes', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 256 * 1024, flag: 'decode-thread-min-bytes',
    doc: 'Smallest body (bytes as read, inflated) that goes to a decode thread; smaller ones are decoded on the main thread, where the hand-off would cost more than the decode.' },
  { key: 'telemetry.serverTiming', kind: { type: 'bool' }, default: true, flag: 'server-timing',
    doc: 'Send a `Server-Timing` header with the hop durations of each inference (docs/telemetry.md).' },
  { key: 'telemetry.logLevel', kind: { type: 'enum', values: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] }, default: 'info', flag: 'log-level',
    doc: 'pino log level; `info` writes one JSON access line per request (payloads are never logged).' },
  { key: 'telemetry.tracing', kind: { type: 'bool' }, default: false, flag: 'tracing',
    doc: 'OpenTelemetry traces: one span per request with the hops as child spans; `traceparent` is forwarded to Triton.' },
  { key: 'telemetry.traceExporter', kind: { type: 'enum', values: ['otlp', 'console'] }, default: 'otlp', flag: 'trace-exporter',
    doc: 'Where spans go when tracing is on: `otlp` (OTLP over HTTP) or `console`.' },
  { key: 'telemetry.otlpEndpoint', kind: { type: 'string' }, default: 'http://127.0.0.1:4318/v1/traces', flag: 'otlp-endpoint',
    doc: 'OTLP/HTTP traces endpoint.' },
  { key: 'telemetry.serviceName', kind: { type: 'string' }, default: 'tensorgate', flag: 'service-name',
    doc: '`service.name` of the metrics and traces resource.' },
  { key: 'telemetry.recent.size', kind: { type: 'int', min: 0, max: 16_384 }, default: 512, flag: 'recent-requests',
    doc: 'Recent requests kept for the `/dashboard` page of the metrics port (docs/telemetry.md "Dashboard"): each with its hops, bytes and copies, in a fixed ring (about 600 bytes a slot); the oldest is overwritten. 0 keeps none.' },
  { key: 'telemetry.recent.perSecond', kind: { type: 'int', min: 1, max: 1_000_000 }, default: 50, flag: 'recent-requests-per-second',
    doc: 'At most this many requests per second enter the ring of `telemetry.recent.size` (one per 1/N s; the others are counted in the metrics only), so its cost per request stays near nothing under load.' },
  { key: 'v1.statusFormat', kind: { type: 'enum', values: ['tfserving', 'kserve'] }, default: 'tfserving', flag: 'v1-status-format',
    doc: 'Body of `GET /v1/models/{m}`: `tfserving`, TF-Serving\'s `{"model_version_status":[…]}`, or `kserve`, KServe V1\'s `{"name","ready"}`.' },
  { key: 'torchserve.enabled', kind: { type: 'bool' }, default: false, flag: 'torchserve',
    doc: 'Answer TorchServe\'s inference API: `POST|PUT /predictions/{model}[/{version}]` (raw body or multipart `data`/`body`), `GET /ping` and `GET /models`, in TorchServe\'s shapes (docs/dialects.md "TorchServe").' },
  { key: 'sagemaker.enabled', kind: { type: 'bool' }, default: false, flag: 'sagemaker',
    doc: 'Serve the routes of Triton\'s SageMaker frontend on the gateway\'s port (docs/dialects.md "SageMaker"): `GET /ping`, `POST /invocations` (the model of `sagemaker.defaultModel`) and `POST /models/{m}/invoke` (the model `X-Amzn-SageMaker-Target-Model` names, else `{m}`), with the `application/vnd.sagemaker-triton.binary+json;json-header-size=N` media type.' },
  { key: 'sagemaker.defaultModel', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'sagemaker-default-model',
    doc: 'The model `POST /invocations` calls (Triton\'s `SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`). Empty: `/invocations` answers 400 `GW_ERR_ROUTE_NO_MODEL`, and only `/models/{m}/invoke` infers.' },
  { key: 'sagemaker.inferenceType', kind: { type: 'enum', values: ['infer', 'generate', 'generate_stream'] }, default: 'infer', flag: 'sagemaker-inference-type',
    doc: 'What `POST /invocations` runs on `sagemaker.defaultModel` (Triton\'s `SAGEMAKER_TRITON_INFERENCE_TYPE`, Triton 2.56 and later): `infer` (V2 infer), `generate` (the generate extension\'s one JSON answer) or `generate_stream` (its server-sent events).' },
  { key: 'sagemaker.pingMode', kind: { type: 'enum', values: ['ready', 'live'] }, default: 'ready', flag: 'sagemaker-ping-mode',
    doc: 'What `GET /ping` answers (Triton\'s `SAGEMAKER_TRITON_PING_MODE`): Triton\'s readiness (`ready`) or liveness (`live`), 200 or 400 with an empty body.' },
  { key: 'vertexAi.enabled', kind: { type: 'bool' }, default: false, flag: 'vertex-ai',
    doc: 'Serve the routes of Triton\'s Vertex AI frontend on the gateway\'s port (docs/dialects.md "Vertex AI"): `vertexAi.healthRoute` and `vertexAi.predictRoute`, `X-Vertex-Ai-Triton-Redirect` and the `application/vnd.vertex-ai-triton.binary+json;json-header-size=N` media type. Needs `vertexAi.defaultModel`.' },
  { key: 'vertexAi.predictRoute', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'vertex-ai-predict-route',
    doc: 'Path of the predict route, matched exactly. Empty: the `AIP_PREDICT_ROUTE` variable Vertex AI sets in the container, as Triton reads it.' },
  { key: 'vertexAi.healthRoute', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'vertex-ai-health-route',
    doc: 'Path of the health route (Triton\'s readiness), matched exactly. Empty: the `AIP_HEALTH_ROUTE` variable Vertex AI sets in the container.' },
  { key: 'vertexAi.defaultModel', kind: { type: 'string', allowEmpty: true }, default: '', flag: 'vertex-ai-default-model',
    doc: 'The model the predict route calls without a redirect (Triton\'s `--vertex-ai-default-model`). Required with `vertexAi.enabled`: Triton picks the repository\'s only model when it is absent, which the gateway does not guess.' },
  { key: 'binary.headerless', kind: { type: 'bool' }, default: true, flag: 'binary-headerless',
    doc: 'Accept the binary extension without `Inference-Header-Content-Length`: when a V2 infer body\'s JSON object ends before the body does and its inputs declare `binary_data_size`, the rest is the binary section (Triton refuses such bodies). `--binary-headerless=false` restores Triton\'s reading. See docs/dialects.md.' },
  { key: 'buffers.poolBytes', kind: { type: 'int', min: 0, max: 2 ** 31 - 1 }, default: 64 * 1024 * 1024, flag: 'buffer-pool-bytes',
    doc: 'Idle bytes kept for reusing the buffers requests are framed in for Triton: size classes are powers of two from 64 KiB to half this value (32 MiB by default), each with 4 KiB of room for the header fields (a 4 MiB tensor takes a 4 MiB page); smaller and larger messages are allocated fresh. A reused buffer saves the page faults of a fresh multi-MB allocation (bench/RESULTS.md, "Buffer pools"); the default keeps fifteen 4 MiB pages or three 16 MiB ones. 0 disables pooling.' },
  { key: 'openai.enabled', kind: { type: 'bool' }, default: true, flag: 'openai',
    doc: 'Serve the OpenAI-compatible API under `openai.prefix` for the models of `openai.models` (docs/openai.md): `GET models`, `GET models/{id}`, `POST completions`, `POST chat/completions`, `POST embeddings`, streamed as server-sent events.' },
  { key: 'openai.prefix', kind: { type: 'string' }, default: '/openai/v1', flag: 'openai-prefix',
    doc: 'Path the OpenAI API is served under (the SDKs\' `base_url` is `http://host:port<prefix>`). `/v1` works too: there, `GET /v1/models/{id}` answers in OpenAI\'s shape for the ids of `openai.models` and keeps the V1 status route for every other model (docs/openai.md "Paths").' },
  { key: 'openai.timeoutMs', kind: { type: 'int', min: 1, max: 2 ** 31 - 1 }, default: 600_000, flag: 'openai-timeout-ms',
    doc: 'Deadline of an OpenAI API request\'s call to Triton, the whole generation streamed or not (sent as `grpc-timeout`; a client\'s own `grpc-timeout` still applies when sooner). Longer than `upstream.timeoutMs`, which bounds one answer: a long generation streams for minutes. 10 minutes is the official SDKs\' own default timeout. When it passes, a stream ends with an error event, a non-streamed request gets 504 `GW_ERR_UPSTREAM_DEADLINE`.' },
  { key: 'openai.models', kind: { type: 'openaiModels' }, default: [], flag: 'openai-models',
    doc: 'The models the OpenAI API offers: a list of `{id, model?, kind: generate|embedding, convention?: vllm|trtllm, chatTemplate?: <path of tokenizer_config.json or a .jinja file>, imageInput?, maxTokens?, output?, toolParser?: llama3_json|mistral|hermes}` (docs/openai.md). `model` is the Triton model (default: the id); `convention` how a generate model takes its inputs (default: from its backend at Triton, `vllm` or `tensorrtllm`); `toolParser` the format the model writes tool calls in (without it, requests with `tools` are refused). With `--demo` and no models given, the demo zoo\'s `tiny_llm`, `tiny_llm_trtllm` and `tiny_embed`. As a flag or variable: the list in YAML/JSON flow syntax.' },
  { key: 'routes', kind: { type: 'routes' }, default: [], flag: 'routes',
    doc: 'Declarative routes for hand-rolled REST clients (docs/dialects.md, config/routes.example.yaml): a list of `{path, model, version?, inputs: {<input>: {from?: <JSON Pointer>, decode?: base64|data-uri|numbers|text, part?: <multipart field name>, body?: <media range or list>, datatype?, shape?}}, parameters?: {<name>: <JSON Pointer> | {from?, part?}}, response?}`: each input from a JSON field, a multipart/form-data part or the raw body, the request\'s media type choosing. As a flag or variable: the list in YAML/JSON flow syntax.' },
  { key: 'passthrough', kind: { type: 'passthrough' }, default: [], flag: 'passthrough',
    doc: 'Pass-through routes (docs/dialects.md): a list of `{prefix, upstream: http(s)://host:port, timeoutMs?, category?}` (default timeout 30000 ms); requests under the prefix go to the upstream, streamed both ways, with the path normalised and no credential header (docs/production.md "What the upstream receives"); the longest matching prefix wins. `category` is the API group the route belongs to for `api.restricted`, `api.disabled` and `auth` (default `inference`). As a flag or variable: the list in YAML/JSON flow syntax.' },
  { key: 'demo', kind: { type: 'bool' }, default: false, flag: 'demo',
    doc: 'Start the reference backend (the demo model zoo) in-process on a free port and use it in place of every configured backend (docs/configuration.md, "The demo backend").' },
];

export function envName(key: string): string {
  return 'TENSORGATE_' + key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').replace(/\./g, '_').toUpperCase();
}

// How list options are split (coerce below): a repeated flag is a list of entries as given.
const FLAG_NOTE: Partial<Record<Kind['type'], string>> = {
  addresses: ' (repeatable)',
  categories: ' (repeatable or comma-separated)',
  names: ' (repeatable or comma-separated)',
  restrictions: ' (repeatable)',
};
const ENV_NOTE: Partial<Record<Kind['type'], string>> = {
  addresses: ' (comma-separated)',
  categories: ' (comma-separated)',
  names: ' (comma-separated)',
  restrictions: ' (`;`-separated)',
};

/** docs/config-options.md (`npm run docs`); a unit test keeps the committed file equal to this. */
export function renderConfigDoc(): string {
  const rows = OPTIONS.map((o) =>
    `| \`${o.key}\` | \`--${o.flag}\`${FLAG_NOTE[o.kind.type] ?? ''} | \`${envName(o.key)}\`${ENV_NOTE[o.kind.type] ?? ''} | ${renderDefault(o.default)} | ${linkPaths(o.doc).replace(/\|/g, '\\|')} |`);
  return [
    '# Configuration options',
    '',
    'Generated from the option table in `gateway/config/schema.ts` (`npm run docs`); a unit test fails when',
    'this file is stale. `tensorgate --help` prints the same table. How the file, the environment and the',
    'flags combine: [configuration.md](configuration.md).',
    '',
    '| key | flag | environment | default | meaning |',
    '|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

function renderDefault(v: unknown): string {
  if (v === NO_LIMITS) return '—';
  if (Array.isArray(v)) return v.length === 0 ? '—' : `\`${v.join(',')}\``;
  return v === '' ? '`""`' : `\`${String(v)}\``;
}

/** Paths of the repository named in a doc become links relative to docs/. */
function linkPaths(doc: string): string {
  return doc.replace(/\b(docs|bench|config)\/([\w.-]+\.(?:md|yaml))\b/g, (path, dir: string, file: string) =>
    `[${path}](${dir === 'docs' ? file : `../${path}`})`);
}

/** Converts a raw value (from YAML, env or a flag) to the option's type, or returns a problem. */
export function coerce(spec: OptionSpec, raw: unknown): { value: unknown } | { problem: string | readonly string[] } {
  const k = spec.kind;
  switch (k.type) {
    case 'string':
      if (typeof raw === 'string' && (raw.length > 0 || k.allowEmpty === true)) return { value: raw };
      return { problem: k.allowEmpty === true ? 'must be a string' : 'must be a non-empty string' };
    case 'bool':
      if (typeof raw === 'boolean') return { value: raw };
      if (raw === 'true' || raw === '1' || raw === '') return { value: true };
      if (raw === 'false' || raw === '0') return { value: false };
      return { problem: `must be true or false, got ${JSON.stringify(raw)}` };
    case 'enum':
      return typeof raw === 'string' && k.values.includes(raw)
        ? { value: raw }
        : { problem: `must be one of ${k.values.join(', ')}, got ${JSON.stringify(raw)}` };
    case 'port':
    case 'int': {
      const min = k.type === 'port' ? 0 : k.min;
      const max = k.type === 'port' ? 65535 : k.max;
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
      return Number.isInteger(n) && n >= min && n <= max
        ? { value: n }
        : { problem: `must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}` };
    }
    case 'workers': {
      if (raw === 'auto') return { value: Math.min(availableParallelism(), k.max) };
      const n = typeof raw === 'number' ? raw : typeof raw === 'string' && /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
      return Number.isInteger(n) && n >= 1 && n <= k.max
        ? { value: n }
        : { problem: `must be auto or an integer in [1, ${k.max}], got ${JSON.stringify(raw)}` };
    }
    case 'addresses':
      return coerceAddresses(raw);
    case 'categories':
      return coerceCategories(raw);
    case 'names':
      return coerceNames(k.values, raw);
    case 'limits':
    case 'routes':
    case 'passthrough':
    case 'pools':
    case 'openaiModels':
    case 'modelRoutes': {
      let v = raw;
      if (typeof raw === 'string') {
        try {
          v = parseYaml(raw);
        } catch (err) {
          return { problem: `not YAML/JSON: ${(err as Error).message}` };
        }
      }
      return STRUCTURED[k.type](v);
    }
    case 'restrictions':
      return coerceRestrictions(raw);
  }
}

/** A list given as a YAML list (of comma-separated strings, too) or one comma-separated string; null otherwise. */
function listItems(raw: unknown): unknown[] | null {
  return Array.isArray(raw) ? raw.flatMap((x: unknown) => (typeof x === 'string' ? x.split(',') : [x])) : typeof raw === 'string' ? raw.split(',') : null;
}

function coerceAddresses(raw: unknown): ReturnType<typeof coerce> {
  const items = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(',') : null;
  if (items === null) return { problem: 'must be a list of host:port, dns:///name:port or unix:/path' };
  const out: string[] = [];
  for (const item of items) {
    const a: unknown = typeof item === 'string' ? item.trim() : item;
    const problem = addressProblem(a);
    if (problem !== undefined) return { problem };
    out.push(a as string);
  }
  return { value: out };
}

function coerceCategories(raw: unknown): ReturnType<typeof coerce> {
  if (raw === 'none' || raw === '' || (Array.isArray(raw) && raw.length === 1 && raw[0] === 'none')) return { value: [] };
  const items = listItems(raw);
  if (items === null) return { problem: 'must be a list of API categories' };
  const out: ApiCategory[] = [];
  for (const item of items) {
    const c = typeof item === 'string' ? item.trim() : '';
    if (!isApiCategory(c)) return { problem: `unknown API category ${JSON.stringify(item)} (known: ${API_CATEGORIES.join(', ')})` };
    if (!out.includes(c)) out.push(c);
  }
  return { value: out };
}

function coerceNames(values: readonly string[], raw: unknown): ReturnType<typeof coerce> {
  const items = listItems(raw);
  if (items === null) return { problem: `must be a list of ${values.join(', ')}` };
  const out: string[] = [];
  for (const item of items) {
    const n = typeof item === 'string' ? item.trim() : '';
    if (!values.includes(n)) return { problem: `${JSON.stringify(item)} is not one of ${values.join(', ')}` };
    if (!out.includes(n)) out.push(n);
  }
  if (out.length === 0) return { problem: `must name at least one of ${values.join(', ')}` };
  return { value: out };
}

function coerceRestrictions(raw: unknown): ReturnType<typeof coerce> {
  const items = Array.isArray(raw) ? raw : typeof raw === 'string' ? raw.split(';').filter((x) => x.trim() !== '') : null;
  if (items === null) return { problem: 'must be a list of <category>[,<category>...]:<key>=<value>' };
  const out: Restriction[] = [];
  for (const item of items) {
    const r = typeof item === 'string' ? parseRestriction(item.trim()) : `${JSON.stringify(item)} is not a string`;
    if (typeof r === 'string') return { problem: r };
    // Triton refuses to start when a category sits in two groups; so do we.
    const twice = r.categories.find((c) => out.some((o) => o.categories.includes(c)));
    if (twice !== undefined) return { problem: `API category '${twice}' is given in more than one restriction` };
    out.push(r);
  }
  return { value: out };
}

/** The parsers of the kinds given as YAML/JSON structures. */
const STRUCTURED: Readonly<Record<'limits' | 'routes' | 'passthrough' | 'pools' | 'openaiModels' | 'modelRoutes', (v: unknown) => ReturnType<typeof coerce>>> = {
  limits: parseLimits,
  routes: parseRoutes,
  passthrough: parsePassthrough,
  pools: parsePools,
  openaiModels: parseOpenAiModels,
  modelRoutes: parseModelRoutes,
};
