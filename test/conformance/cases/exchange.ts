// Sends one Case with node's http module (exact headers, explicit Content-Length or chunked
// transfer) and compares two answers: status, Content-Type, Inference-Header-Content-Length,
// Content-Encoding (plus per-case extras) and the body bytes.
import { request } from 'node:http';
import { connect as h2connect, type IncomingHttpHeaders } from 'node:http2';
import { inflateSync, gunzipSync } from 'node:zlib';
import type { Case } from './types';

export interface Answer {
  status: number;
  statusMessage: string;
  headers: Record<string, string | undefined>;
  /** Bytes as received on the wire (possibly compressed). */
  wire: Buffer;
  /** Body after undoing Content-Encoding gzip/deflate (= wire otherwise). */
  body: Buffer;
  decodeError?: string;
}

export const COMPARED_HEADERS = ['content-type', 'inference-header-content-length', 'content-encoding'];

/**
 * An answer from what came on the wire. Compressor output may legitimately differ byte-wise (zlib
 * level, header fields such as the gzip mtime/OS byte), so compressed answers are compared after
 * decompression; the Content-Encoding header itself is compared separately.
 */
function answerOf(status: number, statusMessage: string, headers: Record<string, string | undefined>, wire: Buffer): Answer {
  try {
    const encoding = headers['content-encoding'];
    const body = encoding === 'gzip' ? gunzipSync(wire) : encoding === 'deflate' ? inflateSync(wire) : wire;
    return { status, statusMessage, headers, wire, body };
  } catch (err) {
    return { status, statusMessage, headers, wire, body: wire, decodeError: `cannot decode ${headers['content-encoding']} body: ${(err as Error).message}` };
  }
}

/** Sends `c` to `base` ("http://host:port"). One connection per request (no keep-alive). */
export function send(base: string, c: Case, timeoutMs = 30_000): Promise<Answer> {
  const url = new URL(base);
  const headers: Record<string, string> = { ...(c.headers ?? {}) };
  if (c.chunked !== undefined) headers['Transfer-Encoding'] = 'chunked';
  else if (c.body !== undefined) headers['Content-Length'] = String(c.body.length);
  // No body: say so explicitly for methods where node would otherwise default to chunked.
  else if (c.method !== 'GET' && c.method !== 'HEAD') headers['Content-Length'] = '0';
  return new Promise<Answer>((resolve, reject) => {
    const req = request(
      { host: url.hostname, port: Number(url.port), method: c.method, path: c.path, headers, agent: false, setHost: true },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.push(d));
        res.on('error', reject);
        res.on('end', () => {
          const h: Record<string, string | undefined> = {};
          for (const [k, v] of Object.entries(res.headers)) h[k] = Array.isArray(v) ? v.join(', ') : v;
          resolve(answerOf(res.statusCode ?? 0, res.statusMessage ?? '', h, Buffer.concat(parts)));
        });
      },
    );
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    if (c.body !== undefined && c.chunked !== undefined) {
      for (let o = 0; o < c.body.length; o += c.chunked) req.write(c.body.subarray(o, o + c.chunked));
    } else if (c.body !== undefined) {
      req.write(c.body);
    }
    req.end();
  });
}

/** Fields HTTP/2 forbids in a request (RFC 9113 §8.2.2); Host becomes :authority. */
const NOT_IN_H2 = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'host']);

/**
 * Sends `c` to `base` over HTTP/2 (h2c with prior knowledge; h2 for https:// with `tls`), one
 * session per request. A chunked case sends its pieces as DATA frames without Content-Length,
 * the HTTP/2 way of a body of unknown length; the fields HTTP/2 forbids are left out, and values
 * are trimmed.
 */
