// The OpenAI API's call and answer (docs/openai.md): a generation's ModelStreamInfer call
// (pipeline/generate.ts streamCall), answered as one JSON object or as server-sent events ending
// with `data: [DONE]`; embeddings, one call per input string. An error before the first event is
// an ordinary error answer (in OpenAI's shape: routes/openai.ts), after it the stream's last
// event. A client that goes away cancels the Triton call (the request's signal), as on generate.
import { randomBytes } from 'node:crypto';
import { decodeEmbeddings, embeddingInputs } from '../decode/dialects/openai';
import { asGatewayError, errorBody } from '../egress/error-body';
import {
  type ChunkHead, embeddingBytes, embeddingTokens, encodeChatCompletion, encodeChunk, encodeCompletion, encodeEmbeddings,
  encodeToolCallChunks, encodeUsageChunk, type Generation, type GenerationStep, readGenerationStep, type ToolCall, type Usage,
} from '../encode/openai';
import { GatewayError } from '../errors';
import { gather } from '../infer/gather';
import { requestEncoding } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { StreamMessage } from '../upstream/infer/stream-plane';
import { streamError } from '../upstream/status';
import { GenerateEvents, streamCall } from './generate';
import { frame, modelConfig, type OpenAiPlan, pick, type Prepared, prepare } from './openai-decode';
import { checkedCalls, checkStructured, parseToolCalls, ToolScan } from './openai-tools';
import { readWholeBody, startLedger, writeAnswer } from './steps';

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

/** POST completions and chat/completions: prepared, called, answered whole or streamed. */
export async function generate(ctx: RequestContext, deps: OpenAiPlan, kind: 'completion' | 'chat'): Promise<void> {
  const p = await prepare(ctx, deps, kind);
  const head: ChunkHead = {
    id: newId(kind === 'completion' ? 'cmpl' : 'chatcmpl'), created: Math.floor(Date.now() / 1000), model: p.model.id, includeUsage: p.ask.includeUsage,
  };
  await (p.ask.stream ? answerStream(ctx, deps, p, kind, head) : answerWhole(ctx, deps, p, kind, head));
}

/** Not streamed: every response gathered, one JSON answer. */
async function answerWhole(ctx: RequestContext, deps: OpenAiPlan, p: Prepared, kind: 'completion' | 'chat', head: ChunkHead): Promise<void> {
  const tally = new Tally(true);
  try {
    await streamCall(ctx, deps.streams, deps.configs, deps.timeoutMs, p.message, p.ledger, (msg) => {
      tally.take(msg);
    });
  } finally {
    tally.record(ctx);
  }
  p.ledger.start('encode');
  let finishReason = tally.finish(p.ask.maxTokens ?? p.model.maxTokens);
  let text = tally.text;
  let toolCalls: readonly ToolCall[] = [];
  const tools = p.ask.tools;
  checkStructured(p.ask.responseFormat, text);
  if (tools !== undefined) {
    const parsed = parseToolCalls(tools.parser, text);
    toolCalls = checkedCalls(tools, parsed);
    if (toolCalls.length > 0) [text, finishReason] = [parsed.content, tools.legacy ? 'function_call' : 'tool_calls'];
  }
  const g: Generation = { id: head.id, created: head.created, model: head.model, text, finishReason, usage: tally.usage(), toolCalls, legacy: tools?.legacy };
  const out = kind === 'completion' ? encodeCompletion(g) : encodeChatCompletion(g);
  p.ledger.end('encode');
  await writeAnswer(ctx, p.ledger, { 'Content-Type': 'application/json' }, [out], deps.telemetry.serverTiming);
}

/**
 * Streamed: a chunk per response as it comes, then one that ends the choice with its finish
 * reason, the usage chunk when asked for (stream_options.include_usage), and `data: [DONE]`. An
 * error before the first chunk is an ordinary error answer; after it, the last event.
 */
async function answerStream(ctx: RequestContext, deps: OpenAiPlan, p: Prepared, kind: 'completion' | 'chat', head: ChunkHead): Promise<void> {
  // A strict schema is checked on the whole text, at the end (docs/openai.md "Structured output").
  const strict = p.ask.responseFormat?.kind === 'json_schema' && p.ask.responseFormat.strict;
  const tally = new Tally(strict);
  const events = new GenerateEvents(ctx, p.ledger, deps.telemetry.serverTiming);
  const tools = p.ask.tools;
  const scan = tools === undefined ? undefined : new ToolScan(tools.parser);
  let first = true;
  const send = (text: string): Promise<void> | void => {
    events.open(200);
    const chunk = encodeChunk(kind, head, text, null, first);
    first = false;
    return events.write(chunk);
  };
  let finishReason: string;
  try {
    await streamCall(ctx, deps.streams, deps.configs, deps.timeoutMs, p.message, p.ledger, (msg) => {
      const step = tally.take(msg);
      const text = scan === undefined ? step.text : scan.push(step.text);
      // Text a tool parser holds back (a call's beginning) goes out at the end.
      return text !== '' || scan === undefined ? send(text) : undefined;
    });
    finishReason = tally.finish(p.ask.maxTokens ?? p.model.maxTokens);
    checkStructured(p.ask.responseFormat, tally.text);
    if (scan !== undefined) {
      const parsed = scan.end();
      const calls = checkedCalls(tools!, parsed);
      if (parsed.content !== '' && calls.length === 0) await send(parsed.content);
      if (calls.length > 0) {
        events.open(200);
        for (const chunk of encodeToolCallChunks(head, calls, tools!.legacy, first)) await events.write(chunk);
        first = false;
        finishReason = tools!.legacy ? 'function_call' : 'tool_calls';
      }
    }
  } catch (err) {
    tally.record(ctx);
    if (!events.started) throw err;
    events.end(Buffer.from(errorBody('openai', asGatewayError(err))));
    return;
  }
  tally.record(ctx);
  events.open(200);
  // A chat stream that never opened its message says its role in the last chunk.
  await events.write(encodeChunk(kind, head, first && kind === 'chat' ? '' : undefined, finishReason, first));
  if (p.ask.includeUsage) await events.write(encodeUsageChunk(kind, head, tally.usage() ?? null));
  await events.write(DONE);
  events.close();
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
