// The one error table. Every condition the gateway answers by itself has a stable code
// GW_ERR_<STAGE>_<PROBLEM>, an HTTP status and a message; match on `code`, never on
// `instanceof` (jest's VM realms and worker threads break it). docs/errors.md is generated
// from this table and a test keeps them in sync.
//
// Errors Triton itself reports come back over gRPC and are mapped by upstream/status.ts; they
// carry GW_ERR_UPSTREAM_STATUS with the status that mapping chose, and Triton's message verbatim.

export interface ErrorSpec {
  readonly status: number;
  /** What the condition means, for docs/errors.md. */
  readonly doc: string;
}

export const ERRORS = {
  GW_ERR_ROUTE_NOT_FOUND: {
    status: 404,
    doc: 'No route matches the path (Triton\'s own body: `{"error":"Not Found"}`).',
  },
  GW_ERR_ROUTE_METHOD_NOT_ALLOWED: {
    status: 405,
    doc: 'The path exists but not for this method (`{"error":"Method Not Allowed"}`).',
  },
  GW_ERR_UPSTREAM_STATUS: {
    status: 500,
    doc: 'Triton answered with a gRPC error; the HTTP status comes from upstream/status.ts and the message is Triton\'s.',
  },
  GW_ERR_UPSTREAM_UNAVAILABLE: {
    status: 503,
    doc: 'No backend could be reached (connection refused, reset, or gRPC UNAVAILABLE from the transport).',
  },
  GW_ERR_UPSTREAM_DEADLINE: {
    status: 504,
    doc: 'The upstream call did not finish within its deadline (`upstream.timeoutMs` or the request deadline).',
  },
  GW_ERR_UPSTREAM_CANCELLED: {
    status: 499,
    doc: 'The client went away; the upstream call was cancelled (logged only: nobody is left to read it).',
  },
  GW_ERR_GATEWAY_INTERNAL: {
    status: 500,
    doc: 'A bug in tensorgate: an exception escaped a handler. The message says what it was.',
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

/** An error the gateway answers with `{"error": message}` and `status`. */
export class GatewayError extends Error {
  readonly code: ErrorCode;
  readonly status: number;

  constructor(code: ErrorCode, message: string, options?: { status?: number; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.code = code;
    this.status = options?.status ?? ERRORS[code].status;
  }
}

export function isGatewayError(err: unknown): err is GatewayError {
  return typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'GatewayError'
    && typeof (err as { code?: unknown }).code === 'string' && (err as { code: string }).code in ERRORS;
}

/** docs/errors.md, generated from the table (a unit test compares it with the committed file). */
export function renderErrorsDoc(): string {
  const rows = Object.entries(ERRORS).map(([code, spec]) => `| \`${code}\` | ${spec.status} | ${spec.doc} |`);
  return [
    '# Errors tensorgate answers itself',
    '',
    'Generated from `gateway/errors.ts` (`npm run docs`); a unit test fails when this file is stale.',
    'Every error body is `{"error": "<message>"}`; the code is also sent in the `x-tensorgate-error`',
    'response header. Errors reported by Triton keep Triton\'s message and',
    'get their HTTP status from the gRPC status (see `gateway/upstream/status.ts`).',
    '',
    '| code | HTTP status | meaning |',
    '|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}
