// The Responses API (docs/openai.md "The Responses API") against the reference backend's tiny
// LLMs: plain text (instructions and input items rendered through the chat template, as chat
// completions render them), a function tool's round trip (function_call → function_call_output →
// words), text.format json_schema through guided decoding, the stream's typed events in order
// (`event:` lines, sequence numbers), the tokens charged to a quota as chat's are, and each bad or
// unsupported input a 400 in OpenAI's shape with `param` set and nothing sent upstream.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor, gatewayForSuite } from '../support/gateway';
import { send } from '../support/http';

const LLMS = ['tiny_llm', 'tiny_llm_trtllm'];
const VOCAB = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa', 'lambda', 'mu', 'nu', 'xi', 'omicron', 'pi'];
const words = (promptTokens: number, n: number): string => Array.from({ length: n }, (_, i) => ` ${VOCAB[(promptTokens + i) % 16]}`).join('');
const WEATHER = { type: 'function', name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } }, required: ['city', 'days'] } };
const ASK = 'What is the weather in Paris?';
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are read field by field
type Any = any;

const post = (gw: RunningGateway, body: unknown, headers: Record<string, string> = {}) =>
  send(`${gw.url}/openai/v1/responses`, { body: JSON.stringify(body), headers: { 'Content-Type': 'application/json', ...headers } });
const json = (r: { body: Buffer }): Any => JSON.parse(r.body.toString());
/** Each event of an SSE body: its `event:` line's name and its data. */
const events = (body: Buffer): { name: string; data: Any }[] => body.toString().split('\n\n').filter((e) => e !== '').map((e) => {
  const m = /^event: (\S+)\ndata: (.*)$/s.exec(e);
  if (m === null) throw new Error(`not a named event: ${e}`);
  return { name: m[1]!, data: JSON.parse(m[2]!) };
});

