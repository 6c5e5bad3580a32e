// The one error table. Every condition the gateway answers by itself has a stable code
// GW_ERR_<STAGE>_<PROBLEM>, an HTTP status, a gRPC status and a message; match on `code`, never
// on `instanceof` (jest's VM realms and worker threads break it). A REST client gets the HTTP
// status, a gRPC client (the pass-through) the gRPC status: both come from this table only.
// docs/errors.md is generated from it and a test keeps them in sync.
//
// Errors Triton itself reports come back over gRPC and become GatewayErrors in one place,
// upstream/status.ts: GW_ERR_UPSTREAM_STATUS with the HTTP status that mapping chose, Triton's
// message verbatim and the gRPC code as a field (`grpcCode`); a gRPC answer made from such an
// error carries that code rather than the table's (grpc/status.ts grpcStatusOf).

/**
 * The closed list of stages a code may name (GW_ERR_<STAGE>_<PROBLEM>); the errors test checks
 * every code against it.
 */
export const STAGES = ['ROUTE', 'REQUEST', 'DECODE', 'MODEL', 'ENCODE', 'UPSTREAM', 'PASSTHROUGH', 'AUTH', 'GATEWAY'] as const;

/**
 * A gRPC status by its name in the gRPC spec (doc/statuscodes.md); grpc/status.ts GrpcStatus gives
 * each its number.
 */
export type GrpcStatusName =
  | 'OK' | 'CANCELLED' | 'UNKNOWN' | 'INVALID_ARGUMENT' | 'DEADLINE_EXCEEDED' | 'NOT_FOUND' | 'ALREADY_EXISTS'
  | 'PERMISSION_DENIED' | 'RESOURCE_EXHAUSTED' | 'FAILED_PRECONDITION' | 'ABORTED' | 'OUT_OF_RANGE'
  | 'UNIMPLEMENTED' | 'INTERNAL' | 'UNAVAILABLE' | 'DATA_LOSS' | 'UNAUTHENTICATED';

export interface ErrorSpec {
  readonly status: number;
  /**
   * The gRPC status a gRPC client is answered with (the pass-through), chosen as Triton's gRPC
   * frontend or gRPC's own libraries answer the same condition.
   */
  readonly grpc: GrpcStatusName;
  /** What the condition means, for docs/errors.md. */
  readonly doc: string;
  /**
   * Triton's HTTP frontend answers this condition with its default `text/plain` content type
   * (errors raised before it starts parsing the request); the others are `application/json`.
   */
  readonly plain?: boolean;
}

