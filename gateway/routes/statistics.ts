// GET /v2/models/stats and /v2/models/{m}[/versions/{v}]/stats → ModelStatistics (name "" = every
// model), rendered by encode/statistics.ts.
import { writeJson } from '../egress/write';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';
import { EVERY_MODEL } from '../auth/guard';
import { encodeModelStatistics } from '../encode/statistics';

export function statisticsRoutes(upstream: ControlPlane): Route[] {
  const stats = (name: string, version: string) => async (ctx: Parameters<NonNullable<Route['methods']['GET']>>[0]): Promise<void> => {
    const r = await upstream.call('ModelStatistics', { name, version }, ctx.signal);
    writeJson(ctx.res, 200, encodeModelStatistics(r));
  };
  return [
    {
      name: 'statistics_all',
      pattern: /^\/v2\/models\/stats$/,
      category: 'statistics',
      // Every model's statistics: not for credentials limited to some (auth/guard.ts).
      model: { name: EVERY_MODEL },
      methodNotAllowedJson: true,
      methods: { GET: (ctx) => stats('', '')(ctx) },
    },
    {
      name: 'statistics_model',
      pattern: /^\/v2\/models\/([^/]+)(?:\/versions\/([0-9]+))?\/stats$/,
      category: 'statistics',
      model: { param: 0 },
      methodNotAllowedJson: true,
      methods: { GET: (ctx) => stats(ctx.params[0]!, ctx.params[1] ?? '')(ctx) },
    },
  ];
}