describe('the Responses API on the demo zoo', () => {
  const gw = gatewayForSuite(['--demo']);
  const calls = (): number => gw.demoBackend!.stats.streamCalls;

  test.each(LLMS)('%s: instructions and input as a string — a message item of output_text; cut at max_output_tokens: incomplete', async (model) => {
    // The demo template renders the instructions as a system message, as chat would.
    const r = json(await post(gw, { model, instructions: 'Be terse.', input: ASK, max_output_tokens: 3 }));
    expect(r).toEqual(expect.objectContaining({
      id: expect.stringMatching(/^resp_/), object: 'response', created_at: expect.any(Number), status: 'incomplete', model, error: null,
      incomplete_details: { reason: 'max_output_tokens' }, instructions: 'Be terse.', max_output_tokens: 3, store: false, tools: [], tool_choice: 'auto',
      output: [{ type: 'message', id: expect.stringMatching(/^msg_/), status: 'incomplete', role: 'assistant',
        content: [{ type: 'output_text', text: words(r.usage.input_tokens, 3), annotations: [], logprobs: [] }] }],
      usage: { input_tokens: r.usage.input_tokens, input_tokens_details: { cached_tokens: 0 }, output_tokens: 3,
        output_tokens_details: { reasoning_tokens: 0 }, total_tokens: r.usage.input_tokens + 3 },
    }));
    // The same conversation as chat completions renders it: the same prompt, the same words.
    const messages = [{ role: 'system', content: 'Be terse.' }, { role: 'user', content: ASK }];
    const chat = json(await send(`${gw.url}/openai/v1/chat/completions`, { body: JSON.stringify({ model, max_tokens: 3, messages }), headers: { 'Content-Type': 'application/json' } }));
    expect([chat.usage.prompt_tokens, chat.choices[0].message.content]).toEqual([r.usage.input_tokens, r.output[0].content[0].text]);
  });

  test('input items: messages with input_text and output_text parts, roles user, developer, assistant', async () => {
    const input = [{ role: 'developer', content: 'Be terse.' }, { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi' }] },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hello', annotations: [] }] }, { role: 'user', content: ASK }];
    const r = await post(gw, { model: 'tiny_llm', input, max_output_tokens: 2 });
    expect([r.status, json(r).output[0].content[0].text]).toEqual([200, expect.stringMatching(/^( [a-z]+){2}$/)]);
  });

  test.each(LLMS)('%s: a function tool — a function_call item; its output sent back — an answer in words', async (model) => {
    const first = json(await post(gw, { model, input: ASK, tools: [WEATHER] }));
    expect([first.status, first.tools, first.output]).toEqual(['completed', [WEATHER], [{ type: 'function_call', id: expect.stringMatching(/^fc_/),
      call_id: expect.stringMatching(/^call_/), name: 'get_weather', arguments: '{"city":"","days":1}', status: 'completed' }]]);
    const call = first.output[0];
    const second = json(await post(gw, { model, tools: [WEATHER], max_output_tokens: 3,
      input: [{ role: 'user', content: ASK }, call, { type: 'function_call_output', call_id: call.call_id, output: 'sunny, 21 C' }] }));
    expect([second.status, (second.output as Any[]).map((i) => i.type), second.output[0].content[0].text]).toEqual(['incomplete', ['message'], expect.stringMatching(/^( [a-z]+){3}$/)]);
  });

  test('tool_choice none: no call; a named tool_choice ({type, name}) calls that one', async () => {
    const other = { type: 'function', name: 'other', parameters: { type: 'object', properties: {} } };
    const none = json(await post(gw, { model: 'tiny_llm', input: ASK, tools: [WEATHER], tool_choice: 'none', max_output_tokens: 1 }));
    expect((none.output as Any[]).map((i) => i.type)).toEqual(['message']);
    const named = json(await post(gw, { model: 'tiny_llm', input: ASK, tools: [WEATHER, other], tool_choice: { type: 'function', name: 'other' } }));
    expect((named.output as Any[]).map((i) => [i.name, i.arguments])).toEqual([['other', '{}']]);
  });

  const SCHEMA = { type: 'object', properties: { city: { type: 'string' }, temperature: { type: 'number' } }, required: ['city', 'temperature'], additionalProperties: false };

  test.each(LLMS)('%s: text.format json_schema (strict) and json_object — guided decoding, the answer checked', async (model) => {
    const r = json(await post(gw, { model, input: ASK, max_output_tokens: 32, text: { format: { type: 'json_schema', name: 'weather', schema: SCHEMA, strict: true } } }));
    expect([r.status, r.output[0].content[0].text, r.text.format.name]).toEqual(['completed', '{"city":"","temperature":0}', 'weather']);
    const o = json(await post(gw, { model, input: ASK, text: { format: { type: 'json_object' } } }));
    expect(o.output[0].content[0].text).toBe('{}');
    const code = { type: 'json_schema', name: 'code', strict: true, schema: { type: 'object', properties: { c: { type: 'string', pattern: '^x+$' } }, required: ['c'] } };
    const breach = await post(gw, { model, input: ASK, text: { format: code } });
    expect([breach.status, json(breach).error.message]).toEqual([502, 'The model\'s answer does not satisfy the schema \'code\' (strict): answer/c must match pattern "^x+$".']);
  });

  test('streamed text: created, in_progress, the item and part added, a delta a token, the dones, incomplete — each named, numbered in order', async () => {
    const r = await post(gw, { model: 'tiny_llm', input: ASK, max_output_tokens: 2, stream: true });
    expect([r.status, r.headers['content-type']]).toEqual([200, 'text/event-stream; charset=utf-8']);
    const ev = events(r.body);
    expect(ev.map((e) => e.name)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
      'response.output_text.delta', 'response.output_text.delta', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete']);
    expect(ev.map((e) => [e.data.type, e.data.sequence_number])).toEqual(ev.map((e, i) => [e.name, i]));
    expect(ev[0]!.data.response).toEqual(expect.objectContaining({ status: 'in_progress', output: [], usage: null }));
    const text = ev.filter((e) => e.name === 'response.output_text.delta').map((e) => e.data.delta).join('');
    expect(text).toMatch(/^( [a-z]+){2}$/);
    expect(ev[6]!.data).toEqual(expect.objectContaining({ item_id: ev[2]!.data.item.id, output_index: 0, content_index: 0, text }));
    const last = ev.at(-1)!.data.response;
    expect([last.id, last.status, last.output[0].content[0].text, last.usage.output_tokens]).toEqual([ev[0]!.data.response.id, 'incomplete', text, 2]);
  });

  test('a streamed call: a function_call item added, its arguments, their done, the item done, completed', async () => {
    const ev = events((await post(gw, { model: 'tiny_llm', input: ASK, tools: [WEATHER], stream: true })).body);
    expect(ev.map((e) => e.name)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added',
      ...ev.filter((e) => e.name === 'response.function_call_arguments.delta').map(() => 'response.function_call_arguments.delta'),
      'response.function_call_arguments.done', 'response.output_item.done', 'response.completed']);
    expect(ev[2]!.data.item).toEqual({ type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: expect.stringMatching(/^call_/), name: 'get_weather', arguments: '', status: 'in_progress' });
    // The arguments as the model writes them, 16 characters a token.
    expect(ev.filter((e) => e.name === 'response.function_call_arguments.delta').map((e) => e.data.delta)).toEqual(['{"', 'city":"","days":', '1}']);
    const args = '{"city":"","days":1}';
    expect(ev.at(-3)!.data).toEqual(expect.objectContaining({ item_id: ev[2]!.data.item.id, output_index: 0, name: 'get_weather', arguments: args }));
    expect(ev.at(-1)!.data.response.output).toEqual([expect.objectContaining({ type: 'function_call', name: 'get_weather', arguments: args, status: 'completed' })]);
  });

  test('a strict schema broken mid-stream: the text sent, then response.failed with the error', async () => {
    const ev = events((await post(gw, { model: 'tiny_llm', input: ASK, stream: true, text: { format: { type: 'json_schema', name: 'code', strict: true, schema: { type: 'object', properties: { c: { type: 'string', pattern: '^x+$' } }, required: ['c'] } } } })).body);
    expect(ev.at(-1)!.name).toBe('response.failed');
    expect(ev.at(-1)!.data.response).toEqual(expect.objectContaining({ status: 'failed', error: { code: 'server_error', message: expect.stringContaining('does not satisfy the schema') } }));
  });

  const body = (extra: Record<string, unknown>) => ({ model: 'tiny_llm', input: ASK, ...extra });
  test.each([
    ['previous_response_id (no responses are kept)', body({ previous_response_id: 'resp_1' }), 'previous_response_id'],
    ['background', body({ background: true }), 'background'],
    ['reasoning', body({ reasoning: { effort: 'high' } }), 'reasoning'],
    ['include', body({ include: ['reasoning.encrypted_content'] }), 'include'],
    ['a built-in tool', body({ tools: [{ type: 'web_search' }] }), 'tools[0].type'],
    ['a function tool without a name', body({ tools: [{ type: 'function', parameters: {} }] }), 'tools[0].name'],
    ['parameters that are not a JSON Schema', body({ tools: [{ type: 'function', name: 'f', parameters: { type: 'objekt' } }] }), 'tools[0].parameters'],
    ['tool_choice naming no offered tool', body({ tools: [WEATHER], tool_choice: { type: 'function', name: 'nope' } }), 'tool_choice'],
    ['an image part', body({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'data:image/png;base64,AAAA' }] }] }), 'input[0].content[0].type'],
    ['a file part', body({ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] }), 'input[0].content[0].type'],
    ['an item of another type', body({ input: [{ type: 'item_reference', id: 'x' }] }), 'input[0].type'],
    ['a function_call_output without call_id', body({ input: [{ role: 'user', content: ASK }, { type: 'function_call_output', output: 'x' }] }), 'input[1].call_id'],
    ['a role of another kind', body({ input: [{ role: 'tool', content: 'x' }] }), 'input[0].role'],
    ['no input', body({ input: [] }), 'input'],
    ['a text.format of another type', body({ text: { format: { type: 'yaml' } } }), 'text.format.type'],
    ['a json_schema format that is not JSON Schema', body({ text: { format: { type: 'json_schema', name: 'x', schema: { required: 'a' } } } }), 'text.format.schema'],
    ['an unknown argument', body({ frobnicate: 1 }), 'frobnicate'],
    ['max_output_tokens of 0', body({ max_output_tokens: 0 }), 'max_output_tokens'],
  ])('400 for %s, param named, nothing sent upstream', async (_what, b, param) => {
    const before = calls();
    const r = await post(gw, b);
    expect([r.status, r.headers['x-tensorgate-error'], json(r).error]).toEqual([400, 'GW_ERR_DECODE_OPENAI_INVALID',
      expect.objectContaining({ message: expect.any(String), type: 'invalid_request_error', param })]);
    expect(calls()).toBe(before);
  });

  test('store (OpenAI\'s default true) and metadata are accepted; nothing is kept (store false in the answer)', async () => {
    const r = json(await post(gw, body({ store: true, metadata: { k: 'v' }, max_output_tokens: 1 })));
    expect([r.store, r.metadata]).toEqual([false, { k: 'v' }]);
  });
});

