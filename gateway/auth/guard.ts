// Authentication in front of the route handlers. Every route of a group that is not open
// (auth.open) gets its handlers wrapped at start, so open routes and a gateway without auth pay
// nothing per request. The check runs before the handler reads anything of the body: a refusal
// goes through the server's early-answer path (ingress/server.ts: a bounded drain, then close).
// 401 when the credentials are missing or not valid, 403 when they are valid but do not cover
// the API group or the model, 503 when the JWKS cannot be fetched: each with RFC 6750's
// WWW-Authenticate challenge and a GW_ERR_AUTH_* code. The decision goes in the request's record.
// Credentials let in then meet their limits (auth/limits.ts): past them 429 with Retry-After, still
// before the body is read; a place taken is given back when the request is over (ctx.whenDone).
import type { ApiCategory } from '../api-access';
import { GatewayError } from '../errors';
import type { RequestContext } from '../ingress/context';
import { type Handler, type Method, type Route, routeModel } from '../ingress/router';
import type { Authentication, Authenticator } from './authenticator';
import type { Grant } from './key-file';
import type { LimitRefusal } from './limits';
import type { LimitsWithQuotas, MeteredRecord } from './usage';

export const REALM = 'tensorgate';

/** The message of GW_ERR_AUTH_MISSING: how to send credentials. */
export function missingMessage(keyHeader: string): string {
  return `authentication required: send Authorization: Bearer <token>${keyHeader === '' ? '' : ` or ${keyHeader}: <key>`}`;
}

export function guardRoutes(routes: readonly Route[], auth: Authenticator, keyHeader: string): Route[] {
  const missing = missingMessage(keyHeader);
  return routes.map((route) => {
    const category = route.category;
    // The gateway's own probes have no group; open groups need no credentials.
    if (category === undefined || auth.open.has(category)) return route;
    const methods: Partial<Record<Method, Handler>> = {};
    for (const [m, h] of Object.entries(route.methods) as [Method, Handler][]) {
      methods[m] = async (ctx) => {
        const a = await auth.authenticate(ctx.req.headers);
        decide(ctx, route, category, a, missing);
        if (a.kind === 'granted') await limit(ctx, auth.limiter, a.grant, a.method);
        return h(ctx);
      };
    }
    // A planned route (pipeline/infer-planned.ts) never skips the guard: it is served by its handler.
    return { ...route, methods, planned: undefined };
  });
}

/** Who was let in, or why not (telemetry/record.ts AuthRecord). Never the credential. */
export interface AuthDecision {
  readonly outcome: 'allowed' | 'missing' | 'invalid' | 'forbidden' | 'unavailable';
  readonly method: 'key' | 'jwt' | 'none';
  readonly subject?: string;
}

/** A refusal: the error, and RFC 6750's WWW-Authenticate challenge an HTTP answer carries. */
export interface AuthRefusal {
  readonly error: GatewayError;
  readonly challenge?: string;
}

/**
 * The decision for a credential, an API group and (when known) a model: the core of the guard,
 * shared by the HTTP routes and the gRPC pass-through (passthrough/grpc-ingress.ts), which answers
 * a refusal with a gRPC status instead.
 */
export function judge(a: Authentication, category: ApiCategory, model: string | undefined, missing: string): { decision: AuthDecision; refusal?: AuthRefusal } {
  if (a.kind === 'missing') {
    // RFC 6750 §3.1: a request without credentials gets the challenge without an error code.
    return { decision: { outcome: 'missing', method: 'none' }, refusal: { error: new GatewayError('GW_ERR_AUTH_MISSING', missing), challenge: `Bearer realm="${REALM}"` } };
  }
  if (a.kind === 'invalid') {
    return {
      decision: { outcome: 'invalid', method: a.method },
      refusal: {
        error: new GatewayError('GW_ERR_AUTH_INVALID', `the credentials are not valid: ${a.reason}`),
        challenge: `Bearer realm="${REALM}", error="invalid_token", error_description="${quotable(a.reason)}"`,
      },
    };
  }
  if (a.kind === 'unavailable') {
    return { decision: { outcome: 'unavailable', method: a.method }, refusal: { error: new GatewayError('GW_ERR_AUTH_UNAVAILABLE', `the credentials cannot be checked now: ${a.reason}`) } };
  }
  const { grant } = a;
  const forbidden: AuthDecision = { outcome: 'forbidden', method: a.method, subject: grant.subject };
  if (!grant.groups.has(category)) {
    // RFC 6750 §3.1 insufficient_scope: 403, naming the scope that would do.
    return {
      decision: forbidden,
      refusal: {
        error: new GatewayError('GW_ERR_AUTH_FORBIDDEN', `${whoOf(grant)} may not use the '${category}' API group`),
        challenge: `Bearer realm="${REALM}", error="insufficient_scope", scope="${category}"`,
      },
    };
  }
  const refused = modelRefusal(grant, model);
  if (refused !== undefined) return { decision: forbidden, refusal: refused };
  return { decision: { outcome: 'allowed', method: a.method, subject: grant.subject } };
}

/**
 * The refusal of a model the credentials do not cover; undefined when they do, or when the call
 * names no model (undefined). `EVERY_MODEL` is a call that acts on every model at once (the
 * global trace settings): credentials limited to some models may not make it.
 */
