// TorchServe's inference API's steps (routes/torchserve.ts), as pytorch/serve's frontend answers
// (InferenceRequestHandler.java, ApiUtils.getModelList): a prediction is V2 infer's upload path
// (pipeline/infer-decode.ts decodeUploadBody) answered as a handler would return it
// (encode/torchserve.ts); the health and the model list are one control-plane call each. A 404
// carries TorchServe's exception class (GatewayError.dialect).
import { writeJson } from '../egress/write';
import { encodeTorchServeAnswer } from '../encode/torchserve';
import { type ErrorCode, GatewayError, isGatewayError } from '../errors';
import { readInferResponse } from '../infer/answer-reader';
import type { RequestContext } from '../ingress/context';
import type { ControlPlane } from '../upstream/control/control-plane';
import { AnswerStreamer } from './answer-streamer';
import { callTriton } from './infer-answer';
import { decodeUploadBody, type InferPlan, lookupModel } from './infer-decode';
import type { SharedMemoryHold } from './shared-memory-sink';
import { startLedger, writeAnswer } from './steps';

/** The multipart fields TorchServe's handlers read as the request's data (BaseHandler: `data` or `body`). */
const ALIASES = ['data', 'body'];

export async function predictions(ctx: RequestContext, p: InferPlan): Promise<void> {
  const name = ctx.params[0]!;
  const version = ctx.params[1] ?? '';
  // TorchServe's versions are strings ("1.0"); Triton's are numbers: another one names no version.
  if (!/^[0-9]*$/.test(version)) {
    throw torchServeError('GW_ERR_ROUTE_NOT_FOUND', 'ModelVersionNotFoundException', `Model version: ${version} does not exist for model: ${name}`);
  }
  const ledger = startLedger(ctx, version);
  let config;
  try {
    config = await lookupModel(ctx, p, false);
  } catch (err) {
    if (!isGatewayError(err) || err.status !== 404) throw err;
    throw version === ''
      ? torchServeError(err.code, 'ModelNotFoundException', `Model not found: ${name}`, err)
      : torchServeError(err.code, 'ModelVersionNotFoundException', `Model version: ${version} does not exist for model: ${name}`, err);
  }
  const streamer = new AnswerStreamer(ctx, false, p.telemetry.serverTiming, ledger);
  const shm: SharedMemoryHold = { upload: undefined };
  try {
    const decoded = await decodeUploadBody(ctx, p, config, ledger, streamer, shm, ALIASES);
    const answer = await callTriton(ctx, p, decoded, ledger, streamer, false);
    shm.upload?.release();
    ledger.start('encode');
    const out = encodeTorchServeAnswer(readInferResponse(answer.chunks), (config.max_batch_size ?? 0) > 0);
    ledger.end('encode');
    ledger.bytes('encode', answer.byteLength, out.body.length);
    ctx.record.encodingOut = out.contentType === 'application/json' ? 'json' : 'binary';
    await writeAnswer(ctx, ledger, { 'Content-Type': out.contentType }, [out.body], p.telemetry.serverTiming);
  } finally {
    shm.upload?.release();
  }
}

export async function ping(ctx: RequestContext, control: ControlPlane): Promise<void> {
  let ready = false;
  try {
    ready = (await control.call('ServerReady', {}, ctx.signal)).ready === true;
  } catch {
    // Triton unreachable: unhealthy, as TorchServe is when its workers are gone.
  }
  writeJson(ctx.res, ready ? 200 : 500, JSON.stringify({ status: ready ? 'Healthy' : 'Unhealthy' }));
}

/** TorchServe's paging: `limit` 1–100 (else 100), `next_page_token` the index to start at. */
export async function models(ctx: RequestContext, control: ControlPlane): Promise<void> {
  const query = new URLSearchParams((ctx.req.url ?? '').split('?')[1] ?? '');
  let limit = Number.parseInt(query.get('limit') ?? '100', 10);
  if (!(limit >= 0 && limit <= 100)) limit = 100;
  let from = Number.parseInt(query.get('next_page_token') ?? '0', 10);
  if (!(from >= 0)) from = 0;
  const index = await control.call('RepositoryIndex', { repository_name: '', ready: false }, ctx.signal);
  const names = [...new Set((index.models ?? []).map((m) => m.name ?? ''))].sort();
  const last = Math.min(from + limit, names.length);
  // Triton has no model archive: modelUrl is the model's name in its repository.
  const list = names.slice(from, last).map((n) => ({ modelName: n, modelUrl: n }));
  // In ListModelsResponse's field order; nextPageToken only when there is a next page.
  writeJson(ctx.res, 200, JSON.stringify(last < names.length ? { nextPageToken: String(last), models: list } : { models: list }));
}

/** A 404 in TorchServe's own words: its exception class as `type` (the gateway's code kept). */
function torchServeError(code: ErrorCode, type: string, message: string, cause?: unknown): GatewayError {
  return new GatewayError(code, message, { status: 404, cause, dialect: { shape: 'torchserve', type } });
}
