// TF-Serving / KServe-V1 REST (docs/dialects.md "TF-Serving / KServe-V1"):
//   POST /v1/models/{m}[/versions/{v}]:predict: metadata → read body → decodeV1Predict → ModelInfer → encodeV1Predict
//   GET /v1/models/{m}[/versions/{v}]: model status, in the body shape `v1.statusFormat` picks.
// Errors are `{"error": "…"}` as both servers write them.
import type { Config } from '../config/schema';
import type { StagedBody } from '../decode/base64-staging';
import { decodeV1Predict, type V1Decoded } from '../decode/v1-predict';
import { writeJson } from '../egress/write';
import { encodeV1Predict } from '../encode/v1-predict';
import { encodeV1Status } from '../encode/v1-status';
import { requestEncoding } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';
import type { DataPlane } from '../upstream/infer/data-plane';
import { readInferResponse } from '../upstream/infer/answer-reader';
import type { ModelMetadatas } from '../upstream/control/model-metadata';
import { callModelInfer, evictOnNotFound, framer, readWholeBody, stagingFor, startLedger, writeAnswer } from '../pipeline/steps';

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
  const body = await readWholeBody(ctx, ledger, deps.limits, encoding, staging === undefined ? undefined : (c) => staging.push(c));

  ledger.start('decode');
  const model = { name, version, inputs: md.inputs };
  const staged = staging?.end((nonce, i) => `\\u0000tg-${nonce}-${i}`);
  let decoded = staged === undefined ? undefined : decodeStaged(staged, model, deps.limits.maxInputSizeBytes);
  let gathered = staged === undefined ? 0 : staged.allocated;
  // The staging (its text left and the decoded payloads) and, when its reading fails, the gathered
  // body; then each base64 payload byte once into its slot: a copy each.
  if (staged !== undefined) ledger.copied('decode', staged.copied);
  if (decoded === undefined) {
    const text = Buffer.concat(body.chunks, body.length).toString('utf8');
    decoded = decodeV1Predict(text, model, deps.limits.maxInputSizeBytes);
    gathered++;
    ledger.copied('decode', body.length);
  }
  ctx.record.encoding = decoded.base64 ? 'v1_base64' : 'v1';
  const framed = framer(ctx, ledger, true, gathered)(decoded.request, []);
  ledger.copied('decode', decoded.fill(framed.message, framed.slots));
  ledger.end('decode');
  ledger.bytes('decode', body.length, framed.message.length);

  const answer = await callModelInfer(ctx, deps.dataPlane, framed.message, deps.upstream.timeoutMs, ledger)
    .catch((err: unknown) => {
      throw evictOnNotFound(err, () => deps.metadata.evict(name));
    });

  ledger.start('encode');
  const out = Buffer.from(encodeV1Predict(readInferResponse(answer.chunks), decoded.row));
  ledger.end('encode');
  ledger.bytes('encode', answer.byteLength, out.length);
  ctx.record.encodingOut = 'json';
  await writeAnswer(ctx, ledger, { 'Content-Type': 'application/json' }, [out], deps.telemetry.serverTiming);
}

/**
 * The body read from its staged text; undefined — read the whole body — when that fails for any
 * reason or leaves a staged payload unused (the whole-body reading alone gives the answers).
 */
function decodeStaged(staged: StagedBody, model: Parameters<typeof decodeV1Predict>[1], maxInputSizeBytes: number): V1Decoded | undefined {
  const payloads = [...staged.staged.values()];
  const rows = { bytes: new Map(staged.placeholders.map((p, i) => [JSON.parse(`"${p}"`) as string, payloads[i]!])), used: new Set<string>() };
  try {
    const decoded = decodeV1Predict(staged.header.toString('utf8'), model, maxInputSizeBytes, rows);
    return rows.used.size === rows.bytes.size ? decoded : undefined;
  } catch {
    return undefined;
  }
}

async function status(ctx: RequestContext, deps: V1Deps): Promise<void> {
  const name = ctx.params[0]!;
  const version = ctx.params[1] ?? '';
  const ready = await deps.control.call('ModelReady', { name, version }, ctx.signal);
  const versions = deps.v1.statusFormat === 'kserve' ? undefined : (await deps.control.call('ModelMetadata', { name, version }, ctx.signal)).versions;
  writeJson(ctx.res, 200, encodeV1Status(deps.v1.statusFormat, name, version, ready.ready, versions));
}
