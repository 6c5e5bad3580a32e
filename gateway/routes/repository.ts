// Model repository: POST /v2/repository[/{repo}]/index → RepositoryIndex,
// …/models/{m}/load → RepositoryModelLoad, …/models/{m}/unload → RepositoryModelUnload. Bodies are
// read and checked by decode/control/repository.ts, answers rendered by encode/repository.ts. Load and
// unload through the gateway evict the model's cached configuration (raw-binary requests deduce
// their input from it).
import { EVERY_MODEL, limitedRefusal } from '../auth/guard';
import type { Config } from '../config/schema';
import { decodeIndexReady, decodeLoadParameters, decodeUnloadDependents, refuseRepositoryName } from '../decode/control/repository';
import { writeJson } from '../egress/write';
import { encodeRepositoryIndex } from '../encode/repository';
import { readControlBody } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';
import type { ModelConfigs } from '../upstream/control/model-configs';

export interface RepositoryDeps {
  readonly control: ControlPlane;
  readonly configs: ModelConfigs;
  readonly limits: Config['limits'];
}

export function repositoryRoutes(deps: RepositoryDeps): Route[] {
  const { control } = deps;
  return [
    {
      name: 'repository_index',
      pattern: /^\/v2\/repository(?:\/([^/]+))?\/index$/,
      category: 'model-repository',
      // Lists every model: not for credentials limited to some (auth/guard.ts).
      model: { name: EVERY_MODEL },
      methodNotAllowedJson: true,
      methods: {
        POST: async (ctx) => {
          const ready = decodeIndexReady(await readControlBody(ctx.req, deps.limits));
          // Triton's HTTP frontend ignores the repository name here; its gRPC refuses any.
          const r = await control.call('RepositoryIndex', { repository_name: '', ready }, ctx.signal);
          writeJson(ctx.res, 200, encodeRepositoryIndex(r));
        },
      },
    },
    {
      name: 'repository_load',
      pattern: /^\/v2\/repository(?:\/([^/]+))?\/models\/([^/]+)\/load$/,
      category: 'model-repository',
      model: { param: 1 },
      methodNotAllowedJson: true,
      methods: {
        POST: (ctx) => changeModel(ctx, deps, async (name, body) => {
          const parameters = decodeLoadParameters(body);
          if (Object.keys(parameters).length > 0) refuseLimited(ctx, 'load a model with parameters (a configuration or files)');
          await control.call('RepositoryModelLoad', { repository_name: '', model_name: name, parameters }, ctx.signal);
        }),
      },
    },
    {
      name: 'repository_unload',
      pattern: /^\/v2\/repository(?:\/([^/]+))?\/models\/([^/]+)\/unload$/,
      category: 'model-repository',
      model: { param: 1 },
      methodNotAllowedJson: true,
      methods: {
        POST: (ctx) => changeModel(ctx, deps, async (name, body) => {
          const unloadDependents = decodeUnloadDependents(body);
          if (unloadDependents) refuseLimited(ctx, 'unload a model with unload_dependents');
          await control.call('RepositoryModelUnload', {
            repository_name: '', model_name: name, parameters: { unload_dependents: { bool_param: unloadDependents } },
          }, ctx.signal);
        }),
      },
    },
  ];
}

/** Throws 403 for credentials limited to some models (auth/guard.ts limitedRefusal). */
function refuseLimited(ctx: RequestContext, what: string): void {
  const refusal = limitedRefusal(ctx.grant, what);
  if (refusal === undefined) return;
  if (ctx.record.auth !== undefined) ctx.record.auth = { ...ctx.record.auth, outcome: 'forbidden' };
  throw refusal;
}

/**
 * Load or unload: no repository name (Triton's HTTP frontend refuses one), the body read, the
 * change made, and the model's cached configuration evicted whatever the outcome (a failed load
 * may still have replaced or dropped the model).
 */
async function changeModel(ctx: RequestContext, deps: RepositoryDeps, change: (name: string, body: Buffer) => Promise<void>): Promise<void> {
  refuseRepositoryName(ctx.params[0]);
  const name = ctx.params[1]!;
  const body = await readControlBody(ctx.req, deps.limits);
  try {
    await change(name, body);
  } finally {
    deps.configs.evict(name);
  }
  writeJson(ctx.res, 200, '');
}
