// GET /v2/health/live and /v2/health/ready → ServerLive / ServerReady. Triton answers 200 with
// an empty body when true and 400 with an empty body when false (docs/architecture.md#endpoints); a backend
// that cannot be reached is the gateway's own 503.
import { writeEmpty } from '../egress/write';
import type { Handler, Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';

export function healthRoutes(upstream: ControlPlane): Route[] {
  return [
    { name: 'health_live', probe: true, category: 'health', pattern: /^\/v2\/health\/live$/, methods: { GET: serverHealth(upstream, 'live') } },
    { name: 'health_ready', probe: true, category: 'health', pattern: /^\/v2\/health\/ready$/, methods: { GET: serverHealth(upstream, 'ready') } },
  ];
}

/**
 * Triton's answer to a liveness or readiness question (HandleServerHealth), also SageMaker's /ping
 * and Vertex AI's health route.
 */
export function serverHealth(upstream: ControlPlane, kind: 'live' | 'ready'): Handler {
  return kind === 'live'
    ? async (ctx) => writeEmpty(ctx.res, (await upstream.call('ServerLive', {}, ctx.signal)).live ? 200 : 400)
    : async (ctx) => writeEmpty(ctx.res, (await upstream.call('ServerReady', {}, ctx.signal)).ready ? 200 : 400);
}
