// Tools and structured output on the OpenAI API (docs/openai.md "Tools", "Structured output")
// against the reference backend's tiny LLMs, which call the first tool a prompt offers (Hermes'
// format, the demo template's) and follow a guide with a minimal instance of its schema: calls
// whole and streamed as OpenAI sends them, a round trip through a `tool` message, the legacy
// functions, tool_choice none/required/named, json_object and json_schema on both conventions,
// strict answers checked (a breach is a 502, whole or as the stream's last event), and each bad
// input a 400 in OpenAI's shape with `param` set and nothing sent upstream.
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor, gatewayForSuite } from '../support/gateway';
import { send } from '../support/http';

const LLMS = ['tiny_llm', 'tiny_llm_trtllm'];
const WEATHER = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } }, required: ['city', 'days'] } } };
const OTHER = { type: 'function', function: { name: 'other', parameters: { type: 'object', properties: {} } } };
const ASK = [{ role: 'user', content: 'What is the weather in Paris?' }];
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are read field by field
type Any = any;

const post = (gw: RunningGateway, body: unknown) =>
  send(`${gw.url}/openai/v1/chat/completions`, { body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
const json = (r: { body: Buffer }): Any => JSON.parse(r.body.toString());
/** The data of each event of an SSE body, `[DONE]` included. */
const events = (body: Buffer): string[] => body.toString().split('\n\n').filter((e) => e !== '').map((e) => e.replace(/^data: /, ''));

describe('tools and structured output on the demo zoo', () => {
  const gw = gatewayForSuite(['--demo']);
  const calls = (): number => gw.demoBackend!.stats.streamCalls;

  test.each(LLMS)('%s: a prompt offering tools gets a call of the first, arguments minimal; content null, finish_reason tool_calls', async (model) => {
    const r = json(await post(gw, { model, messages: ASK, tools: [WEATHER, OTHER] }));
    expect(r.choices).toEqual([{ index: 0, logprobs: null, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, refusal: null,
      tool_calls: [{ id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather', arguments: '{"city":"","days":1}' } }] } }]);
    expect(r.usage.completion_tokens).toBe(Math.ceil('<tool_call>\n{"name":"get_weather","arguments":{"city":"","days":1}}\n</tool_call>'.length / 16));
  });

  // The tiny LLMs write `<tool_call>\n{"name":"get_weather","arguments":{"city":"","days":1}}\n</tool_call>`
  // 16 characters a token: the arguments go out as those tokens bring them.
  test.each(LLMS)('%s streamed: the call\'s index, id, type, name and arguments "" first, then the arguments as written; finish_reason tool_calls', async (model) => {
    const r = await post(gw, { model, messages: ASK, tools: [WEATHER], stream: true, stream_options: { include_usage: true } });
    expect(r.status).toBe(200);
    const ev = events(r.body);
    expect(ev.at(-1)).toBe('[DONE]');
    const chunks = ev.slice(0, -1).map((e) => JSON.parse(e));
    expect(chunks.map((c) => c.choices[0]?.delta)).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather', arguments: '' } }] },
      ...['{"', 'city":"","days":', '1}'].map((a) => ({ tool_calls: [{ index: 0, function: { arguments: a } }] })),
      {},
      undefined,
    ]);
    expect(chunks.map((c) => c.choices[0]?.finish_reason)).toEqual([null, null, null, null, 'tool_calls', undefined]);
    expect(chunks.at(-1).usage).toEqual(expect.objectContaining({ completion_tokens: 5 }));
  });

  test('a round trip: the call and its result in the history render through the template; the model answers in words', async () => {
    const first = json(await post(gw, { model: 'tiny_llm', messages: ASK, tools: [WEATHER] })).choices[0].message;
    const r = json(await post(gw, { model: 'tiny_llm', tools: [WEATHER], max_tokens: 3,
      messages: [...ASK, first, { role: 'tool', tool_call_id: first.tool_calls[0].id, content: 'sunny, 21 C' }] }));
    expect(r.choices[0]).toEqual(expect.objectContaining({ finish_reason: 'length', message: expect.objectContaining({ role: 'assistant', content: expect.stringMatching(/^( [a-z]+){3}$/) }) }));
    expect(r.choices[0].message.tool_calls).toBeUndefined();
  });

  test('tool_choice none: the tools are not offered, the model answers in words', async () => {
    const r = json(await post(gw, { model: 'tiny_llm', messages: ASK, tools: [WEATHER], tool_choice: 'none', max_tokens: 2 }));
    expect([r.choices[0].finish_reason, r.choices[0].message.content, r.usage.prompt_tokens]).toEqual(['length', expect.stringMatching(/^( [a-z]+){2}$/), 8]);
  });

  test('tool_choice naming a function offers that one alone; required and no call is a 502, never a silent answer', async () => {
    const named = json(await post(gw, { model: 'tiny_llm', messages: ASK, tools: [WEATHER, OTHER], tool_choice: { type: 'function', function: { name: 'other' } } }));
    expect((named.choices[0].message.tool_calls as { function: { name: string; arguments: string } }[]).map((c) => [c.function.name, c.function.arguments])).toEqual([['other', '{}']]);
    const answered = [...ASK, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris", "days": 1}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'sunny' }];
    const error = { message: 'The model answered without a tool call, though tool_choice required one.', type: 'server_error', param: null, code: null };
    const r = await post(gw, { model: 'tiny_llm', messages: answered, tools: [WEATHER], tool_choice: 'required', max_tokens: 2 });
    expect([r.status, r.headers['x-tensorgate-error'], json(r).error]).toEqual([502, 'GW_ERR_MODEL_OPENAI_OUTPUT', error]);
    // Streamed, the words went out as they came (no call began): the breach is the last event, no [DONE].
    const s = await post(gw, { model: 'tiny_llm', messages: answered, tools: [WEATHER], tool_choice: 'required', max_tokens: 2, stream: true });
    expect([s.status, JSON.parse(events(s.body).at(-1)!)]).toEqual([200, { error }]);
  });

  test('a strict function\'s arguments are checked against its parameters: a breach is a 502', async () => {
    const strict = { type: 'function', function: { name: 'code', strict: true, parameters: { type: 'object', properties: { c: { type: 'string', pattern: '^x+$' } }, required: ['c'] } } };
    const r = await post(gw, { model: 'tiny_llm', messages: ASK, tools: [strict] });
    expect([r.status, json(r).error.message]).toEqual([502, 'The model\'s call of \'code\' does not satisfy the function\'s parameters (strict): answer/c must match pattern "^x+$".']);
  });

  test('the legacy functions: function_call, finish_reason function_call, whole and streamed', async () => {
    const body = { model: 'tiny_llm', messages: ASK, functions: [WEATHER.function], function_call: 'auto' };
    const r = json(await post(gw, body));
    expect(r.choices[0]).toEqual(expect.objectContaining({ finish_reason: 'function_call',
      message: { role: 'assistant', content: null, refusal: null, function_call: { name: 'get_weather', arguments: '{"city":"","days":1}' } } }));
    const s = events((await post(gw, { ...body, stream: true })).body).slice(0, -1).map((e) => JSON.parse(e));
    expect(s.map((c) => c.choices[0].delta)).toEqual([{ role: 'assistant', content: null, function_call: { name: 'get_weather', arguments: '' } },
      ...['{"', 'city":"","days":', '1}'].map((a) => ({ function_call: { arguments: a } })), {}]);
    expect(s.at(-1).choices[0].finish_reason).toBe('function_call');
  });

  const SCHEMA = { type: 'object', properties: { city: { type: 'string' }, temperature: { type: 'number' }, tags: { type: 'array', items: { type: 'string' } } }, required: ['city', 'temperature', 'tags'], additionalProperties: false };

  test.each(LLMS)('%s: response_format json_schema (strict) and json_object: the backend\'s guided decoding, the answer checked', async (model) => {
    const r = json(await post(gw, { model, messages: ASK, max_tokens: 32, response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: SCHEMA, strict: true } } }));
    expect([r.choices[0].message.content, r.choices[0].finish_reason]).toEqual(['{"city":"","temperature":0,"tags":[]}', 'stop']);
    const o = json(await post(gw, { model, messages: ASK, response_format: { type: 'json_object' } }));
    expect(o.choices[0].message.content).toBe('{}');
    const s = events((await post(gw, { model, messages: ASK, max_tokens: 32, stream: true, response_format: { type: 'json_schema', json_schema: { name: 'weather', schema: SCHEMA, strict: true } } })).body);
    expect(s.at(-1)).toBe('[DONE]');
    expect(s.slice(0, -1).map((e) => JSON.parse(e).choices[0].delta.content ?? '').join('')).toBe('{"city":"","temperature":0,"tags":[]}');
  });

  test('a strict answer that breaks its schema: 502 whole; streamed, the text sent and then an error event, no [DONE]', async () => {
    const schema = { type: 'object', properties: { code: { type: 'string', pattern: '^x+$' } }, required: ['code'] };
    const body = { model: 'tiny_llm', messages: ASK, response_format: { type: 'json_schema', json_schema: { name: 'code', schema, strict: true } } };
    const r = await post(gw, body);
    expect([r.status, json(r).error.message]).toEqual([502, 'The model\'s answer does not satisfy the schema \'code\' (strict): answer/code must match pattern "^x+$".']);
    const s = events((await post(gw, { ...body, stream: true })).body);
    expect(JSON.parse(s.at(-1)!)).toEqual({ error: expect.objectContaining({ type: 'server_error', message: expect.stringContaining('does not satisfy the schema') }) });
    // Not strict: the same answer goes out as it is.
    const loose = json(await post(gw, { ...body, response_format: { type: 'json_schema', json_schema: { name: 'code', schema } } }));
    expect(loose.choices[0].message.content).toBe('{"code":""}');
  });

  test.each(LLMS)('%s, n = 3: three generations, three calls upstream, choices indexed 0–2, usage summed; streamed, each chunk with its index', async (model) => {
    const before = calls();
    const r = json(await post(gw, { model, messages: ASK, n: 3, max_tokens: 2 }));
    expect(calls()).toBe(before + 3);
    expect((r.choices as Any[]).map((c) => [c.index, c.finish_reason, c.message.content])).toEqual([0, 1, 2].map((i) => [i, 'length', ' iota kappa']));
    expect(r.usage).toEqual({ prompt_tokens: 8, completion_tokens: 6, total_tokens: 14 });
    const t = json(await post(gw, { model, messages: ASK, n: 2, tools: [WEATHER] }));
    expect((t.choices as Any[]).map((c) => [c.index, c.finish_reason, c.message.tool_calls[0].function.name])).toEqual([[0, 'tool_calls', 'get_weather'], [1, 'tool_calls', 'get_weather']]);
    const s = events((await post(gw, { model, messages: ASK, n: 2, max_tokens: 2, stream: true, stream_options: { include_usage: true } })).body);
    expect(s.at(-1)).toBe('[DONE]');
    const chunks = s.slice(0, -1).map((e) => JSON.parse(e));
    for (const i of [0, 1]) {
      const mine = chunks.filter((c) => c.choices[0]?.index === i);
      expect(mine.map((c) => [c.choices[0].delta, c.choices[0].finish_reason])).toEqual([
        [{ role: 'assistant', content: ' iota' }, null], [{ content: ' kappa' }, null], [{}, 'length']]);
    }
    expect(chunks.at(-1)).toEqual(expect.objectContaining({ choices: [], usage: { prompt_tokens: 8, completion_tokens: 4, total_tokens: 12 } }));
  });

  // The tiny LLM's logprobs (docs/openai.md "The demo models"): each word −0.125, the next words at −1.125, −2.125, …
  const alt = (token: string, logprob: number) => ({ token, logprob, bytes: [...Buffer.from(token)] });
  test('logprobs (tiny_llm, the vLLM backend\'s logprobs output): chat whole and streamed, completions; the token and its top_logprobs', async () => {
    const r = json(await post(gw, { model: 'tiny_llm', messages: ASK, max_tokens: 2, logprobs: true, top_logprobs: 2 }));
    expect(r.choices[0].message.content).toBe(' iota kappa');
    expect(r.choices[0].logprobs).toEqual({ refusal: null, content: [
      { ...alt(' iota', -0.125), top_logprobs: [alt(' iota', -0.125), alt(' kappa', -1.125)] },
      { ...alt(' kappa', -0.125), top_logprobs: [alt(' kappa', -0.125), alt(' lambda', -1.125)] }] });
    const plain = json(await post(gw, { model: 'tiny_llm', messages: ASK, max_tokens: 1, logprobs: true }));
    expect(plain.choices[0].logprobs.content).toEqual([{ ...alt(' iota', -0.125), top_logprobs: [] }]);
    expect(json(await post(gw, { model: 'tiny_llm', messages: ASK, max_tokens: 1 })).choices[0].logprobs).toBeNull();
    const s = events((await post(gw, { model: 'tiny_llm', messages: ASK, max_tokens: 2, logprobs: true, top_logprobs: 1, stream: true })).body);
    expect(s.slice(0, 2).map((e) => JSON.parse(e).choices[0].logprobs.content)).toEqual([
      [{ ...alt(' iota', -0.125), top_logprobs: [alt(' iota', -0.125)] }], [{ ...alt(' kappa', -0.125), top_logprobs: [alt(' kappa', -0.125)] }]]);
    const c = json(await send(`${gw.url}/openai/v1/completions`, { body: JSON.stringify({ model: 'tiny_llm', prompt: 'one two three', max_tokens: 2, logprobs: 2 }), headers: { 'Content-Type': 'application/json' } }));
    expect(c.choices[0].logprobs).toEqual({ tokens: [' delta', ' epsilon'], token_logprobs: [-0.125, -0.125],
      top_logprobs: [{ ' delta': -0.125, ' epsilon': -1.125 }, { ' epsilon': -0.125, ' zeta': -1.125 }], text_offset: [0, 6] });
  });

  test('logprobs where the model cannot give them: the trtllm convention, tools beside them — 400 naming logprobs, nothing sent upstream', async () => {
    const before = calls();
    for (const body of [{ model: 'tiny_llm_trtllm', messages: ASK, logprobs: true }, { model: 'tiny_llm', messages: ASK, logprobs: true, tools: [WEATHER] },
      { model: 'tiny_llm', messages: ASK, top_logprobs: 2 }]) {
      const r = await post(gw, body);
      expect([r.status, json(r).error.param]).toEqual([400, body.top_logprobs === undefined ? 'logprobs' : 'top_logprobs']);
    }
    expect(json(await post(gw, { model: 'tiny_llm_trtllm', messages: ASK, logprobs: true })).error.message).toContain('the trtllm convention');
    expect(calls()).toBe(before);
  });

  const chat = (extra: Record<string, unknown>, messages: unknown[] = ASK) => ({ model: 'tiny_llm', messages, ...extra });
  test.each([
    ['a tool without a name', chat({ tools: [{ type: 'function', function: { parameters: {} } }] }), 'tools[0].function.name'],
    ['a tool whose name is not a function name', chat({ tools: [{ type: 'function', function: { name: 'get weather' } }] }), 'tools[0].function.name'],
    ['parameters that are not a JSON Schema object', chat({ tools: [{ type: 'function', function: { name: 'f', parameters: 'object' } }] }), 'tools[0].function.parameters'],
    ['parameters that break the meta-schema', chat({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'objekt' } } }] }), 'tools[0].function.parameters'],
    ['a tool of another type', chat({ tools: [{ type: 'code_interpreter' }] }), 'tools[0].type'],
    ['tool_choice naming no offered tool', chat({ tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'nope' } } }), 'tool_choice'],
    ['tool_choice without tools', chat({ tool_choice: 'required' }), 'tool_choice'],
    ['function_call naming no offered function', chat({ functions: [WEATHER.function], function_call: { name: 'nope' } }), 'function_call'],
    ['tools and functions both', chat({ tools: [WEATHER], functions: [WEATHER.function] }), 'functions'],
    ['a tool message without tool_call_id', chat({}, [...ASK, { role: 'tool', content: 'sunny' }]), 'messages[1].tool_call_id'],
    ['an assistant call whose arguments are not JSON', chat({}, [...ASK, { role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{' } }] }]),
      'messages[1].tool_calls[0].function.arguments'],
    ['a json_schema without a name', chat({ response_format: { type: 'json_schema', json_schema: { schema: {} } } }), 'response_format.json_schema.name'],
    ['a json_schema that is not JSON Schema', chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { required: 'a' } } } }), 'response_format.json_schema.schema'],
    ['a response_format of another type', chat({ response_format: { type: 'yaml' } }), 'response_format.type'],
  ])('400 for %s, param named, nothing sent upstream', async (_what, body, param) => {
    const before = calls();
    const r = await post(gw, body);
    expect([r.status, r.headers['x-tensorgate-error'], json(r).error]).toEqual([400, 'GW_ERR_DECODE_OPENAI_INVALID', { message: expect.any(String), type: 'invalid_request_error', param, code: null }]);
    expect(calls()).toBe(before);
  });
});

describe('a model without openai.models[].toolParser', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    const template = join(__dirname, '../../config/tiny_llm/tokenizer_config.json');
    gw = await gatewayFor(['--demo', '--openai-models', `[{id: plain, model: tiny_llm, convention: vllm, chatTemplate: ${JSON.stringify(template)}}]`]);
  });
  afterAll(async () => {
    await gw?.close();
  });

  test('refuses tools (and functions) with a 400 naming the key; nothing sent upstream; without tools it serves', async () => {
    const before = gw.demoBackend!.stats.streamCalls;
    for (const [extra, param] of [[{ tools: [WEATHER] }, 'tools'], [{ functions: [WEATHER.function] }, 'functions']] as const) {
      const r = await post(gw, { model: 'plain', messages: ASK, ...extra });
      expect([r.status, json(r).error.param, json(r).error.code]).toEqual([400, param, 'unsupported_value']);
      expect(json(r).error.message).toContain('openai.models[].toolParser');
    }
    expect(gw.demoBackend!.stats.streamCalls).toBe(before);
    expect((await post(gw, { model: 'plain', messages: ASK, max_tokens: 1 })).status).toBe(200);
  });
});
