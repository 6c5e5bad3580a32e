// POST responses (docs/openai.md "The Responses API"): the chat pipeline (pipeline/openai/decode.ts
// prepare, the same template, upstream call, tool parser and schema checks as chat completions),
// answered as a response object, or streamed as its typed events: response.created and
// response.in_progress at once, a message item's text deltas as they come, each call the model
// made as a function_call item, and response.completed (response.incomplete when max_output_tokens
// cut it). An error after the first event is response.failed.
import { asGatewayError } from '../../egress/error-body';
import type { ToolCall } from '../../encode/openai';
import {
  type OutputItem, type ResponseEvent, ResponseEvents, type ResponseHead, newItemId, newResponseHead, responseJson,
} from '../../encode/openai-responses';
import type { RequestContext } from '../../ingress/context';
import { GenerateEvents } from '../generate';
import { callEach, choiceOf, record, StreamChoice, Tally, TokenTotal, usageOf } from './answer';
import { type OpenAiPlan, type Prepared, prepare } from './decode';
import { type CallPiece, checkedCalls, checkStructured } from './tools';
import { writeAnswer } from '../steps';

export async function responses(ctx: RequestContext, deps: OpenAiPlan): Promise<void> {
  const p = await prepare(ctx, deps, 'responses');
  const head = newResponseHead(p.model.id, p.ask.repeat!);
  await (p.ask.stream ? answerStream(ctx, deps, p, head) : answerWhole(ctx, deps, p, head));
}

const statusOf = (reason: string): 'completed' | 'incomplete' => (reason === 'length' ? 'incomplete' : 'completed');

/** The items of an answer: its text as a message (when there is any), then its calls. */
function itemsOf(text: string, calls: readonly ToolCall[]): OutputItem[] {
  const items: OutputItem[] = text === '' && calls.length > 0 ? [] : [{ type: 'message', id: newItemId('message'), text }];
  for (const call of calls) items.push({ type: 'function_call', id: newItemId('function_call'), call });
  return items;
}

async function answerWhole(ctx: RequestContext, deps: OpenAiPlan, p: Prepared, head: ResponseHead): Promise<void> {
  const tally = new Tally(true, new TokenTotal(1, ctx.record.meter).choice(0));
  try {
    await callEach(ctx, deps, p, (_, msg) => {
      tally.take(msg);
    });
  } finally {
    record(ctx, [tally]);
  }
  p.ledger.start('encode');
  const c = choiceOf(p, tally);
  const out = Buffer.from(JSON.stringify(responseJson(head, statusOf(c.finishReason), itemsOf(c.text, c.toolCalls ?? []), usageOf([tally]))));
  p.ledger.end('encode');
  await writeAnswer(ctx, p.ledger, { 'Content-Type': 'application/json' }, [out], deps.telemetry.serverTiming);
}

/** The message item of a stream, its text growing as the deltas go out. */
interface Streaming { readonly type: 'message'; readonly id: string; text: string }

/** A stream's output: the message item (open until a call starts or the answer ends), then the call items. */
class StreamOutput {
  readonly output: OutputItem[] = [];
  readonly ev = new ResponseEvents();
  #message: Streaming | undefined;
  #messageDone = false;
  /** The output index of each call streamed as written, by its index among the calls. */
  readonly #calls: number[] = [];

  constructor(private readonly events: GenerateEvents) {}

  async write(list: readonly ResponseEvent[]): Promise<void> {
    for (const e of list) await this.events.write(e.data, e.type);
  }

