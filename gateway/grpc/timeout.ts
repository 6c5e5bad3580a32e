// A deadline the client asks for. Triton's own HTTP frontend reads no deadline header (only the
// `timeout` request parameter, a batcher queue timeout it passes on to the core; see
// docs/production.md "Deadlines and drain"); its gRPC frontend takes the client's `grpc-timeout`.
// The gateway accepts that same header on its REST inference routes, in the gRPC spec's syntax,
// and sends Triton the shorter of it and upstream.timeoutMs — as Envoy caps a request's
// grpc-timeout with its route's grpc_timeout_header_max.
import { GatewayError } from '../errors';

/** gRPC over HTTP/2: `TimeoutValue TimeoutUnit`, at most 8 ASCII digits, then one unit letter. */
const GRPC_TIMEOUT = /^(\d{1,8})([HMSmun])$/;

const MS_PER_UNIT: Readonly<Record<string, number>> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };

/**
 * The milliseconds a `grpc-timeout` value asks for (fractions for u and n); undefined without the
 * header. A value that is not one — a repeated header arrives joined with ", " — is a 400:
 * silently ignoring it would leave the client waiting for upstream.timeoutMs instead.
 */
export function parseGrpcTimeout(value: string | string[] | undefined): number | undefined {
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? value.join(', ') : value;
  const m = GRPC_TIMEOUT.exec(text);
  if (m === null) {
    throw new GatewayError('GW_ERR_REQUEST_HEADER_INVALID',
      `Unable to parse 'grpc-timeout': '${text.slice(0, 64)}' is not a gRPC timeout (1 to 8 digits and a unit H, M, S, m, u or n)`);
  }
  return Number(m[1]) * MS_PER_UNIT[m[2]!]!;
}

/**
 * The grpc-timeout value for a deadline `ms` away: at most 8 digits, in the coarsest unit that
 * keeps the value; at least 1 ms (grpc-timeout has no value for "already passed").
 */
export function formatGrpcTimeout(ms: number): string {
  const v = Math.max(1, Math.ceil(ms));
  return v < 1e8 ? `${v}m` : `${Math.ceil(v / 1000)}S`;
}
