// Writing responses. Every body the gateway writes itself goes through here.
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { ErrorShape } from '../errors';
import { compress, type ResponseEncoding } from './compress';
import { asGatewayError, errorBody } from './error-body';

/** An empty body, as Triton answers health and readiness probes (libevhtp's default type). */
export function writeEmpty(res: ServerResponse, status: number): void {
  res.writeHead(status, { 'Content-Type': 'text/plain', 'Content-Length': 0 });
  res.end();
}

/**
 * Short text for humans that must never be cached (the gateway's own probes): orchestrators read
 * the status, a person reading the body sees why.
 */
export function writeText(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store' });
  res.end(text);
}

export function writeJson(res: ServerResponse, status: number, body: string | Buffer): void {
  const length = Buffer.byteLength(body);
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': length,
  });
  if (length <= SLICE) {
    res.end(body);
    return;
  }
  res.cork();
  writeSliced(res, typeof body === 'string' ? Buffer.from(body) : body);
  res.end();
  res.uncork();
}

/**
 * Large bodies are handed to the response in slices of at most this many bytes (views, no copy):
 * over HTTP/2 each slice's write completes once the client has taken it, so a reader that moves
 * at all is seen to move (ingress/h2.ts, server.h2.unreadAnswerMs). HTTP/1.1 writes them corked,
 * as one writev.
 */
const SLICE = 64 * 1024;

function writeSliced(res: ServerResponse, p: Buffer): void {
  for (let at = 0; at < p.length; at += SLICE) res.write(p.subarray(at, Math.min(p.length, at + SLICE)));
}

/**
 * Retry-After of a 503 GW_ERR_REQUEST_OVERLOADED, in seconds (RFC 9110 §10.2.3). A request holds
 * its place for milliseconds, so capacity is back within a second; longer would idle clients for
 * nothing, and spreading their retries is their own jitter's job. (Kubernetes' API server answers
 * its max-in-flight 429 with the same 1 s.)
 */
export const OVERLOADED_RETRY_AFTER_S = 1;

/**
 * The error's status and its body in the route's `shape` (Route.errorShape: Triton's
 * `{"error": message}` unless a dialect has its own, always JSON); the code goes in x-tensorgate-error.
 */
export function writeError(res: ServerResponse, err: unknown, shape: ErrorShape = 'triton'): void {
  const e = asGatewayError(err);
  if (res.headersSent) {
    // Too late for a status: the only honest signal left is an abrupt close.
    res.destroy(e);
    return;
  }
  const body = errorBody(shape, e);
  const headers: OutgoingHttpHeaders = {
    'Content-Type': e.plain && shape === 'triton' ? 'text/plain' : 'application/json',
    'Content-Length': Buffer.byteLength(body),
    'x-tensorgate-error': e.code,
  };
  // Triton tells the client which request encodings it accepts (docs/architecture.md#compression).
  if (e.code === 'GW_ERR_REQUEST_ENCODING_UNSUPPORTED') headers['Accept-Encoding'] = 'gzip, deflate';
  else if (e.code === 'GW_ERR_REQUEST_OVERLOADED') headers['Retry-After'] = OVERLOADED_RETRY_AFTER_S;
  res.writeHead(e.status, headers);
  res.end(body);
}

/**
 * Writes a body made of parts (a JSON header and binary output views) in one corked write,
 * without concatenating them; or compresses them first when the client asked for it. Returns the
 * number of body bytes written.
 */
export async function writeParts(
  res: ServerResponse, status: number, headers: OutgoingHttpHeaders, parts: readonly Buffer[], encoding: ResponseEncoding,
): Promise<number> {
  let body = parts;
  if (encoding !== undefined) {
    const compressed = await compress(parts, encoding);
    if (compressed !== undefined) {
      body = compressed;
      headers['Content-Encoding'] = encoding;
    }
  }
  let length = 0;
  for (let i = 0; i < body.length; i++) length += body[i]!.length;
  headers['Content-Length'] = length;
  res.writeHead(status, headers);
  res.cork();
  for (let i = 0; i < body.length; i++) if (body[i]!.length > 0) writeSliced(res, body[i]!);
  res.end();
  res.uncork();
  return length;
}
