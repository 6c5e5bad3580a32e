// The OpenAI-compatible API (docs/openai.md) under openai.prefix (/openai/v1 by default):
//   GET models, GET models/{id}                      — the ids of openai.models
//   POST completions, POST chat/completions          — read body → check and map (decode/dialects/openai.ts,
//       chat templates: decode/dialects/chat-template.ts) → ModelStreamInfer (pipeline/generate.ts streamCall)
//       → one JSON answer, or server-sent events ending with `data: [DONE]`
//   POST embeddings                                  — one ModelStreamInfer call per input string
// Errors are OpenAI's error object; before the first event, with the gateway's status, after it as
// an event. A client that goes away cancels the Triton call (the request's signal), as on generate.
import { randomBytes } from 'node:crypto';
import { modelRefusal } from '../auth/guard';
import type { Config } from '../config/schema';
import type { ChatTemplate, OpenAiModel } from '../config/openai';
import {
  conventionOf, decodeChat, decodeCompletions, decodeEmbeddings, embeddingInputs, type BuiltInput, type GenerateAsk, generateInputs, invalidParam,
} from '../decode/dialects/openai';
import { requestEncoding } from '../ingress/body';
import {
  type ChunkHead, embeddingBytes, embeddingTokens, encodeChatCompletion, encodeChunk, encodeCompletion, encodeEmbeddings, encodeModel,
  encodeModelList, encodeOpenAiError, encodeUsageChunk, type Generation, type GenerationStep, readGenerationStep, type Usage,
} from '../encode/openai';
import { GatewayError, isGatewayError } from '../errors';
import { gather } from '../infer/gather';
import type { Ledger } from '../infer/ledger';
import type { Slot } from '../infer/framed-message';
import type { InferRequest } from '../infer/request';
import { SlotWriter } from '../infer/slot-writer';
import type { RequestContext } from '../ingress/context';
import { escapeRegExp, type Route } from '../ingress/router';
import { GenerateEvents, streamCall } from '../pipeline/generate';
import { framer, readWholeBody, releaseStaged, stagingFor, startLedger, writeAnswer } from '../pipeline/steps';
import type { ModelConfigs } from '../upstream/control/model-configs';
import type { StreamInferPlane, StreamMessage } from '../upstream/infer/stream-plane';
import { streamError } from '../upstream/status';

export interface OpenAiDeps {
  readonly prefix: string;
  readonly models: readonly OpenAiModel[];
  readonly streams: StreamInferPlane;
  readonly configs: ModelConfigs;
  /** openai.timeoutMs: the deadline of a generation's whole call (upstream.timeoutMs is for one answer). */
  readonly timeoutMs: number;
  readonly limits: Config['limits'];
  readonly telemetry: Config['telemetry'];
}

/** Seconds since the epoch when the gateway started: the models' `created`. */
const STARTED = Math.floor(Date.now() / 1000);

export function openAiRoutes(deps: OpenAiDeps): Route[] {
  const p = escapeRegExp(deps.prefix);
  const byId = new Map(deps.models.map((m) => [m.id, m]));
  // Under /v1 the retrieve route would take KServe V1's status route: it matches only the ids
  // offered here, and every other name keeps the V1 route (docs/openai.md "Paths").
  const ids = deps.prefix === '/v1' ? `(${deps.models.map((m) => escapeRegExp(m.id)).join('|') || '(?!)'})` : '(.+)';
  return [
    { name: 'openai_models', category: 'metadata', pattern: new RegExp(`^${p}\\/models$`),
      methods: { GET: async (ctx) => listModels(ctx, deps) }, errorBody },
    { name: 'openai_model', category: 'metadata', pattern: new RegExp(`^${p}\\/models\\/${ids}$`),
      methods: { GET: async (ctx) => retrieveModel(ctx, deps, byId) }, errorBody },
    { name: 'openai_completions', category: 'inference', pattern: new RegExp(`^${p}\\/completions$`),
      methods: { POST: (ctx) => generate(ctx, deps, byId, 'completion') }, errorBody },
    { name: 'openai_chat_completions', category: 'inference', pattern: new RegExp(`^${p}\\/chat\\/completions$`),
      methods: { POST: (ctx) => generate(ctx, deps, byId, 'chat') }, errorBody },
    { name: 'openai_embeddings', category: 'inference', pattern: new RegExp(`^${p}\\/embeddings$`),
      methods: { POST: (ctx) => embeddings(ctx, deps, byId) }, errorBody },
  ];
}

