// Model repository (PROTOCOL.md §1): POST /v2/repository[/{repo}]/index → RepositoryIndex,
// …/models/{m}/load → RepositoryModelLoad, …/models/{m}/unload → RepositoryModelUnload. Bodies are
// read with Triton's HTTP rules (decode/control-json.ts); what only the HTTP frontend checks —
// `ready` and parameter types, the `config` / `file:` keys, a repository name on load/unload — is
// checked here with its messages. Load and unload through the gateway evict the model's cached
// configuration (raw-binary requests deduce their input from it).
import { writeJson } from '../egress/write';
import { GatewayError } from '../errors';
import { asBool, asObject, asString, find, readControlBody } from '../decode/control-json';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control-plane';
import type { ModelConfigs } from '../upstream/model-configs';
import type { inference } from '../../proto/services';

export interface RepositoryDeps {
  readonly upstream: ControlPlane;
  readonly configs: ModelConfigs;
  readonly maxBodyBytes: number;
}

/** Triton's HTTP answer to index: a JSON array, empty fields left out. */
export function encodeRepositoryIndex(r: inference.IRepositoryIndexResponse): string {
  return JSON.stringify((r.models ?? []).map((m) => ({
    name: m.name ?? '',
    ...(m.version ? { version: m.version } : {}),
    ...(m.state ? { state: m.state } : {}),
    ...(m.reason ? { reason: m.reason } : {}),
  })));
}

function refuseRepositoryName(repo: string | undefined): void {
  if (repo !== undefined && repo !== '') {
    throw new GatewayError('GW_ERR_DECODE_UNSUPPORTED', "'repository_name' specification is not supported");
  }
}

/**
 * Load parameters as Triton's HTTP frontend builds them: every value must be a string; `config`
 * stays a string, `file:<path>` is base64 decoded into bytes; any other key is Triton's 500.
 */
function loadParameters(body: Awaited<ReturnType<typeof readControlBody>>): Record<string, inference.IModelRepositoryParameter> {
  const out: Record<string, inference.IModelRepositoryParameter> = {};
  const params = find(body.root, 'parameters');
  if (params === undefined) return out;
  for (const m of asObject(params).members) {
    const value = asString(m.value);
    if (m.key === 'config') out[m.key] = { string_param: value };
    // Triton's decoder, like Node's, skips what is not base64; the core judges the files.
    else if (m.key.startsWith('file:')) out[m.key] = { bytes_param: Buffer.from(value, 'base64') };
    else throw new GatewayError('GW_ERR_DECODE_MALFORMED', 'unexpected error on creating Triton parameter');
  }
  return out;
}

export function repositoryRoutes(deps: RepositoryDeps): Route[] {
  const { upstream, configs } = deps;
  return [
    {
      name: 'repository_index',
      pattern: /^\/v2\/repository(?:\/([^/]+))?\/index$/,
      category: 'model-repository',
      methodNotAllowedJson: true,
      methods: {
        POST: async (ctx) => {
          const body = await readControlBody(ctx.req, deps.maxBodyBytes, true);
          const readyNode = find(body.root, 'ready');
          const ready = readyNode === undefined ? false : asBool(readyNode);
          // Triton's HTTP frontend ignores the repository name here; its gRPC refuses any (PROTOCOL.md §2.2).
          const r = await upstream.call('RepositoryIndex', { repository_name: '', ready }, ctx.signal);
          writeJson(ctx.res, 200, encodeRepositoryIndex(r));
        },
      },
    },
    {
      name: 'repository_load',
      pattern: /^\/v2\/repository(?:\/([^/]+))?\/models\/([^/]+)\/load$/,
      category: 'model-repository',
      methodNotAllowedJson: true,
      methods: {
        POST: async (ctx) => {
          refuseRepositoryName(ctx.params[0]);
          const name = ctx.params[1]!;
          const body = await readControlBody(ctx.req, deps.maxBodyBytes, true);
          const parameters = loadParameters(body);
          try {
            await upstream.call('RepositoryModelLoad', { repository_name: '', model_name: name, parameters }, ctx.signal);
          } finally {
            configs.evict(name); // a failed load may still have replaced or dropped the model
          }
          writeJson(ctx.res, 200, '');
        },
      },
    },
    {
      name: 'repository_unload',
      pattern: /^\/v2\/repository(?:\/([^/]+))?\/models\/([^/]+)\/unload$/,
      category: 'model-repository',
      methodNotAllowedJson: true,
      methods: {
        POST: async (ctx) => {
          refuseRepositoryName(ctx.params[0]);
          const name = ctx.params[1]!;
          const body = await readControlBody(ctx.req, deps.maxBodyBytes, true);
          // Triton 2.51 drops a non-bool unload_dependents without a word (its parse error is
          // overwritten by the unload's result; observed): the model is unloaded alone.
          const ud = find(find(body.root, 'parameters'), 'unload_dependents');
          const unloadDependents = ud?.kind === 'bool' && ud.value;
          try {
            await upstream.call('RepositoryModelUnload', {
              repository_name: '', model_name: name, parameters: { unload_dependents: { bool_param: unloadDependents } },
            }, ctx.signal);
          } finally {
            configs.evict(name);
          }
          writeJson(ctx.res, 200, '');
        },
      },
    },
  ];
}
