// The SageMaker and Vertex AI routes under auth (docs/dialects.md), played as an attacker with a
// key limited to the model `simple`: whatever model a request reaches — named by
// X-Amzn-SageMaker-Target-Model over the path, by the configured default, or by an
// X-Vertex-Ai-Triton-Redirect path — is the model the guard checks, and the API group of what a
// redirect reaches is the group checked. A redirect is one request: its credentials' limits are
// taken once. Nothing refused reaches the backend (its statistics do not move).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';

const ALL = 'all_groups_0123456789abcdef';
const SIMPLE = 'simple_only_0123456789abcdef';
const TWICE = 'two_requests_0123456789abcdef';
const KEYS = [
  'keys:',
  `  - { id: all, token: ${ALL}, groups: "*" }`,
  `  - { id: simple-only, token: ${SIMPLE}, groups: [inference, metadata, health], models: [simple] }`,
  `  - { id: twice, token: ${TWICE}, groups: [inference], limits: { rate: 0.01, burst: 2 } }`,
].join('\n');

const SIMPLE_INFER = '{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},{"name":"INPUT1","datatype":"INT32","shape":[1,16],"data":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}';
const FP32_INFER = '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2],"data":[1,2]}]}';
const PREDICT = '/v1/endpoints/1/deployedModels/2:predict';

let gw: RunningGateway;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tg-cloud-auth-'));
  const keysFile = join(dir, 'keys.yaml');
  writeFileSync(keysFile, KEYS);
  gw = await gatewayFor(['--demo', '--api-disabled', 'none', '--auth', '--auth-keys-file', keysFile, '--auth-open', 'none',
    '--sagemaker', '--sagemaker-default-model', 'identity_fp32',
    '--vertex-ai', '--vertex-ai-predict-route', PREDICT, '--vertex-ai-health-route', '/health', '--vertex-ai-default-model', 'identity_fp32']);
});
afterAll(async () => {
  await gw?.close();
  rmSync(dir, { recursive: true, force: true });
});

const as = (token: string, more: Record<string, string> = {}): Record<string, string> => ({ Authorization: `Bearer ${token}`, ...more });
const post = (path: string, headers: Record<string, string>, body = SIMPLE_INFER) => send(`${gw.url}${path}`, { headers, body });
const refusal = (r: { status: number; headers: Record<string, unknown>; body: Buffer }) => [r.status, r.headers['x-tensorgate-error'], r.body.toString()];
const forbidden = (model: string) => [403, 'GW_ERR_AUTH_FORBIDDEN', JSON.stringify({ error: `'simple-only' may not call model '${model}'` })];

/** Inferences the backend counted for `model` (asked with the all-groups key). */
async function inferences(model: string): Promise<number> {
  const r = await send(`${gw.url}/v2/models/${model}/stats`, { headers: as(ALL) });
  return (JSON.parse(r.body.toString()) as { model_stats: { inference_count: number }[] }).model_stats[0]!.inference_count;
}

