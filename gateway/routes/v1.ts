// TF-Serving / KServe-V1 REST (docs/dialects.md "TF-Serving / KServe-V1"):
//   POST /v1/models/{m}[/versions/{v}]:predict: metadata → read body → decodeV1Predict → ModelInfer → encodeV1Predict
//   GET /v1/models/{m}[/versions/{v}]: model status, in the body shape `v1.statusFormat` picks.
// Errors are `{"error": "…"}` as both servers write them.
import type { Config } from '../config/schema';
import { writeJson } from '../egress/write';
import { encodeV1Status } from '../encode/v1-status';
import { requestEncoding } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';
import type { DataPlane } from '../upstream/infer/data-plane';
import type { ModelMetadatas } from '../upstream/control/model-metadata';
import { callCutOut, callModelInfer, evictOnNotFound, readWholeBody, stagingFor, startLedger, writeAnswer } from '../pipeline/steps';
import { decodeV1Body, encodeV1Answer, frameV1 } from '../pipeline/v1-body';

export interface V1Deps {
  readonly dataPlane: DataPlane;
  readonly control: ControlPlane;
  readonly metadata: ModelMetadatas;
  readonly upstream: Config['upstream'];
  readonly limits: Config['limits'];
  readonly v1: Config['v1'];
  readonly telemetry: Config['telemetry'];
}

const MODEL = '\\/v1\\/models\\/([^/:]+)(?:\\/versions\\/([0-9]+))?';

export function v1Routes(deps: V1Deps): Route[] {
  return [
    { name: 'v1_predict', category: 'inference', model: { param: 0 }, pattern: new RegExp(`^${MODEL}:predict$`), methods: { POST: (ctx) => predict(ctx, deps) } },
    { name: 'v1_status', category: 'health', model: { param: 0 }, pattern: new RegExp(`^${MODEL}$`), methods: { GET: (ctx) => status(ctx, deps) } },
  ];
}

async function predict(ctx: RequestContext, deps: V1Deps): Promise<void> {
  const name = ctx.params[0]!;
  const version = ctx.params[1] ?? '';
  const ledger = startLedger(ctx, version);
  ctx.record.encoding = 'v1'; // v1_base64 once decoding finds base64 rows
  const md = await deps.metadata.get(name, version, ctx.signal);
  const encoding = requestEncoding(ctx.req);
  const staging = stagingFor(ctx, deps.limits, encoding);
  const body = await readWholeBody(ctx, ledger, deps.limits, encoding, staging);

  const decoded = decodeV1Body(ctx, ledger, body, staging, { name, version, inputs: md.inputs }, deps.limits.maxInputSizeBytes);
  const framed = frameV1(ctx, ledger, decoded, body.length, deps.upstream.cutThrough && deps.dataPlane.startModelInfer !== undefined);

  const answer = await (framed.cuts.length === 0
    ? callModelInfer(ctx, deps.dataPlane, framed.message, deps.upstream.timeoutMs, ledger)
    : callCutOut(ctx, deps.dataPlane, framed, deps.upstream.timeoutMs, ledger))
    .catch((err: unknown) => {
      throw evictOnNotFound(err, () => deps.metadata.evict(name));
    });

  const out = encodeV1Answer(ledger, answer, decoded.row);
  ctx.record.encodingOut = 'json';
  await writeAnswer(ctx, ledger, { 'Content-Type': 'application/json' }, [out], deps.telemetry.serverTiming);
}

async function status(ctx: RequestContext, deps: V1Deps): Promise<void> {
  const name = ctx.params[0]!;
  const version = ctx.params[1] ?? '';
  const ready = await deps.control.call('ModelReady', { name, version }, ctx.signal);
  const versions = deps.v1.statusFormat === 'kserve' ? undefined : (await deps.control.call('ModelMetadata', { name, version }, ctx.signal)).versions;
  writeJson(ctx.res, 200, encodeV1Status(deps.v1.statusFormat, name, version, ready.ready, versions));
}
