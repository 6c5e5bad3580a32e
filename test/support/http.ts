// Raw HTTP for tests: exact headers in and out, body bytes untouched (fetch would decompress and
// normalise).
import { type Agent, request } from 'node:http';

export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Buffer;
}

export interface SendOptions {
  method?: string;
  headers?: Record<string, string | number>;
  body?: Buffer | string;
  /** Its connections (kept alive, a bound on their number); default: Node's global agent. */
  agent?: Agent;
}

/** One request, its answer as read. */
export function send(url: string, options: SendOptions = {}): Promise<RawResponse> {
  const body = typeof options.body === 'string' ? Buffer.from(options.body) : options.body;
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: options.method ?? (body ? 'POST' : 'GET'),
      ...(options.agent !== undefined ? { agent: options.agent } : {}),
      headers: { ...(body ? { 'Content-Length': body.length } : {}), ...options.headers },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A binary-extension body: JSON header followed by raw tensor bytes. */
export function binaryBody(header: unknown, ...tensors: Buffer[]): { body: Buffer; headers: Record<string, number> } {
  const json = Buffer.from(JSON.stringify(header));
  return { body: Buffer.concat([json, ...tensors]), headers: { 'Inference-Header-Content-Length': json.length } };
}

/** Sends the body in `piece`-byte writes, each after the previous one was flushed. */
export function sendInPieces(url: string, body: Buffer, headers: Record<string, string | number>, piece: number): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { 'Content-Length': body.length, ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    let at = 0;
    const next = (): void => {
      if (at >= body.length) {
        req.end();
        return;
      }
      const part = body.subarray(at, at + piece);
      at += piece;
      req.write(part, () => setImmediate(next));
    };
    next();
  });
}
