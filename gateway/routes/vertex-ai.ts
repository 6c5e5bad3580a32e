// The routes of Triton's Vertex AI frontend (src/vertex_ai_server.cc), on the gateway's port when
// vertexAi.enabled (docs/dialects.md "Vertex AI"):
//   GET  <vertexAi.healthRoute>   → server readiness (HandleServerHealth "ready"): 200 or 400, empty
//   POST <vertexAi.predictRoute>  → V2 infer of vertexAi.defaultModel, or, with
//        X-Vertex-Ai-Triton-Redirect: <path>, the Triton API at /<path> that the frontend lets a
//        redirect reach, called with the method that API takes.
// Infers (the default model's and /v2/models/{m}[/versions/{v}]/infer redirected) are
// routes/infer.ts's with the media type application/vnd.vertex-ai-triton.binary+json;json-header-size=N
// in place of Inference-Header-Content-Length and no compression; their answers are V2's (the
// frontend keeps the base SetResponseHeader). The other redirects go to the gateway's own route
// for that path, exactly as a request to it would go: its API group's restriction, its
// credentials' group and model (auth/guard.ts), its answer. A redirect names the model it reaches
// in its path, so the guard of that route checks it; this route itself has no group, and sends
// nothing upstream of its own.
// What a redirect may reach is Triton's list: metrics, every model's statistics, a model's
// metadata, readiness, config, statistics and infer, server metadata and health, shared-memory
// status and the repository index. Shared-memory register/unregister and repository load/unload
// are 403, as Triton answers them; metrics 403 too (the gateway's metrics are on their own port,
// Triton's are not the gateway's to relay); any other path 400, as Triton answers. Triton answers
// those with an empty body, the gateway with {"error"} naming the problem.
import { GatewayError } from '../errors';
import { type RequestContext, withParams } from '../ingress/context';
import { type AccessTable, exactPath, matchRoute, type Route } from '../ingress/router';
import type { InferPlan } from '../pipeline/infer-decode';
import { VERTEX_AI_DIALECT } from '../pipeline/infer-dialect';
import type { ControlPlane } from '../upstream/control/control-plane';
import { serverHealth } from './health';
import { infer } from './infer';

export interface VertexAiDeps {
  readonly control: ControlPlane;
  /** routes/infer.ts inferPlan: the V2 infer's plan, which gets the dialect here. */
  readonly plan: InferPlan;
  readonly predictRoute: string;
  readonly healthRoute: string;
  readonly defaultModel: string;
  /** api.restricted and api.disabled, as the router checks them (ingress/router.ts). */
  readonly access: AccessTable;
  /** What the server does to every route it serves: auth's guard (auth/guard.ts), or nothing. */
  readonly guard: (routes: Route[]) => Route[];
  /** The routes the server serves, guarded; read when a redirect arrives (they include these). */
  readonly served: () => readonly Route[];
}

export const REDIRECT_HEADER = 'x-vertex-ai-triton-redirect';

/** Where a redirect goes, decided from its path alone (Triton's regular expressions, in its order). */
export type RedirectTarget =
  /** The gateway's own route for `path`, asked with `method`; `routes`: the names it may be. */
  | { readonly kind: 'route'; readonly method: 'GET' | 'POST'; readonly path: string; readonly routes: readonly string[] }
  /** A model's infer, with the dialect. */
  | { readonly kind: 'infer'; readonly path: string }
  | { readonly kind: 'refused'; readonly why: string }
  | { readonly kind: 'invalid'; readonly why: string };

const MODEL = /^\/v2\/models\/([^/]+)(?:\/versions\/([0-9]+))?(?:\/(infer|generate|generate_stream|ready|config|stats|trace\/setting))?$/;
const HEALTH = /^\/v2\/health\/(live|ready)$/;
const SHARED_MEMORY = /^\/v2\/(systemsharedmemory|cudasharedmemory)(?:\/region\/([^/]+))?\/(status|register|unregister)$/;
const REPOSITORY = /^\/v2\/repository(?:\/([^/]+))?\/(index|models\/([^/]+)\/(load|unload))$/;

