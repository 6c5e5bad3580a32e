// gRPC statuses as they travel (gRPC over HTTP/2: the grpc-status and grpc-message trailers, or
// the headers of a trailers-only answer): the codes by name, grpc-message's percent-encoding both
// ways, and the status of an answer the gateway gives itself. That status comes from the one error
// table (errors.ts ERRORS, its `grpc` column): nothing here maps our codes by hand.
import { ERRORS, type GatewayError, type GrpcStatusName } from '../errors';

/** The gRPC status codes (the gRPC spec, doc/statuscodes.md). */
export const GrpcStatus = {
  OK: 0, CANCELLED: 1, UNKNOWN: 2, INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, NOT_FOUND: 5,
  ALREADY_EXISTS: 6, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, FAILED_PRECONDITION: 9,
  ABORTED: 10, OUT_OF_RANGE: 11, UNIMPLEMENTED: 12, INTERNAL: 13, UNAVAILABLE: 14,
  DATA_LOSS: 15, UNAUTHENTICATED: 16,
} as const satisfies Record<GrpcStatusName, number>;

/**
 * The gRPC status a gRPC client is answered with for `err`: the status of the upstream call it
 * stands for when it carries one (`grpcCode`: Triton's own, or the transport's), otherwise its
 * code's row of the error table.
 */
export function grpcStatusOf(err: Pick<GatewayError, 'code' | 'grpcCode'>): number {
  return err.grpcCode ?? GrpcStatus[ERRORS[err.code].grpc];
}

/**
 * The gRPC status a server's HTTP answer other than 200 stands for, as gRPC clients read it (the
 * gRPC spec, doc/http-grpc-status-mapping.md): a proxy in front of Triton refusing, or an HTTP
 * server that is no gRPC server.
 */
export function grpcStatusOfHttp(status: number): number {
  switch (status) {
    case 400: return GrpcStatus.INTERNAL;
    case 401: return GrpcStatus.UNAUTHENTICATED;
    case 403: return GrpcStatus.PERMISSION_DENIED;
    case 404: return GrpcStatus.UNIMPLEMENTED;
    case 429: case 502: case 503: case 504: return GrpcStatus.UNAVAILABLE;
    default: return GrpcStatus.UNKNOWN;
  }
}

/** grpc-message as sent: percent-encoded are the bytes outside 0x20–0x7E, and '%' (gRPC over HTTP/2). */
export function encodeGrpcMessage(m: string): string {
  return /[^\x20-\x24\x26-\x7e]/.test(m) ? encodeURIComponent(m).replace(/%20/g, ' ') : m;
}

/**
 * grpc-message as received, percent-decoded; a repeated field is joined with ','. A value that
 * does not decode is kept as sent (the spec asks a receiver not to fail the call over it).
 */
export function decodeGrpcMessage(m: string | string[] | undefined): string {
  const s = Array.isArray(m) ? m.join(',') : m ?? '';
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
