// TF-Serving / KServe-V1 REST (docs/dialects.md "TF-Serving / KServe-V1"):
//   POST /v1/models/{m}[/versions/{v}]:predict: metadata → read body → decodeV1Predict → ModelInfer → encodeV1Predict
//     (planned on the fast path once the model's metadata is cached: pipeline/v1-planned.ts)
//   GET /v1/models/{m}[/versions/{v}]: model status, in the body shape `v1.statusFormat` picks.
// Errors are `{"error": "…"}` as both servers write them. Predict's steps live in pipeline/v1-body.ts.
import type { Config } from '../config/schema';
import { writeJson } from '../egress/write';
import { encodeV1Status } from '../encode/v1-status';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';
import { v1Predict, type V1Plan } from '../pipeline/v1-body';
import { plannedV1 } from '../pipeline/v1-planned';

export interface V1Deps extends V1Plan {
  readonly control: ControlPlane;
  readonly v1: Config['v1'];
}

const MODEL = '\\/v1\\/models\\/([^/:]+)(?:\\/versions\\/([0-9]+))?';

export function v1Routes(deps: V1Deps): Route[] {
  return [
    { name: 'v1_predict', category: 'inference', model: { param: 0 }, pattern: new RegExp(`^${MODEL}:predict$`), methods: { POST: (ctx) => v1Predict(ctx, deps) },
      planned: plannedV1(deps) },
    { name: 'v1_status', category: 'health', model: { param: 0 }, pattern: new RegExp(`^${MODEL}$`), methods: { GET: (ctx) => status(ctx, deps) } },
  ];
}

async function status(ctx: RequestContext, deps: V1Deps): Promise<void> {
  const name = ctx.params[0]!;
  const version = ctx.params[1] ?? '';
  const ready = await deps.control.call('ModelReady', { name, version }, ctx.signal);
  const versions = deps.v1.statusFormat === 'kserve' ? undefined : (await deps.control.call('ModelMetadata', { name, version }, ctx.signal)).versions;
  writeJson(ctx.res, 200, encodeV1Status(deps.v1.statusFormat, name, version, ready.ready, versions));
}
