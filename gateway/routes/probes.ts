// The gateway's own probes, apart from the proxied V2 ones and outside every restricted group:
// GET /healthz — the process is alive (200); GET /readyz — the configuration is loaded, the
// gateway is not draining and at least one backend of the set is ready (its health checks,
// upstream/backends/backend-set.ts) (200), else 503. Bodies
// are short text for humans; orchestrators read the status.
import { writeText } from '../egress/write';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';

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