  /** The message item, added (with its content part) when the first text comes. */
  #opened(): { readonly item: Streaming; readonly added: ResponseEvent[] } {
    if (this.#message !== undefined) return { item: this.#message, added: [] };
    this.#message = { type: 'message', id: newItemId('message'), text: '' };
    return { item: this.#message, added: this.ev.added(this.output.push(this.#message) - 1, this.#message) };
  }

  text(delta: string): Promise<void> | undefined {
    if (delta === '') return undefined;
    const { item, added } = this.#opened();
    item.text += delta;
    return this.write([...added, this.ev.delta(this.output.indexOf(item), item, delta)]);
  }

  /** The message done (an empty one when the answer has nothing else: a response has an item). */
  async endMessage(status: 'completed' | 'incomplete', always: boolean): Promise<void> {
    if (this.#messageDone || (this.#message === undefined && !always)) return;
    this.#messageDone = true;
    const { item, added } = this.#opened();
    await this.write([...added, ...this.ev.done(this.output.indexOf(item), item, status)]);
  }

  /** A call's piece as the model writes it: a function_call item added, or its arguments' delta. */
  async piece(piece: CallPiece): Promise<void> {
    if (piece.kind === 'arguments') {
      const at = this.#calls[piece.index]!;
      return this.write([this.ev.delta(at, this.output[at]!, piece.text)]);
    }
    await this.endMessage('completed', false);
    const item: OutputItem = { type: 'function_call', id: newItemId('function_call'), call: { id: piece.id, name: piece.name, arguments: '' } };
    this.#calls.push(this.output.push(item) - 1);
    return this.write(this.ev.added(this.#calls.at(-1)!, item));
  }

  /** The calls at the end: the streamed ones done with their whole arguments, the rest added, given and done. */
  async calls(calls: readonly ToolCall[]): Promise<void> {
    for (const [i, call] of calls.entries()) {
      const at = this.#calls[i];
      if (at !== undefined) {
        const item: OutputItem = { type: 'function_call', id: this.output[at]!.id, call };
        this.output[at] = item;
        await this.write(this.ev.done(at, item, 'completed'));
        continue;
      }
      const item: OutputItem = { type: 'function_call', id: newItemId('function_call'), call };
      const index = this.output.push(item) - 1;
      await this.write([...this.ev.added(index, item), this.ev.delta(index, item, call.arguments), ...this.ev.done(index, item, 'completed')]);
    }
  }
}

async function answerStream(ctx: RequestContext, deps: OpenAiPlan, p: Prepared, head: ResponseHead): Promise<void> {
  const events = new GenerateEvents(ctx, p.ledger, deps.telemetry.serverTiming);
  const out = new StreamOutput(events);
  const c = new StreamChoice(0, p, new TokenTotal(1, ctx.record.meter));
  events.open(200);
  const begun = responseJson(head, 'in_progress', [], undefined);
  await out.write([out.ev.event('response.created', { response: begun }), out.ev.event('response.in_progress', { response: begun })]);
  const pieces = async (text: string, list: readonly CallPiece[]): Promise<void> => {
    await out.text(text);
    for (const piece of list) await out.piece(piece);
  };
  try {
    await callEach(ctx, deps, p, (_, msg) => {
      const step = c.tally.take(msg);
      if (c.scan === undefined) return out.text(step.text);
      const text = c.scan.push(step.text);
      const list = c.scan.drain();
      return text === '' && list.length === 0 ? undefined : pieces(text, list);
    });
    const reason = c.tally.finish(p.ask.maxTokens ?? p.model.maxTokens);
    const parsed = c.scan?.end();
    const calls = parsed === undefined ? [] : checkedCalls(p.ask.tools!, parsed);
    if (calls.length === 0) checkStructured(p.ask.responseFormat, c.tally.text);
    if (calls.length === 0 && parsed !== undefined) await out.text(parsed.content);
    const status = statusOf(calls.length > 0 ? 'tool_calls' : reason);
    await out.endMessage(status, calls.length === 0);
    await out.calls(calls);
    record(ctx, [c.tally]);
    const done = responseJson(head, status, out.output, usageOf([c.tally]));
    await out.write([out.ev.event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: done })]);
    events.close();
  } catch (err) {
    record(ctx, [c.tally]);
    const e = asGatewayError(err);
    const failed = out.ev.event('response.failed', { response: responseJson(head, 'failed', out.output, undefined, { code: 'server_error', message: e.message }) });
    events.end(failed.data, failed.type);
  }
}
