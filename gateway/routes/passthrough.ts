// Pass-through routes (docs/dialects.md "Pass-through routes"): requests under a configured prefix go to an
// HTTP upstream — the legacy REST service, while models move one by one — with path and query
// unchanged, streamed both ways with undici's Dispatcher.stream() (the request body is piped as it arrives,
// the answer is written to the client as it comes). Hop-by-hop headers are dropped in both
// directions, X-Forwarded-For/-Host/-Proto are set, the upstream gets `timeoutMs` for its headers
// and between body chunks, and a client that goes away aborts the upstream request.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { Agent, errors as undiciErrors } from 'undici';
import type { PassthroughRoute } from '../config/routes';
import { settlesWithin } from '../deadline';
import { GatewayError } from '../errors';
import type { RequestContext } from '../ingress/context';
import { type Method, pathPrefix, type Route } from '../ingress/router';

const METHODS: readonly Method[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

/** RFC 9110 §7.6.1 connection-specific fields, plus Proxy-Connection and Expect (undici sends its own). */
const HOP_BY_HOP = new Set([
  'connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'expect', 'host',
]);

/** The headers without hop-by-hop fields, including those the Connection header names. */
function endToEnd(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const listed = new Set(String(headers.connection ?? '').toLowerCase().split(',').map((s) => s.trim()).filter((s) => s !== ''));
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    const name = k.toLowerCase();
    if (v === undefined || HOP_BY_HOP.has(name) || listed.has(name)) continue;
    out[name] = v;
  }
  return out;
}

export interface PassthroughRoutes {
  readonly routes: Route[];
  /** Closes the connection pools; requests still running after `deadlineMs` are aborted. */
  close(deadlineMs: number): Promise<void>;
}

export function passthroughRoutes(config: readonly PassthroughRoute[]): PassthroughRoutes {
  // One connection pool per upstream origin, kept alive across requests.
  const agents = new Map<string, Agent>();
  const routes = config.map((p): Route => {
    let agent = agents.get(p.upstream);
    if (agent === undefined) {
      agent = new Agent({ keepAliveTimeout: 30_000, connect: { timeout: p.timeoutMs } });
      agents.set(p.upstream, agent);
    }
    const handler = (ctx: RequestContext) => forward(ctx, p, agent);
    return {
      name: `passthrough ${p.prefix}`,
      pattern: pathPrefix(p.prefix),
      methods: Object.fromEntries(METHODS.map((m) => [m, handler])),
    };
  });
  return {
    routes,
    async close(deadlineMs) {
      const all = [...agents.values()];
      if (!await settlesWithin(Promise.all(all.map((a) => a.close())), deadlineMs)) {
        await Promise.all(all.map((a) => a.destroy()));
      }
    },
  };
}

async function forward(ctx: RequestContext, p: PassthroughRoute, dispatcher: Agent): Promise<void> {
  const { req, res, signal } = ctx;
  const headers = endToEnd(req.headers);
  const client = req.socket.remoteAddress ?? '';
  const prior = req.headers['x-forwarded-for'];
  headers['x-forwarded-for'] = prior === undefined ? client : `${Array.isArray(prior) ? prior.join(', ') : prior}, ${client}`;
  if (req.headers.host !== undefined) headers['x-forwarded-host'] = req.headers.host;
  headers['x-forwarded-proto'] = 'http';
  const hasBody = req.headers['content-length'] !== undefined ? req.headers['content-length'] !== '0' : req.headers['transfer-encoding'] !== undefined;
  ctx.record.encoding = 'passthrough';

  try {
    // The dispatcher's stream() takes origin and path apart: the path goes out byte for byte
    // (the top-level stream(url) would run it through URL and resolve dot segments).
    await dispatcher.stream({
      origin: p.upstream,
      method: req.method ?? 'GET',
      path: req.url ?? '/',
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
    throw upstreamError(err, p.upstream);
  }
}

function upstreamError(err: unknown, upstream: string): GatewayError {
  const e = err as { code?: string; message?: string };
  if (err instanceof undiciErrors.HeadersTimeoutError || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_CONNECT_TIMEOUT') {
    return new GatewayError('GW_ERR_PASSTHROUGH_TIMEOUT', `upstream ${upstream} did not answer in time`, { cause: err });
  }
  return new GatewayError('GW_ERR_PASSTHROUGH_UNAVAILABLE', `upstream ${upstream} failed: ${e.code ?? e.message ?? String(err)}`, { cause: err });
}
