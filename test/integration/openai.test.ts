// The OpenAI-compatible API (docs/openai.md) against the reference backend's zoo models: models,
// completions and chat (streamed with curl -N, and not), stop strings and max_tokens, an image
// content part, embeddings as floats and base64, OpenAI's error object for each refusal with
// nothing sent upstream, a client that leaves mid-stream cancelling the model, Bearer keys and
// keys limited to some models, the /v1 prefix beside V1's status route, and the token metrics.
// The official SDKs against real Triton: test/conformance/openai-sdk.test.ts.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { curl } from '../support/curl';
import { gatewayFor, gatewayForSuite } from '../support/gateway';
import { send } from '../support/http';
import { prometheusSamples } from '../support/prometheus';
import { RecordTap } from '../support/records';
import { nextEvent } from '../support/wait';
import { CURL, needs } from '../support/tools';

const VOCAB = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa', 'lambda', 'mu', 'nu', 'xi', 'omicron', 'pi'];
/** The zoo's generation: `n` tokens after a prompt of `promptTokens` words (docs/openai.md "The demo models"). */
const tokens = (promptTokens: number, n: number): string[] => Array.from({ length: n }, (_, i) => ` ${VOCAB[(promptTokens + i) % 16]}`);
const JSON_HEADERS = { 'Content-Type': 'application/json' };

/** The JSON of each `data:` event of an SSE body, and whether it ended with [DONE]. */
function events(body: string): { chunks: Record<string, unknown>[]; done: boolean } {
  const data = body.split('\n\n').filter((e) => e !== '').map((e) => {
    expect(e.startsWith('data: ')).toBe(true);
    return e.slice(6);
  });
  const done = data.at(-1) === '[DONE]';
  return { chunks: (done ? data.slice(0, -1) : data).map((d) => JSON.parse(d) as Record<string, unknown>), done };
}

const post = (gw: RunningGateway, path: string, body: unknown, headers: Record<string, string> = {}) =>
  send(`${gw.url}/openai/v1${path}`, { body: JSON.stringify(body), headers: { ...JSON_HEADERS, ...headers } });
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are read field by field
const json = (r: { body: Buffer }): any => JSON.parse(r.body.toString());

