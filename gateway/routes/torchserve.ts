// TorchServe's inference API (docs/dialects.md "TorchServe"), for clients moving from TorchServe to
// Triton; on with torchserve.enabled. As pytorch/serve's frontend answers them
// (InferenceRequestHandler.java, ApiUtils.getModelList):
//   POST|PUT /predictions/{m}[/{v}]: lookupModel → body (raw: the model's one input; multipart:
//     the `data`/`body` part, or parts named after inputs) → call Triton → the answer as a
//     handler would return it (encode/torchserve.ts)
//   GET /ping: {"status": "Healthy"} 200 while Triton is ready, {"status": "Unhealthy"} 500
//   GET /models[?limit=&next_page_token=]: {"models": [{"modelName", "modelUrl"}], "nextPageToken"?}
// The steps live in pipeline/torchserve.ts. Every error these routes answer is TorchServe's
// {"code", "type", "message"}.
import { EVERY_MODEL } from '../auth/guard';
import type { Config } from '../config/schema';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import type { InferPlan } from '../pipeline/infer-decode';
import { models, ping, predictions } from '../pipeline/torchserve';
import type { ControlPlane } from '../upstream/control/control-plane';
import type { InferDeps } from './infer';

export interface TorchServeDeps extends InferDeps {
  readonly control: ControlPlane;
  readonly torchserve: Config['torchserve'];
}

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
      errorShape: 'torchserve',
    },
    {
      name: 'torchserve_ping',
      category: 'health',
      pattern: /^\/ping$/,
      methods: { GET: (ctx) => ping(ctx, deps.control) },
      errorShape: 'torchserve',
    },
    {
      name: 'torchserve_models',
      // A read-only listing, as model metadata is: not the load/unload group (model-repository)
      // that an edge gateway keeps off. Lists every model: not for credentials limited to some.
      category: 'metadata',
      model: { name: EVERY_MODEL },
      pattern: /^\/models$/,
      methods: { GET: (ctx) => models(ctx, deps.control) },
      errorShape: 'torchserve',
    },
  ];
}
