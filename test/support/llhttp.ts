// llhttp as node:http's server runs it, for differential tests of our own HTTP/1.1 parser
// (gateway/ingress/http1/head.ts): Node's HTTPParser binding, reachable without flags through the
// legacy `_http_common` module, set up as lib/_http_server.js connectionListenerInternal sets it
// up — a REQUEST parser, maxHeaderSize, no lenient flags (node:http's default, insecureHTTPParser
// off) and maxHeaderPairs from the server's maxHeadersCount, which the gateway sets one above
// server.maxHeaderCount (ingress/server.ts). Its callbacks collect what node:http's would hand
// to an IncomingMessage (Node's lib/_http_common.js parserOnHeaders / parserOnHeadersComplete). A
// thousand reads take milliseconds; `serverRead` below reads the same bytes through a real
// node:http server on 127.0.0.1, to check that this reading is the server's.
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { connect, type AddressInfo } from 'node:net';

type Callback = (...args: unknown[]) => unknown;
interface Parser {
  initialize(type: number, resource: object, maxHeaderSize: number, lenient: number): void;
  execute(b: Buffer): number | (Error & { code?: string; reason?: string });
  close(): void;
  maxHeaderPairs: number;
  [k: number]: Callback;
}
interface ParserClass {
  new (): Parser;
  REQUEST: number;
  kLenientNone: number;
  kOnHeaders: number;
  kOnHeadersComplete: number;
  kOnBody: number;
  kOnMessageComplete: number;
}
const common = createRequire(__filename)('_http_common') as { HTTPParser: ParserClass; methods: string[] };
const { HTTPParser, methods } = common;

/** One message as llhttp read it (up to its end, or as far as the bytes went). */
export interface LlhttpMessage {
  method: string;
  url: string;
  version: string;
  /** Raw name, value pairs, as req.rawHeaders. */
  headers: string[];
  keepAlive: boolean;
  upgrade: boolean;
  /** Body bytes read. */
  body: number;
  /** The message's end was read. */
  complete: boolean;
}

export interface LlhttpReading {
  messages: LlhttpMessage[];
  /** llhttp's refusal (code and reason), if it refused. */
  error?: string;
}

export interface ParserLimits {
  readonly maxHeaderBytes: number;
  readonly maxHeaderCount: number;
}

/** What llhttp reads from `chunks`, fed one execute() each, as node:http would feed its reads. */
export function llhttpRead(chunks: readonly Buffer[], limits: ParserLimits): LlhttpReading {
  const p = new HTTPParser();
  p.initialize(HTTPParser.REQUEST, {}, limits.maxHeaderBytes, HTTPParser.kLenientNone);
  p.maxHeaderPairs = (limits.maxHeaderCount + 1) << 1;
  const out: LlhttpReading = { messages: [] };
  let pending: string[] = [];
  let pendingUrl = '';
  let current: LlhttpMessage | undefined;
  p[HTTPParser.kOnHeaders] = (headers, url) => {
    pending.push(...(headers as string[]));
    pendingUrl += url as string;
  };
  p[HTTPParser.kOnHeadersComplete] = (major, minor, headers, method, url, _s, _m, upgrade, keepAlive) => {
    current = {
      method: methods[method as number] ?? String(method), url: (url as string | undefined) ?? pendingUrl,
      version: `${major as number}.${minor as number}`, headers: (headers as string[] | undefined) ?? pending,
      keepAlive: keepAlive as boolean, upgrade: upgrade as boolean, body: 0, complete: false,
    };
    pending = [];
    pendingUrl = '';
    out.messages.push(current);
    return 0;
  };
  p[HTTPParser.kOnBody] = (b) => {
    current!.body += (b as Buffer).length;
  };
  p[HTTPParser.kOnMessageComplete] = () => {
    current!.complete = true;
  };
  try {
    for (const chunk of chunks) {
      const r = p.execute(chunk);
      if (typeof r !== 'number') {
        out.error = `${r.code} ${r.reason}`;
        break;
      }
    }
  } finally {
    p.close();
  }
  return out;
}

/**
 * The first request of `bytes` as a real node:http server reads it (options as ingress/server.ts
 * sets them: maxHeaderSize, maxHeadersCount one above the count, no Host requirement): its
 * method, url, version, raw headers, keep-alive and the body bytes it delivered, or the
 * clientError's code. One connection, closed once the first request is read or refused.
 */
export async function serverRead(bytes: Buffer, limits: ParserLimits): Promise<LlhttpReading> {
  const out: LlhttpReading = { messages: [] };
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const m: LlhttpMessage = {
      method: req.method ?? '', url: req.url ?? '', version: req.httpVersion, headers: req.rawHeaders,
      keepAlive: res.shouldKeepAlive, upgrade: false, body: 0, complete: false,
    };
    out.messages.push(m);
    req.on('data', (c: Buffer) => { m.body += c.length; });
    req.on('end', () => { m.complete = true; });
    setTimeout(() => req.socket.destroy(), 20);
  };
  const server = createServer({ maxHeaderSize: limits.maxHeaderBytes, requireHostHeader: false }, onRequest);
  // An Expect other than 100-continue is answered 417 by node:http itself, past its parser.
  server.on('checkExpectation', onRequest);
  server.maxHeadersCount = limits.maxHeaderCount + 1;
  server.on('clientError', (err: NodeJS.ErrnoException & { reason?: string }, socket) => {
    out.error ??= `${err.code} ${err.reason}`;
    socket.destroy();
  });
  server.on('upgrade', (req: IncomingMessage, socket) => {
    out.messages.push({ method: req.method ?? '', url: req.url ?? '', version: req.httpVersion, headers: req.rawHeaders, keepAlive: false, upgrade: true, body: 0, complete: false });
    socket.destroy();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  try {
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.end(bytes);
    socket.resume();
    const timer = setTimeout(() => socket.destroy(), 2000);
    await once(socket, 'close');
    clearTimeout(timer);
  } finally {
    server.closeAllConnections();
    server.close();
  }
  return out;
}
