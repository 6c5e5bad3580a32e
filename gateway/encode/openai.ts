// The OpenAI API's answers (docs/openai.md), in the shapes of OpenAI's API reference and of the
// official SDKs' types: models, completions and chat completions (whole, or as the chunks of a
// stream), embeddings (floats, or base64 of the little-endian float32 bytes — Triton's own bytes,
// no number formatting); the error object is egress/error-body.ts's. What a Triton response says
// is read here too: the generated text (`text_output`), the token counts (`num_input_tokens`,
// `num_output_tokens`) and the finish reason, where the model reports them.
import { GatewayError } from '../errors';
import { unframeBytesElements } from '../infer/bytes-element';
import { type InferResponse, type OutputTensor, outputBytes } from '../infer/response';
import { floatElements } from './infer-response';

/** What one Triton response of a generation says. */
export interface GenerationStep {
  /** The text of this response (a delta when streaming, the whole text otherwise). */
  readonly text: string;
  readonly promptTokens: number | undefined;
  readonly completionTokens: number | undefined;
  /** '' or absent on all but the last response; the model's own word ("stop", "length", …). */
  readonly finishReason: string | undefined;
  /** This response's tokens with their logprobs, when the model reports them (the vLLM backend's `logprobs`). */
  readonly logprobs: readonly TokenLogprob[] | undefined;
}

/** A generated token, its logprob, and the alternatives listed for it (the token first when it is the likeliest). */
export interface TokenLogprob {
  readonly token: string;
  readonly logprob: number;
  readonly top: readonly { readonly token: string; readonly logprob: number }[];
}

type VllmLogprob = { readonly logprob?: unknown; readonly rank?: unknown; readonly decoded_token?: unknown };

/**
 * The vLLM backend's `logprobs` output (src/utils/request.py in triton-inference-server/vllm_backend):
 * JSON, per token of this response `{token_id: {logprob, rank, decoded_token}}` — the sampled token
 * and the top alternatives. The sampled one is the entry whose text the response's text goes on
 * with (the ids are not text the gateway can read), else the likeliest.
 */
function readLogprobs(json: string | undefined, text: string): TokenLogprob[] | undefined {
  if (json === undefined) return undefined;
  let list: unknown;
  try {
    list = JSON.parse(json);
  } catch {
    throw new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'the model\'s logprobs output is not JSON');
  }
  if (!Array.isArray(list)) return undefined;
  let rest = text;
  return list.map((d: unknown) => {
    const entries = (typeof d === 'object' && d !== null ? Object.values(d as Record<string, VllmLogprob>) : [])
      .filter((e) => typeof e.logprob === 'number' && typeof e.decoded_token === 'string')
      .map((e) => ({ token: e.decoded_token as string, logprob: e.logprob as number, rank: typeof e.rank === 'number' ? e.rank : Infinity }))
      .sort((a, b) => a.rank - b.rank);
    const chosen = entries.find((e) => e.token !== '' && rest.startsWith(e.token)) ?? entries[0] ?? { token: '', logprob: 0 };
    rest = rest.slice(rest.startsWith(chosen.token) ? chosen.token.length : 0);
    return { token: chosen.token, logprob: chosen.logprob, top: entries.map((e) => ({ token: e.token, logprob: e.logprob })) };
  });
}

const bytesOf = (t: string): number[] => [...Buffer.from(t, 'utf8')];

/** Chat's `logprobs` of a choice or a chunk: `{content: [{token, logprob, bytes, top_logprobs}], refusal: null}`. */
export function chatLogprobs(tokens: readonly TokenLogprob[] | undefined, top: number): Record<string, unknown> | null {
  if (tokens === undefined) return null;
  return {
    content: tokens.map((t) => ({ token: t.token, logprob: t.logprob, bytes: bytesOf(t.token),
      top_logprobs: t.top.slice(0, top).map((a) => ({ token: a.token, logprob: a.logprob, bytes: bytesOf(a.token) })) })),
    refusal: null,
  };
}

/** Completions' `logprobs`: tokens, token_logprobs, top_logprobs (token → logprob each), text_offset from `offset`. */
export function completionLogprobs(tokens: readonly TokenLogprob[] | undefined, top: number, offset = 0): Record<string, unknown> | null {
  if (tokens === undefined) return null;
  let at = offset;
  const textOffset = tokens.map((t) => {
    const here = at;
    at += t.token.length;
    return here;
  });
  return {
    tokens: tokens.map((t) => t.token), token_logprobs: tokens.map((t) => t.logprob),
    top_logprobs: tokens.map((t) => Object.fromEntries(t.top.slice(0, top).map((a) => [a.token, a.logprob]))), text_offset: textOffset,
  };
}

function firstInteger(o: OutputTensor | undefined): number | undefined {
  if (o === undefined || o.byteLength === 0) return undefined;
  const b = outputBytes(o);
  switch (o.datatype) {
    case 'INT32': return b.length >= 4 ? b.readInt32LE(0) : undefined;
    case 'UINT32': return b.length >= 4 ? b.readUInt32LE(0) : undefined;
    case 'INT64': return b.length >= 8 ? Number(b.readBigInt64LE(0)) : undefined;
    case 'UINT64': return b.length >= 8 ? Number(b.readBigUInt64LE(0)) : undefined;
    default: return undefined;
  }
}