export function modelRefusal(grant: Grant, model: string | undefined): AuthRefusal | undefined {
  if (grant.models === undefined || model === undefined || grant.models.has(model)) return undefined;
  const what = model === EVERY_MODEL ? 'make a call that applies to every model' : `call model '${model}'`;
  return {
    error: new GatewayError('GW_ERR_AUTH_FORBIDDEN', `${whoOf(grant)} may not ${what}`),
    challenge: `Bearer realm="${REALM}", error="insufficient_scope"`,
  };
}

/**
 * The model of a call that applies to every model or to the whole server: Triton's empty model
 * name (the global trace settings, every model's statistics), the repository index, the log
 * settings.
 */
export const EVERY_MODEL = '';

/**
 * Credentials limited to some models may call a model they cover, but not in ways that reach past
 * it (docs/production.md "Authentication"): `what` they may not do, as a 403 / PERMISSION_DENIED.
 * Loading with parameters sends the model's configuration or files (a Python backend's model.py
 * is code Triton runs); unload_dependents unloads other models; unregistering with no region name
 * removes every region. undefined: the credentials are not limited.
 */
export function limitedRefusal(grant: Grant | undefined, what: string): GatewayError | undefined {
  if (grant?.models === undefined) return undefined;
  return new GatewayError('GW_ERR_AUTH_FORBIDDEN', `${whoOf(grant)} may not ${what}: they are limited to some models`);
}

const whoOf = (grant: Grant): string => (grant.subject === '' ? 'these credentials' : `'${grant.subject}'`);

/** Throws the refusal, or records who was let in. */
function decide(ctx: RequestContext, route: Route, category: ApiCategory, a: Authentication, missing: string): void {
  const model = routeModel(route, ctx.params, ctx.req.headers);
  const { decision, refusal } = judge(a, category, model, missing);
  ctx.record.auth = { ...decision };
  if (refusal === undefined) {
    if (a.kind === 'granted') ctx.grant = a.grant;
    return;
  }
  if (refusal.challenge !== undefined) ctx.res.setHeader('WWW-Authenticate', refusal.challenge);
  throw refusal.error;
}

/**
 * A request of credentials let in, judged against their limits (auth/limits.ts; on a store,
 * auth/shared-limiter.ts), then their quotas (auth/usage.ts) — shared with the gRPC pass-through,
 * which answers a refusal with RESOURCE_EXHAUSTED (UNAVAILABLE when the store cannot judge).
 * Admitted: the function that gives its places back and charges what it used (once its record is
 * complete), and a soft quota's warning. Refused: the error, the Retry-After in seconds, and the
 * record says so.
 */
export async function takeLimits(
  limiter: LimitsWithQuotas, grant: Grant, method: AuthDecision['method'], record: MeteredRecord,
): Promise<{ release: () => void; warning?: string } | { refusal: GatewayError; retryAfterS: number }> {
  const v = await limiter.take(grant, method);
  if (!v.admitted) return refused(v, record);
  if (limiter.quotas === undefined) return { release: v.release };
  const q = await limiter.quotas.admit(grant, method, record.declaredBytes);
  if (!q.admitted) {
    v.release();
    return refused(q.refusal, record);
  }
  const { meter } = q;
  record.meter = meter;
  let held = true;
  const release = (): void => {
    if (!held) return;
    held = false;
    v.release();
    meter.finish(record);
  };
  return q.warning === undefined ? { release } : { release, warning: q.warning };
}

const REFUSED = { rate: 'GW_ERR_AUTH_RATE_LIMITED', concurrency: 'GW_ERR_AUTH_CONCURRENCY_LIMITED', quota: 'GW_ERR_AUTH_QUOTA_EXHAUSTED' } as const;

function refused(v: LimitRefusal, record: MeteredRecord): { refusal: GatewayError; retryAfterS: number } {
  if (v.reason === 'unavailable') return { refusal: new GatewayError('GW_ERR_AUTH_LIMITS_UNAVAILABLE', v.message), retryAfterS: v.retryAfterS };
  record.limited = { limit: v.label, reason: v.reason };
  return { refusal: new GatewayError(REFUSED[v.reason], v.message), retryAfterS: v.retryAfterS };
}

/**
 * Throws the 429 of credentials past their limits or quotas, or holds their places until the
 * request is over (when what it used is charged); a soft quota spent is told in X-Quota-Warning.
 */
async function limit(ctx: RequestContext, limiter: LimitsWithQuotas, grant: Grant, method: AuthDecision['method']): Promise<void> {
  const r = await takeLimits(limiter, grant, method, ctx.record);
  if ('release' in r) {
    ctx.whenDone(r.release);
    if (r.warning !== undefined) ctx.res.setHeader('X-Quota-Warning', r.warning.replace(/[^\x20-\x7e]/g, '?'));
    return;
  }
  // RFC 6585 §4: a 429 MAY say how long to wait; RFC 9110 §10.2.3: in seconds.
  ctx.res.setHeader('Retry-After', r.retryAfterS);
  throw r.refusal;
}

/** RFC 6750 §3: error_description is %x20-21 / %x23-5B / %x5D-7E (no `"` nor `\`). */
const quotable = (s: string): string => s.replace(/[^\x20\x21\x23-\x5b\x5d-\x7e]/g, '');
