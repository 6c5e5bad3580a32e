// A deadline the client asks for. Triton's own HTTP frontend reads no deadline header (only the
// `timeout` request parameter, a batcher queue timeout it passes on to the core; see
// docs/production.md "Deadlines and drain"); its gRPC frontend takes the client's `grpc-timeout`.
// The gateway accepts that same header on its REST inference routes, in the gRPC spec's syntax,
// and sends Triton the shorter of it and upstream.timeoutMs — as Envoy caps a request's
// grpc-timeout with its route's grpc_timeout_header_max.
import { GatewayError } from '../errors';

/**
 * The milliseconds a `grpc-timeout` value asks for (fractions for u and n); undefined without the
 * header. gRPC over HTTP/2 says `TimeoutValue TimeoutUnit`: 1 to 8 ASCII digits, then one of
 * H, M, S, m, u, n. A value that is not one — a repeated header arrives joined with ", " — is a
 * 400: silently ignoring it would leave the client waiting for upstream.timeoutMs instead. Read by
 * hand, not by a regular expression: every gRPC call has one.
 */
export function parseGrpcTimeout(value: string | string[] | undefined): number | undefined {
  if (value === undefined) return undefined;
  const text = Array.isArray(value) ? value.join(', ') : value;
  const n = text.length;
  const unit = n >= 2 && n <= 9 ? msPerUnit(text.charCodeAt(n - 1)) : 0;
  let v = 0;
  for (let i = 0; unit !== 0 && i < n - 1; i++) {
    const d = text.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) {
      v = -1;
      break;
    }
    v = v * 10 + d;
  }
  if (unit === 0 || v < 0) {
    throw new GatewayError('GW_ERR_REQUEST_HEADER_INVALID',
      `Unable to parse 'grpc-timeout': '${text.slice(0, 64)}' is not a gRPC timeout (1 to 8 digits and a unit H, M, S, m, u or n)`);
  }
  return v * unit;
}

/** Milliseconds per grpc-timeout unit (its character code); 0 for none. */
function msPerUnit(c: number): number {
  switch (c) {
    case 0x48: return 3_600_000; // H
    case 0x4d: return 60_000; // M
    case 0x53: return 1000; // S
    case 0x6d: return 1; // m
    case 0x75: return 1e-3; // u
    case 0x6e: return 1e-6; // n
    default: return 0;
  }
}

/**
 * The grpc-timeout value for a deadline `ms` away: at most 8 digits, in the coarsest unit that
 * keeps the value; at least 1 ms (grpc-timeout has no value for "already passed").
 */
export function formatGrpcTimeout(ms: number): string {
  const v = Math.max(1, Math.ceil(ms));
  return v < 1e8 ? `${v}m` : `${Math.ceil(v / 1000)}S`;
}
