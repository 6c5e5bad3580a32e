// Pass-through routes (docs/dialects.md "Pass-through routes"): every method under a configured
// prefix goes to its HTTP upstream unchanged (upstream/http-passthrough.ts). Each route belongs to
// an API group (its `category`), so api.restricted, api.disabled and auth guard it as any other.
import type { PassthroughRoute } from '../config/routes';
import type { RequestContext } from '../ingress/context';
import { type Method, pathPrefix, type Route } from '../ingress/router';
import { HttpUpstreams } from '../upstream/http-passthrough';

const METHODS: readonly Method[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

export interface PassthroughRoutes {
  readonly routes: Route[];
  /** Closes the connection pools; requests still running after `deadlineMs` are aborted. */
  close(deadlineMs: number): Promise<void>;
}

export function passthroughRoutes(config: readonly PassthroughRoute[]): PassthroughRoutes {
  const upstreams = new HttpUpstreams();
  const routes = config.map((p): Route => {
    const handler = (ctx: RequestContext): Promise<void> => {
      ctx.record.encoding = 'passthrough';
      return upstreams.forward(ctx.req, ctx.res, ctx.signal, p);
    };
    return {
      name: `passthrough ${p.prefix}`,
      // The group the operator gives the route (default inference): the restricted-API check and auth apply to it.
      category: p.category,
      pattern: pathPrefix(p.prefix),
      relayed: true,
      methods: Object.fromEntries(METHODS.map((m) => [m, handler])),
    };
  });
  return { routes, close: (deadlineMs) => upstreams.close(deadlineMs) };
}
