// Pass-through to HTTP upstreams (docs/dialects.md "Pass-through routes"): the legacy REST service,
// while models move one by one — the path as passthrough/path.ts normalised it, the query
// unchanged, streamed both ways with undici's Dispatcher.stream() (the request body is piped as it
// arrives, the answer is written to the client as it comes). Hop-by-hop headers are dropped in
// both directions, and every credential header the gateway knows is dropped from the request
// (auth/credential-headers.ts), X-Forwarded-For/-Host/-Proto are set, the upstream gets
// `timeoutMs` for its headers and between body chunks, and a client that goes away aborts the
// upstream request.
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { Agent, errors as undiciErrors } from 'undici';
import type { PassthroughRoute } from '../config/routes';
import { settlesWithin } from '../deadline';
import { GatewayError } from '../errors';

/** RFC 9110 §7.6.1 connection-specific fields, plus Proxy-Connection and Expect (undici sends its own). */
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'expect', 'host',
]);

/** The headers without hop-by-hop fields, including those the Connection header names, and without `dropped`. */
function endToEnd(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>,
  dropped?: ReadonlySet<string>): Record<string, string | string[]> {
  const listed = new Set(String(headers.connection ?? '').toLowerCase().split(',').map((s) => s.trim()).filter((s) => s !== ''));
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    const name = k.toLowerCase();
    // HTTP/2's pseudo-header fields (:method, :path, …) are the request line, not headers.
    if (v === undefined || HOP_BY_HOP.has(name) || listed.has(name) || name.startsWith(':') || dropped?.has(name) === true) continue;
    out[name] = v;
  }
  return out;
}

/** One connection pool per upstream origin, kept alive across requests. */
export class HttpUpstreams {
  readonly #agents = new Map<string, Agent>();

  /** `credentials`: the header names never relayed. */
  constructor(private readonly credentials: ReadonlySet<string>) {}

  #agentFor(p: PassthroughRoute): Agent {
    let agent = this.#agents.get(p.upstream);
    if (agent === undefined) {
      agent = new Agent({ keepAliveTimeout: 30_000, connect: { timeout: p.timeoutMs } });
      this.#agents.set(p.upstream, agent);
    }
    return agent;
  }

  /**
   * Sends the request (to `path`: the normalised path and the query) to the route's upstream and
   * streams the answer to `res`. Rejects with
   * GW_ERR_PASSTHROUGH_* when the upstream fails before answering; a client that went away ends it quietly.
   */
  async forward(req: IncomingMessage, res: ServerResponse, signal: AbortSignal, p: PassthroughRoute, path: string): Promise<void> {
    const dispatcher = this.#agentFor(p);
    const headers = endToEnd(req.headers, this.credentials);
    const client = req.socket.remoteAddress ?? '';
    const prior = req.headers['x-forwarded-for'];
    headers['x-forwarded-for'] = prior === undefined ? client : `${Array.isArray(prior) ? prior.join(', ') : prior}, ${client}`;
    const host = req.headers.host ?? req.headers[':authority']; // HTTP/2 names the host :authority
    if (host !== undefined) headers['x-forwarded-host'] = String(host);
    headers['x-forwarded-proto'] = (req.socket as TLSSocket).encrypted === true ? 'https' : 'http';
    const hasBody = req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;

    try {
      // The dispatcher's stream() takes origin and path apart: the path goes out byte for byte,
      // as normalised (the top-level stream(url) would run it through URL once more).
      await dispatcher.stream({
        origin: p.upstream,
        method: req.method ?? 'GET',
        path,
        headers,
        body: hasBody ? req : undefined,
        signal,
        headersTimeout: p.timeoutMs,
        bodyTimeout: p.timeoutMs,
      }, ({ statusCode, headers: upstreamHeaders }) => {
        res.writeHead(statusCode, endToEnd(upstreamHeaders) as OutgoingHttpHeaders);
        return res;
      });
    } catch (err) {
      if (signal.aborted) return; // the client went away; undici has aborted the upstream request
      throw passthroughError(err, p.upstream);
    }
  }

  /** Closes the connection pools; requests still running after `deadlineMs` are aborted. */
  async close(deadlineMs: number): Promise<void> {
    const all = [...this.#agents.values()];
    if (!await settlesWithin(Promise.all(all.map((a) => a.close())), deadlineMs)) {
      await Promise.all(all.map((a) => a.destroy()));
    }
  }
}

/** A failed request to an HTTP pass-through upstream (undici's error): the client's 504 or 502, naming it. */
function passthroughError(err: unknown, upstream: string): GatewayError {
  const e = err as { code?: string; message?: string };
  if (err instanceof undiciErrors.HeadersTimeoutError || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_CONNECT_TIMEOUT') {
    return new GatewayError('GW_ERR_PASSTHROUGH_TIMEOUT', `upstream ${upstream} did not answer in time`, { cause: err });
  }
  return new GatewayError('GW_ERR_PASSTHROUGH_UNAVAILABLE', `upstream ${upstream} failed: ${e.code ?? e.message ?? String(err)}`, { cause: err });
}
