// The Responses API's request body (docs/openai.md "The Responses API"), OpenAI's
// api-reference/responses/create: `input` (a string, or items: messages with text parts,
// `function_call` and `function_call_output` for a tool round trip), `instructions`, function
// `tools` (flat: `{type: "function", name, parameters, strict}`), `tool_choice`, `text.format`,
// `max_output_tokens`, `temperature`, `top_p`, `stream`. It is checked here and rendered into the
// chat completions request it means — instructions a system message first, a call an assistant
// message's `tool_calls`, its output a `tool` message — which the chat decoder (openai.ts chatAsk)
// checks and renders with the model's template: one pipeline, two request shapes. What needs
// state the gateway does not keep (previous_response_id, conversation, background) or a tool it
// does not run (web_search, file inputs, images) is a 400 naming the parameter.
import { isObject } from '../../config/problems';
import { bool, type ChatTarget, chatAsk, type GenerateAsk, invalidParam, type Json, type JsonObject, num, parseBody, str } from './openai';

/** A Responses request: the generation it asks for, and what its answer repeats. */
export interface ResponsesAsk extends GenerateAsk {
  /** What the answer repeats of the request, in its fields' names (OpenAI's response object echoes its settings). */
  readonly repeat: JsonObject;
}

/** Accepted and not acted on: who asks, caching hints, and `store` (nothing is kept: docs/openai.md). */
const IGNORED = ['user', 'store', 'metadata', 'service_tier', 'safety_identifier', 'prompt_cache_key', 'prompt_cache_retention'];
/** Known, and served only at their neutral value (each a 400 otherwise, saying why). */
const NEUTRAL: Readonly<Record<string, { readonly ok: (v: Json) => boolean; readonly why: string }>> = {
  previous_response_id: { ok: (v) => v === null, why: 'the gateway keeps no responses (store is accepted and nothing is kept): send the whole conversation in input' },
  conversation: { ok: (v) => v === null, why: 'the gateway keeps no conversations: send the whole conversation in input' },
  background: { ok: (v) => v === null || v === false, why: 'the gateway keeps no responses to poll: stream instead' },
  reasoning: { ok: (v) => v === null || (isObject(v) && Object.values(v).every((x) => x === null)), why: 'the model has no reasoning settings' },
  include: { ok: (v) => v === null || (Array.isArray(v) && v.length === 0), why: 'there is nothing more to include: no built-in tools, no reasoning, no logprobs on this endpoint' },
  truncation: { ok: (v) => v === null || v === 'disabled', why: 'the gateway has no tokenizer to truncate the input with' },
  prompt: { ok: (v) => v === null, why: 'prompt templates live at OpenAI' },
  max_tool_calls: { ok: (v) => v === null, why: 'the gateway runs no built-in tools' },
  context_management: { ok: (v) => v === null, why: 'the gateway keeps no context' },
  top_logprobs: { ok: (v) => v === null || v === 0, why: 'logprobs are served on chat completions and completions, not here' },
};
const RESPONSES = new Set(['model', 'input', 'instructions', 'tools', 'tool_choice', 'parallel_tool_calls', 'text', 'max_output_tokens',
  'temperature', 'top_p', 'stream', 'stream_options', ...IGNORED, ...Object.keys(NEUTRAL)]);

/** POST /responses: checked, its items rendered as chat messages, the chat request decoded. */
export function decodeResponses(body: Buffer, target: (modelId: string) => ChatTarget): ResponsesAsk {
  const o = parseBody(body, RESPONSES);
  for (const [k, { ok, why }] of Object.entries(NEUTRAL)) {
    const v = o[k];
    if (v !== undefined && !ok(v)) throw invalidParam(k, `'${k}' is not supported: ${why}.`, 'unsupported_parameter');
  }
  const so = o.stream_options;
  if (so !== undefined && so !== null && (!isObject(so) || Object.keys(so).some((k) => k !== 'include_obfuscation'))) {
    throw invalidParam('stream_options', '\'stream_options\' takes include_obfuscation only.');
  }
  const instructions = str(o, 'instructions') ?? null;
  const messages: JsonObject[] = instructions === null ? [] : [{ role: 'system', content: instructions }];
  messages.push(...inputMessages(o.input));
  const chat: JsonObject = { messages };
  for (const k of ['model', 'tools', 'tool_choice', 'parallel_tool_calls', 'text', 'temperature', 'top_p', 'stream']) if (o[k] !== undefined) chat[k] = o[k]!;
  const maxOutputTokens = num(o, 'max_output_tokens', 1, 2 ** 31 - 1, true);
  if (maxOutputTokens !== undefined) chat.max_completion_tokens = maxOutputTokens;
  const ask = chatAsk(chat, target, undefined, true);
  const number = (k: string): number | null => (typeof o[k] === 'number' ? o[k] : null);
  return {
    ...ask,
    repeat: {
      instructions, tools: Array.isArray(o.tools) ? o.tools : [], tool_choice: o.tool_choice ?? 'auto', parallel_tool_calls: bool(o, 'parallel_tool_calls') ?? true,
      text: o.text ?? { format: { type: 'text' } }, temperature: number('temperature'), top_p: number('top_p'), max_output_tokens: maxOutputTokens ?? null,
      metadata: o.metadata ?? {},
    },
  };
}

