// Writing responses. Every body the gateway writes itself goes through here.
import type { ServerResponse } from 'node:http';
import { type GatewayError, isGatewayError, GatewayError as GE } from '../errors';

/** 200/400 with an empty body, as Triton answers health and readiness probes. */
export function writeEmpty(res: ServerResponse, status: number): void {
  res.writeHead(status, { 'Content-Length': 0 });
  res.end();
}

export function writeJson(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** `{"error": message}` with the error's status; the code goes in x-tensorgate-error. */
export function writeError(res: ServerResponse, err: unknown): void {
  const e: GatewayError = isGatewayError(err)
    ? err
    : new GE('GW_ERR_GATEWAY_INTERNAL', `internal error: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  if (res.headersSent) {
    // Too late for a status: the only honest signal left is an abrupt close.
    res.destroy(e);
    return;
  }
  const body = JSON.stringify({ error: e.message });
  res.writeHead(e.status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(body),
    'x-tensorgate-error': e.code,
  });
  res.end(body);
}
