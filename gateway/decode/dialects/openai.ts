// The OpenAI API's request bodies (docs/openai.md): completions, chat completions and embeddings,
// checked the way OpenAI checks them — an unknown argument, a value of the wrong type or range, or
// a feature no Triton model here can serve is a 400 naming the parameter, before anything is sent
// upstream — and mapped onto a Triton model's inputs in one of the two layouts Triton's own OpenAI
// frontend speaks (python/openai/openai_frontend/engine/utils/triton.py in triton-inference-server/server):
// - vllm: `text_input`, `stream`, `exclude_input_in_output`, and every sampling parameter in one
//   JSON string, `sampling_parameters` (the vLLM backend's model.json);
// - trtllm: one input per parameter (`max_tokens` INT32, `stop_words` BYTES, `temperature` FP32, …),
//   as TensorRT-LLM's ensemble takes them.
// Which layout a model uses is configured (openai.models[].convention) or read from its backend.
import type { inference } from '../../../proto/services';
import type { OpenAiConvention, OpenAiModel, ToolParserName } from '../../config/openai';
import { isObject } from '../../config/problems';
import { GatewayError } from '../../errors';
import { frameBytesElements } from '../../infer/bytes-element';
import { type Datatype, datatypeOfConfigEnum, elementSize, writeNumberElement } from '../../infer/datatype';
import type { InferRequest, InputTensor, ParamValue } from '../../infer/request';
import { type ChatMessage, renderChat } from './chat-template';
import { schemaProblem } from './json-schema';
import { deduceShape } from '../tensor-shape';

/** A 400 in OpenAI's terms: the message and the parameter it is about. */
export function invalidParam(param: string | null, message: string, code: string | null = null): GatewayError {
  return new GatewayError('GW_ERR_DECODE_OPENAI_INVALID', message, { dialect: { shape: 'openai', param, code } });
}

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
export type JsonObject = { [k: string]: Json };

/** What a generate request asks for, whatever the endpoint: one prompt and its sampling. */
export interface GenerateAsk {
  readonly model: string;
  readonly prompt: string;
  readonly image: Buffer | undefined;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  readonly maxTokens: number | undefined;
  readonly stop: readonly string[];
  readonly echo: boolean;
  readonly sampling: Readonly<Record<string, number>>;
  /** How many choices: n generations of the same prompt, each its own call. */
  readonly n: number;
  /** Bytes decoded from base64 text here (an image that was not decoded while the body arrived). */
  readonly copied: number;
  /** Chat: the tools offered, and the parser that reads the model's calls. */
  readonly tools?: (ToolsAsk & { readonly parser: ToolParserName }) | undefined;
  /** Chat: structured output, the backend's guided decoding. */
  readonly responseFormat?: ResponseFormat | undefined;
  /** logprobs asked for: how many top alternatives each token lists (0: the token's own only); undefined: none. */
  readonly logprobs?: number | undefined;
}

export interface EmbeddingAsk {
  readonly model: string;
  readonly inputs: readonly string[];
  readonly base64: boolean;
}

/** The parameters both generate endpoints take, OpenAI's API reference (api-reference/completions, /chat). */
const SAMPLING: Readonly<Record<string, readonly [number, number]>> = {
  temperature: [0, 2], top_p: [0, 1], presence_penalty: [-2, 2], frequency_penalty: [-2, 2],
};
/** Accepted and not forwarded: they say who asks or where OpenAI keeps a copy, nothing the model does. */
const IGNORED = new Set(['user', 'store', 'metadata', 'service_tier']);
const COMMON = new Set(['model', 'stream', 'stream_options', 'max_tokens', 'stop', 'n', 'seed', 'logprobs', 'logit_bias', ...Object.keys(SAMPLING), ...IGNORED]);
const COMPLETIONS = new Set([...COMMON, 'prompt', 'echo', 'best_of', 'suffix']);
const CHAT = new Set([...COMMON, 'messages', 'max_completion_tokens', 'top_logprobs', 'response_format', 'tools', 'tool_choice', 'parallel_tool_calls', 'functions', 'function_call', 'modalities', 'audio', 'prediction', 'reasoning_effort', 'web_search_options']);
const EMBEDDINGS = new Set(['model', 'input', 'encoding_format', 'dimensions', 'user']);

/** At most this many choices (`n`) in one request: each is a generation of its own (OpenAI's bound is 128). */
export const MAX_CHOICES = 16;

/** At most this many strings in one embeddings request (OpenAI's own bound is 2048). */
export const MAX_EMBEDDING_INPUTS = 2048;