const ROLES = ['user', 'system', 'developer', 'assistant'];

/** `input`: a string (one user message), or items, each rendered as a chat message. */
function inputMessages(input: Json | undefined): JsonObject[] {
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  if (!Array.isArray(input) || input.length === 0) throw invalidParam('input', '\'input\' must be a string or a non-empty list of items.');
  const out: JsonObject[] = [];
  input.forEach((item, i) => {
    const where = `input[${i}]`;
    if (!isObject(item)) throw invalidParam(where, `${where} must be an object.`);
    const type = item.type ?? 'message';
    if (type === 'message') out.push(message(item, where));
    else if (type === 'function_call') functionCall(out, item, where);
    else if (type === 'function_call_output') out.push(functionCallOutput(item, where));
    else if (type !== 'reasoning') throw invalidParam(`${where}.type`, `Input items of type ${JSON.stringify(type)} are not supported (message, function_call and function_call_output are).`, 'unsupported_value');
    // A reasoning item (another model's, passed back by an agent) is nothing this model reads.
  });
  if (out.length === 0) throw invalidParam('input', '\'input\' holds no message.');
  return out;
}

function message(item: JsonObject, where: string): JsonObject {
  const role = item.role;
  if (typeof role !== 'string' || !ROLES.includes(role)) throw invalidParam(`${where}.role`, `${where}.role must be one of ${ROLES.join(', ')}.`);
  const content = item.content;
  if (typeof content === 'string') return { role, content };
  if (!Array.isArray(content)) throw invalidParam(`${where}.content`, `${where}.content must be a string or a list of content parts.`);
  const text = content.map((part, j) => {
    const pw = `${where}.content[${j}]`;
    if (!isObject(part)) throw invalidParam(pw, `${pw} must be an object.`);
    if (part.type !== 'input_text' && part.type !== 'output_text' && part.type !== 'refusal') {
      throw invalidParam(`${pw}.type`, `Content parts of type ${JSON.stringify(part.type)} are not supported (input_text and output_text are: the gateway takes no images or files here).`, 'unsupported_value');
    }
    const t = part.type === 'refusal' ? part.refusal : part.text;
    if (typeof t !== 'string') throw invalidParam(`${pw}.${part.type === 'refusal' ? 'refusal' : 'text'}`, `${pw} needs its text as a string.`);
    return t;
  });
  return { role, content: text.join('') };
}

/** A call the model made: an assistant message's tool call (the calls of one turn, one message). */
function functionCall(out: JsonObject[], item: JsonObject, where: string): void {
  for (const k of ['call_id', 'name', 'arguments']) {
    if (typeof item[k] !== 'string' || (k !== 'arguments' && item[k] === '')) throw invalidParam(`${where}.${k}`, `${where} is a function_call: it needs ${k} (a string).`);
  }
  const call: JsonObject = { id: item.call_id!, type: 'function', function: { name: item.name!, arguments: item.arguments! } };
  const last = out.at(-1);
  if (last?.role === 'assistant' && Array.isArray(last.tool_calls)) last.tool_calls.push(call);
  else if (last?.role === 'assistant' && last.tool_calls === undefined) last.tool_calls = [call];
  else out.push({ role: 'assistant', content: null, tool_calls: [call] });
}

/** A call's result: a `tool` message answering its call_id. */
function functionCallOutput(item: JsonObject, where: string): JsonObject {
  if (typeof item.call_id !== 'string' || item.call_id === '') throw invalidParam(`${where}.call_id`, `${where} is a function_call_output: it needs the call_id of the call it answers.`);
  const output = item.output;
  if (typeof output === 'string') return { role: 'tool', tool_call_id: item.call_id, content: output };
  if (!Array.isArray(output)) throw invalidParam(`${where}.output`, `${where}.output must be a string or a list of input_text parts.`);
  const text = output.map((p, j) => {
    if (!isObject(p) || p.type !== 'input_text' || typeof p.text !== 'string') throw invalidParam(`${where}.output[${j}]`, `${where}.output[${j}] must be an input_text part (the gateway takes no images or files here).`, 'unsupported_value');
    return p.text;
  });
  return { role: 'tool', tool_call_id: item.call_id, content: text.join('') };
}
