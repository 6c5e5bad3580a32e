// Chat messages rendered into a prompt with the model's own chat template (the Jinja template of
// its tokenizer_config.json, loaded at start by config/openai.ts), on @huggingface/jinja — the
// engine transformers.js renders the same templates with. The template sees what Hugging Face's
// apply_chat_template gives it: `messages` (content a string, or parts of type text and
// image_url — an image's bytes are never handed to the template), `add_generation_prompt` and the
// tokenizer's special tokens (bos_token, eos_token, …); with tools offered, `tools` (a list of
// `{type: "function", function: {name, description, parameters}}`), an assistant's calls as
// `tool_calls` (`function.arguments` an object) and a tool's result as a `tool` message with its
// `tool_call_id` — what transformers' apply_chat_template(tools=…) gives a template.
import { Template } from '@huggingface/jinja';
import type { ChatTemplate } from '../../config/openai';
import { GatewayError } from '../../errors';

export interface ChatMessage {
  readonly role: string;
  readonly content: string | readonly ({ readonly type: 'text'; readonly text: string } | { readonly type: 'image_url' })[];
  readonly tool_calls?: readonly { readonly id: string; readonly type: 'function'; readonly function: { readonly name: string; readonly arguments: unknown } }[];
  readonly tool_call_id?: string;
  readonly name?: string;
}

const parsed = new WeakMap<ChatTemplate, Template>();

/** The prompt for `messages`, ending with the assistant's turn opened. */
export function renderChat(t: ChatTemplate, messages: readonly ChatMessage[], tools?: readonly unknown[]): string {
  let template = parsed.get(t);
  if (template === undefined) {
    template = new Template(t.source);
    parsed.set(t, template);
  }
  try {
    return template.render({ ...t.tokens, messages, add_generation_prompt: true, ...(tools === undefined ? {} : { tools }) });
  } catch (err) {
    // A template may refuse a conversation (raise_exception: roles out of order, say): the client's to fix.
    throw new GatewayError('GW_ERR_DECODE_OPENAI_INVALID', `The model's chat template refused the messages: ${(err as Error).message}`,
      { dialect: { shape: 'openai', param: 'messages', code: null } });
  }
}