export function parseBody(body: Buffer, known: ReadonlySet<string>): JsonObject {
  let v: Json;
  try {
    v = JSON.parse(body.toString('utf8')) as Json;
  } catch (err) {
    throw invalidParam(null, `We could not parse the JSON body of your request: ${(err as Error).message}`);
  }
  if (!isObject(v)) throw invalidParam(null, 'The request body must be a JSON object.');
  for (const k of Object.keys(v)) if (!known.has(k)) throw invalidParam(k, `Unrecognized request argument supplied: ${k}`);
  return v;
}

export function str(o: JsonObject, k: string): string | undefined {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalidParam(k, `'${k}' must be a string, got ${JSON.stringify(v).slice(0, 64)}.`);
  return v;
}

export function bool(o: JsonObject, k: string): boolean | undefined {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw invalidParam(k, `'${k}' must be a boolean, got ${JSON.stringify(v).slice(0, 64)}.`);
  return v;
}

export function num(o: JsonObject, k: string, min: number, max: number, integer: boolean): number | undefined {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || (integer && !Number.isInteger(v))) throw invalidParam(k, `'${k}' must be ${integer ? 'an integer' : 'a number'}, got ${JSON.stringify(v).slice(0, 64)}.`);
  if (v < min || v > max) throw invalidParam(k, `'${k}' must be between ${min} and ${max}, got ${v}.`);
  return v;
}

function model(o: JsonObject): string {
  const m = str(o, 'model');
  if (m === undefined || m === '') throw invalidParam('model', 'you must provide a model parameter');
  return m;
}

/** The parameters completions and chat share; `maxKey`: chat prefers max_completion_tokens. */
function common(o: JsonObject, maxTokens: number | undefined): Omit<GenerateAsk, 'prompt' | 'image' | 'echo' | 'copied'> {
  const stream = bool(o, 'stream') ?? false;
  let includeUsage = false;
  const so = o.stream_options;
  if (so !== undefined && so !== null) {
    if (!stream) throw invalidParam('stream_options', 'The \'stream_options\' parameter is only allowed when \'stream\' is enabled.');
    if (!isObject(so)) throw invalidParam('stream_options', '\'stream_options\' must be an object.');
    for (const k of Object.keys(so)) if (k !== 'include_usage') throw invalidParam(`stream_options.${k}`, `Unrecognized argument: stream_options.${k}`);
    includeUsage = bool(so, 'include_usage') ?? false;
  }
  // n choices are n generations, each its own call (docs/openai.md "Parameters"), so bounded here.
  const n = num(o, 'n', 1, MAX_CHOICES, true) ?? 1;
  const lb = o.logit_bias;
  if (lb !== undefined && lb !== null && (!isObject(lb) || Object.keys(lb).length > 0)) throw invalidParam('logit_bias', 'logit_bias is not supported: the gateway has no tokenizer to map it onto the model\'s vocabulary.', 'unsupported_value');
  const sampling: Record<string, number> = {};
  for (const [k, [min, max]] of Object.entries(SAMPLING)) {
    const v = num(o, k, min, max, false);
    if (v !== undefined) sampling[k] = v;
  }
  const seed = num(o, 'seed', -(2 ** 63), 2 ** 64 - 1, true);
  if (seed !== undefined) sampling.seed = seed;
  return { model: model(o), stream, includeUsage, maxTokens, stop: stops(o), sampling, n };
}

function stops(o: JsonObject): string[] {
  const v = o.stop;
  if (v === undefined || v === null) return [];
  const list = typeof v === 'string' ? [v] : v;
  if (!Array.isArray(list) || list.some((s) => typeof s !== 'string' || s === '')) throw invalidParam('stop', '\'stop\' must be a non-empty string or a list of them.');
  if (list.length > 4) throw invalidParam('stop', `'stop' takes at most 4 sequences, got ${list.length}.`);
  return list as string[];
}

/** POST /completions. */
export function decodeCompletions(body: Buffer): GenerateAsk {
  const o = parseBody(body, COMPLETIONS);
  const maxTokens = num(o, 'max_tokens', 1, 2 ** 31 - 1, true);
  const c = common(o, maxTokens);
  const lp = num(o, 'logprobs', 0, 20, true);
  const bestOf = num(o, 'best_of', 1, 20, true);
  if (bestOf !== undefined && bestOf !== 1) throw invalidParam('best_of', 'best_of > 1 is not supported.', 'unsupported_value');
  if (str(o, 'suffix') !== undefined) throw invalidParam('suffix', 'suffix is not supported.', 'unsupported_value');
  let p = o.prompt;
  if (Array.isArray(p) && p.length === 1) p = p[0]!;
  if (typeof p !== 'string') {
    throw invalidParam('prompt', Array.isArray(p) && p.every((x) => typeof x === 'string')
      ? 'One prompt per request: send each prompt as its own request.'
      : '\'prompt\' must be a string (token ids are not supported: the gateway has no tokenizer).');
  }
  const echo = bool(o, 'echo') ?? false;
  if (lp !== undefined && echo) throw invalidParam('logprobs', 'logprobs with echo is not supported: the model reports no logprobs of the prompt.', 'unsupported_value');
  return { ...c, prompt: p, image: undefined, echo, copied: 0, logprobs: lp };
}

