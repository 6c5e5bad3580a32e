// TF-Serving / KServe-V1 REST (README "TF-Serving / KServe-V1"): POST /v1/models/{m}[/versions/{v}]:predict
// through Triton's gRPC ModelInfer, and GET /v1/models/{m}[/versions/{v}] model status, in the
// body shape `v1.statusFormat` picks. Errors are `{"error": "…"}` as both servers write them.
import { decodeV1Predict } from '../decode/v1-predict';
import { responseEncoding } from '../egress/compress';
import { writeJson, writeParts } from '../egress/write';
import { encodeV1Predict } from '../encode/v1-predict';
import { isGatewayError } from '../errors';
import { readBody, requestEncoding } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import { callModelInfer } from './infer';
import { Ledger } from '../telemetry/ledger';
import type { ControlPlane } from '../upstream/control-plane';
import type { DataPlane } from '../upstream/data-plane';
import { frameInferRequest } from '../upstream/frame-request';
import { readInferResponse } from '../upstream/infer-response';
import type { ModelMetadatas } from '../upstream/model-metadata';

export interface V1Deps {
  readonly dataPlane: DataPlane;
  readonly upstream: ControlPlane;
  readonly metadata: ModelMetadatas;
  readonly timeoutMs: number;
  readonly maxInputSizeBytes: number;
  readonly maxBodyBytes: number;
  readonly statusFormat: 'tfserving' | 'kserve';
}

const MODEL = '\\/v1\\/models\\/([^/:]+)(?:\\/versions\\/([0-9]+))?';

export function v1Routes(deps: V1Deps): Route[] {
  return [
    { name: 'v1_predict', category: 'inference', pattern: new RegExp(`^${MODEL}:predict$`), methods: { POST: (ctx) => predict(ctx, deps) } },
    { name: 'v1_status', category: 'health', pattern: new RegExp(`^${MODEL}$`), methods: { GET: (ctx) => status(ctx, deps) } },
  ];
}

async function predict(ctx: RequestContext, deps: V1Deps): Promise<void> {
  const { req, res, signal } = ctx;
  const name = ctx.params[0]!;
  const version = ctx.params[1] ?? '';
  const ledger = new Ledger();
  ctx.record.ledger = ledger;
  ctx.record.version = version;
  ctx.record.encoding = 'v1';
  {
    const md = await deps.metadata.get(name, version, signal);
    ledger.start('ingress_read');
    const body = await readBody(req, { maxBodyBytes: deps.maxBodyBytes, maxDecompressedBytes: deps.maxInputSizeBytes }, requestEncoding(req));
    ledger.end('ingress_read');
    ledger.bytes('ingress_read', body.length, body.length);

    ledger.start('decode');
    const text = Buffer.concat(body.chunks, body.length).toString('utf8');
    const decoded = decodeV1Predict(text, { name, version, inputs: md.inputs }, deps.maxInputSizeBytes);
    const framed = frameInferRequest(decoded.request, ctx.buffers.acquire);
    ledger.allocated('decode', ctx.buffers.reused(framed.message) ? 1 : 2);
    // The gathered body, then each base64 payload byte once into its slot.
    ledger.copied('decode', body.length + decoded.fill(framed.message, framed.slots));
    ledger.end('decode');

    let answer;
    try {
      answer = await callModelInfer(ctx, deps.dataPlane, framed.message, deps.timeoutMs, ledger);
    } catch (err) {
      if (isGatewayError(err) && err.status === 404) deps.metadata.evict(name);
      throw err;
    }

    ledger.start('encode');
    const out = Buffer.from(encodeV1Predict(readInferResponse(answer.chunks), decoded.row));
    ledger.end('encode');
    ctx.record.encodingOut = 'json';
    ledger.start('egress_write');
    const written = await writeParts(res, 200, { 'Content-Type': 'application/json' }, [out], responseEncoding(req));
    ledger.end('egress_write');
    ledger.bytes('egress_write', out.length, written);
  }
}

async function status(ctx: RequestContext, deps: V1Deps): Promise<void> {
  const name = ctx.params[0]!;
  const version = ctx.params[1] ?? '';
  const ready = await deps.upstream.call('ModelReady', { name, version }, ctx.signal);
  if (deps.statusFormat === 'kserve') {
    writeJson(ctx.res, 200, JSON.stringify({ name, ready: ready.ready }));
    return;
  }
  const m = await deps.upstream.call('ModelMetadata', { name, version }, ctx.signal);
  const versions = version !== '' ? [version] : m.versions.length > 0 ? m.versions : ['1'];
  writeJson(ctx.res, 200, JSON.stringify({
    model_version_status: versions.map((v) => ({
      version: v, state: ready.ready ? 'AVAILABLE' : 'UNAVAILABLE', status: { error_code: 'OK', error_message: '' },
    })),
  }));
}