export const ERRORS = {
  GW_ERR_ROUTE_NOT_FOUND: {
    status: 404, grpc: 'NOT_FOUND', plain: true,
    doc: 'No route matches the path (Triton\'s own body: `{"error":"Not Found"}`).',
  },
  GW_ERR_ROUTE_METHOD_NOT_ALLOWED: {
    status: 405, grpc: 'UNIMPLEMENTED', plain: true,
    doc: 'The path exists but not for this method (`{"error":"Method Not Allowed"}`).',
  },
  GW_ERR_ROUTE_RESTRICTED: {
    status: 403, grpc: 'UNAVAILABLE', plain: true,
    doc: 'A restricted API group (`api.restricted`) called without its header and value (Triton\'s `This API is restricted, expecting header \'<key>\'`).',
  },
  GW_ERR_ROUTE_DISABLED: {
    status: 403, grpc: 'PERMISSION_DENIED', plain: true,
    doc: 'An API group the gateway does not serve (`api.disabled`; by default model-repository, shared-memory, trace and logging).',
  },
  GW_ERR_ROUTE_GRPC_UNIMPLEMENTED: {
    status: 501, grpc: 'UNIMPLEMENTED',
    doc: 'gRPC pass-through: a method outside `inference.GRPCInferenceService` and `grpc.health.v1.Health/Check`; answered with gRPC status UNIMPLEMENTED (docs/production.md "gRPC pass-through").',
  },
  GW_ERR_ROUTE_REDIRECT_INVALID: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Vertex AI: an `X-Vertex-Ai-Triton-Redirect` that names none of the APIs Triton\'s Vertex AI frontend redirects to (Triton answers 400), or that carries a query, a fragment or a control character; nothing is sent upstream (docs/dialects.md "Vertex AI").',
  },
  GW_ERR_ROUTE_REDIRECT_REFUSED: {
    status: 403, grpc: 'PERMISSION_DENIED',
    doc: 'Vertex AI: an `X-Vertex-Ai-Triton-Redirect` to an API that changes Triton (shared-memory register or unregister, repository load or unload), which Triton\'s Vertex AI frontend refuses with 403, or to `metrics`, which the gateway serves on its metrics port only; nothing is sent upstream.',
  },
  GW_ERR_ROUTE_NO_MODEL: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'SageMaker: `POST /invocations` while `sagemaker.defaultModel` is not set, or an empty `X-Amzn-SageMaker-Target-Model`; nothing is sent upstream (docs/dialects.md "SageMaker").',
  },
  GW_ERR_REQUEST_ENCODING_UNSUPPORTED: {
    status: 415, grpc: 'UNIMPLEMENTED', plain: true,
    doc: 'Request `Content-Encoding` other than gzip, deflate or identity (`Unsupported compression type`); the answer carries `Accept-Encoding: gzip, deflate` (RFC 9110 §15.5.16). Triton answers 501 (docs/differences.md "Client mistakes are 4xx").',
  },
  GW_ERR_REQUEST_HEADER_INVALID: {
    status: 400, grpc: 'INVALID_ARGUMENT', plain: true,
    doc: '`Content-Length`, `Inference-Header-Content-Length` or the `json-header-size` of a SageMaker / Vertex AI binary media type unparsable or out of range, with Triton\'s messages; a `grpc-timeout` header on an inference route that is not a gRPC timeout.',
  },
  GW_ERR_REQUEST_DECOMPRESSED_TOO_LARGE: {
    status: 400, grpc: 'RESOURCE_EXHAUSTED', plain: true,
    doc: 'A compressed body inflates past `limits.maxInputSizeBytes`; inflation stops there (no decompression bombs).',
  },
  GW_ERR_REQUEST_COMPRESSED_INVALID: {
    status: 400, grpc: 'INTERNAL',
    doc: 'Gateway-only: a gzip/deflate body that does not inflate (corrupt data, a truncated stream, bytes that were never compressed); Triton forwards what inflated so far, often nothing (docs/differences.md).',
  },
  GW_ERR_REQUEST_TOO_LARGE: {
    status: 413, grpc: 'RESOURCE_EXHAUSTED',
    doc: 'Gateway-only: the body (declared or counted) exceeds `limits.maxBodyBytes` (default: Triton\'s own 2 GiB - 1 cap); refused before it is read, or as soon as the count passes it. Also chunk extensions past 16 KiB (Node\'s parser).',
  },
  GW_ERR_REQUEST_OVERLOADED: {
    status: 503, grpc: 'UNAVAILABLE',
    doc: 'Gateway-only: this process already serves `limits.maxInFlightRequests` requests, or this request\'s `Content-Length` would take the bodies in flight past `limits.maxInFlightBodyBytes`; refused before its body is read, with `Retry-After: 1`. Probes are never refused (docs/production.md).',
  },
  GW_ERR_REQUEST_GRPC_MESSAGE_TOO_LARGE: {
    status: 413, grpc: 'RESOURCE_EXHAUSTED',
    doc: 'gRPC pass-through: a request message whose length prefix declares more than `limits.maxInputSizeBytes`; answered with gRPC status RESOURCE_EXHAUSTED before any of it is forwarded, and the upstream call is cancelled.',
  },
  GW_ERR_REQUEST_TIMEOUT: {
    status: 408, grpc: 'DEADLINE_EXCEEDED',
    doc: 'Gateway-only: the request line and headers did not arrive within `server.headersTimeoutMs`, or the whole request within `server.requestTimeoutMs`; the connection is closed after the answer.',
  },
  GW_ERR_REQUEST_MALFORMED: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Gateway-only: Node\'s HTTP parser (llhttp) refused the request — among others `Content-Length` together with `Transfer-Encoding` (either order), two `Content-Length` fields, a `Transfer-Encoding` not ending in `chunked`, bare CR or LF, obs-fold, control characters in a field, a malformed chunk (the request-smuggling vectors of RFC 9112 §11.2) — or an HTTP/1.1 request has no `Host`. The message gives llhttp\'s reason; the connection is closed after the answer.',
  },
  GW_ERR_REQUEST_HEADERS_TOO_LARGE: {
    status: 431, grpc: 'RESOURCE_EXHAUSTED',
    doc: 'Gateway-only: the request line and headers exceed `server.maxHeaderBytes` (Node\'s `maxHeaderSize`), or the request has more than `server.maxHeaderCount` header fields (RFC 6585 §5 covers both). When Node\'s parser refuses the head it cannot tell which bound was passed, and the message names both; the connection is closed after that answer.',
  },
  GW_ERR_REQUEST_URL_TOO_LONG: {
    status: 414, grpc: 'INVALID_ARGUMENT',
    doc: 'Gateway-only: the request target (path and query) is longer than `server.maxUrlBytes`.',
  },
  GW_ERR_REQUEST_ANSWER_UNREAD: {
    status: 499, grpc: 'CANCELLED',
    doc: 'HTTP/2 slow reader (a REST answer or a gRPC pass-through call): the client did not read its answer — the streams of its connection held more than `server.h2.maxUnreadAnswerBytes` of unread answers and it was the newest holding any, or its queued answer did not move for `server.h2.unreadAnswerMs`. The stream was reset (RST_STREAM CANCEL) and the upstream call cancelled (logged and counted; nobody reads it).',
  },
  GW_ERR_REQUEST_ANSWER_CUT: {
    status: 499, grpc: 'CANCELLED',
    doc: 'Logged, never sent: an answer whose head went out but whose connection closed before all of it had — destroyed at the drain deadline (`server.drainTimeoutMs`), or closed by the client or the network. The access line keeps the status that was sent, and its `bytes_out` what was handed to the connection (at the drain deadline, no more than what had left it, the head included). A drain that cut answers exits 3 (docs/production.md, "Drain").',
  },
  GW_ERR_REQUEST_ABORTED: {
    status: 400, grpc: 'CANCELLED',
    doc: 'The client closed the connection or the body ended before Content-Length bytes arrived (logged; nobody reads the answer).',
  },
  GW_ERR_DECODE_MALFORMED: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Malformed JSON or a JSON value of the wrong type, with Triton\'s messages (`failed to parse the request JSON buffer: …`, `Unable to parse \'…\': …`); Triton answers these 500 (docs/differences.md "Client mistakes are 4xx"). Nothing is sent upstream.',
  },
  GW_ERR_DECODE_SHM_REGION_RESERVED: {
    status: 403, grpc: 'PERMISSION_DENIED',
    doc: 'Gateway-only, with `upstream.sharedMemory.enabled`: a request names a system shared-memory region of the gateway\'s own (`<prefix>-…`, `upstream.sharedMemory.prefix`) — an input or output `shared_memory_region` of an inference, or the region or key of a register, unregister or status call. Those regions carry other requests\' tensors; nothing is sent upstream (README.md "Shared-memory mode").',
  },
  GW_ERR_DECODE_INVALID: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Well-formed request that breaks the protocol: input content kind, shape, nesting depth, binary sizes, `triton_` parameters, duplicate names, FP16/BF16 in JSON.',
  },
  GW_ERR_DECODE_TOO_LARGE: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'A JSON header, JSON-decoded input or raw body over `limits.maxInputSizeBytes` (Triton\'s --http-max-input-size messages).',
  },
  GW_ERR_DECODE_BASE64_INVALID: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Gateway-only: base64 tensor data (`{"b64": …}`, `content_type: "base64"`, a numeric tensor as one base64 string) that is not base64: a character outside both alphabets, padding before the end, a length of 4k+1, a `data:` URI that is not `;base64,`. The message names the input, the character and its offset.',
  },
  GW_ERR_DECODE_BASE64_SIZE: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Gateway-only: base64 tensor data that decodes to a size other than shape × datatype size; checked from the text\'s length before anything is decoded.',
  },
  GW_ERR_DECODE_ROUTE_INVALID: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Gateway-only: a body sent to a declarative route (`routes`) without a field its JSON Pointers name, or with a value its `decode` cannot read (not base64, not a data: URI, not numbers, not text); the message names the route and key. With status 415: a body of a media type the route does not take (JSON, multipart parts or a raw body, as its inputs\' `from`, `part` and `body` say; docs/dialects.md "Declarative routes"). Nothing is sent upstream.',
  },
  GW_ERR_ROUTE_CONFIG_INVALID: {
    status: 500, grpc: 'INTERNAL',
    doc: 'Gateway-only: a declarative route does not fit its model\'s metadata or config (an input or output name the model lacks, a model input without a source, a datatype or decode that does not match, an input a multipart part or raw body cannot fill: BYTES with dims other than [1], several variable dims); checked on first use, every problem listed with the route and key.',
  },
  GW_ERR_PASSTHROUGH_UNAVAILABLE: {
    status: 502, grpc: 'UNAVAILABLE',
    doc: 'Gateway-only: a pass-through route\'s upstream could not be reached or failed before answering (refused, reset, TLS, DNS); the message names the upstream.',
  },
  GW_ERR_PASSTHROUGH_PATH_INVALID: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Gateway-only: a path under a pass-through prefix that the gateway will not normalise: `;` raw or encoded (a path parameter to Java servers), a character that is neither pchar nor `/` (`#`, a space, a backslash, a byte outside ASCII), an encoded slash, backslash, `%` or control character (`%2F`, `%5C`, `%25`, `%00`–`%1F`), a malformed percent-encoding, or dot segments that leave the prefix it was written under (`/legacy/../admin`) or the root. Nothing is sent upstream.',
  },
  GW_ERR_PASSTHROUGH_TIMEOUT: {
    status: 504, grpc: 'DEADLINE_EXCEEDED',
    doc: 'Gateway-only: a pass-through route\'s upstream sent no response headers within its `timeoutMs`. (A body that stalls longer after the headers is cut: the connection is closed.)',
  },
  GW_ERR_DECODE_V1_INVALID: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Gateway-only: a TF-Serving / KServe-V1 predict body that does not fit the model: neither `instances` nor `inputs`, a missing input, ragged rows, a value of the wrong type, a `{"b64"}` row that is not whole elements.',
  },
  GW_ERR_DECODE_RAW_UNDEDUCIBLE: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'A raw binary request whose input cannot be deduced from the model configuration (several inputs, several variable dims, BYTES not [1]).',
  },
  GW_ERR_DECODE_UPLOAD_UNFIT: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Gateway-only: an upload (a raw body of type `image/*`, `audio/*` or `video/*` without `Inference-Header-Content-Length`) to a model that does not have exactly one BYTES or UINT8 input; the message names the model, its inputs and the header that sends raw tensor data instead (docs/dialects.md "Uploads").',
  },
  GW_ERR_DECODE_MULTIPART_INVALID: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Gateway-only: a `multipart/form-data` body that cannot be read (no boundary, a malformed or truncated part, a body without `Content-Length`, compressed) or does not fit the model (a part naming no input, an input given twice, no input at all, too many parts for `limits.multipartMaxParts`, a part over `limits.maxInputSizeBytes`); nothing is sent upstream (docs/dialects.md "Uploads").',
  },
  GW_ERR_DECODE_OPENAI_INVALID: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'OpenAI API: a body that is not a JSON object, an unknown argument, a value of the wrong type or range, or a feature the gateway or the model cannot serve (`n` over 16, `logprobs` on the TensorRT-LLM convention, `tools` for a model without `toolParser`, `response_format` for a model without guided decoding inputs, token-id prompts, an image that is not a base64 `data:` URL…), a model of the other kind than the endpoint serves (an embedding model asked for chat: the message names the endpoint that serves it), answered in OpenAI\'s error shape with the parameter named; nothing is sent upstream (docs/openai.md "Errors").',
  },
  GW_ERR_DECODE_UNSUPPORTED: {
    status: 501, grpc: 'UNIMPLEMENTED',
    doc: 'A control request asks for what Triton\'s HTTP frontend refuses as UNSUPPORTED before calling its core: a trace or log file location (`… can not be updated through network protocol`), a repository name on load/unload (`\'repository_name\' specification is not supported`).',
  },
  GW_ERR_DECODE_LOG_FORMAT_INVALID: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'A `log_format` other than `default` or `ISO8601` in POST /v2/logging (`invalid argument for --log_format, got: …`); Triton\'s HTTP frontend answers this with 503 (docs/differences.md "Client mistakes are 4xx").',
  },
  GW_ERR_MODEL_NOT_READY: {
    status: 400, grpc: 'UNAVAILABLE', plain: true,
    doc: 'GET …/ready for a model (version) that is not ready: Triton\'s HTTP frontend answers 400 `Model version not ready`.',
  },
  GW_ERR_MODEL_DECOUPLED: {
    status: 400, grpc: 'INVALID_ARGUMENT',
    doc: 'Infer on a decoupled model without `Accept: text/event-stream` (Triton\'s 501 `HTTP end point doesn\'t support models with decoupled transaction policy`, with the header to send).',
  },
  GW_ERR_MODEL_OPENAI_UNKNOWN: {
    status: 404, grpc: 'NOT_FOUND',
    doc: 'OpenAI API: a `model` that is not one of `openai.models` (or that the credentials do not cover and is of the other kind), or that Triton does not have; OpenAI\'s `model_not_found` (docs/openai.md).',
  },
  GW_ERR_MODEL_OPENAI_UNFIT: {
    status: 500, grpc: 'FAILED_PRECONDITION',
    doc: 'OpenAI API: the Triton model behind an `openai.models` entry does not have the inputs or outputs its convention needs (no `text_input`, an input of a type the mapping cannot write, no FP32 embedding output, a backend that names no convention); the message names what is missing. A configuration problem: fix `openai.models` or the model.',
  },
  GW_ERR_MODEL_OPENAI_OUTPUT: {
    status: 502, grpc: 'INTERNAL',
    doc: 'OpenAI API: the model\'s answer breaks what the request asked for and the gateway checks: text that does not satisfy `response_format.json_schema` with `strict: true`, a call whose arguments do not satisfy its `strict` function\'s parameters, no tool call where `tool_choice` required one (or a call of another function than the one named). Never passed on silently; streamed, it is the last event (docs/openai.md "Structured output", "Tools").',
  },
  GW_ERR_ENCODE_UNSUPPORTED: {
    status: 400, grpc: 'INVALID_ARGUMENT', plain: true,
    doc: 'An FP16/BF16 output requested as JSON (`sending FP16 data via JSON is not supported…`).',
  },
  GW_ERR_ENCODE_MALFORMED: {
    status: 500, grpc: 'INTERNAL',
    doc: 'Triton\'s answer cannot be rendered: an output\'s bytes do not match its shape and datatype.',
  },
  GW_ERR_UPSTREAM_STATUS: {
    status: 500, grpc: 'UNKNOWN',
    doc: 'Triton answered with a gRPC error; the HTTP status comes from upstream/status.ts and the message is Triton\'s.',
  },
  GW_ERR_UPSTREAM_STREAM_ERROR: {
    status: 400, grpc: 'UNKNOWN',
    doc: 'Generate: Triton reported an error inside the ModelStreamInfer stream (its `error_message`, not a gRPC status); Triton\'s HTTP generate answers it with 400 and the message.',
  },
  GW_ERR_UPSTREAM_PROTOCOL: {
    status: 502, grpc: 'INTERNAL',
    doc: 'Triton\'s answer broke the protocol: a response message that does not decode; on the h2 data plane also an HTTP status other than 200, a compressed or truncated message, an answer that ends without grpc-status (grpc-js reports those as gRPC statuses of its own: GW_ERR_UPSTREAM_STATUS).',
  },
  GW_ERR_UPSTREAM_UNAVAILABLE: {
    status: 503, grpc: 'UNAVAILABLE',
    doc: 'No backend could be reached, or the connection or stream broke off before the answer\'s status (connection refused, reset, or gRPC UNAVAILABLE from the transport).',
  },
  GW_ERR_UPSTREAM_NO_BACKEND: {
    status: 503, grpc: 'UNAVAILABLE',
    doc: 'No backend of `upstream.backends` is ready (health checks failing, ejected, or none resolved); the call was not attempted. Until some backend has been ready once, backends still connecting are tried instead (docs/production.md).',
  },
  GW_ERR_UPSTREAM_DEADLINE: {
    status: 504, grpc: 'DEADLINE_EXCEEDED',
    doc: 'The upstream call did not finish within its deadline: `upstream.timeoutMs`, or the shorter `grpc-timeout` header an inference request asked for. The call is cancelled (Triton sees it end).',
  },
  GW_ERR_UPSTREAM_CANCELLED: {
    status: 499, grpc: 'CANCELLED',
    doc: 'The client went away; the upstream call was cancelled (logged only: nobody is left to read it).',
  },
  GW_ERR_AUTH_MISSING: {
    status: 401, grpc: 'UNAUTHENTICATED',
    doc: 'Gateway-only (auth.enabled): a route of an API group that is not in `auth.open` was called without credentials (`Authorization: Bearer <token>`, or the `auth.keyHeader` header). The answer carries `WWW-Authenticate: Bearer realm="tensorgate"` (RFC 6750 §3); the body was not read.',
  },
  GW_ERR_AUTH_INVALID: {
    status: 401, grpc: 'UNAUTHENTICATED',
    doc: 'Gateway-only: the credentials are not valid: an unknown API key, or a JWT that is expired, not yet valid, for another issuer or audience, signed with an algorithm not in `auth.jwt.algorithms` or by no key of the JWKS. `WWW-Authenticate: Bearer realm="tensorgate", error="invalid_token", error_description="…"`; the message says which check failed, never the credential.',
  },
  GW_ERR_AUTH_FORBIDDEN: {
    status: 403, grpc: 'PERMISSION_DENIED',
    doc: 'Gateway-only: valid credentials that do not cover the route\'s API group (the key\'s `groups`, the JWT\'s `auth.jwt.groupsClaim`) or the model called (the key\'s `models`, the JWT\'s `auth.jwt.modelsClaim`). `WWW-Authenticate: Bearer … error="insufficient_scope"`.',
  },
  GW_ERR_AUTH_UNAVAILABLE: {
    status: 503, grpc: 'UNAVAILABLE',
    doc: 'Gateway-only: a JWT could not be checked because the JWKS at `auth.jwt.jwksUrl` could not be fetched (refused, not 200, not a JWKS, or no answer within `auth.jwt.fetchTimeoutMs`). The client may retry; its token was not judged.',
  },
  GW_ERR_AUTH_RATE_LIMITED: {
    status: 429, grpc: 'RESOURCE_EXHAUSTED',
    doc: 'Gateway-only: valid credentials over their rate (requests per second with a burst: the key\'s `limits` in `auth.keysFile`, `auth.limits.subjects`, `auth.limits.groups` or `auth.limits.default`). Refused before the body is read and before anything goes upstream, with `Retry-After` in whole seconds until the bucket has a request again (RFC 6585 §4). Limits are per process (docs/production.md "Per-key limits").',
  },
  GW_ERR_AUTH_CONCURRENCY_LIMITED: {
    status: 429, grpc: 'RESOURCE_EXHAUSTED',
    doc: 'Gateway-only: valid credentials that already have their `concurrency` of requests in flight (same places as `GW_ERR_AUTH_RATE_LIMITED`). Refused before the body is read and before anything goes upstream, with `Retry-After: 1`; a place comes back when one of their answers is done, however it ends.',
  },
  GW_ERR_AUTH_QUOTA_EXHAUSTED: {
    status: 429, grpc: 'RESOURCE_EXHAUSTED',
    doc: 'Gateway-only: valid credentials whose hard quota is spent for its window (a `quotas` entry of the key\'s `limits` in `auth.keysFile`, `auth.limits.subjects`, `auth.limits.groups` or `auth.limits.default`: `requests`, `inferences`, `inputBytes`, `outputBytes` or `tokens` per UTC `minute`, `hour`, `day` or calendar `month`). Refused before the body is read, with `Retry-After` in whole seconds until the window ends (docs/production.md "Quotas and usage").',
  },
  GW_ERR_AUTH_LIMITS_UNAVAILABLE: {
    status: 503, grpc: 'UNAVAILABLE',
    doc: 'Gateway-only: the credentials have limits counted in a shared store (`auth.limits.store`, Redis) that did not answer within `auth.limits.storeTimeoutMs` or is not connected, and `auth.limits.storeFailure` is `closed`. With `Retry-After: 1`; refused before the body is read. The other policies let such requests in (`open`) or judge them by this process\'s own limits (`local`).',
  },
  GW_ERR_GATEWAY_INTERNAL: {
    status: 500, grpc: 'INTERNAL',
    doc: 'A bug in tensorgate: an exception escaped a handler. The message says what it was.',
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

/**
 * The body a route family's error answers take (Route.errorShape, written by egress/error-body.ts):
 * Triton's `{"error": "…"}`, OpenAI's error object, or TorchServe's `{"code", "type", "message"}`.
 */
export type ErrorShape = 'triton' | 'openai' | 'torchserve';

/**
 * What a dialect's error body says besides the status and message, given where the error is made:
 * the parameter and code of OpenAI's error object, TorchServe's exception class. Read only when
 * the route answers in that dialect's shape; without it each shape says what the status implies.
 */
export type DialectDetail =
  | { readonly shape: 'openai'; readonly param: string | null; readonly code: string | null }
  | { readonly shape: 'torchserve'; readonly type: string };

/** An error the gateway answers with `status` and a body of its message, in the route's shape (ErrorShape). */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Answer with Content-Type text/plain, as Triton does for this condition. */
  readonly plain: boolean;
  /**
   * The gRPC status code of the failed upstream call, when there was one (set by
   * upstream/status.ts), or the gRPC status an upstream's HTTP answer stands for.
   */
  readonly grpcCode: number | undefined;
  /** The dialect's own fields of the error body (OpenAI's param and code, TorchServe's type), where one was given. */
  readonly dialect: DialectDetail | undefined;

  constructor(code: ErrorCode, message: string,
    options?: { status?: number; plain?: boolean; cause?: unknown; grpcCode?: number; dialect?: DialectDetail }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.code = code;
    const spec: ErrorSpec = ERRORS[code];
    this.status = options?.status ?? spec.status;
    this.plain = options?.plain ?? spec.plain === true;
    this.grpcCode = options?.grpcCode;
    this.dialect = options?.dialect;
  }
}