function strings(o: OutputTensor | undefined, name: string): string[] {
  if (o === undefined) return [];
  if (o.datatype !== 'BYTES') throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT', `output '${name}' must be BYTES, the model answered ${o.datatype}`);
  const u = unframeBytesElements(outputBytes(o));
  if (!u.ok) throw new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `output '${name}' is not a well-formed BYTES tensor`);
  return u.elements.map((e) => e.toString('utf8'));
}

/** One generation response: its text (the elements of text_output joined), counts and finish reason. */
export function readGenerationStep(r: InferResponse): GenerationStep {
  const out = (n: string): OutputTensor | undefined => r.outputs.find((o) => o.name === n);
  const text = out('text_output');
  if (text === undefined && r.outputs.length > 0) throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT', `the model answered without a text_output output (it has ${r.outputs.map((o) => o.name).join(', ')})`);
  const reason = strings(out('finish_reason'), 'finish_reason')[0];
  const whole = strings(text, 'text_output').join('');
  return {
    text: whole,
    logprobs: readLogprobs(strings(out('logprobs'), 'logprobs')[0], whole),
    promptTokens: firstInteger(out('num_input_tokens')),
    completionTokens: firstInteger(out('num_output_tokens')),
    // The vLLM backend writes Python's None on the responses before the last.
    finishReason: reason === '' || reason === 'None' ? undefined : reason,
  };
}

export interface Usage {
  readonly prompt_tokens: number;
  readonly completion_tokens: number;
  readonly total_tokens: number;
}

/** A tool call read from the model's text (pipeline/openai/tools.ts): `arguments` is JSON text, as OpenAI sends it. */
export interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

/** One choice of a whole answer: its generation's text, finish reason and (chat with tools) calls. */
export interface Choice {
  readonly text: string;
  readonly finishReason: string;
  /** Its tokens' logprobs, when asked for and reported. */
  readonly logprobs?: readonly TokenLogprob[] | undefined;
  /** Chat with tools: the calls the model made (its text beside them is `text`). */
  readonly toolCalls?: readonly ToolCall[];
}

/** What a whole answer came to: a choice per generation, indexed in order. */
export interface Generation {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly choices: readonly Choice[];
  readonly usage: Usage | undefined;
  /** The legacy `functions`: the (one) call as `function_call`. */
  readonly legacy?: boolean;
  /** logprobs asked for: the alternatives each token lists (undefined: not asked, `logprobs: null`). */
  readonly topLogprobs?: number | undefined;
}

const json = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));

export function encodeCompletion(g: Generation): Buffer {
  return json({
    id: g.id, object: 'text_completion', created: g.created, model: g.model,
    choices: g.choices.map((c, index) => ({
      index, text: c.text, logprobs: g.topLogprobs === undefined ? null : completionLogprobs(c.logprobs, g.topLogprobs), finish_reason: c.finishReason,
    })),
    ...(g.usage === undefined ? {} : { usage: g.usage }),
  });
}

export function encodeChatCompletion(g: Generation): Buffer {
  const choice = (c: Choice, index: number): Record<string, unknown> => {
    const calls = c.toolCalls ?? [];
    const message: Record<string, unknown> = { role: 'assistant', content: calls.length > 0 && c.text === '' ? null : c.text, refusal: null };
    if (calls.length > 0 && g.legacy === true) message.function_call = { name: calls[0]!.name, arguments: calls[0]!.arguments };
    else if (calls.length > 0) message.tool_calls = calls.map((t) => ({ id: t.id, type: 'function', function: { name: t.name, arguments: t.arguments } }));
    return { index, message, logprobs: g.topLogprobs === undefined ? null : chatLogprobs(c.logprobs, g.topLogprobs), finish_reason: c.finishReason };
  };
  return json({
    id: g.id, object: 'chat.completion', created: g.created, model: g.model,
    choices: g.choices.map(choice),
    ...(g.usage === undefined ? {} : { usage: g.usage }),
  });
}

/** A chat chunk of one choice whose delta is `delta`. */
function deltaChunk(h: ChunkHead, choice: number, delta: Record<string, unknown>): Buffer {
  return json({
    id: h.id, object: 'chat.completion.chunk', created: h.created, model: h.model,
    choices: [{ index: choice, delta, logprobs: null, finish_reason: null }], ...(h.includeUsage ? { usage: null } : {}),
  });
}

/**
 * A streamed call's first chunk as OpenAI sends it: the call's index, id, type, name and arguments ""
 * (legacy: `function_call` with name). `first` opens the message with its role.
 */
export function encodeToolCallStart(h: ChunkHead, index: number, c: Pick<ToolCall, 'id' | 'name'>, legacy: boolean, first: boolean, choice = 0): Buffer {
  const opening = first ? { role: 'assistant', content: null } : {};
  return deltaChunk(h, choice, legacy ? { ...opening, function_call: { name: c.name, arguments: '' } }
    : { ...opening, tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] });
}

