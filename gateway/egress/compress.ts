// Response compression as Triton negotiates it (docs/architecture.md#compression): Accept-Encoding is a comma list
// of `token[;q=w]`; leading spaces are skipped, tokens compared exactly, the highest weight > 0
// wins and the first listed wins ties; `*` is not understood. gzip = gzip wrapper, deflate =
// zlib wrapper; the whole body is compressed. A compression failure falls back to identity.
import type { IncomingMessage } from 'node:http';
import { createDeflate, createGzip } from 'node:zlib';

export type ResponseEncoding = 'gzip' | 'deflate' | undefined;

export function responseEncoding(req: Pick<IncomingMessage, 'headers'>): ResponseEncoding {
  const header = req.headers['accept-encoding'];
  if (header === undefined) return undefined;
  let best = 'identity';
  let weight = 0;
  for (const item of header.split(',')) {
    const start = item.search(/[^ ]/);
    const q = item.indexOf(';q=');
    if (start === -1 || (q !== -1 && start >= q)) continue;
    const type = q === -1 ? item.slice(start) : item.slice(start, q);
    let w = 1;
    if (q !== -1) {
      // std::stod: leading whitespace, then the longest number prefix; nothing parsable skips the item.
      const m = /^\s*[+-]?(\d+\.?\d*(e[+-]?\d+)?|\.\d+(e[+-]?\d+)?|inf(inity)?|nan)/i.exec(item.slice(q + 3));
      if (m === null) continue;
      w = Number(m[0].trim().replace(/^([+-]?)inf(inity)?$/i, '$1Infinity'));
    }
    if ((type === 'identity' || type === 'deflate' || type === 'gzip') && w > weight) {
      best = type;
      weight = w;
    }
  }
  return best === 'gzip' || best === 'deflate' ? best : undefined;
}

/** Compresses the parts; resolves to the compressed chunks, or undefined on failure. */
export function compress(parts: readonly Buffer[], encoding: 'gzip' | 'deflate'): Promise<Buffer[] | undefined> {
  return new Promise((resolve) => {
    const z = encoding === 'gzip' ? createGzip() : createDeflate();
    const out: Buffer[] = [];
    z.on('data', (c: Buffer) => out.push(c));
    z.on('end', () => resolve(out));
    z.on('error', () => resolve(undefined));
    for (const p of parts) z.write(p);
    z.end();
  });
}