describe('the Responses API\'s tokens charged to a quota as chat\'s are', () => {
  let gw: RunningGateway;
  let dir: string;
  const token = (stream: boolean): string => `responses-quota-key-${stream}-0123456789`;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tg-responses-'));
    // One answer of max_output_tokens 3 to "What is the weather in Paris?" (the demo template: 8 words) is 11 tokens.
    const key = (stream: boolean): string => `  - { id: r${stream}, token: sha256:${createHash('sha256').update(token(stream)).digest('hex')}, groups: "*", limits: { quotas: [{ unit: tokens, per: month, max: 11 }] } }`;
    writeFileSync(join(dir, 'keys.yaml'), `keys:\n${key(false)}\n${key(true)}\n`);
    gw = await gatewayFor(['--demo', '--auth', '--auth-keys-file', join(dir, 'keys.yaml')]);
  });
  afterAll(async () => {
    await gw?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test.each([false, true])('stream %s: the first answer spends the quota; the next is refused', async (stream) => {
    const auth = { Authorization: `Bearer ${token(stream)}` };
    const first = await post(gw, { model: 'tiny_llm', input: ASK, max_output_tokens: 3, stream }, auth);
    expect(first.status).toBe(200);
    const next = await post(gw, { model: 'tiny_llm', input: ASK, max_output_tokens: 3 }, auth);
    expect([next.status, next.headers['x-tensorgate-error']]).toEqual([429, 'GW_ERR_AUTH_QUOTA_EXHAUSTED']);
  });
});
