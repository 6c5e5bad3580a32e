// Health, Triton's and the gateway's own:
// GET /v2/health/live and /v2/health/ready → ServerLive / ServerReady. Triton answers 200 with
// an empty body when true and 400 with an empty body when false (docs/architecture.md#endpoints); a backend
// that cannot be reached is the gateway's own 503.
// The gateway's own probes, apart from the proxied V2 ones and outside every restricted group:
// GET /healthz — the process is alive (200); GET /readyz — the configuration is loaded, the
// gateway is not draining and at least one backend of the set is ready (its health checks,
// upstream/backends/backend-set.ts) (200), else 503. Bodies are short text for humans;
// orchestrators read the status.
import { writeEmpty, writeText } from '../egress/write';
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

export interface ProbeState {
  /** Set by close(): load balancers should stop sending before the server stops. */
  draining: boolean;
}

export function probeRoutes(upstream: ControlPlane, state: ProbeState): Route[] {
  return [
    {
      name: 'gateway_healthz',
      probe: true,
      pattern: /^\/healthz$/,
      methods: { GET: async (ctx) => writeText(ctx.res, 200, 'ok\n') },
    },
    {
      name: 'gateway_readyz',
      probe: true,
      pattern: /^\/readyz$/,
      methods: {
        GET: async (ctx) => {
          if (state.draining) return writeText(ctx.res, 503, 'draining\n');
          const ready = upstream.anyReady();
          writeText(ctx.res, ready ? 200 : 503, ready ? 'ready\n' : 'no backend is ready\n');
        },
      },
    },
  ];
}
