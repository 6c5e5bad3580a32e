// TorchServe's inference API (docs/dialects.md "TorchServe"), for clients moving from TorchServe to
// Triton; on with torchserve.enabled. As pytorch/serve's frontend answers them
// (InferenceRequestHandler.java, ApiUtils.getModelList):
//   POST|PUT /predictions/{m}[/{v}]: lookupModel → body (raw: the model's one input; multipart:
//     the `data`/`body` part, or parts named after inputs) → call Triton → the answer as a
//     handler would return it (encode/torchserve.ts)
//   GET /ping: {"status": "Healthy"} 200 while Triton is ready, {"status": "Unhealthy"} 500
//   GET /models[?limit=&next_page_token=]: {"models": [{"modelName", "modelUrl"}], "nextPageToken"?}
// Every error these routes answer is TorchServe's {"code", "type", "message"}.
import type { Config } from '../config/schema';
import { writeJson } from '../egress/write';
import { encodeTorchServeAnswer } from '../encode/torchserve';
import { type ErrorCode, GatewayError, isGatewayError } from '../errors';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import { EVERY_MODEL } from '../auth/guard';
import { AnswerStreamer } from '../pipeline/answer-streamer';
import { callTriton } from '../pipeline/infer-answer';
import { decodeUploadBody, type InferPlan, lookupModel } from '../pipeline/infer-decode';
import type { SharedMemoryHold } from '../pipeline/shared-memory-sink';
import { startLedger, writeAnswer } from '../pipeline/steps';
import { readInferResponse } from '../infer/answer-reader';
import type { ControlPlane } from '../upstream/control/control-plane';
import type { InferDeps } from './infer';

export interface TorchServeDeps extends InferDeps {
  readonly control: ControlPlane;
  readonly torchserve: Config['torchserve'];
}

/** The multipart fields TorchServe's handlers read as the request's data (BaseHandler: `data` or `body`). */
const ALIASES = ['data', 'body'];

export function torchServeRoutes(deps: TorchServeDeps): Route[] {
  if (!deps.torchserve.enabled) return [];
  // The answer is encoded from the whole response: nothing is streamed back as it arrives.
  const plan: InferPlan = { ...deps, cutThrough: deps.upstream.cutThrough && deps.dataPlane.startModelInfer !== undefined };
  const predict = (ctx: RequestContext): Promise<void> => predictions(ctx, plan);
  return [
    {
      name: 'torchserve_predictions',
      category: 'inference',
      model: { param: 0 },
      pattern: /^\/predictions\/([^/]+)(?:\/([^/]+))?$/,
      methods: { POST: predict, PUT: predict },
      errorBody: torchServeErrorBody,
    },
    {
      name: 'torchserve_ping',
      category: 'health',
      pattern: /^\/ping$/,
      methods: { GET: (ctx) => ping(ctx, deps.control) },
      errorBody: torchServeErrorBody,
    },
    {
      name: 'torchserve_models',
      // A read-only listing, as model metadata is: not the load/unload group (model-repository)
      // that an edge gateway keeps off. Lists every model: not for credentials limited to some.
      category: 'metadata',
      model: { name: EVERY_MODEL },
      pattern: /^\/models$/,
      methods: { GET: (ctx) => models(ctx, deps.control) },
      errorBody: torchServeErrorBody,
    },
  ];
}

async function predictions(ctx: RequestContext, p: InferPlan): Promise<void> {
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

async function ping(ctx: RequestContext, control: ControlPlane): Promise<void> {
  let ready = false;
  try {
    ready = (await control.call('ServerReady', {}, ctx.signal)).ready === true;
  } catch {
    // Triton unreachable: unhealthy, as TorchServe is when its workers are gone.
  }
  writeJson(ctx.res, ready ? 200 : 500, JSON.stringify({ status: ready ? 'Healthy' : 'Unhealthy' }));
}

/** TorchServe's paging: `limit` 1–100 (else 100), `next_page_token` the index to start at. */
async function models(ctx: RequestContext, control: ControlPlane): Promise<void> {
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
  return Object.assign(new GatewayError(code, message, { status: 404, cause }), { torchServeType: type });
}

/** TorchServe's exception class for a status the gateway answers with (NettyUtils.sendError). */
function typeOf(status: number): string {
  if (status === 404) return 'ResourceNotFoundException';
  // TorchServe's token authorization refuses with InvalidKeyException (its TokenAuthorization plugin).
  if (status === 401 || status === 403) return 'InvalidKeyException';
  if (status === 503) return 'ServiceUnavailableException';
  if (status < 500) return 'BadRequestException';
  return 'InternalServerException';
}

/** Errors as TorchServe answers them, `{"code", "type", "message"}` (Route.errorBody). */
function torchServeErrorBody(err: GatewayError): string {
  const type = (err as { torchServeType?: string }).torchServeType ?? typeOf(err.status);
  return JSON.stringify({ code: err.status, type, message: err.message });
}