describe('SageMaker', () => {
  test('the target-model header wins over the path, and is the model checked', async () => {
    const before = await inferences('identity_fp32');
    // the path names simple, the header identity_fp32: Triton infers identity_fp32, so that is checked
    expect(refusal(await post('/models/simple/invoke', as(SIMPLE, { 'X-Amzn-SageMaker-Target-Model': 'identity_fp32' }), FP32_INFER)))
      .toEqual(forbidden('identity_fp32'));
    // the other way round: the header names simple, which is what runs
    const ok = await post('/models/identity_fp32/invoke', as(SIMPLE, { 'X-Amzn-SageMaker-Target-Model': 'simple' }));
    expect([ok.status, JSON.parse(ok.body.toString()).model_name]).toEqual([200, 'simple']);
    // no header: the path's model
    expect(refusal(await post('/models/identity_fp32/invoke', as(SIMPLE), FP32_INFER))).toEqual(forbidden('identity_fp32'));
    expect((await post('/models/simple/invoke', as(SIMPLE))).status).toBe(200);
    // the header twice is one value ("a, b"), checked as such: never the first alone
    const twice = await send(`${gw.url}/models/simple/invoke`, { headers: { ...as(SIMPLE), 'X-Amzn-SageMaker-Target-Model': ['identity_fp32', 'simple'] } as never, body: FP32_INFER });
    expect(refusal(twice)).toEqual(forbidden('identity_fp32, simple'));
    expect(await inferences('identity_fp32')).toBe(before);
  });

  test('/invocations calls the configured model whatever the headers say', async () => {
    expect(refusal(await post('/invocations', as(SIMPLE, { 'X-Amzn-SageMaker-Target-Model': 'simple' }), FP32_INFER))).toEqual(forbidden('identity_fp32'));
    const ok = await post('/invocations', as(ALL, { 'X-Amzn-SageMaker-Target-Model': 'simple' }), FP32_INFER);
    expect([ok.status, JSON.parse(ok.body.toString()).model_name]).toEqual([200, 'identity_fp32']);
  });

  test('/ping is the health group: credentials unless auth.open has it', async () => {
    expect((await send(`${gw.url}/ping`)).status).toBe(401);
    expect((await send(`${gw.url}/ping`, { headers: as(SIMPLE) })).status).toBe(200);
  });
});

describe('Vertex AI', () => {
  test('without a redirect, the default model is the model checked', async () => {
    expect(refusal(await post(PREDICT, as(SIMPLE), FP32_INFER))).toEqual(forbidden('identity_fp32'));
    expect((await post(PREDICT, as(ALL), FP32_INFER)).status).toBe(200);
    expect((await post(PREDICT, {}, FP32_INFER)).status).toBe(401);
  });

  test('a redirect is checked as the route it reaches: its model and its group', async () => {
    const before = await inferences('identity_fp32');
    const redirect = (to: string) => as(SIMPLE, { 'X-Vertex-Ai-Triton-Redirect': to });
    expect(refusal(await post(PREDICT, redirect('v2/models/identity_fp32/infer'), FP32_INFER))).toEqual(forbidden('identity_fp32'));
    expect(refusal(await post(PREDICT, redirect('v2/models/identity_fp32/versions/1/infer'), FP32_INFER))).toEqual(forbidden('identity_fp32'));
    expect(refusal(await post(PREDICT, redirect('v2/models/identity_fp32')))).toEqual(forbidden('identity_fp32'));
    const infer = await post(PREDICT, redirect('v2/models/simple/infer'));
    expect([infer.status, JSON.parse(infer.body.toString()).model_name]).toEqual([200, 'simple']);
    expect((await post(PREDICT, redirect('v2/models/simple'))).status).toBe(200);
    // groups the key lacks: model-config, statistics, model-repository (every model at once)
    expect(refusal(await post(PREDICT, redirect('v2/models/simple/config')))).toEqual([403, 'GW_ERR_AUTH_FORBIDDEN', '{"error":"\'simple-only\' may not use the \'model-config\' API group"}']);
    expect((await post(PREDICT, redirect('v2/models/stats'))).status).toBe(403);
    expect((await post(PREDICT, redirect('v2/repository/index'))).status).toBe(403);
    // without credentials, a redirect to a health route is still the health group, not open here
    expect((await post(PREDICT, { 'X-Vertex-Ai-Triton-Redirect': 'v2/health/ready' })).status).toBe(401);
    expect(await inferences('identity_fp32')).toBe(before);
  });

  test('a redirected request takes its credentials\' limits once', async () => {
    const h = as(TWICE, { 'X-Vertex-Ai-Triton-Redirect': 'v2/models/simple/infer' });
    expect((await post(PREDICT, h)).status).toBe(200);
    expect((await post(PREDICT, as(TWICE))).status).not.toBe(429); // the default model: a place of its own
    const third = await post(PREDICT, h);
    expect([third.status, third.headers['x-tensorgate-error']]).toEqual([429, 'GW_ERR_AUTH_RATE_LIMITED']);
  });
});