/**
 * An image content part: the bytes of its base64 data: URL (nothing is fetched) — decoded while
 * the body arrived (`staged`: the data's placeholder in the document → its bytes), or here.
 */
function imageBytes(part: JsonObject, where: string, staged: ReadonlyMap<string, Buffer> | undefined): Buffer {
  const iu = part.image_url;
  const url = typeof iu === 'string' ? iu : isObject(iu) ? iu.url : undefined;
  if (typeof url !== 'string') throw invalidParam(`${where}.image_url`, 'An image_url part needs image_url.url.');
  const m = /^data:([^,;]*)((?:;[^,;]*)*),/.exec(url.slice(0, 256));
  if (m === null || !m[2]!.split(';').includes('base64')) {
    throw invalidParam(`${where}.image_url.url`, 'Only base64 data: URLs are supported (data:image/png;base64,…): the gateway fetches nothing.', 'invalid_image_url');
  }
  const b64 = url.slice(m[0].length);
  const early = staged?.get(b64);
  if (early !== undefined) return early;
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 === 1) throw invalidParam(`${where}.image_url.url`, 'The image\'s data: URL is not valid base64.', 'invalid_image_url');
  return Buffer.from(b64, 'base64');
}

/** What a chat model offers the request: its template and how it writes tool calls. */
export type ChatTarget = Pick<OpenAiModel, 'chatTemplate' | 'toolParser'>;

/** POST /chat/completions: the messages rendered with the model's chat template. */
export function decodeChat(body: Buffer, target: (modelId: string) => ChatTarget, staged?: ReadonlyMap<string, Buffer>): GenerateAsk {
  return chatAsk(parseBody(body, CHAT), target, staged);
}

/**
 * A chat completions request's object (one the Responses API's items were rendered into, too:
 * decode/dialects/openai-responses.ts), checked and rendered; `flat`: the tools and format are
 * the Responses API's (`tools[i].name`, `text.format`).
 */
export function chatAsk(o: JsonObject, target: (modelId: string) => ChatTarget, staged?: ReadonlyMap<string, Buffer>, flat = false): GenerateAsk {
  const maxTokens = num(o, 'max_completion_tokens', 1, 2 ** 31 - 1, true) ?? num(o, 'max_tokens', 1, 2 ** 31 - 1, true);
  const c = common(o, maxTokens);
  const logprobs = chatLogprobs(o);
  for (const k of ['audio', 'prediction', 'web_search_options']) {
    const v = o[k];
    if (v !== undefined && v !== null) throw invalidParam(k, `'${k}' is not supported by this gateway.`, 'unsupported_value');
  }
  const mod = o.modalities;
  if (mod !== undefined && mod !== null && !(Array.isArray(mod) && mod.every((x) => x === 'text'))) throw invalidParam('modalities', 'Only the text modality is supported.', 'unsupported_value');
  const tools = decodeTools(o, flat);
  if (tools !== undefined && logprobs !== undefined) throw invalidParam('logprobs', 'logprobs with tools is not supported: a call\'s text is not the answer\'s tokens.', 'unsupported_value');
  const responseFormat = flat ? decodeTextFormat(o.text) : decodeResponseFormat(o.response_format, 'response_format', 'json_schema');
  const { messages, image } = chatMessages(o.messages, staged);
  const t = target(c.model);
  if (t.chatTemplate === undefined) throw invalidParam('model', `The model '${c.model}' has no chat template configured (openai.models[].chatTemplate): use /completions.`, 'model_not_chat');
  if (tools !== undefined && t.toolParser === undefined) {
    throw invalidParam(tools.legacy ? 'functions' : 'tools', `The model '${c.model}' has no tool call parser configured: set openai.models[].toolParser (llama3_json, mistral or hermes) to the format the model writes its calls in.`, 'unsupported_value');
  }
  const copied = image === undefined || [...(staged?.values() ?? [])].includes(image) ? 0 : (image).length;
  const prompt = renderChat(t.chatTemplate, messages, tools?.offered);
  return { ...c, prompt, image, echo: false, copied, tools: tools === undefined ? undefined : { ...tools, parser: t.toolParser! }, responseFormat, logprobs };
}

