// The SageMaker and Vertex AI keys that only make sense together (docs/dialects.md). Vertex AI
// tells a container its routes through AIP_PREDICT_ROUTE and AIP_HEALTH_ROUTE; Triton's Vertex AI
// frontend reads them (src/vertex_ai_server.cc Create), so an empty route key falls back to them
// here, at load time, like every other variable the gateway reads.

/** The gateway's own paths a dialect route may not take (they would shadow or be shadowed). */
const TAKEN = /^\/v2(?:\/|$)|^\/v1\/models\/|^\/(?:healthz|readyz)$/;

const PATH = /^\/[\x21-\x7e]*$/;

/** Fills vertexAi.*Route from AIP_* when empty; the problems of the dialect keys. */
export function cloudDialectProblems(values: Map<string, unknown>, env: Readonly<Record<string, string | undefined>>): string[] {
  const problems: string[] = [];
  const sagemaker = values.get('sagemaker.enabled') === true;
  if (!sagemaker && values.get('sagemaker.defaultModel') !== '') {
    problems.push('sagemaker.defaultModel: given but the SageMaker routes are off; set sagemaker.enabled (--sagemaker) or remove it');
  }
  if (values.get('sagemaker.inferenceType') !== 'infer' && values.get('sagemaker.defaultModel') === '') {
    problems.push(`sagemaker.inferenceType: ${String(values.get('sagemaker.inferenceType'))} runs on sagemaker.defaultModel, which is not set; name the model (--sagemaker-default-model)`);
  }
  // TorchServe's routes (routes/torchserve.ts) share GET /ping with SageMaker's, in another shape.
  const torchserve = values.get('torchserve.enabled') === true;
  if (torchserve && sagemaker) problems.push('torchserve.enabled: TorchServe and SageMaker both answer GET /ping; enable one of torchserve.enabled and sagemaker.enabled');
  if (values.get('vertexAi.enabled') !== true) return problems;
  const routes: string[] = [];
  for (const [key, variable] of [['vertexAi.predictRoute', 'AIP_PREDICT_ROUTE'], ['vertexAi.healthRoute', 'AIP_HEALTH_ROUTE']] as const) {
    let path = values.get(key) as string;
    if (path === '') path = env[variable] ?? '';
    values.set(key, path);
    if (path === '') problems.push(`${key}: required with vertexAi.enabled; give the path Vertex AI sends to (--${key === 'vertexAi.predictRoute' ? 'vertex-ai-predict-route' : 'vertex-ai-health-route'}) or set ${variable}`);
    else if (!PATH.test(path) || path.includes('?') || path.includes('#')) problems.push(`${key}: ${JSON.stringify(path)} is not a path (it starts with / and has no query, fragment, blank or control character)`);
    else if (TAKEN.test(path) || (sagemaker && (path === '/ping' || path === '/invocations' || path.startsWith('/models/')))
      || (torchserve && (path === '/ping' || path === '/models' || path.startsWith('/predictions/')))) {
      problems.push(`${key}: ${path} is one of the gateway's own routes; choose another path`);
    }
    routes.push(path);
  }
  if (routes[0] !== '' && routes[0] === routes[1]) problems.push('vertexAi.healthRoute: the same path as vertexAi.predictRoute; give them different paths');
  const model = values.get('vertexAi.defaultModel') as string;
  if (model === '') problems.push('vertexAi.defaultModel: required with vertexAi.enabled; name the model the predict route calls (--vertex-ai-default-model)');
  else if (/[/?#]/.test(model)) problems.push(`vertexAi.defaultModel: ${JSON.stringify(model)} is not a model name (no /, ? or #)`);
  return problems;
}