describe('the OpenAI API on the demo zoo', () => {
  const tap = new RecordTap();
  const gw = gatewayForSuite(['--demo'], tap);
  const base = (): string => `${gw.url}/openai/v1`;

  test('GET models lists the demo\'s three, GET models/{id} one, an unknown id is model_not_found', async () => {
    const list = json(await send(`${base()}/models`));
    expect(list.object).toBe('list');
    expect((list.data as { id: string }[]).map((m) => m.id)).toEqual(['tiny_llm', 'tiny_llm_trtllm', 'tiny_embed']);
    expect(list.data[0]).toEqual({ id: 'tiny_llm', object: 'model', created: expect.any(Number), owned_by: 'tensorgate' });
    expect(json(await send(`${base()}/models/tiny_embed`)).id).toBe('tiny_embed');
    const r = await send(`${base()}/models/nope`);
    expect(r.status).toBe(404);
    expect(r.headers['x-tensorgate-error']).toBe('GW_ERR_MODEL_OPENAI_UNKNOWN');
    expect(json(r)).toEqual({ error: { message: "The model 'nope' does not exist or you do not have access to it.", type: 'invalid_request_error', param: 'model', code: 'model_not_found' } });
  });

  test.each(['tiny_llm', 'tiny_llm_trtllm'])('completions on %s: max_tokens, stop, usage', async (model) => {
    const r = json(await post(gw, '/completions', { model, prompt: 'one two three', max_tokens: 5 }));
    expect(r).toEqual({
      id: expect.stringMatching(/^cmpl-/), object: 'text_completion', created: expect.any(Number), model,
      choices: [{ index: 0, text: tokens(3, 5).join(''), logprobs: null, finish_reason: 'length' }],
      usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 },
    });
    // stop: the text ends before the stop string; the model's token count includes the one that completed it
    const s = json(await post(gw, '/completions', { model, prompt: 'one two three', max_tokens: 10, stop: ['zeta', 'nu'] }));
    expect(s.choices[0]).toMatchObject({ text: ' delta epsilon ', finish_reason: 'stop' });
    expect(s.usage.completion_tokens).toBe(3);
  });

  needs(CURL()).test('completions streamed (curl -N): a chunk per token, the finish reason, the usage chunk, [DONE]', async () => {
    const r = await curl('-N', '-H', 'Content-Type: application/json', '--data-binary',
      JSON.stringify({ model: 'tiny_llm', prompt: 'a b', max_tokens: 3, stream: true, stream_options: { include_usage: true } }), `${base()}/completions`);
    expect(r.exit).toBe(0);
    const { chunks, done } = events(r.body.toString());
    expect(done).toBe(true);
    expect(chunks.map((c) => (c.choices as { text: string }[])[0]?.text)).toEqual([...tokens(2, 3), '', undefined]);
    expect(chunks.map((c) => (c.choices as { finish_reason: string | null }[])[0]?.finish_reason)).toEqual([null, null, null, 'length', undefined]);
    expect(chunks.at(-1)).toMatchObject({ object: 'text_completion', choices: [], usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 } });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  test('chat with the model\'s template: the answer, streamed and not', async () => {
    const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Say something' }];
    const r = json(await post(gw, '/chat/completions', { model: 'tiny_llm', messages, max_completion_tokens: 4 }));
    // <s><|system|>\nBe brief.\n<|user|>\nSay something\n<|assistant|>\n: seven words
    expect(r.usage).toEqual({ prompt_tokens: 7, completion_tokens: 4, total_tokens: 11 });
    expect(r.choices).toEqual([{ index: 0, message: { role: 'assistant', content: tokens(7, 4).join(''), refusal: null }, logprobs: null, finish_reason: 'length' }]);
    expect(r.object).toBe('chat.completion');
    const s = await post(gw, '/chat/completions', { model: 'tiny_llm', messages, max_tokens: 2, stream: true });
    expect(s.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    const { chunks, done } = events(s.body.toString());
    expect(done).toBe(true);
    expect(chunks.map((c) => (c.choices as { delta: unknown }[])[0]!.delta)).toEqual([
      { role: 'assistant', content: tokens(7, 2)[0] }, { content: tokens(7, 2)[1] }, {},
    ]);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && !('usage' in c))).toBe(true);
  });

  test('an image content part reaches the model\'s image input as its bytes', async () => {
    const image = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7) % 256));
    const sha8 = createHash('sha256').update(image).digest('hex').slice(0, 8);
    const r = json(await post(gw, '/chat/completions', {
      model: 'tiny_llm', max_tokens: 2,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${image.toString('base64')}` } }] }],
    }));
    // <s><|user|>\nWhat is this? <image>\n<|assistant|>\n: six words; the image token replaces the first
    expect(r.choices[0].message.content).toBe(` [image:3000:${sha8}]${tokens(6, 2)[1]}`);
  });

  test('a large image is decoded while the body arrives; a data: URL in a text part stays text', async () => {
    const image = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 13 + (i >> 9)) % 256));
    const sha8 = createHash('sha256').update(image).digest('hex').slice(0, 8);
    const url = `data:image/jpeg;base64,${image.toString('base64')}`;
    const r = json(await post(gw, '/chat/completions', {
      model: 'tiny_llm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }],
    }));
    expect(r.choices[0].message.content).toBe(` [image:300000:${sha8}]`);
    // The same URL as text: the model sees it whole (its words counted), no image.
    const t = json(await post(gw, '/chat/completions', { model: 'tiny_llm', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'text', text: url }] }] }));
    expect(t.usage.prompt_tokens).toBe(3);
    expect(t.choices[0].message.content).toBe(tokens(3, 1)[0]);
  });

  test('embeddings as floats and as base64 of the same float32 bytes', async () => {
    const expected = (text: string): number[] => [...createHash('sha256').update(text).digest().subarray(0, 8)].map((b) => (b - 128) / 128);
    const f = json(await post(gw, '/embeddings', { model: 'tiny_embed', input: ['hello', 'world'] }));
    expect(f).toEqual({
      object: 'list', model: 'tiny_embed',
      data: [{ object: 'embedding', index: 0, embedding: expected('hello') }, { object: 'embedding', index: 1, embedding: expected('world') }],
      usage: { prompt_tokens: 2, total_tokens: 2 },
    });
    const b = json(await post(gw, '/embeddings', { model: 'tiny_embed', input: 'hello', encoding_format: 'base64' }));
    const bytes = Buffer.from(b.data[0].embedding as string, 'base64');
    expect(Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4))).toEqual(expected('hello'));
  });

  test.each([
    ['n over 16 (each choice is a generation of its own)', '/completions', { model: 'tiny_llm', prompt: 'x', n: 17 }, 'n', null],
    ['an unknown argument', '/completions', { model: 'tiny_llm', prompt: 'x', best: 1 }, 'best', null],
    ['a temperature out of range', '/chat/completions', { model: 'tiny_llm', messages: [{ role: 'user', content: 'x' }], temperature: 3 }, 'temperature', null],
    ['logprobs on the trtllm convention', '/chat/completions', { model: 'tiny_llm_trtllm', messages: [{ role: 'user', content: 'x' }], logprobs: true }, 'logprobs', 'unsupported_value'],
    ['an image by http URL', '/chat/completions', { model: 'tiny_llm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://169.254.169.254/x.png' } }] }] },
      'messages[0].content[0].image_url.url', 'invalid_image_url'],
    ['stream_options without stream', '/completions', { model: 'tiny_llm', prompt: 'x', stream_options: { include_usage: true } }, 'stream_options', null],
    ['token ids as the prompt', '/completions', { model: 'tiny_llm', prompt: [1, 2, 3] }, 'prompt', null],
  ])('400 GW_ERR_DECODE_OPENAI_INVALID for %s, in OpenAI\'s error shape; nothing sent upstream', async (_what, path, body, param, code) => {
    const calls = gw.demoBackend!.stats.streamCalls;
    const r = await post(gw, path, body);
    expect(r.status).toBe(400);
    expect(r.headers['x-tensorgate-error']).toBe('GW_ERR_DECODE_OPENAI_INVALID');
    expect(json(r).error).toEqual({ message: expect.any(String), type: 'invalid_request_error', param, code });
    expect(gw.demoBackend!.stats.streamCalls).toBe(calls);
  });

  test.each([
    ['/chat/completions', { model: 'tiny_embed', messages: [{ role: 'user', content: 'x' }] },
      "The model 'tiny_embed' is an embedding model and thus not supported in the chat completions endpoint. Did you mean to use the embeddings endpoint?", 'model_not_chat'],
    ['/completions', { model: 'tiny_embed', prompt: 'x' },
      "The model 'tiny_embed' is an embedding model and thus not supported in the completions endpoint. Did you mean to use the embeddings endpoint?", null],
    ['/embeddings', { model: 'tiny_llm', input: 'x' },
      "The model 'tiny_llm' is a text generation model and thus not supported in the embeddings endpoint. Did you mean to use the completions or chat completions endpoint?", null],
  ])('a listed model sent to %s, which serves the other kind: 400 saying which endpoint serves it; nothing sent upstream', async (path, body, message, code) => {
    const calls = gw.demoBackend!.stats.streamCalls;
    const r = await post(gw, path, body);
    expect({ status: r.status, error: r.headers['x-tensorgate-error'], body: json(r) })
      .toEqual({ status: 400, error: 'GW_ERR_DECODE_OPENAI_INVALID', body: { error: { message, type: 'invalid_request_error', param: 'model', code } } });
    expect(gw.demoBackend!.stats.streamCalls).toBe(calls);
  });

  test('a client that leaves mid-stream cancels the model', async () => {
    const before = gw.demoBackend!.stats.streamCancellations;
    const cancelled = nextEvent(gw.demoBackend!.events, 'stream-cancelled');
    const got: string[] = [];
    const req = request(`${base()}/completions`, { method: 'POST', headers: JSON_HEADERS }, (res) => {
      res.on('data', (c: Buffer) => {
        got.push(c.toString());
        if (got.length === 2) req.destroy();
      });
      res.on('error', () => { /* closed by us */ });
    });
    req.on('error', () => { /* closed by us */ });
    req.end(JSON.stringify({ model: 'tiny_llm', prompt: 'go slowly', max_tokens: 1000, stream: true }));
    await cancelled;
    expect(gw.demoBackend!.stats.streamCancellations).toBe(before + 1);
  });

  test('time to first token, per output token and tokens in the metrics and the request record', async () => {
    const mark = tap.mark();
    await post(gw, '/completions', { model: 'tiny_llm', prompt: 'p', max_tokens: 4, stream: true });
    const rec = await tap.after(mark);
    expect(rec.route).toBe('openai_completions');
    expect(rec.outputTokens).toBe(4);
    expect(rec.firstTokenNs! > rec.startNs && rec.lastTokenNs! >= rec.firstTokenNs!).toBe(true);
    const samples = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
    expect(samples.get('tensorgate_openai_output_tokens_total{model="tiny_llm"}')).toBeGreaterThanOrEqual(4);
    expect(samples.get('tensorgate_openai_time_to_first_token_count{model="tiny_llm"}')).toBeGreaterThanOrEqual(1);
    expect(samples.get('tensorgate_openai_time_per_output_token_count{model="tiny_llm"}')).toBeGreaterThanOrEqual(1);
  });
});

describe('configuration: the /v1 prefix beside V1, keys, a model that does not fit', () => {
  let gw: RunningGateway;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tg-openai-'));
    const keys = join(dir, 'keys.yaml');
    writeFileSync(keys, ['keys:',
      '  - { id: all, token: all-secret-0123456789, groups: [inference, metadata, health] }',
      '  - { id: embed-only, token: embed-secret-0123456789, groups: [inference, metadata], models: [tiny_embed] }', ''].join('\n'));
    const template = join(dir, 'template.jinja');
    writeFileSync(template, '{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:');
    gw = await gatewayFor(['--demo', '--openai-prefix', '/v1', '--auth', '--auth-keys-file', keys, '--openai-models', JSON.stringify([
      { id: 'tiny_llm', convention: 'vllm', chatTemplate: template },
      { id: 'tiny_embed', kind: 'embedding' },
      { id: 'bad', model: 'simple', convention: 'vllm' },
      { id: 'trt_on_vllm', model: 'tiny_llm', convention: 'trtllm' },
    ])]);
  });
  afterAll(async () => {
    await gw.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const auth = (token: string): Record<string, string> => ({ Authorization: `Bearer ${token}` });

  test('under /v1, GET /v1/models/{id} is OpenAI\'s for its ids and V1\'s status for every other model', async () => {
    expect(json(await send(`${gw.url}/v1/models/tiny_llm`, { headers: auth('all-secret-0123456789') }))).toEqual({ id: 'tiny_llm', object: 'model', created: expect.any(Number), owned_by: 'tensorgate' });
    const v1 = await send(`${gw.url}/v1/models/simple`, { headers: auth('all-secret-0123456789') });
    expect(v1.status).toBe(200);
    expect(json(v1)).toHaveProperty('model_version_status');
  });

  test('the SDK\'s Bearer key: none is 401, a wrong one 401; a key limited to some models sees and calls only those', async () => {
    expect((await send(`${gw.url}/v1/models`)).status).toBe(401);
    const wrong = await send(`${gw.url}/v1/models`, { headers: auth('wrong') });
    expect(wrong.status).toBe(401);
    // The credentials' refusal in OpenAI's shape too (Route.errorShape), so the SDK's error has its type.
    expect(json(wrong).error).toEqual({ message: 'the credentials are not valid: unknown API key', type: 'authentication_error', param: null, code: null });
    expect((json(await send(`${gw.url}/v1/models`, { headers: auth('embed-secret-0123456789') })).data as { id: string }[]).map((m) => m.id)).toEqual(['tiny_embed']);
    const r = await send(`${gw.url}/v1/completions`, { body: JSON.stringify({ model: 'tiny_llm', prompt: 'x' }), headers: { ...JSON_HEADERS, ...auth('embed-secret-0123456789') } });
    expect(r.status).toBe(403);
    expect(r.headers['x-tensorgate-error']).toBe('GW_ERR_AUTH_FORBIDDEN');
    expect(json(r).error.type).toBe('permission_error');
    const e = await send(`${gw.url}/v1/embeddings`, { body: JSON.stringify({ model: 'tiny_embed', input: 'x' }), headers: { ...JSON_HEADERS, ...auth('embed-secret-0123456789') } });
    expect(e.status).toBe(200);
  });

  test('a chat template given as a .jinja file renders the prompt', async () => {
    const r = json(await send(`${gw.url}/v1/chat/completions`, {
      body: JSON.stringify({ model: 'tiny_llm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }), headers: { ...JSON_HEADERS, ...auth('all-secret-0123456789') },
    }));
    // "user: hi\nassistant:": three words
    expect(r.usage.prompt_tokens).toBe(3);
    expect(r.choices[0].message.content).toBe(tokens(3, 1)[0]);
  });

  test('500 GW_ERR_MODEL_OPENAI_UNFIT: the configured model lacks the convention\'s inputs; a model without a template refuses chat', async () => {
    const r = await send(`${gw.url}/v1/completions`, { body: JSON.stringify({ model: 'bad', prompt: 'x' }), headers: { ...JSON_HEADERS, ...auth('all-secret-0123456789') } });
    expect(r.status).toBe(500);
    expect(r.headers['x-tensorgate-error']).toBe('GW_ERR_MODEL_OPENAI_UNFIT');
    expect(json(r).error).toEqual({ message: "model 'simple' has no input 'text_input', which the vllm convention needs", type: 'server_error', param: null, code: null });
    const c = await send(`${gw.url}/v1/chat/completions`, { body: JSON.stringify({ model: 'bad', messages: [{ role: 'user', content: 'x' }] }), headers: { ...JSON_HEADERS, ...auth('all-secret-0123456789') } });
    expect(c.status).toBe(400);
    expect(json(c).error.code).toBe('model_not_chat');
  });

  test('a parameter the model has no input for is a 400 naming it; an input the convention needs and the model lacks a 500', async () => {
    const calls = gw.demoBackend!.stats.streamCalls;
    const r = await send(`${gw.url}/v1/completions`, { body: JSON.stringify({ model: 'trt_on_vllm', prompt: 'x', max_tokens: 3 }), headers: { ...JSON_HEADERS, ...auth('all-secret-0123456789') } });
    expect(r.status).toBe(400);
    expect(json(r).error).toEqual({ message: "The model does not take 'max_tokens' (it has no input 'max_tokens').", type: 'invalid_request_error', param: 'max_tokens', code: 'unsupported_parameter' });
    const u = await send(`${gw.url}/v1/completions`, { body: JSON.stringify({ model: 'trt_on_vllm', prompt: 'x' }), headers: { ...JSON_HEADERS, ...auth('all-secret-0123456789') } });
    expect(u.status).toBe(500);
    expect(json(u).error.message).toBe("model 'tiny_llm' has no input 'max_tokens', which the trtllm convention needs");
    expect(gw.demoBackend!.stats.streamCalls).toBe(calls);
  });
});

describe('openai.timeoutMs: a generation\'s whole call, not upstream.timeoutMs', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', '--upstream-timeout-ms', '300', '--openai-timeout-ms', '1500']);
  });
  afterAll(async () => {
    await gw.close();
  });
  // `slowly`: 50 ms before each token after the first.
  const slow = (maxTokens: number, stream: boolean): Promise<{ status: number; body: Buffer }> =>
    send(`${gw.url}/openai/v1/completions`, { body: JSON.stringify({ model: 'tiny_llm', prompt: 'go slowly', max_tokens: maxTokens, stream }), headers: JSON_HEADERS });

  test('a stream longer than upstream.timeoutMs runs to its end', async () => {
    const r = await slow(12, true); // about 550 ms
    const { chunks, done } = events(r.body.toString());
    expect(done).toBe(true);
    expect(chunks.at(-1)).toMatchObject({ choices: [{ finish_reason: 'length' }] });
  });

  test('past openai.timeoutMs: a stream ends with an error event, a whole answer is 504 GW_ERR_UPSTREAM_DEADLINE', async () => {
    const s = await slow(60, true); // about 3 s
    const last = s.body.toString().split('\n\n').filter((e) => e !== '').at(-1)!;
    expect(JSON.parse(last.slice('data: '.length))).toMatchObject({ error: { type: 'server_error' } });
    expect(s.body.toString()).not.toContain('[DONE]');
    const w = await slow(60, false);
    expect(w.status).toBe(504);
    expect(json(w).error.type).toBe('server_error');
  });
});
