// The OpenAI API's call and answer (docs/openai.md): a generation's ModelStreamInfer call
// (pipeline/generate.ts streamCall), answered as one JSON object or as server-sent events ending
// with `data: [DONE]`; embeddings, one call per input string. An error before the first event is
// an ordinary error answer (in OpenAI's shape: routes/openai.ts), after it the stream's last
// event. A client that goes away cancels the Triton call (the request's signal), as on generate.
import { randomBytes } from 'node:crypto';
import { decodeEmbeddings, embeddingInputs } from '../../decode/dialects/openai';
import { asGatewayError, errorBody } from '../../egress/error-body';
import {
  type ChunkHead, embeddingBytes, embeddingTokens, encodeChatCompletion, encodeChunk, encodeCompletion, encodeEmbeddings,
  type Choice, type TokenLogprob, encodeToolCallArguments, encodeToolCallChunks, encodeToolCallStart, encodeUsageChunk, type Generation, type GenerationStep,
  readGenerationStep, type Usage,
} from '../../encode/openai';
import { GatewayError } from '../../errors';
import { gather } from '../../infer/gather';
import { requestEncoding } from '../../ingress/body';
import type { RequestContext } from '../../ingress/context';
import type { StreamMessage } from '../../upstream/infer/stream-plane';
import { streamError } from '../../upstream/status';
import { GenerateEvents, streamCall } from '../generate';
import { frame, modelConfig, type OpenAiPlan, pick, type Prepared, prepare } from './decode';
import { type CallPiece, checkedCalls, checkStructured, parseToolCalls, ToolScan } from './tools';
import { readWholeBody, startLedger, writeAnswer } from '../steps';
import { nowNs } from '../../infer/clock';

export const newId = (prefix: string): string => `${prefix}-${randomBytes(12).toString('hex')}`;

/**
 * What the responses of one generation came to: the text, the token counts the model reports
 * (prompt tokens once, output tokens summed over the responses), its finish reason, and when the
 * first and last responses with tokens came (telemetry: time to first token, per output token).
 */
export class Tally {
  /** The whole text, gathered only for an answer given whole (a stream sends each piece as it comes). */
  text = '';
  /** Its tokens' logprobs, gathered with the text when the model reports them. */
  logprobs: TokenLogprob[] | undefined;
  promptTokens: number | undefined;
  completionTokens: number | undefined;
  reason: string | undefined;
  count = 0;
  firstNs = 0;
  lastNs = 0;

  constructor(private readonly whole: boolean, private readonly meter: ChoiceMeter | undefined) {}

  /** One message of the stream: its step, or the model's error thrown. */
  take(msg: StreamMessage): GenerationStep {
    if (msg.kind === 'error') throw streamError(msg.message);
    const step = readGenerationStep(msg.response);
    this.lastNs = nowNs();
    if (this.firstNs === 0) this.firstNs = this.lastNs;
    this.count++;
    if (this.whole) this.text += step.text;
    if (this.whole && step.logprobs !== undefined) (this.logprobs ??= []).push(...step.logprobs);
    this.promptTokens ??= step.promptTokens;
    if (step.completionTokens !== undefined) this.completionTokens = (this.completionTokens ?? 0) + step.completionTokens;
    if (step.finishReason !== undefined) this.reason = step.finishReason;
    this.meter?.tokens(this.promptTokens ?? 0, this.completionTokens ?? this.count);
    return step;
  }

  /** The model's own finish reason, else `length` when it generated max_tokens, else `stop`. */
  finish(maxTokens: number): string {
    return this.reason ?? (this.completionTokens !== undefined && this.completionTokens >= maxTokens ? 'length' : 'stop');
  }
}

/** One choice's tokens so far, for the request's TokenTotal. */
interface ChoiceMeter { tokens(prompt: number, completion: number): void }

/**
 * The request's tokens over all its choices, told to its quota meter (auth/usage.ts) as they
 * come: the prompt once and every choice's completion, as usageOf counts them.
 */
export class TokenTotal {
  readonly #completions: number[];
  #prompt = 0;

  constructor(n: number, private readonly meter: RequestContext['record']['meter']) {
    this.#completions = new Array<number>(n).fill(0);
  }