/** A fragment of a streamed call's arguments. */
export function encodeToolCallArguments(h: ChunkHead, index: number, text: string, legacy: boolean, choice = 0): Buffer {
  return deltaChunk(h, choice, legacy ? { function_call: { arguments: text } } : { tool_calls: [{ index, function: { arguments: text } }] });
}

/** Calls from `from` on, each whole: its first chunk, then its arguments in one. */
export function encodeToolCallChunks(h: ChunkHead, calls: readonly ToolCall[], legacy: boolean, first: boolean, choice = 0, from = 0): Buffer[] {
  return calls.slice(from).flatMap((c, i) => [
    encodeToolCallStart(h, from + i, c, legacy, first && i === 0, choice), encodeToolCallArguments(h, from + i, c.arguments, legacy, choice)]);
}

export interface ChunkHead {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  /** stream_options.include_usage: every chunk carries `usage` (null until the last). */
  readonly includeUsage: boolean;
  /** logprobs asked for: the alternatives each token lists (undefined: not asked). */
  readonly topLogprobs?: number | undefined;
}

/**
 * One chunk of a streamed completion or chat completion: `text` a delta; `first` opens the chat
 * message with its role; `finishReason` ends the choice.
 */
export function encodeChunk(kind: 'completion' | 'chat', h: ChunkHead, text: string | undefined, finishReason: string | null, first: boolean, index = 0,
  tokens?: { readonly logprobs: readonly TokenLogprob[] | undefined; readonly offset: number }): Buffer {
  const top = h.topLogprobs;
  const lp = top === undefined || tokens === undefined ? null
    : kind === 'completion' ? completionLogprobs(tokens.logprobs, top, tokens.offset) : chatLogprobs(tokens.logprobs, top);
  const choice = kind === 'completion'
    ? { index, text: text ?? '', logprobs: lp, finish_reason: finishReason }
    : { index, delta: text === undefined ? {} : first ? { role: 'assistant', content: text } : { content: text }, logprobs: lp, finish_reason: finishReason };
  return json({
    id: h.id, object: kind === 'completion' ? 'text_completion' : 'chat.completion.chunk', created: h.created, model: h.model,
    choices: [choice], ...(h.includeUsage ? { usage: null } : {}),
  });
}

/** The last chunk of a stream asked for with include_usage: no choices, the usage. */
export function encodeUsageChunk(kind: 'completion' | 'chat', h: ChunkHead, usage: Usage | null): Buffer {
  return json({ id: h.id, object: kind === 'completion' ? 'text_completion' : 'chat.completion.chunk', created: h.created, model: h.model, choices: [], usage });
}

export interface ModelEntry {
  readonly id: string;
  readonly created: number;
}

const modelObject = (m: ModelEntry): Record<string, unknown> => ({ id: m.id, object: 'model', created: m.created, owned_by: 'tensorgate' });

export function encodeModelList(models: readonly ModelEntry[]): Buffer {
  return json({ object: 'list', data: models.map(modelObject) });
}

export function encodeModel(m: ModelEntry): Buffer {
  return json(modelObject(m));
}

/** The FP32 vector of an embedding model's answer, as its little-endian bytes. */
export function embeddingBytes(r: InferResponse, name: string): Buffer {
  const o = name === '' ? onlyFp32(r) : r.outputs.find((x) => x.name === name);
  if (o === undefined || o.datatype !== 'FP32') throw new GatewayError('GW_ERR_MODEL_OPENAI_UNFIT', `the embedding model answered without an FP32 output${name === '' ? '' : ` '${name}'`}`);
  return outputBytes(o);
}

function onlyFp32(r: InferResponse): OutputTensor | undefined {
  const fp32 = r.outputs.filter((o) => o.datatype === 'FP32');
  return fp32.length === 1 ? fp32[0] : undefined;
}

/** The prompt's token count an embedding model reports, if it does. */
export function embeddingTokens(r: InferResponse): number | undefined {
  return firstInteger(r.outputs.find((o) => o.name === 'num_input_tokens'));
}

/**
 * The embeddings answer. base64: the vector's bytes as Triton sent them (float32, little-endian),
 * which is what the SDKs decode; float: each value printed as Triton prints an FP32.
 */
export function encodeEmbeddings(model: string, vectors: readonly Buffer[], base64: boolean, promptTokens: number | undefined): Buffer {
  const parts: string[] = [];
  vectors.forEach((v, i) => {
    const embedding = base64 ? `"${v.toString('base64')}"` : `[${floatElements(v, v.length >> 2, true).toString('latin1')}]`;
    parts.push(`{"object":"embedding","index":${i},"embedding":${embedding}}`);
  });
  const usage = promptTokens === undefined ? '' : `,"usage":{"prompt_tokens":${promptTokens},"total_tokens":${promptTokens}}`;
  return Buffer.from(`{"object":"list","data":[${parts.join(',')}],"model":${JSON.stringify(model)}${usage}}`);
}