/** Chat's `logprobs: true` and `top_logprobs` (0–20, with logprobs only): the alternatives a token lists. */
function chatLogprobs(o: JsonObject): number | undefined {
  const top = num(o, 'top_logprobs', 0, 20, true);
  if (bool(o, 'logprobs') !== true) {
    if (top !== undefined) throw invalidParam('top_logprobs', '\'top_logprobs\' is only allowed when \'logprobs\' is true.');
    return undefined;
  }
  return top ?? 0;
}

/** messages: each checked, its parts read (an image's bytes taken out), tool calls and results for the template. */
function chatMessages(messages: Json | undefined, staged: ReadonlyMap<string, Buffer> | undefined): { messages: ChatMessage[]; image: Buffer | undefined } {
  if (!Array.isArray(messages) || messages.length === 0) throw invalidParam('messages', '\'messages\' must be a non-empty list.');
  let image: Buffer | undefined;
  const takeImage = (part: JsonObject, pw: string): void => {
    if (image !== undefined) throw invalidParam(pw, 'One image per request: the model takes one image input.', 'unsupported_value');
    image = imageBytes(part, pw, staged);
  };
  const rendered = messages.map((msg, i): ChatMessage => {
    const where = `messages[${i}]`;
    if (!isObject(msg)) throw invalidParam(where, `${where} must be an object.`);
    const role = msg.role;
    if (typeof role !== 'string' || !ROLES.includes(role)) throw invalidParam(`${where}.role`, `${where}.role must be one of ${ROLES.join(', ')}.`);
    const content = messageContent(msg.content, where, takeImage);
    return { role: role === 'function' ? 'tool' : role, content, ...messageTools(msg, role, where) };
  });
  return { messages: rendered, image };
}

const ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'];

function messageContent(content: Json | undefined, where: string, takeImage: (part: JsonObject, pw: string) => void): ChatMessage['content'] {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw invalidParam(`${where}.content`, `${where}.content must be a string or a list of content parts.`);
  return content.map((part, j) => {
    const pw = `${where}.content[${j}]`;
    if (!isObject(part)) throw invalidParam(pw, `${pw} must be an object.`);
    if (part.type === 'text') {
      if (typeof part.text !== 'string') throw invalidParam(`${pw}.text`, `${pw}.text must be a string.`);
      return { type: 'text' as const, text: part.text };
    }
    if (part.type === 'image_url') {
      takeImage(part, pw);
      return { type: 'image_url' as const };
    }
    throw invalidParam(`${pw}.type`, `Content parts of type ${JSON.stringify(part.type)} are not supported (text and image_url are).`, 'unsupported_value');
  });
}

/**
 * A message's part in a tool conversation, as Hugging Face's templates take it: an assistant's
 * `tool_calls` (legacy: `function_call`) with `arguments` as an object (the JSON string OpenAI sends,
 * parsed, as vLLM hands it to templates), a tool result's `tool_call_id` (legacy: a `function`
 * message's `name`).
 */
function messageTools(msg: JsonObject, role: string, where: string): Pick<ChatMessage, 'tool_calls' | 'tool_call_id' | 'name'> {
  if (role === 'tool') {
    const id = msg.tool_call_id;
    if (typeof id !== 'string' || id === '') throw invalidParam(`${where}.tool_call_id`, `${where} is a tool message: it needs the tool_call_id of the call it answers.`);
    return { tool_call_id: id, ...(typeof msg.name === 'string' ? { name: msg.name } : {}) };
  }
  if (role === 'function') {
    if (typeof msg.name !== 'string' || msg.name === '') throw invalidParam(`${where}.name`, `${where} is a function message: it needs the name of the function.`);
    return { tool_call_id: msg.name, name: msg.name };
  }
  if (role !== 'assistant') return {};
  const calls = msg.tool_calls ?? (msg.function_call === undefined || msg.function_call === null ? undefined : [{ id: '', type: 'function', function: msg.function_call }]);
  if (calls === undefined || calls === null) return {};
  const param = msg.tool_calls === undefined ? `${where}.function_call` : `${where}.tool_calls`;
  if (!Array.isArray(calls)) throw invalidParam(param, `${param} must be a list of tool calls.`);
  return {
    tool_calls: calls.map((tc, j) => {
      const w = msg.tool_calls === undefined ? param : `${param}[${j}]`;
      const f = isObject(tc) ? tc.function : undefined;
      if (!isObject(tc) || !isObject(f) || typeof f.name !== 'string' || f.name === '') throw invalidParam(`${w}.function.name`, `${w} needs function.name.`);
      const args = typeof f.arguments === 'string' ? parseArguments(f.arguments) : undefined;
      if (!isObject(args)) throw invalidParam(`${w}.function.arguments`, `${w}.function.arguments must be a JSON object in a string.`);
      return { id: typeof tc.id === 'string' ? tc.id : '', type: 'function' as const, function: { name: f.name, arguments: args } };
    }),
  };
}

