// POST /v2/models/{m}[/versions/{v}]/infer, in Triton's order (docs/dialects.md):
//   lookupModel → decode (as the body arrives, or whole) → call Triton → answer
// or, asked for with Accept: text/event-stream (decoupled models only answer so), the responses of a
// ModelStreamInfer call as server-sent events (pipeline/infer-events.ts).
// Unknown models are 404 whatever the body; bodies of known length are push-decoded, and cut
// through to Triton where the data plane can (docs/cut-through.md); binary answers stream back
// from Triton's DATA frames when nothing needs the whole answer. The steps live in pipeline/ and
// record their own hops.
import { acceptsEventStream } from '../egress/sse';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import { AnswerStreamer } from '../pipeline/answer-streamer';
import { callTriton, respond } from '../pipeline/infer-answer';
import { decodeInferBody, type InferPlan, lookupModel } from '../pipeline/infer-decode';
import { inferEvents } from '../pipeline/infer-events';
import { plannedInfer } from '../pipeline/infer-planned';
import type { SharedMemoryHold } from '../pipeline/shared-memory-sink';
import { startLedger } from '../pipeline/steps';

/** What the route is built from: the plan of pipeline/infer-decode.ts, less what the route decides. */
export type InferDeps = Omit<InferPlan, 'cutThrough'>;

/** The plan of the route, for the dialects that run the same infer (routes/sagemaker.ts, routes/vertex-ai.ts). */
export function inferPlan(deps: InferDeps): InferPlan {
  return { ...deps, cutThrough: deps.upstream.cutThrough && deps.dataPlane.startModelInfer !== undefined };
}

export function inferRoutes(deps: InferDeps): Route[] {
  const plan = inferPlan(deps);
  return [{
    name: 'infer',
    category: 'inference',
    model: { param: 0 },
    pattern: /^\/v2\/models\/([^/]+)(?:\/versions\/([0-9]+))?\/infer$/,
    methods: { POST: (ctx) => infer(ctx, plan) },
    planned: plannedInfer(plan),
  }];
}

/** The infer of model ctx.params[0], version ctx.params[1]. */
export async function infer(ctx: RequestContext, p: InferPlan): Promise<void> {
  const ledger = startLedger(ctx, ctx.params[1] ?? '');
  // Events are V2's own (a cloud platform's frontend answers as Triton's does: no stream).
  const events = p.dialect === undefined && acceptsEventStream(ctx.req.headers.accept);
  const config = await lookupModel(ctx, p, events);
  if (events) return inferEvents(ctx, p, config, ledger);
  const streamer = new AnswerStreamer(ctx, p.cutThrough, p.telemetry.serverTiming, ledger, p.dialect);
  const shm: SharedMemoryHold = { upload: undefined };
  try {
    const decoded = await decodeInferBody(ctx, p, config, ledger, streamer, shm);
    const answer = await callTriton(ctx, p, decoded, ledger, streamer, shm.upload?.hasOutputs === true);
    // Triton has answered: it has read the inputs, the region may take the next request's —
    // unless it wrote outputs there, which the answer is written from first.
    if (shm.upload?.hasOutputs !== true) shm.upload?.release();
    if (streamer.streaming) await streamer.finish(answer);
    else await respond(ctx, p, decoded.request, answer, ledger, shm.upload);
  } finally {
    shm.upload?.release();
  }
}