export function sendH2(base: string, c: Case, timeoutMs = 30_000, tls: { ca?: string; servername?: string } = {}): Promise<Answer> {
  const headers: Record<string, string> = { ':method': c.method, ':path': c.path };
  // RFC 9113 §8.2.1: an HTTP/2 field value never begins or ends with whitespace (HTTP/1.1's
  // parser strips that optional whitespace; an HTTP/2 client must not send it).
  for (const [k, v] of Object.entries(c.headers ?? {})) if (!NOT_IN_H2.has(k.toLowerCase())) headers[k.toLowerCase()] = v.trim();
  if (c.chunked === undefined && c.body !== undefined) headers['content-length'] = String(c.body.length);
  else if (c.chunked === undefined && c.method !== 'GET' && c.method !== 'HEAD') headers['content-length'] = '0';
  return new Promise<Answer>((resolve, reject) => {
    const session = h2connect(base, tls);
    const timer = setTimeout(() => {
      session.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    const fail = (err: Error): void => {
      clearTimeout(timer);
      session.destroy();
      reject(err);
    };
    session.on('error', fail);
    const stream = session.request(headers);
    let head: IncomingHttpHeaders = {};
    const parts: Buffer[] = [];
    stream.on('response', (h) => { head = h; });
    stream.on('data', (d: Buffer) => parts.push(d));
    stream.on('error', fail);
    stream.on('end', () => {
      clearTimeout(timer);
      session.close();
      const h: Record<string, string | undefined> = {};
      for (const [k, v] of Object.entries(head)) if (!k.startsWith(':')) h[k] = Array.isArray(v) ? v.join(', ') : v;
      resolve(answerOf(Number(head[':status'] ?? 0), '', h, Buffer.concat(parts)));
    });
    if (c.body !== undefined && c.chunked !== undefined) {
      for (let o = 0; o < c.body.length; o += c.chunked) stream.write(c.body.subarray(o, o + c.chunked));
    } else if (c.body !== undefined) {
      stream.write(c.body);
    }
    stream.end();
  });
}

/**
 * Client mistakes Triton answers with a 5xx and the gateway with a 4xx, by the gateway's code
 * (docs/differences.md "Client mistakes are 4xx"): only the status differs, headers and body
 * must still be Triton's.
 */
const CLIENT_MISTAKES = new Map([
  ['GW_ERR_DECODE_MALFORMED', [500, 400]],
  ['GW_ERR_REQUEST_ENCODING_UNSUPPORTED', [501, 415]],
  ['GW_ERR_DECODE_LOG_FORMAT_INVALID', [503, 400]],
]);

/** The status the gateway must give where Triton gave `ref` (Triton's, or its 4xx twin above). */
export function expectedStatus(ref: Pick<Answer, 'status'>, got: Pick<Answer, 'headers'>): number {
  const pair = CLIENT_MISTAKES.get(got.headers['x-tensorgate-error'] ?? '');
  return pair !== undefined && pair[0] === ref.status ? pair[1]! : ref.status;
}

/** Differences between the reference answer (Triton) and the candidate (gateway); [] = same. */
export function differences(c: Case, ref: Answer, got: Answer): string[] {
  const out: string[] = [];
  const status = expectedStatus(ref, got);
  if (status !== got.status) out.push(`status: expected ${status}${status === ref.status ? '' : ` (Triton: ${ref.status})`}, got ${got.status}`);
  for (const name of [...COMPARED_HEADERS, ...(c.alsoCompareHeaders ?? [])]) {
    if (ref.headers[name] !== got.headers[name]) out.push(`header ${name}: expected ${show(ref.headers[name])}, got ${show(got.headers[name])}`);
  }
  if (got.decodeError) out.push(got.decodeError);
  const cmp = c.compare ?? { kind: 'exact' };
  if (cmp.kind === 'exact') {
    if (!ref.body.equals(got.body)) {
      const at = firstDifference(ref.body, got.body);
      out.push(`body differs at byte ${at} (lengths: expected ${ref.body.length}, got ${got.body.length}); around it: expected ${preview(ref.body, Math.max(0, at - 40), 120)}, got ${preview(got.body, Math.max(0, at - 40), 120)}`);
    }
  } else if (cmp.kind === 'json-shape') {
    const zeroed = (b: Buffer): string => b.toString('utf8').replace(/-?\d+(\.\d+)?([eE][+-]?\d+)?/g, '0');
    const [a, b] = [zeroed(ref.body), zeroed(got.body)];
    if (a !== b) {
      const at = firstDifference(Buffer.from(a), Buffer.from(b));
      out.push(`JSON shape differs at ${at}: expected ${JSON.stringify(a.slice(Math.max(0, at - 60), at + 80))}, got ${JSON.stringify(b.slice(Math.max(0, at - 60), at + 80))}`);
    }
  } else {
    // Volatile bodies: both sides must satisfy the same shape (the reference too, so a stale
    // override is noticed).
    for (const [who, a] of [['triton', ref], ['gateway', got]] as const) {
      const s = a.body.toString('utf8');
      if (!s.startsWith(cmp.prefix)) out.push(`${who} body does not start with ${JSON.stringify(cmp.prefix)}`);
      for (const inc of cmp.includes) if (!s.includes(inc)) out.push(`${who} body does not contain ${JSON.stringify(inc)}`);
    }
  }
  return out;
}

/** A readable report of one exchange, for failure messages. */
export function report(c: Case, ref: Answer, got: Answer, diffs: string[]): string {
  const side = (label: string, a: Answer): string => {
    const hs = [...COMPARED_HEADERS, ...(c.alsoCompareHeaders ?? [])].map((h) => `    ${h}: ${show(a.headers[h])}`).join('\n');
    const enc = a.headers['content-encoding'] ? ` (decompressed from ${a.wire.length} wire bytes)` : '';
    return `  ${label}: ${a.status} ${a.statusMessage}\n${hs}\n    body ${a.body.length} bytes${enc}: ${preview(a.body, 0, 300)}`;
  };
  const sent = `${c.method} ${c.path}  headers=${JSON.stringify(c.headers ?? {})}  body=${c.body ? `${c.body.length} bytes${c.chunked ? `, chunked by ${c.chunked}` : ''}: ${preview(c.body, 0, 160)}` : 'none'}`;
  return [`case "${c.name}" differs:`, ...diffs.map((d) => `  - ${d}`), `  request: ${sent}`, side('triton ', ref), side('gateway', got)].join('\n');
}

function show(v: string | undefined): string {
  return v === undefined ? '(absent)' : JSON.stringify(v);
}

function firstDifference(a: Buffer, b: Buffer): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return n;
}

/** `len` bytes from `start`: as text when printable UTF-8, else with \xNN escapes for the rest. */
export function preview(buf: Buffer, start: number, len: number): string {
  const slice = buf.subarray(start, start + len);
  const more = start + len < buf.length ? `… (+${buf.length - start - len} bytes)` : '';
  const lead = start > 0 ? '…' : '';
  let s = '';
  for (let i = 0; i < slice.length; i++) {
    const c = slice[i]!;
    if (c >= 0x20 && c < 0x7f) s += String.fromCharCode(c);
    else if (c === 0x0a) s += '\\n';
    else if (c >= 0x80) {
      // Keep valid multi-byte UTF-8 sequences readable.
      const n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
      const seq = slice.subarray(i, i + n);
      const txt = n > 1 && seq.length === n ? seq.toString('utf8') : '\uFFFD';
      if (txt.includes('\uFFFD')) s += `\\x${c.toString(16).padStart(2, '0')}`;
      else {
        s += txt;
        i += n - 1;
      }
    } else s += `\\x${c.toString(16).padStart(2, '0')}`;
  }
  return `${lead}"${s}"${more}`;
}
