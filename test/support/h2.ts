// HTTP/2 for tests (h2c with prior knowledge, or h2 over TLS): one session, requests with exact
// headers in and out, and the headers an HTTP/1.1 answer may carry that HTTP/2 forbids.
import { type ClientHttp2Session, type ClientHttp2Stream, connect, type IncomingHttpHeaders, type SecureClientSessionOptions } from 'node:http2';
import type { RawResponse } from './http';

/** A session to `url` (http: h2c, https: h2 by ALPN), once connected; rejects after `ms`. */
export function h2Connect(url: string, options: SecureClientSessionOptions = {}, ms = 5000): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = connect(url, options);
    const timer = setTimeout(() => {
      session.destroy();
      reject(new Error(`no HTTP/2 session with ${url} within ${ms} ms`));
    }, ms);
    session.once('connect', () => {
      clearTimeout(timer);
      resolve(session);
    });
    session.once('error', (err: Error) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

export interface H2Answer extends RawResponse {
  /** The stream's RST_STREAM code (0: ended normally). */
  readonly rstCode: number;
}

export interface H2Request {
  readonly method?: string;
  readonly headers?: Record<string, string | number>;
  readonly body?: Buffer | string;
}

/** Sends a request on `session` (Content-Length from the body) and reads its whole answer. */
export function h2Send(session: ClientHttp2Session, path: string, options: H2Request = {}): Promise<H2Answer> {
  const { stream, answer } = h2Open(session, path, options);
  stream.end(typeof options.body === 'string' ? Buffer.from(options.body) : options.body);
  return answer;
}

/** A request whose body the caller writes (and ends); `answer` settles when the stream closes. */
export function h2Open(session: ClientHttp2Session, path: string, options: H2Request = {}): { stream: ClientHttp2Stream; answer: Promise<H2Answer> } {
  const body = typeof options.body === 'string' ? Buffer.from(options.body) : options.body;
  const stream = session.request({
    ':method': options.method ?? (body ? 'POST' : 'GET'), ':path': path,
    ...(body ? { 'content-length': body.length } : {}), ...lower(options.headers ?? {}),
  });
  const answer = new Promise<H2Answer>((resolve, reject) => {
    let headers: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on('response', (h) => { headers = h; });
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', () => undefined); // the close says how it ended
    stream.on('close', () => {
      const status = Number(headers[':status'] ?? 0);
      if (status === 0) {
        reject(Object.assign(new Error(`the stream closed without an answer (RST_STREAM ${stream.rstCode})`), { rstCode: stream.rstCode }));
        return;
      }
      resolve({ status, headers: { ...headers }, body: Buffer.concat(chunks), rstCode: stream.rstCode ?? 0 });
    });
  });
  answer.catch(() => undefined);
  return { stream, answer };
}

const lower = (h: Record<string, string | number>): Record<string, string | number> =>
  Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));

/**
 * HTTP/1.1 connection-specific fields (RFC 9113 §8.2.2: an HTTP/2 answer must not carry them),
 * the date, Server-Timing (durations differ from one request to the next) and the Trailer field
 * announcing its trailer (HTTP/2 carries one on any answer, HTTP/1.1 only when the client asks:
 * telemetry/server-timing.ts), and pseudo-header fields.
 */
const NOT_COMPARED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'proxy-connection', 'upgrade', 'date', 'server-timing', 'trailer']);

/** The headers two answers must share, whatever their HTTP version. */
export function comparableHeaders(headers: RawResponse['headers']): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || k.startsWith(':') || NOT_COMPARED.has(k.toLowerCase())) continue;
    out[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : String(v);
  }
  return out;
}