/** The models these credentials may call (auth/guard.ts modelRefusal: grants name Triton models). */
function visible(ctx: RequestContext, m: OpenAiModel): boolean {
  return ctx.grant === undefined || modelRefusal(ctx.grant, m.model) === undefined;
}

function listModels(ctx: RequestContext, deps: OpenAiDeps): void {
  const body = encodeModelList(deps.models.filter((m) => visible(ctx, m)).map((m) => ({ id: m.id, created: STARTED })));
  ctx.res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': body.length });
  ctx.res.end(body);
}

function retrieveModel(ctx: RequestContext, deps: OpenAiDeps, byId: ReadonlyMap<string, OpenAiModel>): void {
  const id = decodeURIComponentSafe(ctx.params[0]!);
  const m = byId.get(id);
  if (m === undefined || !visible(ctx, m)) throw notFound(id);
  const body = encodeModel({ id: m.id, created: STARTED });
  ctx.res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': body.length });
  ctx.res.end(body);
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function notFound(id: string): GatewayError {
  return Object.assign(new GatewayError('GW_ERR_MODEL_OPENAI_UNKNOWN', `The model '${id}' does not exist or you do not have access to it.`),
    { openai: { param: 'model', code: 'model_not_found' } });
}

/** The endpoints, each with the kind of model it serves. */
type Endpoint = 'completion' | 'chat' | 'embeddings';
const ENDPOINT_NAME: Record<Endpoint, string> = { completion: 'completions', chat: 'chat completions', embeddings: 'embeddings' };

/** The configured model a request names, of the kind the endpoint serves, that these credentials may call. */
function pick(ctx: RequestContext, byId: ReadonlyMap<string, OpenAiModel>, id: string, endpoint: Endpoint): OpenAiModel {
  const m = byId.get(id);
  if (m === undefined) throw notFound(id);
  // A model the credentials do not cover is refused as Triton's own model check would be, 403;
  // one of another kind is not found, as the model list shows it.
  const refused = ctx.grant === undefined ? undefined : modelRefusal(ctx.grant, m.model);
  const kind = endpoint === 'embeddings' ? 'embedding' : 'generate';
  if (refused !== undefined) throw m.kind === kind ? refused.error : notFound(id);
  if (m.kind !== kind) throw wrongEndpoint(m, endpoint);
  ctx.record.model = m.model;
  return m;
}

/** A listed model sent to an endpoint of the other kind: which one serves it (OpenAI: "This is not a chat model…"). */
function wrongEndpoint(m: OpenAiModel, endpoint: Endpoint): GatewayError {
  const [is, use] = m.kind === 'embedding' ? ['an embedding model', 'the embeddings endpoint'] : ['a text generation model', 'the completions or chat completions endpoint'];
  return invalidParam('model', `The model '${m.id}' is ${is} and thus not supported in the ${ENDPOINT_NAME[endpoint]} endpoint. Did you mean to use ${use}?`,
    endpoint === 'chat' ? 'model_not_chat' : null);
}

/** The model's config at Triton; Triton's own 404 (the configured model is not loaded) is OpenAI's model_not_found. */
async function modelConfig(ctx: RequestContext, deps: OpenAiDeps, m: OpenAiModel): ReturnType<ModelConfigs['get']> {
  try {
    return await deps.configs.get(m.model, m.version, ctx.signal);
  } catch (err) {
    if (isGatewayError(err) && err.status === 404) throw Object.assign(notFound(m.id), { cause: err });
    throw err;
  }
}

/** The request framed as one ModelInferRequest, each input's bytes copied into its slot. */
function frame(ctx: RequestContext, ledger: Ledger, request: InferRequest, inputs: readonly BuiltInput[]): Buffer {
  const framed = framer(ctx, ledger, true)(request, []);
  // No input is in shared memory: every one has its slot, filled in order.
  const writer = new SlotWriter(framed.message, framed.slots as readonly Slot[]);
  for (const input of inputs) for (const part of input.parts) writer.write(part);
  ledger.copied('decode', writer.copied);
  return framed.message;
}

const newId = (prefix: string): string => `${prefix}-${randomBytes(12).toString('hex')}`;

/**
 * What the responses of one generation came to: the text, the token counts the model reports
 * (prompt tokens once, output tokens summed over the responses), its finish reason, and when the
 * first and last responses with tokens came (telemetry: time to first token, per output token).
 */
class Tally {
  /** The whole text, gathered only for an answer given whole (a stream sends each piece as it comes). */
  text = '';
  promptTokens: number | undefined;
  completionTokens: number | undefined;
  reason: string | undefined;
  count = 0;
  firstNs = 0n;
  lastNs = 0n;

  constructor(private readonly whole: boolean) {}

  /** One message of the stream: its step, or the model's error thrown. */
  take(msg: StreamMessage): GenerationStep {
    if (msg.kind === 'error') throw streamError(msg.message);
    const step = readGenerationStep(msg.response);
    this.lastNs = process.hrtime.bigint();
    if (this.firstNs === 0n) this.firstNs = this.lastNs;
    this.count++;
    if (this.whole) this.text += step.text;
    this.promptTokens ??= step.promptTokens;
    if (step.completionTokens !== undefined) this.completionTokens = (this.completionTokens ?? 0) + step.completionTokens;
    if (step.finishReason !== undefined) this.reason = step.finishReason;
    return step;
  }

  /** The model's own finish reason, else `length` when it generated max_tokens, else `stop`. */
  finish(maxTokens: number): string {
    return this.reason ?? (this.completionTokens !== undefined && this.completionTokens >= maxTokens ? 'length' : 'stop');
  }

  /** Usage when the model reported both counts; absent otherwise (docs/openai.md "Usage"). */
  usage(): Usage | undefined {
    const { promptTokens: p, completionTokens: c } = this;
    return p === undefined || c === undefined ? undefined : { prompt_tokens: p, completion_tokens: c, total_tokens: p + c };
  }

  record(ctx: RequestContext): void {
    if (this.firstNs === 0n) return;
    ctx.record.firstTokenNs = this.firstNs;
    // One response (not streamed) says nothing of the time between tokens.
    if (this.count > 1) ctx.record.lastTokenNs = this.lastNs;
    ctx.record.outputTokens = this.completionTokens ?? this.count;
  }
}

interface Prepared {
  readonly ledger: Ledger;
  readonly ask: GenerateAsk;
  readonly model: OpenAiModel;
  readonly message: Buffer;
}

/** Reads and checks the body, finds the model and its config, and frames the Triton request. */
async function prepare(ctx: RequestContext, deps: OpenAiDeps, byId: ReadonlyMap<string, OpenAiModel>, kind: 'completion' | 'chat'): Promise<Prepared> {
  const ledger = startLedger(ctx, '');
  ctx.record.encoding = `openai_${kind}`;
  const encoding = requestEncoding(ctx.req);
  // Chat images (base64 data: URLs) are decoded while the body arrives (decode/base64/base64-staging.ts).
  const staging = kind === 'chat' ? stagingFor(ctx, deps.limits, encoding, true) : undefined;
  const body = await readWholeBody(ctx, ledger, deps.limits, encoding, staging);
  ledger.start('decode');
  const staged = staging?.end((nonce, i) => `tensorgate-staged-${nonce}-${i}`);
  let images: Map<string, Buffer> | undefined;
  if (staged !== undefined) {
    ledger.allocated('decode', staged.allocated);
    ledger.copied('decode', staged.copied);
    const bytes = [...staged.staged.values()];
    images = new Map(staged.placeholders.map((p, i) => [p, bytes[i]!]));
  }
  const text = staged?.header ?? gather(body.chunks, body.length);
  // An unknown model is model_not_found before its (missing) template is anything.
  let picked: OpenAiModel | undefined;
  const template = (id: string): ChatTemplate | undefined => (picked = pick(ctx, byId, id, kind)).chatTemplate;
  let ask: GenerateAsk;
  try {
    ask = kind === 'completion' ? decodeCompletions(text) : decodeChat(text, template, images);
    // A staged data: URL that was not the image (one in a text part, say) holds a placeholder
    // where its text should be: the body is read again as it was sent.
    if (images !== undefined && [...images.values()].some((b) => b !== ask.image)) {
      const original = staging!.original();
      ask = decodeChat(Buffer.concat(original), template);
      ledger.copied('decode', body.length);
    }
  } catch (err) {
    releaseImages(images);
    throw err;
  }
  ledger.copied('decode', ask.copied);
  ledger.end('decode');
  let message: Buffer;
  let m: OpenAiModel;
  try {
    m = picked ?? pick(ctx, byId, ask.model, kind);
    ctx.record.version = m.version;
    const config = await modelConfig(ctx, deps, m);
    ledger.start('decode');
    const convention = conventionOf(m.convention, config, m.id);
    const target = { model: m.model, version: m.version, convention, imageInput: m.imageInput, defaultMaxTokens: m.maxTokens };
    const { request, inputs } = generateInputs(ask, target, config);
    message = frame(ctx, ledger, request, inputs);
    ledger.end('decode');
  } finally {
    // The images are in the message now (or unused): their staging buffers go back.
    releaseImages(images);
  }
  ledger.bytes('decode', body.length, message.length);
  ctx.record.encodingOut = ask.stream ? 'sse' : 'json';
  return { ledger, ask, model: m, message };
}

async function generate(ctx: RequestContext, deps: OpenAiDeps, byId: ReadonlyMap<string, OpenAiModel>, kind: 'completion' | 'chat'): Promise<void> {
  const p = await prepare(ctx, deps, byId, kind);
  const head: ChunkHead = {
    id: newId(kind === 'completion' ? 'cmpl' : 'chatcmpl'), created: Math.floor(Date.now() / 1000), model: p.model.id, includeUsage: p.ask.includeUsage,
  };
  await (p.ask.stream ? answerStream(ctx, deps, p, kind, head) : answerWhole(ctx, deps, p, kind, head));
}

/** Not streamed: every response gathered, one JSON answer. */
async function answerWhole(ctx: RequestContext, deps: OpenAiDeps, p: Prepared, kind: 'completion' | 'chat', head: ChunkHead): Promise<void> {
  const tally = new Tally(true);
  try {
    await streamCall(ctx, deps.streams, deps.configs, deps.timeoutMs, p.message, p.ledger, (msg) => {
      tally.take(msg);
    });
  } finally {
    tally.record(ctx);
  }
  p.ledger.start('encode');
  const finishReason = tally.finish(p.ask.maxTokens ?? p.model.maxTokens);
  const g: Generation = { id: head.id, created: head.created, model: head.model, text: tally.text, finishReason, usage: tally.usage() };
  const out = kind === 'completion' ? encodeCompletion(g) : encodeChatCompletion(g);
  p.ledger.end('encode');
  await writeAnswer(ctx, p.ledger, { 'Content-Type': 'application/json' }, [out], deps.telemetry.serverTiming);
}

/**
 * Streamed: a chunk per response as it comes, then one that ends the choice with its finish
 * reason, the usage chunk when asked for (stream_options.include_usage), and `data: [DONE]`. An
 * error before the first chunk is an ordinary error answer; after it, the last event.
 */
async function answerStream(ctx: RequestContext, deps: OpenAiDeps, p: Prepared, kind: 'completion' | 'chat', head: ChunkHead): Promise<void> {
  const tally = new Tally(false);
  const events = new GenerateEvents(ctx, p.ledger, deps.telemetry.serverTiming);
  let first = true;
  try {
    await streamCall(ctx, deps.streams, deps.configs, deps.timeoutMs, p.message, p.ledger, (msg) => {
      const step = tally.take(msg);
      events.open(200);
      const chunk = encodeChunk(kind, head, step.text, null, first);
      first = false;
      return events.write(chunk);
    });
  } catch (err) {
    tally.record(ctx);
    if (!events.started) throw err;
    const e = isGatewayError(err) ? err : undefined;
    events.end(openAiError(e?.status ?? 500, e?.message ?? String(err), err));
    return;
  }
  tally.record(ctx);
  events.open(200);
  // A chat stream that never opened its message says its role in the last chunk.
  await events.write(encodeChunk(kind, head, first && kind === 'chat' ? '' : undefined, tally.finish(p.ask.maxTokens ?? p.model.maxTokens), first));
  if (p.ask.includeUsage) await events.write(encodeUsageChunk(kind, head, tally.usage() ?? null));
  await events.write(DONE);
  events.close();
}

const DONE = Buffer.from('[DONE]');

function releaseImages(images: ReadonlyMap<string, Buffer> | undefined): void {
  if (images !== undefined) for (const b of images.values()) releaseStaged(b);
}

/** Embeddings: one call per input, in order; the usage sums what the model reports. */
async function embeddings(ctx: RequestContext, deps: OpenAiDeps, byId: ReadonlyMap<string, OpenAiModel>): Promise<void> {
  const ledger = startLedger(ctx, '');
  ctx.record.encoding = 'openai_embeddings';
  const body = await readWholeBody(ctx, ledger, deps.limits, requestEncoding(ctx.req));
  const ask = decodeEmbeddings(gather(body.chunks, body.length));
  const m = pick(ctx, byId, ask.model, 'embeddings');
  ctx.record.version = m.version;
  const config = await modelConfig(ctx, deps, m);
  const vectors: Buffer[] = [];
  let tokens: number | undefined = 0;
  for (const input of ask.inputs) {
    ledger.start('decode');
    const { request, inputs } = embeddingInputs(input, m.model, m.version, config);
    const message = frame(ctx, ledger, request, inputs);
    ledger.end('decode');
    let got: Buffer | undefined;
    await streamCall(ctx, deps.streams, deps.configs, deps.timeoutMs, message, ledger, (msg) => {
      if (msg.kind === 'error') throw streamError(msg.message);
      // The vector is a view of the received message: copied out, as the call's buffers go.
      got = Buffer.from(embeddingBytes(msg.response, m.output));
      const t = embeddingTokens(msg.response);
      tokens = t === undefined || tokens === undefined ? undefined : tokens + t;
    });
    if (got === undefined) throw new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'the embedding model answered nothing');
    vectors.push(got);
  }
  ctx.record.encodingOut = ask.base64 ? 'base64' : 'json';
  ledger.start('encode');
  const out = encodeEmbeddings(m.id, vectors, ask.base64, tokens);
  ledger.end('encode');
  await writeAnswer(ctx, ledger, { 'Content-Type': 'application/json' }, [out], deps.telemetry.serverTiming);
}

/** The OpenAI error object for a route's errors (Route.errorBody). */
function errorBody(err: GatewayError): Buffer {
  return openAiError(err.status, err.message, err);
}

/** The OpenAI error object for `err` (an OpenAI 400 carries its parameter and code). */
function openAiError(status: number, message: string, err: unknown): Buffer {
  const o = (err as { openai?: { param: string | null; code: string | null } } | undefined)?.openai;
  return encodeOpenAiError(status, message, o?.param ?? null, o?.code ?? (status === 404 ? 'model_not_found' : null));
}
