// Routing as Triton's HTTP frontend does it (docs/architecture.md#endpoints): regular expressions over the raw
// path with the query string dropped, no URL-decoding, digits-only versions; a known path
// with the wrong method is 405, anything else 404, both with Triton's JSON bodies. A route's
// restricted-API category is checked before its method, as Triton does (docs/architecture.md#restricted-apis).
import type { LaneOutcome } from './http1/fast';
import type { KeptAnswer, KeptRequest } from './http1/lane';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { Access, ApiCategory } from '../api-access';
import { type ErrorShape, GatewayError } from '../errors';
import type { RequestContext } from './context';
import type { RequestRecord } from '../telemetry/record';

export type Handler = (ctx: RequestContext) => Promise<void>;
/** GET and POST for Triton's routes; pass-through routes take every method. */
export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD' | 'OPTIONS';

export interface Route {
  /** Stable name for logs and metrics, e.g. "health_ready". */
  readonly name: string;
  /** Anchored pattern; its capture groups become `ctx.params`. */
  readonly pattern: RegExp;
  readonly methods: Partial<Record<Method, Handler>>;
  /** Triton answers a wrong method here with application/json (metadata and config), not text/plain. */
  readonly methodNotAllowedJson?: boolean;
  /** Triton's restricted-API category; none for the gateway's own probes. */
  readonly category?: ApiCategory;
  /**
   * The model a request calls, for credentials limited to some models (auth/guard.ts): the
   * capture holding its name (as sent: routing does no URL-decoding), the route's fixed model, or
   * a header that names it, else that capture (SageMaker's X-Amzn-SageMaker-Target-Model): read by
   * routeModel, for the guard and the handler alike.
   */
  readonly model?: { readonly param: number } | { readonly name: string } | { readonly header: string; readonly param: number };
  /**
   * A liveness or readiness probe: never refused by the in-flight bounds nor counted in them
   * (ingress/server.ts).
   */
  readonly probe?: boolean;
  /**
   * Relayed as is to another HTTP server (pass-through): its headers, `grpc-timeout` included,
   * are that server's to read, not the gateway's.
   */
  readonly relayed?: boolean;
  /**
   * The shape of the route's error answers, its dialect's (TorchServe's, OpenAI's): every error
   * once the route is matched — the credentials', the in-flight bounds', the handler's — with the
   * gateway's status and code (egress/write.ts writeError). Absent: Triton's `{"error": "…"}`.
   */
  readonly errorShape?: ErrorShape;
  /**
   * Requests the fast path may serve without node:http's objects nor the handler, decided when
   * the route was built (pipeline/infer-planned.ts). A guarded route has none (auth/guard.ts).
   */
  readonly planned?: PlannedRoute | undefined;
}

/**
 * A route's planned requests: a request on the HTTP/1.1 fast path (ingress/http1/fast.ts) that
 * takes() accepts when its head arrives is served by serve() once its body is whole (the pieces
 * of the socket's reads, in order) and answered through its PlannedRequest.
 */
export interface PlannedRoute {
  /** Whether this request is planned; no side effect (false: the handler serves it as ever). */
  takes(params: readonly string[], headers: IncomingHttpHeaders, bodyBytes: number): boolean;
  /**
   * Whether a body over 1 MiB may be planned where the compiled lane serves (ingress/server.ts
   * plannedBodyBytes): the model's answers are ones the lane keeps whatever their form (every
   * output of a type it prints), so that the repeats are C's. Otherwise such a body is the
   * handler's, which sends it as it arrives.
   */
  largeBodies(params: readonly string[]): boolean;
  serve(x: PlannedRequest, body: readonly Buffer[]): void;
}

/** What a planned request is given by the server that read it (ingress/server.ts). */
export interface PlannedRequest {
  readonly params: readonly string[];
  readonly req: { readonly headers: IncomingHttpHeaders };
  readonly record: RequestRecord;
  readonly upstreamHeaders: Readonly<Record<string, string>>;
  /** The request's upstream call, once started (pipeline/infer-planned.ts): cancelled when the client goes first. */
  call: { cancel(): void } | undefined;
  /** A planned request asks for no deadline of its own (grpc-timeout: the handler's). */
  readonly askedDeadline: undefined;
  /** Writes the 200 answer: `headers`, then `parts` as its body (the server adds Content-Length). */
  answer(headers: OutgoingHttpHeaders, parts: readonly Buffer[]): void;
  /** Answers an error as a handler's thrown error is answered (egress/write.ts writeError). */
  fail(err: unknown): void;
  /**
   * How the compiled lane left this request (ingress/http1/lane.ts): its call failed, or was
   * answered, there; it is answered so and not sent again. Undefined: a request as any other.
   */
  readonly outcome: LaneOutcome | undefined;
  /** Its request and answer were taken from kept heads: the compiled lane may keep it too. */
  kept(known: KeptRequest, answer: KeptAnswer): void;
  /** The compiled lane may keep this request (kept() is worth calling: work to find what it keeps is not wasted). */
  readonly keeping: boolean;
}

