// Routing: server/model metadata, ready and config endpoints for several models, unknown
// models and versions, wrong methods (405), unknown paths (404), query strings.
import { type Case, type CaseGroup, get, input, jsonRequest } from './types';

/** Every model PyTriton serves in the zoo (test/triton/zoo.py). */
export const ZOO = [
  'simple', 'simple_string',
  ...['fp16', 'fp32', 'fp64', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64', 'bool', 'bytes'].map((t) => `identity_${t}`),
  'identity_fp32_nobatch', 'classifier_fp32', 'image_stats', 'blob_len', 'blob_echo', 'big_output', 'slow', 'failing',
  'tiny_llm', 'tiny_llm_trtllm', 'tiny_embed',
];

const req = (name: string, method: string, path: string, extra: Partial<Case> = {}): Case => ({ name, method, path, ...extra });
const inferBody = jsonRequest({ inputs: [input('INPUT0', 'FP32', [1, 1], [1])] });

export const routeCases: CaseGroup = {
  group: 'routes',
  cases: [
    get('GET /v2', '/v2'),
    get('GET /v2/health/live', '/v2/health/live'),
    get('GET /v2/health/ready', '/v2/health/ready'),
    get('GET /v2/health/ready?verbose=1', '/v2/health/ready?verbose=1'),
    // ---- model metadata for the whole zoo
    ...ZOO.map((m) => get(`GET /v2/models/${m}`, `/v2/models/${m}`)),
    get('GET /v2/models/simple/versions/1', '/v2/models/simple/versions/1'),
    get('GET /v2/models/simple/versions/2 (unknown version)', '/v2/models/simple/versions/2'),
    get('GET /v2/models/simple/versions/x (non-digit → 404 Not Found)', '/v2/models/simple/versions/x'),
    get('GET /v2/models/simple/versions/-1', '/v2/models/simple/versions/-1'),
    get('GET /v2/models/simple/versions/01', '/v2/models/simple/versions/01'),
    get('GET /v2/models/simple?x=1 (query ignored)', '/v2/models/simple?x=1&y'),
    get('GET /v2/models/nonexistent', '/v2/models/nonexistent'),
    get('GET /v2/models/sim%70le (no URL decoding)', '/v2/models/sim%70le'),
    get('GET /v2/models/simple/ (trailing slash)', '/v2/models/simple/'),
    // ---- ready
    get('GET /v2/models/simple/ready', '/v2/models/simple/ready'),
    get('GET /v2/models/failing/ready', '/v2/models/failing/ready'),
    get('GET /v2/models/simple/versions/1/ready', '/v2/models/simple/versions/1/ready'),
    get('GET /v2/models/simple/versions/2/ready', '/v2/models/simple/versions/2/ready'),
    get('GET /v2/models/nonexistent/ready', '/v2/models/nonexistent/ready'),
    get('GET /v2/models/nonexistent/versions/1/ready', '/v2/models/nonexistent/versions/1/ready'),
    // ---- config (parameters.workspace-path is the same instance for both sides)
    ...['simple', 'identity_bytes', 'identity_fp32_nobatch', 'big_output', 'classifier_fp32', 'image_stats', 'identity_fp16', 'tiny_llm'].map((m) => get(`GET /v2/models/${m}/config`, `/v2/models/${m}/config`)),
    get('GET /v2/models/simple/versions/1/config', '/v2/models/simple/versions/1/config'),
    get('GET /v2/models/simple/versions/2/config', '/v2/models/simple/versions/2/config'),
    get('GET /v2/models/nonexistent/config', '/v2/models/nonexistent/config'),
    get('GET /v2/models/nonexistent/versions/1/config', '/v2/models/nonexistent/versions/1/config'),
    // ---- wrong methods
    req('POST /v2', 'POST', '/v2'),
    req('PUT /v2/health/ready', 'PUT', '/v2/health/ready'),
    req('POST /v2/health/live', 'POST', '/v2/health/live', { body: Buffer.from('{}') }),
    req('DELETE /v2/models/simple', 'DELETE', '/v2/models/simple'),
    req('POST /v2/models/simple/config', 'POST', '/v2/models/simple/config', { body: Buffer.from('{}') }),
    req('POST /v2/models/simple/ready', 'POST', '/v2/models/simple/ready'),
    get('GET /v2/models/simple/infer', '/v2/models/simple/infer'),
    req('PUT /v2/models/simple/infer', 'PUT', '/v2/models/simple/infer', { ...inferBody }),
    req('GET /v2/models/nonexistent/infer (method before model)', 'GET', '/v2/models/nonexistent/infer'),
    // ---- unknown paths
    get('GET / (unknown path)', '/'),
    get('GET /v2/ (trailing slash)', '/v2/'),
    get('GET /v3', '/v3'),
    get('GET /v2/nonexistent_path', '/v2/nonexistent_path'),
    get('GET /v2/models//ready (empty model name)', '/v2/models//ready'),
    req('POST /base/v2/models/identity_fp32/infer (no base path)', 'POST', '/base/v2/models/identity_fp32/infer', { ...inferBody }),
    req('POST /v2/models/identity_fp32/infer/ (trailing slash)', 'POST', '/v2/models/identity_fp32/infer/', { ...inferBody }),
    req('POST /v2/models/identity_fp32/versions/x/infer', 'POST', '/v2/models/identity_fp32/versions/x/infer', { ...inferBody }),
    req('POST /v2/models/identity_fp32/infer?x=1 (query ignored)', 'POST', '/v2/models/identity_fp32/infer?x=1', { ...inferBody }),
    req('POST /v2/models/identity_fp32/versions/1/infer?debug', 'POST', '/v2/models/identity_fp32/versions/1/infer?debug', { ...inferBody }),
  ],
};
