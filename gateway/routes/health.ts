// GET /v2/health/live and /v2/health/ready → ServerLive / ServerReady. Triton answers 200 with
// an empty body when true and 400 with an empty body when false (docs/architecture.md#endpoints); a backend
// that cannot be reached is the gateway's own 503.
import { writeEmpty } from '../egress/write';
import type { Handler, Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';

export function healthRoutes(upstream: ControlPlane): Route[] {
  return [
    {
      name: 'health_live',
      probe: true,
      category: 'health',
      pattern: /^\/v2\/health\/live$/,
      methods: {
        GET: async (ctx) => {
          const r = await upstream.call('ServerLive', {}, ctx.signal);
          writeEmpty(ctx.res, r.live ? 200 : 400);
        },
      },
    },
    {
      name: 'health_ready',
      probe: true,
      category: 'health',
      pattern: /^\/v2\/health\/ready$/,
      methods: { GET: serverReady(upstream) },
    },
  ];
}

/** Triton's readiness answer, also SageMaker's /ping and Vertex AI's health route (HandleServerHealth "ready"). */
export function serverReady(upstream: ControlPlane): Handler {
  return async (ctx) => {
    const r = await upstream.call('ServerReady', {}, ctx.signal);
    writeEmpty(ctx.res, r.ready ? 200 : 400);
  };
}
