// Declarative routes (docs/dialects.md "Declarative routes"): POST <path> with a hand-rolled JSON
// body, through the V1 predict path:
//   metadata (checked against the route once) → read body → decodeDeclarative → ModelInfer → encodeDeclarative
import type { Config } from '../config/schema';
import { type DeclarativeRoute, routeMetadataProblems } from '../config/routes';
import { GatewayError } from '../errors';
import type { ModelMetadata } from '../infer/model-metadata';
import { requestEncoding } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import { exactPath, type Route } from '../ingress/router';
import type { DataPlane } from '../upstream/infer/data-plane';
import type { ModelMetadatas } from '../upstream/control/model-metadata';
import { callModelInfer, evictOnNotFound, readWholeBody, startLedger, writeAnswer } from '../pipeline/steps';
import { decodeDeclarativeBody, encodeDeclarativeAnswer, frameAndFill } from '../pipeline/v1-body';

export interface DeclarativeDeps {
  readonly routes: readonly DeclarativeRoute[];
  readonly dataPlane: DataPlane;
  readonly metadata: ModelMetadatas;
  readonly upstream: Config['upstream'];
  readonly limits: Config['limits'];
  readonly telemetry: Config['telemetry'];
}

export function declarativeRoutes(deps: DeclarativeDeps): Route[] {
  return deps.routes.map((route) => {
    // Checked once per metadata answer (a reloaded model brings new metadata, checked again).
    const checked = new WeakSet<ModelMetadata>();
    return {
      name: `declarative ${route.path}`,
      category: 'inference',
      model: { name: route.model },
      pattern: exactPath(route.path),
      methods: { POST: (ctx) => handle(ctx, route, checked, deps) },
    } satisfies Route;
  });
}

async function handle(ctx: RequestContext, route: DeclarativeRoute, checked: WeakSet<ModelMetadata>, deps: DeclarativeDeps): Promise<void> {
  const ledger = startLedger(ctx, route.version);
  ctx.record.model = route.model;
  ctx.record.encoding = 'declarative'; // declarative_base64 once decoding finds base64 fields
  const md = await deps.metadata.get(route.model, route.version, ctx.signal);
  if (!checked.has(md)) {
    const problems = routeMetadataProblems(route, md);
    if (problems.length > 0) throw new GatewayError('GW_ERR_ROUTE_CONFIG_INVALID', problems.join('; '));
    checked.add(md);
  }

  const body = await readWholeBody(ctx, ledger, deps.limits, requestEncoding(ctx.req));

  const decoded = decodeDeclarativeBody(ctx, ledger, body, route, md, deps.limits.maxInputSizeBytes);
  const message = frameAndFill(ctx, ledger, decoded, body.length);

  const answer = await callModelInfer(ctx, deps.dataPlane, message, deps.upstream.timeoutMs, ledger)
    .catch((err: unknown) => {
      throw evictOnNotFound(err, () => deps.metadata.evict(route.model));
    });

  const parts = encodeDeclarativeAnswer(ledger, answer, route, decoded);
  ctx.record.encodingOut = 'json';
  await writeAnswer(ctx, ledger, { 'Content-Type': 'application/json' }, parts, deps.telemetry.serverTiming);
}
