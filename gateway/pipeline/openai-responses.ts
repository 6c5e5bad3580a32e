// POST responses (docs/openai.md "The Responses API"): the chat pipeline (pipeline/openai-decode.ts
// prepare, the same template, upstream call, tool parser and schema checks as chat completions),
// answered as a response object, or streamed as its typed events: response.created and
// response.in_progress at once, a message item's text deltas as they come, each call the model
// made as a function_call item, and response.completed (response.incomplete when max_output_tokens
// cut it). An error after the first event is response.failed.
import { asGatewayError } from '../egress/error-body';
import type { ToolCall } from '../encode/openai';
import {
  type OutputItem, type ResponseEvent, ResponseEvents, type ResponseHead, newItemId, newResponseHead, responseJson,
} from '../encode/openai-responses';
import type { RequestContext } from '../ingress/context';
import { GenerateEvents } from './generate';
import { callEach, choiceOf, record, StreamChoice, Tally, TokenTotal, usageOf } from './openai-answer';
import { type OpenAiPlan, type Prepared, prepare } from './openai-decode';
import { checkedCalls, checkStructured } from './openai-tools';
import { writeAnswer } from './steps';

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

async function answerStream(ctx: RequestContext, deps: OpenAiPlan, p: Prepared, head: ResponseHead): Promise<void> {
  const events = new GenerateEvents(ctx, p.ledger, deps.telemetry.serverTiming);
  const ev = new ResponseEvents();
  const c = new StreamChoice(0, p, new TokenTotal(1, ctx.record.meter));
  const output: OutputItem[] = [];
  let message: Streaming | undefined;
  const write = async (list: readonly ResponseEvent[]): Promise<void> => {
    for (const e of list) await events.write(e.data, e.type);
  };
  /** The message item, added (with its content part) when the first text comes. */
  const opened = (): { readonly item: Streaming; readonly added: ResponseEvent[] } => {
    if (message !== undefined) return { item: message, added: [] };
    message = { type: 'message', id: newItemId('message'), text: '' };
    return { item: message, added: ev.added(output.push(message) - 1, message) };
  };
  const text = (delta: string): Promise<void> | undefined => {
    if (delta === '') return undefined;
    const { item, added } = opened();
    item.text += delta;
    return write([...added, ev.delta(output.indexOf(item), item, delta)]);
  };
  events.open(200);
  const begun = responseJson(head, 'in_progress', [], undefined);
  await write([ev.event('response.created', { response: begun }), ev.event('response.in_progress', { response: begun })]);
  try {
    await callEach(ctx, deps, p, (_, msg) => {
      const step = c.tally.take(msg);
      return text(c.scan === undefined ? step.text : c.scan.push(step.text));
    });
    const reason = c.tally.finish(p.ask.maxTokens ?? p.model.maxTokens);
    const parsed = c.scan?.end();
    const calls = parsed === undefined ? [] : checkedCalls(p.ask.tools!, parsed);
    if (calls.length === 0) checkStructured(p.ask.responseFormat, c.tally.text);
    if (calls.length === 0 && parsed !== undefined) await text(parsed.content);
    const status = statusOf(calls.length > 0 ? 'tool_calls' : reason);
    // An answer of no text and no call is an empty message, as given whole.
    if (message !== undefined || calls.length === 0) {
      const { item, added } = opened();
      await write([...added, ...ev.done(output.indexOf(item), item, status)]);
    }
    for (const call of calls) {
      const item: OutputItem = { type: 'function_call', id: newItemId('function_call'), call };
      const index = output.push(item) - 1;
      await write([...ev.added(index, item), ev.delta(index, item, call.arguments), ...ev.done(index, item, 'completed')]);
    }
    record(ctx, [c.tally]);
    const done = responseJson(head, status, output, usageOf([c.tally]));
    await write([ev.event(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: done })]);
    events.close();
  } catch (err) {
    record(ctx, [c.tally]);
    const e = asGatewayError(err);
    const failed = ev.event('response.failed', { response: responseJson(head, 'failed', output, undefined, { code: 'server_error', message: e.message }) });
    events.end(failed.data, failed.type);
  }
}
