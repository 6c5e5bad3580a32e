// Authentication in front of the route handlers. Every route of a group that is not open
// (auth.open) gets its handlers wrapped at start, so open routes and a gateway without auth pay
// nothing per request. The check runs before the handler reads anything of the body: a refusal
// goes through the server's early-answer path (ingress/server.ts: a bounded drain, then close).
// 401 when the credentials are missing or not valid, 403 when they are valid but do not cover
// the API group or the model, 503 when the JWKS cannot be fetched: each with RFC 6750's
// WWW-Authenticate challenge and a GW_ERR_AUTH_* code. The decision goes in the request's record.
import type { IncomingHttpHeaders } from 'node:http';
import type { ApiCategory } from '../api-access';
import { GatewayError } from '../errors';
import type { RequestContext } from '../ingress/context';
import type { Handler, Method, Route } from '../ingress/router';
import type { Authentication, Authenticator } from './authenticator';

export const REALM = 'tensorgate';

export function guardRoutes(routes: readonly Route[], auth: Authenticator, keyHeader: string): Route[] {
  const missing = `authentication required: send Authorization: Bearer <token>${keyHeader === '' ? '' : ` or ${keyHeader}: <key>`}`;
  return routes.map((route) => {
    const category = route.category;
    // The gateway's own probes have no group; open groups need no credentials.
    if (category === undefined || auth.open.has(category)) return route;
    const methods: Partial<Record<Method, Handler>> = {};
    for (const [m, h] of Object.entries(route.methods) as [Method, Handler][]) {
      methods[m] = async (ctx) => {
        decide(ctx, route, category, await auth.authenticate(ctx.req.headers), missing);
        return h(ctx);
      };
    }
    return { ...route, methods };
  });
}

/** Throws the refusal, or records who was let in. */
function decide(ctx: RequestContext, route: Route, category: ApiCategory, a: Authentication, missing: string): void {
  const record = ctx.record;
  if (a.kind === 'missing') {
    record.auth = { outcome: 'missing', method: 'none' };
    // RFC 6750 §3.1: a request without credentials gets the challenge without an error code.
    ctx.res.setHeader('WWW-Authenticate', `Bearer realm="${REALM}"`);
    throw new GatewayError('GW_ERR_AUTH_MISSING', missing);
  }
  // The credential has done its work here: it is not handed on (a pass-through upstream gets no copy).
  dropCredential(ctx.req.headers, a.header);
  if (a.kind === 'invalid') {
    record.auth = { outcome: 'invalid', method: a.method };
    ctx.res.setHeader('WWW-Authenticate', `Bearer realm="${REALM}", error="invalid_token", error_description="${quotable(a.reason)}"`);
    throw new GatewayError('GW_ERR_AUTH_INVALID', `the credentials are not valid: ${a.reason}`);
  }
  if (a.kind === 'unavailable') {
    record.auth = { outcome: 'unavailable', method: a.method };
    throw new GatewayError('GW_ERR_AUTH_UNAVAILABLE', `the credentials cannot be checked now: ${a.reason}`);
  }
  const { grant } = a;
  const who = grant.subject === '' ? 'these credentials' : `'${grant.subject}'`;
  record.auth = { outcome: 'forbidden', method: a.method, subject: grant.subject };
  if (!grant.groups.has(category)) {
    // RFC 6750 §3.1 insufficient_scope: 403, naming the scope that would do.
    ctx.res.setHeader('WWW-Authenticate', `Bearer realm="${REALM}", error="insufficient_scope", scope="${category}"`);
    throw new GatewayError('GW_ERR_AUTH_FORBIDDEN', `${who} may not use the '${category}' API group`);
  }
  const model = route.model === undefined ? undefined : 'name' in route.model ? route.model.name : ctx.params[route.model.param];
  if (grant.models !== undefined && model !== undefined && model !== '' && !grant.models.has(model)) {
    ctx.res.setHeader('WWW-Authenticate', `Bearer realm="${REALM}", error="insufficient_scope"`);
    throw new GatewayError('GW_ERR_AUTH_FORBIDDEN', `${who} may not call model '${model}'`);
  }
  record.auth = { outcome: 'allowed', method: a.method, subject: grant.subject };
}

function dropCredential(headers: IncomingHttpHeaders, header: string): void {
  delete headers[header];
}

/** RFC 6750 §3: error_description is %x20-21 / %x23-5B / %x5D-7E (no `"` nor `\`). */
const quotable = (s: string): string => s.replace(/[^\x20\x21\x23-\x5b\x5d-\x7e]/g, '');