function parseArguments(s: string): Json | undefined {
  try {
    return JSON.parse(s) as Json;
  } catch {
    return undefined;
  }
}

/** The tools a request offers the model, as the template takes them, and what it must do with them. */
export interface ToolsAsk {
  /** `{type: "function", function: {name, description?, parameters?}}` each (legacy functions, wrapped so). */
  readonly offered: readonly JsonObject[];
  /** auto: the model may call; required: it must; a name: it must call that one. */
  readonly choice: 'auto' | 'required' | { readonly name: string };
  /** `functions`: answered with `function_call` (and finish_reason `function_call`), one call. */
  readonly legacy: boolean;
  /** parallel_tool_calls false: only the first call is given. */
  readonly parallel: boolean;
  /** The parameters of each function with `strict: true`: its calls' arguments are checked against them. */
  readonly strict: ReadonlyMap<string, object>;
}

const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * tools / tool_choice (or the legacy functions / function_call); undefined: none offered (or
 * tool_choice none). `flat`: the Responses API's function tools, `{type: "function", name, …}`.
 */
function decodeTools(o: JsonObject, flat: boolean): ToolsAsk | undefined {
  const legacy = o.functions !== undefined && o.functions !== null;
  if (legacy && o.tools !== undefined && o.tools !== null) throw invalidParam('functions', 'Give tools or the legacy functions, not both.');
  const [listKey, choiceKey] = legacy ? ['functions', 'function_call'] : ['tools', 'tool_choice'];
  const list = o[listKey];
  const choice = o[choiceKey];
  if (list === undefined || list === null || (Array.isArray(list) && list.length === 0)) {
    if (choice !== undefined && choice !== null && choice !== 'none') throw invalidParam(choiceKey, `'${choiceKey}' is only allowed when '${listKey}' are specified.`);
    return undefined;
  }
  if (!Array.isArray(list)) throw invalidParam(listKey, `'${listKey}' must be a list.`);
  const strict = new Map<string, object>();
  const offered = list.map((item, i): JsonObject => {
    const where = legacy ? `functions[${i}]` : flat ? `tools[${i}]` : `tools[${i}].function`;
    if (!legacy && (!isObject(item) || item.type !== 'function')) {
      throw invalidParam(`tools[${i}].type`, flat ? `tools[${i}]: only function tools are served ({"type": "function", "name": …}); the gateway runs no built-in tools.`
        : `tools[${i}] must be {"type": "function", "function": {…}}.`, flat ? 'unsupported_value' : null);
    }
    const f = legacy || flat ? item : (item as JsonObject).function;
    if (!isObject(f)) throw invalidParam(where, `${where} must be an object.`);
    if (typeof f.name !== 'string' || !FUNCTION_NAME.test(f.name)) throw invalidParam(`${where}.name`, `${where}.name must be 1 to 64 of a-z A-Z 0-9 _ -, got ${JSON.stringify(f.name ?? null)}.`);
    if (f.parameters !== undefined && f.parameters !== null) {
      const problem = schemaProblem(f.parameters);
      if (problem !== undefined) throw invalidParam(`${where}.parameters`, `${where}.parameters ${problem}.`);
      if (f.strict === true) strict.set(f.name, f.parameters as object);
    }
    const fn: JsonObject = { name: f.name };
    if (typeof f.description === 'string') fn.description = f.description;
    if (f.parameters !== undefined && f.parameters !== null) fn.parameters = f.parameters;
    return { type: 'function', function: fn };
  });
  const names = offered.map((t) => (t.function as JsonObject).name as string);
  const picked = toolChoice(choice, choiceKey, names, legacy, flat);
  if (picked === 'none') return undefined;
  const parallel = bool(o, 'parallel_tool_calls') ?? true;
  // A named choice offers the model that tool alone.
  const shown = typeof picked === 'object' ? offered.filter((_, i) => names[i] === picked.name) : offered;
  return { offered: shown, choice: picked, legacy, parallel: parallel && !legacy, strict };
}