export function isGatewayError(err: unknown): err is GatewayError {
  return typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'GatewayError'
    && typeof (err as { code?: unknown }).code === 'string' && (err as { code: string }).code in ERRORS;
}

/** docs/errors.md, generated from the table (a unit test compares it with the committed file). */
export function renderErrorsDoc(): string {
  const rows = Object.entries(ERRORS).map(([code, spec]: [string, ErrorSpec]) =>
    `| \`${code}\` | ${spec.status} | ${spec.grpc} | ${spec.plain === true ? 'text/plain' : 'application/json'} | ${spec.doc} |`);
  return [
    '# Errors tensorgate answers itself',
    '',
    'Generated from `gateway/errors.ts` (`npm run docs`); a unit test fails when this file is stale.',
    'Every error body is `{"error": "<message>"}`; the code is also sent in the `x-tensorgate-error`',
    'response header. Errors reported by Triton keep Triton\'s message and',
    'get their HTTP status from the gRPC status (see `gateway/upstream/status.ts`).',
    'A gRPC client (the gRPC pass-through) gets the gRPC status of the table, with the message as',
    '`grpc-message` and the code in the `x-tensorgate-error` trailer; for an error that stands for a',
    'failed upstream call, that call\'s gRPC status (an upstream HTTP answer other than 200: the gRPC',
    'spec\'s mapping of its HTTP status).',
    '',
    '| code | HTTP status | gRPC status | Content-Type | meaning |',
    '|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}
