// The OpenAI-compatible API (docs/openai.md) under openai.prefix (/openai/v1 by default):
//   GET models, GET models/{id}                      — the ids of openai.models
//   POST completions, POST chat/completions          — read body → check and map → ModelStreamInfer
//       → one JSON answer, or server-sent events ending with `data: [DONE]`
//   POST responses                                   — the Responses API: chat's steps, its own
//       request and answer shapes (pipeline/openai/responses.ts); streamed as typed events
//   POST embeddings                                  — one ModelStreamInfer call per input string
// The steps live in pipeline/openai/decode.ts and pipeline/openai/answer.ts. Every error these
// routes answer is OpenAI's error object.
import { escapeRegExp, type Route } from '../ingress/router';
import { embeddings, generate } from '../pipeline/openai/answer';
import { responses } from '../pipeline/openai/responses';
import { listModels, type OpenAiDeps, openAiPlan, retrieveModel } from '../pipeline/openai/decode';

export function openAiRoutes(deps: OpenAiDeps): Route[] {
  const plan = openAiPlan(deps);
  const p = escapeRegExp(deps.prefix);
  // Under /v1 the retrieve route would take KServe V1's status route: it matches only the ids
  // offered here, and every other name keeps the V1 route (docs/openai.md "Paths").
  const ids = deps.prefix === '/v1' ? `(${deps.models.map((m) => escapeRegExp(m.id)).join('|') || '(?!)'})` : '(.+)';
  return [
    { name: 'openai_models', category: 'metadata', pattern: new RegExp(`^${p}\\/models$`),
      methods: { GET: async (ctx) => listModels(ctx, plan) }, errorShape: 'openai' },
    { name: 'openai_model', category: 'metadata', pattern: new RegExp(`^${p}\\/models\\/${ids}$`),
      methods: { GET: async (ctx) => retrieveModel(ctx, plan) }, errorShape: 'openai' },
    { name: 'openai_completions', category: 'inference', pattern: new RegExp(`^${p}\\/completions$`),
      methods: { POST: (ctx) => generate(ctx, plan, 'completion') }, errorShape: 'openai' },
    { name: 'openai_chat_completions', category: 'inference', pattern: new RegExp(`^${p}\\/chat\\/completions$`),
      methods: { POST: (ctx) => generate(ctx, plan, 'chat') }, errorShape: 'openai' },
    { name: 'openai_responses', category: 'inference', pattern: new RegExp(`^${p}\\/responses$`),
      methods: { POST: (ctx) => responses(ctx, plan) }, errorShape: 'openai' },
    { name: 'openai_embeddings', category: 'inference', pattern: new RegExp(`^${p}\\/embeddings$`),
      methods: { POST: (ctx) => embeddings(ctx, plan) }, errorShape: 'openai' },
  ];
}