function toolChoice(choice: Json | undefined, key: string, names: readonly string[], legacy: boolean, flat: boolean): ToolsAsk['choice'] | 'none' {
  if (choice === undefined || choice === null || choice === 'auto') return 'auto';
  if (choice === 'none' || (choice === 'required' && !legacy)) return choice;
  const fn = !isObject(choice) ? undefined : legacy ? choice : choice.type !== 'function' ? undefined : flat ? choice : choice.function;
  const name = isObject(fn) ? fn.name : undefined;
  if (typeof name !== 'string') {
    throw invalidParam(key, legacy ? '\'function_call\' must be none, auto or {"name": …}.'
      : `'tool_choice' must be none, auto, required or {"type": "function", ${flat ? '"name": …}' : '"function": {"name": …}}'}.`);
  }
  if (!names.includes(name)) throw invalidParam(key, `'${key}' names the function ${JSON.stringify(name)}, which is not among the ${legacy ? 'functions' : 'tools'} offered (${names.join(', ')}).`);
  return { name };
}

/** response_format: text (undefined), json_object, or json_schema with its schema (checked: a JSON Schema). */
export type ResponseFormat = { readonly kind: 'json_object' } | { readonly kind: 'json_schema'; readonly name: string; readonly schema: object; readonly strict: boolean };

/**
 * A structured output format: `rf` at `where`, its schema's fields under `inner` (chat's
 * response_format.json_schema) or beside its type (the Responses API's text.format: inner '').
 */
function decodeResponseFormat(rf: Json | undefined, where: string, inner: string): ResponseFormat | undefined {
  if (rf === undefined || rf === null) return undefined;
  if (!isObject(rf)) throw invalidParam(where, `'${where}' must be an object.`);
  if (rf.type === 'text') return undefined;
  if (rf.type === 'json_object') return { kind: 'json_object' };
  if (rf.type !== 'json_schema') throw invalidParam(`${where}.type`, `'${where}.type' must be text, json_object or json_schema.`);
  const js = inner === '' ? rf : rf[inner];
  const at = inner === '' ? where : `${where}.${inner}`;
  if (!isObject(js)) throw invalidParam(at, `${where} of type json_schema needs ${inner === '' ? 'name, schema and strict?' : `${inner}: {name, schema, strict?}`}.`);
  if (typeof js.name !== 'string' || !FUNCTION_NAME.test(js.name)) throw invalidParam(`${at}.name`, `${at}.name must be 1 to 64 of a-z A-Z 0-9 _ -.`);
  const schema = js.schema ?? {};
  const problem = schemaProblem(schema);
  if (problem !== undefined) throw invalidParam(`${at}.schema`, `${at}.schema ${problem}.`);
  return { kind: 'json_schema', name: js.name, schema: schema as object, strict: bool(js, 'strict') ?? false };
}

/** The Responses API's `text`: its `format` (verbosity, a hint for OpenAI's models: medium, the default, alone). */
function decodeTextFormat(text: Json | undefined): ResponseFormat | undefined {
  if (text === undefined || text === null) return undefined;
  if (!isObject(text)) throw invalidParam('text', '\'text\' must be an object.');
  for (const k of Object.keys(text)) if (k !== 'format' && k !== 'verbosity') throw invalidParam(`text.${k}`, `Unrecognized argument: text.${k}`);
  const v = text.verbosity;
  if (v !== undefined && v !== null && v !== 'medium') throw invalidParam('text.verbosity', 'text.verbosity is not supported: the model has no verbosity setting (medium, the default, is accepted).', 'unsupported_value');
  return decodeResponseFormat(text.format, 'text.format', '');
}

/** POST /embeddings. */
export function decodeEmbeddings(body: Buffer): EmbeddingAsk {
  const o = parseBody(body, EMBEDDINGS);
  const m = model(o);
  const format = str(o, 'encoding_format') ?? 'float';
  if (format !== 'float' && format !== 'base64') throw invalidParam('encoding_format', `'encoding_format' must be float or base64, got ${JSON.stringify(format)}.`);
  if (num(o, 'dimensions', 1, 1_000_000, true) !== undefined) throw invalidParam('dimensions', 'dimensions is not supported: the model\'s vector has its own size.', 'unsupported_value');
  const input = o.input;
  const inputs = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(inputs) || inputs.length === 0 || inputs.some((s) => typeof s !== 'string')) {
    throw invalidParam('input', '\'input\' must be a string or a non-empty list of strings (token ids are not supported: the gateway has no tokenizer).');
  }
  if (inputs.length > MAX_EMBEDDING_INPUTS) throw invalidParam('input', `At most ${MAX_EMBEDDING_INPUTS} inputs per request, got ${inputs.length}.`);
  if (inputs.some((s) => s === '')) throw invalidParam('input', '\'input\' cannot be an empty string.');
  return { model: m, inputs: inputs as string[], base64: format === 'base64' };
}

// ---------------------------------------------------------------- the Triton request

/** One input's value before it is laid out in its datatype. */
type Value = { readonly kind: 'bytes'; readonly elements: readonly Buffer[] } | { readonly kind: 'number'; readonly values: readonly number[] } | { readonly kind: 'raw'; readonly bytes: Buffer };