/**
 * The model a request to `route` calls (Route.model): what the guard authorises and what a
 * handler of a route whose model a header can name must call. A header given twice is one value
 * (Node joins them with ", "), never a model the guard did not see.
 */
export function routeModel(route: Route, params: readonly string[], headers: IncomingHttpHeaders): string | undefined {
  const m = route.model;
  if (m === undefined) return undefined;
  if ('name' in m) return m.name;
  if ('header' in m) {
    const v = headers[m.header];
    if (typeof v === 'string') return v;
  }
  return params[m.param];
}

export type AccessTable = Readonly<Record<ApiCategory, Access>>;

export interface Match {
  readonly route: Route;
  readonly handler: Handler;
  readonly params: readonly string[];
}

/**
 * The route a path matched and its captures, with the Match of each method asked for: a path is
 * matched against the routes' patterns once, then found here (matchRoute). Per table of routes.
 */
interface Matched {
  readonly route: Route;
  readonly params: readonly string[];
  readonly methods: Map<string, Match>;
}
const MATCHED = new WeakMap<readonly Route[], Map<string, Matched>>();
/**
 * Paths remembered per table of routes: those a deployment's clients send (its models' routes)
 * fit; past it the table starts again, so paths that are all different (a scan) bound its memory.
 */
const MATCHED_PATHS = 1024;

/**
 * The route of a request and its captures: the first route whose pattern matches the path, its
 * access (`access`, the route's restricted-API category, from `headers`) checked on every request.
 */
export function matchRoute(routes: readonly Route[], method: string | undefined, rawUrl: string | undefined,
  access?: AccessTable, headers?: IncomingHttpHeaders): Match {
  const url = rawUrl ?? '/';
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  let table = MATCHED.get(routes);
  if (table === undefined) MATCHED.set(routes, table = new Map<string, Matched>());
  let matched = table.get(path);
  if (matched === undefined) {
    matched = find(routes, path);
    if (table.size >= MATCHED_PATHS) table.clear();
    table.set(path, matched);
  }
  const { route } = matched;
  if (access !== undefined && route.category !== undefined) checkAccess(access[route.category], route.category, headers ?? {});
  const m = method ?? '';
  let match = matched.methods.get(m);
  if (match === undefined) {
    const handler = route.methods[m as Method];
    if (handler === undefined) {
      throw new GatewayError('GW_ERR_ROUTE_METHOD_NOT_ALLOWED', 'Method Not Allowed', { plain: route.methodNotAllowedJson !== true });
    }
    matched.methods.set(m, match = { route, handler, params: matched.params });
  }
  return match;
}

/** The first route whose pattern matches `path`. */
function find(routes: readonly Route[], path: string): Matched {
  for (let i = 0; i < routes.length; i++) {
    const route = routes[i]!;
    const m = route.pattern.exec(path);
    if (m !== null) return { route, params: Object.freeze(groups(m)), methods: new Map<string, Match>() };
  }
  throw new GatewayError('GW_ERR_ROUTE_NOT_FOUND', 'Not Found');
}

/** The match's groups, '' for one that did not take part. */
function groups(m: RegExpExecArray): string[] {
  const params = new Array<string>(m.length - 1);
  for (let i = 1; i < m.length; i++) params[i - 1] = m[i] ?? '';
  return params;
}

/**
 * Triton's answer to a restricted API without its header (403, text/plain: the check runs before
 * the handler sets a content type). A category the gateway disables gets the same status and a
 * message that names the setting.
 */
function checkAccess(access: Access, category: ApiCategory, headers: IncomingHttpHeaders): void {
  if (access.kind === 'open') return;
  if (access.kind === 'disabled') {
    throw new GatewayError('GW_ERR_ROUTE_DISABLED', `This API is restricted, the '${category}' API group is disabled on this gateway (api.disabled)`);
  }
  const v = headers[access.key.toLowerCase()];
  if (v !== access.value) throw new GatewayError('GW_ERR_ROUTE_RESTRICTED', `This API is restricted, expecting header '${access.key}'`);
}

/** `s` as a pattern that matches it literally (slashes escaped too). */
export const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/** The pattern of one configured path, matched exactly (declarative routes). */
export function exactPath(path: string): RegExp {
  return new RegExp(`^${escapeRegExp(path)}$`);
}

/** The pattern of a configured prefix: the prefix itself and every path below it (pass-through routes). */
export function pathPrefix(prefix: string): RegExp {
  return new RegExp(`^${escapeRegExp(prefix)}(?:/.*)?$`);
}
