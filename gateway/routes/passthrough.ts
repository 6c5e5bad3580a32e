// Pass-through routes (docs/dialects.md "Pass-through routes"): every method under a configured
// prefix goes to its HTTP upstream (passthrough/http-upstream.ts). Each route belongs to an API
// group (its `category`), so api.restricted, api.disabled and auth guard it as any other. The path
// is normalised before it is matched and goes upstream normalised (passthrough/path.ts);
// the longest prefix that holds it wins, so a stricter /legacy/admin route is not bypassed through
// /legacy. No credential header goes upstream (auth/credential-headers.ts).
import type { PassthroughRoute } from '../config/routes';
import type { RequestContext } from '../ingress/context';
import type { Method, Route } from '../ingress/router';
import { HttpUpstreams } from '../passthrough/http-upstream';
import { NormalisedPrefix, normalisePath } from '../passthrough/path';

const METHODS: readonly Method[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

export interface PassthroughRoutes {
  readonly routes: Route[];
  /** Closes the connection pools; requests still running after `deadlineMs` are aborted. */
  close(deadlineMs: number): Promise<void>;
}

/** `credentials`: the header names never relayed (auth/credential-headers.ts credentialHeaders). */
export function passthroughRoutes(config: readonly PassthroughRoute[], credentials: ReadonlySet<string>): PassthroughRoutes {
  const upstreams = new HttpUpstreams(credentials);
  const longestFirst = [...config].sort((a, b) => b.prefix.length - a.prefix.length);
  const routes = longestFirst.map((p): Route => {
    const handler = (ctx: RequestContext): Promise<void> => {
      ctx.record.encoding = 'passthrough';
      const url = ctx.req.url ?? '/';
      const q = url.indexOf('?');
      // The pattern matched, so the path normalises (NormalisedPrefix.exec).
      const n = normalisePath(q === -1 ? url : url.slice(0, q));
      const path = 'path' in n ? n.path : '/';
      return upstreams.forward(ctx.req, ctx.res, ctx.signal, p, q === -1 ? path : path + url.slice(q));
    };
    return {
      name: `passthrough ${p.prefix}`,
      // The group the operator gives the route (default inference): the restricted-API check and auth apply to it.
      category: p.category,
      pattern: new NormalisedPrefix(p.prefix),
      relayed: true,
      methods: Object.fromEntries(METHODS.map((m) => [m, handler])),
    };
  });
  return { routes, close: (deadlineMs) => upstreams.close(deadlineMs) };
}
