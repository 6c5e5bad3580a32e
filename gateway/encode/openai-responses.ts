// The Responses API's answers (docs/openai.md "The Responses API"), in the shapes of OpenAI's
// api-reference/responses/object and of the official SDKs' types: the response object (its
// `output` a message item with one output_text part and/or function_call items; `usage` with
// input, output and total tokens), and a stream's typed events, each `event: <type>` and its data
// with `type` and `sequence_number` (api-reference/responses-streaming).
import { randomBytes } from 'node:crypto';
import type { ToolCall, Usage } from './openai';

const hex = (prefix: string): string => `${prefix}_${randomBytes(12).toString('hex')}`;

/** What every event of one response names: its id, creation time, model and the settings it repeats. */
export interface ResponseHead {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  /** The request's settings the answer repeats (instructions, tools, tool_choice, text, …), in their fields' names. */
  readonly repeat: Readonly<Record<string, unknown>>;
}

/** An output item as the answer gives it. */
export type OutputItem =
  | { readonly type: 'message'; readonly id: string; readonly text: string }
  | { readonly type: 'function_call'; readonly id: string; readonly call: ToolCall };

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed';

export const newItemId = (type: OutputItem['type']): string => hex(type === 'message' ? 'msg' : 'fc');

function outputText(text: string): Record<string, unknown> {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

/** An item's JSON; `status` in_progress while it streams. */
export function itemJson(item: OutputItem, status: 'in_progress' | 'completed' | 'incomplete'): Record<string, unknown> {
  if (item.type === 'function_call') {
    const c = item.call;
    return { type: 'function_call', id: item.id, call_id: c.id, name: c.name, arguments: status === 'in_progress' ? '' : c.arguments, status };
  }
  return { type: 'message', id: item.id, status, role: 'assistant', content: status === 'in_progress' ? [] : [outputText(item.text)] };
}

/** The response object. `usage` in OpenAI's Responses terms; `error` when it failed. */
export function responseJson(h: ResponseHead, status: ResponseStatus, output: readonly OutputItem[], usage: Usage | undefined,
  error?: { readonly code: string; readonly message: string }): Record<string, unknown> {
  const itemStatus = status === 'incomplete' ? 'incomplete' : 'completed';
  return {
    id: h.id, object: 'response', created_at: h.created, status, background: false, error: error ?? null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null, model: h.model,
    output: output.map((item) => itemJson(item, itemStatus)),
    previous_response_id: null, reasoning: { effort: null, summary: null }, truncation: 'disabled', user: null, ...h.repeat,
    // Nothing is kept, whatever the request said (docs/openai.md "The Responses API").
    store: false,
    usage: usage === undefined || status === 'in_progress' ? null : {
      input_tokens: usage.prompt_tokens, input_tokens_details: { cached_tokens: 0 },
      output_tokens: usage.completion_tokens, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: usage.total_tokens,
    },
  };
}

export const newResponseHead = (model: string, repeat: ResponseHead['repeat']): ResponseHead => ({ id: hex('resp'), created: Math.floor(Date.now() / 1000), model, repeat });

/** One event of a stream: its type (the `event:` line too) and its data. */
export interface ResponseEvent {
  readonly type: string;
  readonly data: Buffer;
}

/** A stream's events, numbered in order (`sequence_number`). */
export class ResponseEvents {
  #seq = 0;

  event(type: string, fields: Record<string, unknown>): ResponseEvent {
    return { type, data: Buffer.from(JSON.stringify({ type, sequence_number: this.#seq++, ...fields })) };
  }

  /** An item begun: output_item.added (and a message's content_part.added). */
  added(index: number, item: OutputItem): ResponseEvent[] {
    const out = [this.event('response.output_item.added', { output_index: index, item: itemJson(item, 'in_progress') })];
    if (item.type === 'message') out.push(this.event('response.content_part.added', { item_id: item.id, output_index: index, content_index: 0, part: outputText('') }));
    return out;
  }

  /** A piece of an item: output_text.delta, or function_call_arguments.delta. */
  delta(index: number, item: OutputItem, delta: string): ResponseEvent {
    return item.type === 'message'
      ? this.event('response.output_text.delta', { item_id: item.id, output_index: index, content_index: 0, delta, logprobs: [] })
      : this.event('response.function_call_arguments.delta', { item_id: item.id, output_index: index, delta });
  }

  /** An item whole: its text's or arguments' done event (and a message's content_part.done), then output_item.done. */
  done(index: number, item: OutputItem, status: 'completed' | 'incomplete'): ResponseEvent[] {
    const out = item.type === 'message'
      ? [this.event('response.output_text.done', { item_id: item.id, output_index: index, content_index: 0, text: item.text, logprobs: [] }),
        this.event('response.content_part.done', { item_id: item.id, output_index: index, content_index: 0, part: outputText(item.text) })]
      : [this.event('response.function_call_arguments.done', { item_id: item.id, output_index: index, name: item.call.name, arguments: item.call.arguments })];
    out.push(this.event('response.output_item.done', { output_index: index, item: itemJson(item, status) }));
    return out;
  }
}
