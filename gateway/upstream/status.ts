// A failed upstream call's gRPC status → the error the client sees and its HTTP status, in one
// place: the only file that decides by the gRPC code of an upstream call. (The gRPC pass-through
// relays Triton's statuses as they came and only records them; the gateway's own answers take
// their gRPC status from the error table, errors.ts, through grpc/status.ts grpcStatusOf.)
// Triton's own HTTP frontend maps its error codes as docs/architecture.md#status-codes says; over gRPC the
// same errors arrive as the gRPC codes below, so mapping them back reproduces Triton's statuses.
import { GatewayError, isGatewayError } from '../errors';
import { GrpcStatus } from '../grpc/status';

export function httpStatusOfGrpc(code: number): number {
  switch (code) {
    case GrpcStatus.INTERNAL: return 500;          // Triton INTERNAL
    case GrpcStatus.NOT_FOUND: return 404;         // Triton NOT_FOUND (unknown model, region)
    case GrpcStatus.UNAVAILABLE: return 503;       // Triton UNAVAILABLE (not ready, queue full)
    case GrpcStatus.UNIMPLEMENTED: return 501;     // Triton UNSUPPORTED
    case GrpcStatus.INVALID_ARGUMENT:              // Triton INVALID_ARG
    case GrpcStatus.UNKNOWN:                       // Triton UNKNOWN
    case GrpcStatus.ALREADY_EXISTS:                // Triton ALREADY_EXISTS
    case GrpcStatus.CANCELLED:                     // Triton CANCELLED
      return 400;
    // Codes Triton never emits; they come from the transport or the gateway's own deadline.
    case GrpcStatus.DEADLINE_EXCEEDED: return 504;
    case GrpcStatus.RESOURCE_EXHAUSTED: return 400; // a message over a size limit: the request is too big
    default: return 500;
  }
}

const DEADLINE_MESSAGE = 'Deadline Exceeded: no answer from upstream within upstream.timeoutMs or the shorter grpc-timeout the request asked for';
/**
 * The one conversion of a failed upstream call into the error the client sees. `transport`
 * is true when the failure came from the connection rather than from Triton's answer (both
 * arrive as UNAVAILABLE; the transport knows which it was).
 */
export function upstreamError(code: number, details: string, transport: boolean, original?: unknown): GatewayError {
  // grpcCode: telemetry counts upstream calls by status.
  const cause = original ?? { code, details };
  if (transport) {
    return new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', `upstream unavailable: ${details}`, { cause, grpcCode: code });
  }
  if (code === GrpcStatus.DEADLINE_EXCEEDED) {
    // The server's own wording varies ("Deadline Exceeded" from Triton, "Deadline exceeded" from
    // grpc-js); the gateway's condition gets one message that names what set the deadline.
    return new GatewayError('GW_ERR_UPSTREAM_DEADLINE', DEADLINE_MESSAGE, { cause, grpcCode: code });
  }
  return new GatewayError('GW_ERR_UPSTREAM_STATUS', details, { status: httpStatusOfGrpc(code), cause, grpcCode: code });
}

/** A call the gateway cancelled because its client went away (an aborted request, a reset stream). */
export function clientCancelled(cause?: unknown): GatewayError {
  return new GatewayError('GW_ERR_UPSTREAM_CANCELLED', 'request cancelled: the client went away', { cause, grpcCode: GrpcStatus.CANCELLED });
}

/**
 * An error Triton reported inside a ModelStreamInfer stream (a response's error_message, the
 * stream itself OK): Triton's HTTP generate answers it with 400 and the message.
 */
export function streamError(message: string): GatewayError {
  return new GatewayError('GW_ERR_UPSTREAM_STREAM_ERROR', message);
}

/**
 * Triton's HTTP frontend answers some infer failures with its default text/plain type: the model
 * lookup (NOT_FOUND) and errors raised once the request runs — the model's own (INTERNAL), input
 * collection ("incomplete string data") and classification — while checks of the request are
 * application/json (docs/architecture.md#status-codes; observed by the differential suite). gRPC does not say which
 * stage failed, so this is judged from the status and the message.
 */
const EXECUTION_TIME = /^(incomplete string |class result not available )/;

/**
 * A failed infer call as Triton's HTTP infer answers it: `rename` rewrites Triton's message (a
 * raw request's input is 'raw_input' in Triton's own words), and the Content-Type follows the
 * rule above. Errors that did not come from Triton's answer pass unchanged.
 */
export function inferCallError(err: unknown, rename?: (message: string) => string): unknown {
  if (!isGatewayError(err) || err.code !== 'GW_ERR_UPSTREAM_STATUS') return err;
  const message = rename === undefined ? err.message : rename(err.message);
  const plain = err.status === 404 || err.status === 500 || EXECUTION_TIME.test(message) || err.plain;
  if (message === err.message && plain === err.plain) return err;
  return new GatewayError(err.code, message, { status: err.status, plain, cause: err.cause, grpcCode: err.grpcCode });
}

// Failures known not to have reached Triton (the stream never opened, REFUSED_STREAM, a pick
// that found no connection): the only ones a call may be sent again for (upstream/backends/retry.ts).
const notSentErrors = new WeakSet<object>();

/** Marks `err` as a failure before any byte of the call reached the backend. */
export function notSent(err: GatewayError): GatewayError {
  notSentErrors.add(err);
  return err;
}

export function wasNotSent(err: unknown): boolean {
  return typeof err === 'object' && err !== null && notSentErrors.has(err);
}

// Calls the gateway's own shutdown ended (connections/in-flight.ts shutdownError): UNAVAILABLE as a
// broken connection is, but no fault of the backend's.
const shutdownErrors = new WeakSet<object>();

/** Marks `err` as the end of a call that the gateway's shutdown cancelled or refused. */
export function byShutdown(err: GatewayError): GatewayError {
  shutdownErrors.add(err);
  return err;
}

/**
 * Whether a failed call counts against its backend (passive outlier detection): the connection
 * failed, or Triton answered UNAVAILABLE. The gateway's own shutdown, a client that left and a
 * deadline do not.
 */
export function failsBackend(err: unknown): boolean {
  if (!isGatewayError(err) || shutdownErrors.has(err)) return false;
  return err.code === 'GW_ERR_UPSTREAM_UNAVAILABLE' || err.grpcCode === GrpcStatus.UNAVAILABLE;
}

/** Whether the backend answered (any gRPC status of its own): its connection works. */
export function backendAnswered(err: unknown): boolean {
  return isGatewayError(err) && (err.code === 'GW_ERR_UPSTREAM_STATUS' || err.code === 'GW_ERR_UPSTREAM_STREAM_ERROR') && err.grpcCode !== GrpcStatus.UNAVAILABLE;
}

/**
 * Whether Triton answered that the call's model is not on that server, or not ready there: NOT_FOUND
 * ("Request for unknown model: …"), or UNAVAILABLE for a model without a ready version. Its server
 * runs nothing of such a call (model-aware routing, upstream/backends/model-index.ts).
 */
export function lacksModel(err: unknown): boolean {
  if (!isGatewayError(err) || err.code !== 'GW_ERR_UPSTREAM_STATUS') return false;
  if (err.grpcCode === GrpcStatus.NOT_FOUND) return /unknown model/i.test(err.message);
  return err.grpcCode === GrpcStatus.UNAVAILABLE && /(unknown model|is not ready|no available versions|not loaded)/i.test(err.message);
}
