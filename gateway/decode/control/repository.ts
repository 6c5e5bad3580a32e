// Model repository bodies (POST /v2/repository[/{repo}]/index, …/models/{m}/load, …/unload), read
// with Triton's HTTP rules (decode/control/control-json.ts): what only the HTTP frontend checks — `ready`
// and parameter types, the `config` / `file:` keys, a repository name on load/unload — is checked
// here with its messages.
import { GatewayError } from '../../errors';
import type { inference } from '../../../proto/services';
import { asBool, asObject, asString, find, parseControlBody } from './control-json';

/** Triton's HTTP frontend refuses a repository name on load and unload (UNSUPPORTED). */
export function refuseRepositoryName(repo: string | undefined): void {
  if (repo !== undefined && repo !== '') {
    throw new GatewayError('GW_ERR_DECODE_UNSUPPORTED', "'repository_name' specification is not supported");
  }
}

/** Index: `ready` (default false). */
export function decodeIndexReady(bytes: Buffer): boolean {
  const readyNode = find(parseControlBody(bytes, true).root, 'ready');
  return readyNode === undefined ? false : asBool(readyNode);
}

/**
 * Load parameters as Triton's HTTP frontend builds them: every value must be a string; `config`
 * stays a string, `file:<path>` is base64 decoded into bytes; any other key is Triton's 500 (400
 * here: docs/differences.md "Client mistakes are 4xx").
 */
export function decodeLoadParameters(bytes: Buffer): Record<string, inference.IModelRepositoryParameter> {
  const body = parseControlBody(bytes, true);
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

/**
 * Unload: `parameters.unload_dependents`. Triton 2.51 drops a non-bool value without a word (its
 * parse error is overwritten by the unload's result; observed): the model is unloaded alone.
 */
export function decodeUnloadDependents(bytes: Buffer): boolean {
  const ud = find(find(parseControlBody(bytes, true).root, 'parameters'), 'unload_dependents');
  return ud?.kind === 'bool' && ud.value;
}