/** An input of the request: its config at Triton and its bytes (raw_input_contents). */
export interface BuiltInput {
  readonly tensor: InputTensor;
  /** Its raw_input_contents entry in pieces: a BYTES element's length prefix, then its bytes (copied once). */
  readonly parts: readonly Buffer[];
}

function configInput(config: inference.ModelConfig, name: string): inference.IModelInput | undefined {
  return config.input.find((i) => i.name === name);
}

function layOut(spec: inference.IModelInput, value: Value, maxBatch: number): BuiltInput {
  const name = spec.name ?? '';
  const datatype = datatypeOfConfigEnum(Number(spec.data_type ?? 0));
  if (datatype === undefined) throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT', `input '${name}' has a datatype the OpenAI mapping cannot write`);
  let parts: Buffer[];
  let count: number;
  if (value.kind === 'bytes') {
    if (datatype !== 'BYTES') throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT', `input '${name}' must be BYTES (TYPE_STRING) for the OpenAI mapping, the model says ${datatype}`);
    parts = [frameBytesElements(value.elements)];
    count = value.elements.length;
  } else if (value.kind === 'raw') {
    if (datatype === 'BYTES') {
      const prefix = Buffer.allocUnsafe(4);
      prefix.writeUInt32LE(value.bytes.length, 0);
      parts = [prefix, value.bytes];
      count = 1;
    } else if (datatype === 'UINT8') {
      parts = [value.bytes];
      count = value.bytes.length;
    } else {
      throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT', `image input '${name}' must be BYTES or UINT8, the model says ${datatype}`);
    }
  } else {
    count = value.values.length;
    parts = [numbers(datatype, value.values, name)];
  }
  const byteSize = parts.reduce((n, b) => n + b.length, 0);
  const dims = (spec.dims ?? []).map(Number);
  const shape = deduceShape(dims, count);
  if (shape === undefined) throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT', `input '${name}' has dims [${dims.join(',')}], which do not hold ${count} element(s)`);
  return {
    tensor: { name, datatype, shape: maxBatch > 0 ? [1, ...shape] : shape, parameters: new Map(), byteSize },
    parts,
  };
}

function numbers(d: Datatype, values: readonly number[], name: string): Buffer {
  if (d === 'BYTES' || d === 'FP16' || d === 'BF16') {
    throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT', `input '${name}' is ${d}: the OpenAI mapping writes BOOL, integers, FP32 or FP64 there`);
  }
  const float = d === 'FP32' || d === 'FP64';
  const size = elementSize(d);
  const b = Buffer.alloc(size * values.length);
  values.forEach((v, i) => writeNumberElement(d, float ? v : Math.trunc(v), b, i * size));
  return b;
}

/** The model's convention: configured, else its backend (Triton's OpenAI frontend reads the same). */
export function conventionOf(configured: OpenAiConvention | undefined, config: inference.ModelConfig, id: string): OpenAiConvention {
  if (configured !== undefined) return configured;
  if (config.backend === 'vllm') return 'vllm';
  if (config.backend === 'tensorrtllm') return 'trtllm';
  throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT',
    `model '${id}' is served by backend '${config.backend ?? ''}': say how it takes its inputs with openai.models[].convention (vllm or trtllm)`);
}

export interface GenerateTarget {
  readonly model: string;
  readonly version: string;
  readonly convention: OpenAiConvention;
  readonly imageInput: string;
  readonly defaultMaxTokens: number;
}

/**
 * The InferRequest and the bytes of each input for a generate ask, laid out as `config` declares
 * its inputs. A parameter the model has no input for is refused (400, naming it) rather than
 * dropped; optional inputs the model lacks (token counts, finish reason) are left out.
 */