  choice(i: number): ChoiceMeter | undefined {
    return this.meter === undefined ? undefined : { tokens: (prompt, completion) => this.#set(i, prompt, completion) };
  }

  #set(i: number, prompt: number, completion: number): void {
    this.#prompt = prompt;
    this.#completions[i] = completion;
    let total = this.#prompt;
    for (const c of this.#completions) total += c;
    this.meter!.tokens(total);
  }
}

/**
 * Usage when the model reported both counts for every choice: the prompt once, the completions
 * summed (as OpenAI counts n choices); absent otherwise (docs/openai.md "Usage").
 */
export function usageOf(tallies: readonly Tally[]): Usage | undefined {
  const p = tallies[0]?.promptTokens;
  if (p === undefined || tallies.some((t) => t.completionTokens === undefined)) return undefined;
  const c = tallies.reduce((sum, t) => sum + t.completionTokens!, 0);
  return { prompt_tokens: p, completion_tokens: c, total_tokens: p + c };
}

/** The telemetry of the choices' generations: the first token of any, the last of all, the tokens of every one. */
export function record(ctx: RequestContext, tallies: readonly Tally[]): void {
  const started = tallies.filter((t) => t.firstNs !== 0);
  if (started.length === 0) return;
  ctx.record.firstTokenNs = started.reduce((min, t) => (t.firstNs < min ? t.firstNs : min), started[0]!.firstNs);
  // One response (not streamed) says nothing of the time between tokens.
  if (started.reduce((n, t) => n + t.count, 0) > 1) ctx.record.lastTokenNs = started.reduce((max, t) => (t.lastNs > max ? t.lastNs : max), 0);
  ctx.record.outputTokens = started.reduce((n, t) => n + (t.completionTokens ?? t.count), 0);
}

/**
 * Each choice's generation, its own ModelStreamInfer call, all at once; `onMessage` hears which
 * choice a message is of. A failed call is thrown once every call has ended (a client that goes
 * away cancels them all: the request's signal).
 */
export async function callEach(ctx: RequestContext, deps: OpenAiPlan, p: Prepared,
  onMessage: (choice: number, m: StreamMessage) => Promise<void> | undefined | void): Promise<void> {
  const settled = await Promise.allSettled(p.messages.map((message, i) =>
    streamCall(ctx, deps.streams, deps.configs, deps.timeoutMs, message, p.ledger, (m) => onMessage(i, m))));
  const failed = settled.find((r) => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}

/** POST completions and chat/completions: prepared, called, answered whole or streamed. */
export async function generate(ctx: RequestContext, deps: OpenAiPlan, kind: 'completion' | 'chat'): Promise<void> {
  const p = await prepare(ctx, deps, kind);
  const head: ChunkHead = {
    id: newId(kind === 'completion' ? 'cmpl' : 'chatcmpl'), created: Math.floor(Date.now() / 1000), model: p.model.id, includeUsage: p.ask.includeUsage,
    topLogprobs: p.ask.logprobs,
  };
  await (p.ask.stream ? answerStream(ctx, deps, p, kind, head) : answerWhole(ctx, deps, p, kind, head));
}

/** Not streamed: every response gathered, one JSON answer with a choice per generation. */
async function answerWhole(ctx: RequestContext, deps: OpenAiPlan, p: Prepared, kind: 'completion' | 'chat', head: ChunkHead): Promise<void> {
  const tokens = new TokenTotal(p.messages.length, ctx.record.meter);
  const tallies = p.messages.map((_, i) => new Tally(true, tokens.choice(i)));
  try {
    await callEach(ctx, deps, p, (i, msg) => {
      tallies[i]!.take(msg);
    });
  } finally {
    record(ctx, tallies);
  }
  p.ledger.start('encode');
  const choices = tallies.map((tally) => choiceOf(p, tally));
  const g: Generation = {
    id: head.id, created: head.created, model: head.model, choices, usage: usageOf(tallies), legacy: p.ask.tools?.legacy, topLogprobs: p.ask.logprobs,
  };
  const out = kind === 'completion' ? encodeCompletion(g) : encodeChatCompletion(g);
  p.ledger.end('encode');
  await writeAnswer(ctx, p.ledger, { 'Content-Type': 'application/json' }, [out], deps.telemetry.serverTiming);
}

/** A whole generation's choice: its calls read and checked (tools.ts), else its strict schema checked. */
export function choiceOf(p: Prepared, tally: Tally): Choice {
  const text = tally.text;
  const finishReason = tally.finish(p.ask.maxTokens ?? p.model.maxTokens);
  const tools = p.ask.tools;
  const parsed = tools === undefined ? undefined : parseToolCalls(tools.parser, text);
  const toolCalls = parsed === undefined ? [] : checkedCalls(tools!, parsed);
  if (toolCalls.length > 0) return { text: parsed!.content, finishReason: tools!.legacy ? 'function_call' : 'tool_calls', toolCalls };
  // A call is not the answer the format shapes: the answer after it is.
  checkStructured(p.ask.responseFormat, text);
  return { text, finishReason, logprobs: tally.logprobs };
}

/**
 * One choice of a stream: its tally, the tool parser's scan of its text, and whether its first
 * chunk (the chat message's role) went out.
 */
export class StreamChoice {
  readonly tally: Tally;
  readonly scan: ToolScan | undefined;
  first = true;
  /** The characters of text sent (completions' text_offset). */
  sent = 0;

  constructor(readonly index: number, p: Prepared, tokens: TokenTotal) {
    // A strict schema is checked on the whole text, at the end (docs/openai.md "Structured output").
    const rf = p.ask.responseFormat;
    this.tally = new Tally(rf?.kind === 'json_schema' && rf.strict, tokens.choice(index));
    this.scan = p.ask.tools === undefined ? undefined : new ToolScan(p.ask.tools.parser, p.ask.tools.parallel);
  }
}

/**
 * Streamed: a chunk per response as it comes (each with its choice's index), then, per choice, the
 * held tool calls and one chunk that ends it with its finish reason, the usage chunk when asked for
 * (stream_options.include_usage), and `data: [DONE]`. An error before the first chunk is an
 * ordinary error answer; after it, the last event.
 */
async function answerStream(ctx: RequestContext, deps: OpenAiPlan, p: Prepared, kind: 'completion' | 'chat', head: ChunkHead): Promise<void> {
  const events = new GenerateEvents(ctx, p.ledger, deps.telemetry.serverTiming);
  const tokens = new TokenTotal(p.messages.length, ctx.record.meter);
  const choices = p.messages.map((_, i) => new StreamChoice(i, p, tokens));
  const send = (c: StreamChoice, text: string, logprobs?: readonly TokenLogprob[]): Promise<void> | void => {
    events.open(200);
    const chunk = encodeChunk(kind, head, text, null, c.first, c.index, { logprobs, offset: c.sent });
    c.first = false;
    c.sent += text.length;
    return events.write(chunk);
  };
  const sendPieces = async (c: StreamChoice, text: string, pieces: readonly CallPiece[]): Promise<void> => {
    if (text !== '') await send(c, text);
    for (const piece of pieces) {
      events.open(200);
      await events.write(callChunk(head, p.ask.tools!.legacy, c, piece));
    }
  };
  const reasons: string[] = [];
  try {
    await callEach(ctx, deps, p, (i, msg) => {
      const c = choices[i]!;
      const step = c.tally.take(msg);
      if (c.scan === undefined) return send(c, step.text, step.logprobs);
      // Text a tool parser holds back (a call's beginning) goes out as call pieces, or at the end.
      const text = c.scan.push(step.text);
      const pieces = c.scan.drain();
      return text === '' && pieces.length === 0 ? undefined : sendPieces(c, text, pieces);
    });
    for (const c of choices) reasons.push(await endChoice(events, p, head, c, (text) => send(c, text)));
  } catch (err) {
    record(ctx, choices.map((c) => c.tally));
    if (!events.started) throw err;
    events.end(Buffer.from(errorBody('openai', asGatewayError(err))));
    return;
  }
  record(ctx, choices.map((c) => c.tally));
  events.open(200);
  // A chat stream's choice that never opened its message says its role in its last chunk.
  for (const c of choices) await events.write(encodeChunk(kind, head, c.first && kind === 'chat' ? '' : undefined, reasons[c.index]!, c.first, c.index));
  if (p.ask.includeUsage) await events.write(encodeUsageChunk(kind, head, usageOf(choices.map((c) => c.tally)) ?? null));
  await events.write(DONE);
  events.close();
}

/** A call's piece as a chat chunk: its start (opening the message when nothing did), or a fragment of its arguments. */
function callChunk(head: ChunkHead, legacy: boolean, c: StreamChoice, piece: CallPiece): Buffer {
  if (piece.kind === 'arguments') return encodeToolCallArguments(head, piece.index, piece.text, legacy, c.index);
  const chunk = encodeToolCallStart(head, piece.index, piece, legacy, c.first, c.index);
  c.first = false;
  return chunk;
}

/** A choice's end: its held text read as calls (sent as OpenAI sends them), else content, its strict schema checked. */
async function endChoice(events: GenerateEvents, p: Prepared, head: ChunkHead, c: StreamChoice, send: (text: string) => Promise<void> | void): Promise<string> {
  const reason = c.tally.finish(p.ask.maxTokens ?? p.model.maxTokens);
  const tools = p.ask.tools;
  const parsed = c.scan?.end();
  const calls = parsed === undefined ? [] : checkedCalls(tools!, parsed);
  if (calls.length === 0) checkStructured(p.ask.responseFormat, c.tally.text);
  if (parsed === undefined || tools === undefined) return reason;
  if (calls.length === 0) {
    if (parsed.content !== '') await send(parsed.content);
    return reason;
  }
  events.open(200);
  // The calls streamed as written went out; the rest go whole.
  for (const chunk of encodeToolCallChunks(head, calls, tools.legacy, c.first, c.index, parsed.streamed)) await events.write(chunk);
  c.first = false;
  return tools.legacy ? 'function_call' : 'tool_calls';
}

const DONE = Buffer.from('[DONE]');

/** Embeddings: one call per input, in order; the usage sums what the model reports. */
export async function embeddings(ctx: RequestContext, deps: OpenAiPlan): Promise<void> {
  const ledger = startLedger(ctx, '');
  ctx.record.encoding = 'openai_embeddings';
  const body = await readWholeBody(ctx, ledger, deps.limits, requestEncoding(ctx.req));
  const ask = decodeEmbeddings(gather(body.chunks, body.length));
  const m = pick(ctx, deps, ask.model, 'embeddings');
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
