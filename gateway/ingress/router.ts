// Routing as Triton's HTTP frontend does it (PROTOCOL.md §1): regular expressions over the raw
// path with the query string dropped, no URL-decoding, digits-only versions; a known path
// with the wrong method is 405, anything else 404, both with Triton's JSON bodies.
import { GatewayError } from '../errors';
import type { RequestContext } from './context';

export type Handler = (ctx: RequestContext) => Promise<void>;
export type Method = 'GET' | 'POST';

export interface Route {
  /** Stable name for logs and metrics, e.g. "health_ready". */
  readonly name: string;
  /** Anchored pattern; its capture groups become `ctx.params`. */
  readonly pattern: RegExp;
  readonly methods: Partial<Record<Method, Handler>>;
  /** Triton answers a wrong method here with application/json (metadata and config), not text/plain. */
  readonly methodNotAllowedJson?: boolean;
}

export interface Match {
  readonly route: Route;
  readonly handler: Handler;
  readonly params: readonly string[];
}

export function matchRoute(routes: readonly Route[], method: string | undefined, rawUrl: string | undefined): Match {
  const url = rawUrl ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  for (const route of routes) {
    const m = route.pattern.exec(path);
    if (m === null) continue;
    const handler = route.methods[method as Method];
    if (handler === undefined) {
      throw new GatewayError('GW_ERR_ROUTE_METHOD_NOT_ALLOWED', 'Method Not Allowed', { plain: route.methodNotAllowedJson !== true });
    }
    return { route, handler, params: m.slice(1).map((s) => s ?? '') };
  }
  throw new GatewayError('GW_ERR_ROUTE_NOT_FOUND', 'Not Found');
}