export function generateInputs(ask: GenerateAsk, t: GenerateTarget, config: inference.ModelConfig): { request: InferRequest; inputs: BuiltInput[] } {
  const maxBatch = Number(config.max_batch_size ?? 0);
  const out: BuiltInput[] = [];
  const put = (name: string, value: Value, param: string | null, required: boolean): void => {
    const spec = configInput(config, name);
    if (spec === undefined) {
      if (!required) return;
      if (param === null) throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT', `model '${t.model}' has no input '${name}', which the ${t.convention} convention needs`);
      throw invalidParam(param, `The model does not take '${param}' (it has no input '${name}').`, 'unsupported_parameter');
    }
    out.push(layOut(spec, value, maxBatch));
  };
  const text = (s: string): Value => ({ kind: 'bytes', elements: [Buffer.from(s, 'utf8')] });
  const flag = (b: boolean): Value => ({ kind: 'number', values: [b ? 1 : 0] });
  const maxTokens = ask.maxTokens ?? t.defaultMaxTokens;
  put('text_input', text(ask.prompt), null, true);
  put('stream', flag(ask.stream), null, false);
  if (t.convention === 'vllm') {
    const sp: Record<string, unknown> = { ...ask.sampling, max_tokens: maxTokens };
    if (ask.stop.length > 0) sp.stop = ask.stop;
    // vLLM's structured outputs, as Triton's vLLM backend reads them from sampling_parameters
    // (src/utils/vllm_backend_utils.py in triton-inference-server/vllm_backend: guided_decoding
    // becomes vLLM's StructuredOutputsParams).
    const rf = ask.responseFormat;
    if (rf !== undefined) sp.guided_decoding = rf.kind === 'json_schema' ? { json: rf.schema } : { json_object: true };
    // Logprobs, as the vLLM backend returns them: sampling_parameters.logprobs (the top alternatives)
    // and return_logprobs, its `logprobs` output (src/utils/request.py in triton-inference-server/vllm_backend).
    if (ask.logprobs !== undefined) sp.logprobs = ask.logprobs;
    put('sampling_parameters', text(JSON.stringify(sp)), null, true);
    put('return_finish_reason', flag(true), null, false);
    if (ask.logprobs !== undefined) put('return_logprobs', flag(true), 'logprobs', true);
  } else {
    if (ask.logprobs !== undefined) {
      throw invalidParam('logprobs', `logprobs are not supported for model '${t.model}' (the trtllm convention): TensorRT-LLM reports them by token id (output_log_probs), which the gateway has no tokenizer to name, and lists no alternatives.`, 'unsupported_value');
    }
    put('max_tokens', { kind: 'number', values: [maxTokens] }, ask.maxTokens === undefined ? null : 'max_tokens', true);
    if (ask.stop.length > 0) put('stop_words', { kind: 'bytes', elements: ask.stop.map((s) => Buffer.from(s, 'utf8')) }, 'stop', true);
    for (const [k, v] of Object.entries(ask.sampling)) put(k, { kind: 'number', values: [v] }, k, true);
    // TensorRT-LLM's guided decoding inputs, as Triton's OpenAI frontend writes them
    // (python/openai/openai_frontend/engine/utils/triton.py): guide type json_schema and the schema, or json.
    const rf = ask.responseFormat;
    if (rf !== undefined) {
      put('guided_decoding_guide_type', text(rf.kind === 'json_schema' ? 'json_schema' : 'json'), 'response_format', true);
      if (rf.kind === 'json_schema') put('guided_decoding_guide', text(JSON.stringify(rf.schema)), 'response_format', true);
    }
  }
  // OpenAI's text is the completion alone unless `echo`: said whenever the model can be told (a
  // model without the input is taken to leave the prompt out), and echo refused where it cannot.
  put('exclude_input_in_output', flag(!ask.echo), ask.echo ? 'echo' : null, ask.echo);
  put('return_num_input_tokens', flag(true), null, false);
  put('return_num_output_tokens', flag(true), null, false);
  if (ask.image !== undefined) {
    if (t.imageInput === '') throw invalidParam('messages', `The model '${t.model}' takes no image (openai.models[].imageInput is not set).`, 'unsupported_value');
    put(t.imageInput, { kind: 'raw', bytes: ask.image }, 'messages', true);
  }
  return { request: request(t.model, t.version, out), inputs: out };
}

/** The InferRequest for one embeddings input: the model's only BYTES input takes the text. */
export function embeddingInputs(text: string, modelName: string, version: string,
  config: inference.ModelConfig): { request: InferRequest; inputs: BuiltInput[] } {
  const strings = config.input.filter((i) => datatypeOfConfigEnum(Number(i.data_type ?? 0)) === 'BYTES');
  if (strings.length !== 1) throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT', `embedding model '${modelName}' must have exactly one BYTES input for the text, it has ${strings.length}`);
  const built = [layOut(strings[0]!, { kind: 'bytes', elements: [Buffer.from(text, 'utf8')] }, Number(config.max_batch_size ?? 0))];
  return { request: request(modelName, version, built), inputs: built };
}

function request(modelName: string, modelVersion: string, inputs: readonly BuiltInput[]): InferRequest {
  // Decoupled models end their stream with an empty final response only when asked (stream-plane.ts).
  const parameters = new Map<string, ParamValue>([['triton_enable_empty_final_response', { type: 'bool', value: true }]]);
  return { modelName, modelVersion, id: undefined, parameters, inputs: inputs.map((i) => i.tensor), outputs: undefined, binaryDataOutput: true };
}
