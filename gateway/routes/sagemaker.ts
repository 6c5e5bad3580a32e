// The routes of Triton's SageMaker frontend (src/sagemaker_server.cc), on the gateway's port when
// sagemaker.enabled (docs/dialects.md "SageMaker"):
//   GET  /ping                → server readiness, or liveness (sagemaker.pingMode, SAGEMAKER_TRITON_PING_MODE)
//   POST /invocations         → V2 infer of sagemaker.defaultModel (SAGEMAKER_TRITON_DEFAULT_MODEL_NAME),
//                               or its generate / generate_stream (sagemaker.inferenceType,
//                               SAGEMAKER_TRITON_INFERENCE_TYPE); Triton reads no target-model
//                               header here, nor does the gateway
//   POST /models/{m}/invoke   → V2 infer of the model X-Amzn-SageMaker-Target-Model names, else {m}
// Both infers are routes/infer.ts's with the dialect of the media type
// application/vnd.sagemaker-triton.binary+json;json-header-size=N: N replaces
// Inference-Header-Content-Length, a binary answer comes back in that media type (no
// Inference-Header-Content-Length), and nothing is compressed either way. /invocations answers
// as V2 infer does (Triton runs its base HandleInfer); a multi-model invoke answers every failure
// 400, or 507 when the message tells of memory running out, with {"error"} in application/json
// (SageMakerMMEHandleInfer, SageMakerMMEHandleOOMError). The multi-model endpoint's load, unload
// and listing (POST /models, DELETE and GET /models/{m}) register a directory of the container
// with Triton's C API: no gRPC call does that, and models are loaded in Triton, so the gateway
// does not serve them (404).
import type { Config } from '../config/schema';
import { GatewayError, isGatewayError } from '../errors';
import { type RequestContext, withParams } from '../ingress/context';
import { type Route, routeModel } from '../ingress/router';
import type { InferPlan } from '../pipeline/infer-decode';
import { generate, type GenerateDeps, generateStream } from '../pipeline/generate';
import { SAGEMAKER_DIALECT } from '../pipeline/infer-dialect';
import type { ControlPlane } from '../upstream/control/control-plane';
import { serverHealth } from './health';
import { infer } from './infer';

export interface SageMakerDeps {
  readonly control: ControlPlane;
  /** routes/infer.ts inferPlan: the V2 infer's plan, which gets the dialect here. */
  readonly plan: InferPlan;
  /** sagemaker.defaultModel; '' when not set. */
  readonly defaultModel: string;
  /** sagemaker.pingMode: what /ping asks (SAGEMAKER_TRITON_PING_MODE). */
  readonly pingMode: Config['sagemaker']['pingMode'];
  /** sagemaker.inferenceType: what /invocations runs. */
  readonly inferenceType: Config['sagemaker']['inferenceType'];
  /** The generate extension's (pipeline/generate.ts), for an inferenceType of generate or generate_stream. */
  readonly generate: GenerateDeps;
}

/** The header SageMaker's multi-model endpoints name the model in (lower case, as Node keeps header names). */
export const TARGET_MODEL_HEADER = 'x-amzn-sagemaker-target-model';

export function sageMakerRoutes(deps: SageMakerDeps): Route[] {
  const plan: InferPlan = { ...deps.plan, dialect: SAGEMAKER_DIALECT };
  const invoke: Route = {
    name: 'sagemaker_invoke',
    category: 'inference',
    model: { header: TARGET_MODEL_HEADER, param: 0 },
    pattern: /^\/models\/([^/]+)\/invoke$/,
    methods: { POST: (ctx) => multiModelInvoke(ctx, invoke, plan) },
  };
  const run = INVOCATIONS[deps.inferenceType](plan, deps.generate);
  return [
    { name: 'sagemaker_ping', probe: true, category: 'health', pattern: /^\/ping$/, methods: { GET: serverHealth(deps.control, deps.pingMode) } },
    {
      name: 'sagemaker_invocations',
      category: 'inference',
      ...deps.defaultModel === '' ? {} : { model: { name: deps.defaultModel } },
      pattern: /^\/invocations$/,
      methods: { POST: (ctx) => invocations(ctx, deps.defaultModel, run) },
    },
    invoke,
  ];
}

type Run = (ctx: RequestContext) => Promise<void>;

/**
 * What /invocations runs for each SAGEMAKER_TRITON_INFERENCE_TYPE (SagemakerAPIServer::Handle:
 * HandleInfer, or HandleGenerate without or with streaming), on ctx.params [model, version].
 */
const INVOCATIONS: Record<Config['sagemaker']['inferenceType'], (plan: InferPlan, generate: GenerateDeps) => Run> = {
  infer: (plan) => (ctx) => infer(ctx, plan),
  generate: (_plan, deps) => (ctx) => generate(ctx, deps),
  generate_stream: (_plan, deps) => (ctx) => generateStream(ctx, deps),
};

async function invocations(ctx: RequestContext, model: string, run: Run): Promise<void> {
  if (model === '') {
    throw new GatewayError('GW_ERR_ROUTE_NO_MODEL', 'POST /invocations calls the default model, and none is configured: set sagemaker.defaultModel (--sagemaker-default-model), or call POST /models/{model}/invoke', { plain: false });
  }
  ctx.record.model = model;
  await run(withParams(ctx, [model, '']));
}

/** The model the guard let in (routeModel), with Triton's multi-model answers to failures. */
async function multiModelInvoke(ctx: RequestContext, route: Route, plan: InferPlan): Promise<void> {
  const model = routeModel(route, ctx.params, ctx.req.headers)!;
  if (model === '') {
    throw new GatewayError('GW_ERR_ROUTE_NO_MODEL', 'X-Amzn-SageMaker-Target-Model is empty: name the model to invoke, or leave the header out to invoke the model of the path', { plain: false });
  }
  ctx.record.model = model;
  try {
    await infer(withParams(ctx, [model, '']), plan);
  } catch (err) {
    throw multiModelError(err);
  }
}

/**
 * Messages SageMakerMMECheckOOMError reads as memory running out (a 507, which SageMaker answers
 * by unloading models and trying again).
 */
const OUT_OF_MEMORY = /CUDA out of memory|CUDA_OUT_OF_MEMORY|Out of memory|Out Of Memory|out of memory|MemoryError|OutOfMemory|OOM|Dst tensor is not initialized|Src tensor is not initialized|CNMEM_STATUS_OUT_OF_MEMORY|CUDNN_STATUS_NOT_INITIALIZED|CUBLAS_STATUS_ALLOC_FAILED|CUBLAS_STATUS_NOT_INITIALIZED|Failed to allocate memory|failed to allocate memory|No space left on device/;

/**
 * A failure of a multi-model invoke as Triton's SageMaker frontend answers it: 400 (507 out of
 * memory) in application/json, for Triton's errors and the request's own. The gateway's own
 * conditions keep their status: a body past its limits (413), a timeout (408, 504), Triton out of
 * reach (502, 503), and its internal errors.
 */
export function multiModelError(err: unknown): unknown {
  if (!isGatewayError(err)) return err;
  const own = err.code !== 'GW_ERR_UPSTREAM_STATUS' && err.code !== 'GW_ERR_MODEL_DECOUPLED'
    && (err.status < 400 || err.status >= 500 || err.status === 408 || err.status === 413 || err.status === 429);
  if (own) return err;
  return new GatewayError(err.code, err.message, { status: OUT_OF_MEMORY.test(err.message) ? 507 : 400, plain: false, cause: err, grpcCode: err.grpcCode });
}