/** The target of `X-Vertex-Ai-Triton-Redirect: value` (VertexAiAPIServer::Handle). */
export function redirectTarget(value: string): RedirectTarget {
  // The path is matched as sent, and a query would be dropped by the router but not by Triton:
  // the gateway takes printable ASCII without ? or #, so the route it picks is the one Triton would.
  if (!/^[\x21-\x7e]*$/.test(value) || /[?#]/.test(value)) {
    return { kind: 'invalid', why: `X-Vertex-Ai-Triton-Redirect ${JSON.stringify(value)} is not a path of Triton (printable ASCII, no query or fragment)` };
  }
  const path = `/${value}`;
  if (path === '/metrics') return { kind: 'refused', why: 'X-Vertex-Ai-Triton-Redirect: metrics are not served through the gateway\'s port (the gateway\'s own are on its metrics port)' };
  if (path === '/v2/models/stats') return { kind: 'route', method: 'GET', path, routes: ['statistics_all'] };
  const m = MODEL.exec(path);
  if (m !== null) {
    const kind = m[3] ?? '';
    if (kind === 'infer') return { kind: 'infer', path };
    const route = { '': 'model_metadata', ready: 'model_ready', config: 'model_config', stats: 'statistics_model' }[kind];
    if (route !== undefined) return { kind: 'route', method: 'GET', path, routes: [route] };
  }
  if (path === '/v2') return { kind: 'route', method: 'GET', path, routes: ['server_metadata'] };
  if (HEALTH.test(path)) return { kind: 'route', method: 'GET', path, routes: ['health_live', 'health_ready'] };
  const shm = SHARED_MEMORY.exec(path);
  if (shm !== null) {
    if (shm[3] === 'status') return { kind: 'route', method: 'GET', path, routes: [`${shm[1]}_status`] };
    return { kind: 'refused', why: `X-Vertex-Ai-Triton-Redirect: shared-memory ${shm[3]} changes Triton, and only read-only status queries may be redirected` };
  }
  const repo = REPOSITORY.exec(path);
  if (repo !== null) {
    if (repo[2] === 'index') return { kind: 'route', method: 'POST', path, routes: ['repository_index'] };
    return { kind: 'refused', why: `X-Vertex-Ai-Triton-Redirect: model ${repo[4]} changes Triton, and only the repository index may be redirected` };
  }
  return { kind: 'invalid', why: `X-Vertex-Ai-Triton-Redirect ${JSON.stringify(value)} names no API a Vertex AI redirect may reach` };
}

export function vertexAiRoutes(deps: VertexAiDeps): Route[] {
  const plan: InferPlan = { ...deps.plan, dialect: VERTEX_AI_DIALECT };
  // The infers a predict reaches, each guarded for its own model as any route is.
  const infers = deps.guard([
    {
      name: 'vertex_ai_predict_default',
      category: 'inference',
      model: { name: deps.defaultModel },
      pattern: exactPath(deps.predictRoute),
      methods: {
        POST: (ctx) => {
          ctx.record.model = deps.defaultModel;
          return infer(withParams(ctx, [deps.defaultModel, '']), plan);
        },
      },
    },
    {
      name: 'vertex_ai_predict_redirected',
      category: 'inference',
      model: { param: 0 },
      pattern: /^\/v2\/models\/([^/]+)(?:\/versions\/([0-9]+))?\/infer$/,
      methods: { POST: (ctx) => infer(ctx, plan) },
    },
  ]);
  return [
    { name: 'vertex_ai_health', probe: true, category: 'health', pattern: exactPath(deps.healthRoute), methods: { GET: serverHealth(deps.control, 'ready') } },
    { name: 'vertex_ai_predict', pattern: exactPath(deps.predictRoute), methods: { POST: (ctx) => predict(ctx, deps, infers) } },
  ];
}

async function predict(ctx: RequestContext, deps: VertexAiDeps, infers: readonly Route[]): Promise<void> {
  const value = ctx.req.headers[REDIRECT_HEADER];
  if (value === undefined) return dispatch(ctx, infers, 'POST', deps.predictRoute, deps.access, ['vertex_ai_predict_default']);
  const target = redirectTarget(Array.isArray(value) ? value.join(', ') : value);
  switch (target.kind) {
    case 'invalid': throw new GatewayError('GW_ERR_ROUTE_REDIRECT_INVALID', target.why);
    case 'refused': throw new GatewayError('GW_ERR_ROUTE_REDIRECT_REFUSED', target.why);
    case 'infer': return dispatch(ctx, infers, 'POST', target.path, deps.access, ['vertex_ai_predict_redirected']);
    case 'route': return dispatch(ctx, deps.served(), target.method, target.path, deps.access, target.routes);
  }
}

/**
 * Runs the handler `routes` has for `method` and `path`, as the server would run it for a request
 * to that path: its API group's access first (the router's own check), then its guarded handler.
 */
async function dispatch(ctx: RequestContext, routes: readonly Route[], method: 'GET' | 'POST', path: string, access: AccessTable,
  names: readonly string[]): Promise<void> {
  const m = matchRoute(routes, method, path, access, ctx.req.headers);
  // Triton's patterns and the gateway's agree on these paths; a mismatch would be a gateway bug,
  // refused rather than served by some other route.
  if (!names.includes(m.route.name)) throw new GatewayError('GW_ERR_ROUTE_REDIRECT_INVALID', `X-Vertex-Ai-Triton-Redirect: ${path} reaches no redirectable route of the gateway`);
  // as the server records a route's first capture (the model, where there is one)
  if (m.params[0]) ctx.record.model = m.params[0];
  await m.handler(withParams(ctx, m.params));
}
