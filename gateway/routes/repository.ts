// Model repository: POST /v2/repository[/{repo}]/index → RepositoryIndex,
// …/models/{m}/load → RepositoryModelLoad, …/models/{m}/unload → RepositoryModelUnload. Bodies are
// read and checked by decode/control/repository.ts, answers rendered by encode/repository.ts. Load and
// unload through the gateway evict the model's cached configuration (raw-binary requests deduce
// their input from it). With several backends (pools, replicas) the index is the union of every
// backend's, a model version READY when any backend has it ready.
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
import type { inference } from '../../proto/services';

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
          const answers = await control.callEach('RepositoryIndex', { repository_name: '', ready }, ctx.signal);
          writeJson(ctx.res, 200, encodeRepositoryIndex(unionOfIndexes(answers)));
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

type IndexAnswer = PromiseSettledResult<inference.IRepositoryIndexResponse>;

/**
 * One backend's index as it came; several merged: each model version once, READY when any backend
 * has it ready (else the state and reason the first backend gave), in name then version order as
 * Triton lists its own. Backends that failed are left out; all failing fails with the first error.
 */
export function unionOfIndexes(answers: readonly IndexAnswer[]): inference.IRepositoryIndexResponse {
  const ok = answers.filter((a): a is PromiseFulfilledResult<inference.IRepositoryIndexResponse> => a.status === 'fulfilled').map((a) => a.value);
  if (ok.length === 0) throw (answers[0] as PromiseRejectedResult).reason;
  if (ok.length === 1) return ok[0]!;
  const byKey = new Map<string, inference.RepositoryIndexResponse.IModelIndex>();
  for (const index of ok) {
    for (const m of index.models ?? []) {
      const key = `${m.name ?? ''}\u0000${m.version ?? ''}`;
      const seen = byKey.get(key);
      if (seen === undefined || (seen.state !== 'READY' && m.state === 'READY')) byKey.set(key, m);
    }
  }
  const version = (v: string | null | undefined): number => (v === undefined || v === null || v === '' ? -1 : Number(v));
  const models = [...byKey.values()].sort((a, b) => ((a.name ?? '') < (b.name ?? '') ? -1 : (a.name ?? '') > (b.name ?? '') ? 1 : version(a.version) - version(b.version)));
  return { models };
}
