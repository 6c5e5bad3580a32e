// The OpenAI-compatible API in front of real Triton, driven by clients we did not write: the
// official `openai` Python SDK (openai_sdk_check.py, in a venv of its own: test/openai/
// requirements.txt) and the official `openai` npm SDK (openai_sdk_check.mjs, run by Node as a
// program of its own), each made with base URL and API key only; and curl -N. Both SDKs run the
// same cases and are held to the same expectations, computed here from the zoo models' deterministic
// generator (test/triton/zoo.py: token i of a prompt of p words is VOCAB[(p + i) % 16], each preceded
// by a space; stop strings cut the text; an image makes the first token `[image:<bytes>:<sha8>]`;
// tiny_embed's vector is sha256(text)[0..8] as (byte - 128) / 128). Cases: models list and
// retrieve; completions and chat, streamed and not, on the vLLM convention (tiny_llm) and
// TensorRT-LLM's (tiny_llm_trtllm); stop sequences and max_tokens; an image content part;
// embeddings as floats, as base64 and the SDK's default; errors (unknown model 404, bad parameter
// 400) as the SDKs' own exception classes; stream_options.include_usage; a client that leaves
// mid-stream, seen on the wire to Triton as RST_STREAM CANCEL (a TCP proxy in front of Triton's
// gRPC port); and Bearer API keys (a wrong one: AuthenticationError).
import { run } from '../support/run';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { FaultProxy, FRAME } from '../support/fault-proxy';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';
import { tritonVenv } from '../support/triton';
import { waitUntil } from '../support/wait';
import { openaiConfig } from './openai-config';
import { CURL, needs } from '../support/tools';
import { curl } from '../support/curl';

jest.setTimeout(300_000);

const ROOT = join(__dirname, '..', '..');
const PREFIX = '/openai/v1';
const LLMS = ['tiny_llm', 'tiny_llm_trtllm'] as const;
const SDKS = ['python', 'node'] as const;
type Sdk = (typeof SDKS)[number];

// ---- the zoo's generator (test/triton/zoo.py), written again from its description ----------------
const VOCAB = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa', 'lambda', 'mu', 'nu', 'xi', 'omicron', 'pi'];
const words = (text: string): number => text.split(/[ \t\n\r\f\v]+/).filter((w) => w !== '').length;

interface Generated {
  /** The whole text, cut at a stop string. */
  readonly text: string;
  /** What each streamed response adds (the last one may be '' or a token's part before a stop). */
  readonly deltas: string[];
  readonly finish: 'stop' | 'length';
  readonly completionTokens: number;
}

function generate(promptTokens: number, maxTokens: number, stop: readonly string[] = [], firstToken?: string): Generated {
  const deltas: string[] = [];
  let text = '';
  for (let i = 0; i < maxTokens; i++) {
    const token = ` ${i === 0 && firstToken !== undefined ? firstToken : VOCAB[(promptTokens + i) % 16]!}`;
    const whole = text + token;
    const cuts = stop.map((s) => whole.indexOf(s)).filter((at) => at >= 0);
    if (cuts.length > 0) {
      const at = Math.min(...cuts);
      deltas.push(whole.slice(text.length, Math.max(at, text.length)));
      return { text: whole.slice(0, at), deltas, finish: 'stop', completionTokens: i + 1 };
    }
    deltas.push(token);
    text = whole;
  }
  return { text, deltas, finish: 'length', completionTokens: maxTokens };
}

function embedding(text: string): number[] {
  return [...createHash('sha256').update(text, 'utf8').digest().subarray(0, 8)].map((b) => (b - 128) / 128);
}

const IMAGE = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 37 + 11) & 0xff))]);
const IMAGE_TOKEN = `[image:${IMAGE.length}:${createHash('sha256').update(IMAGE).digest('hex').slice(0, 8)}]`;
const KEY = 'sk-tensorgate-openai-0123456789abcdef';
const LIMITED_KEY = 'sk-tensorgate-embed-only-0123456789abcdef';
/** A prompt with `slowly`: a token every 50 ms after the first, a stream a client can leave. */
const SLOW_PROMPT = 'count to two hundred slowly';

// ---- running the drivers ------------------------------------------------------------------------
/** A value as JSON.parse gives it (expect() checks its shape). */
type Json = ReturnType<typeof JSON.parse>;
interface Failure {
  readonly class: string;
  readonly status?: number;
  readonly code?: string | null;
  readonly param?: string | null;
  readonly type?: string | null;
  readonly message: string;
  readonly body?: unknown;
}
interface Line { readonly case: string; readonly ok: boolean; readonly value?: Json; readonly error?: Failure }

async function driver(sdk: Sdk, args: readonly string[]): Promise<Map<string, Line>> {
  const [file, script] = sdk === 'python'
    ? [join(tritonVenv('test/openai/requirements.txt'), 'bin', 'python'), join(__dirname, 'openai_sdk_check.py')]
    : [process.execPath, join(__dirname, 'openai_sdk_check.mjs')];
  const r = await run(file, [script, ...args], { timeoutMs: 240_000, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' } });
  if (r.code !== 0) throw new Error(`${sdk} SDK driver exited with ${r.code}\n${r.stderr.slice(0, 20_000)}`);
  return new Map(r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Line).map((l) => [l.case, l]));
}

/** The value of a case that must have succeeded (its failure shown in full otherwise). */
function ok(lines: Map<string, Line>, name: string): Json {
  const l = lines.get(name);
  expect([name, l?.ok, l?.error]).toEqual([name, true, undefined]);
  return l!.value;
}

/** How a case must fail: the SDK's exception class and status, and the error's type, code and param where given. */
interface Refusal { readonly class: string; readonly status: number; readonly type?: string; readonly code?: string; readonly param?: string }

/**
 * Each case's failure as far as `want` says, side by side with `want` (so one wrong case does not
 * hide the others), and whether its body was OpenAI's error shape: {"error": {"message", "type",
 * "param", "code"}}, of which the SDKs hand over the inner object.
 */
function expectRefused(lines: Map<string, Line>, want: Record<string, Refusal>): void {
  const got = Object.entries(want).map(([name, w]) => {
    const e = lines.get(name)?.error;
    const body = e?.body as Record<string, unknown> | undefined;
    const shaped = typeof body === 'object' && body !== null && typeof body.message === 'string' && typeof body.type === 'string' && 'param' in body && 'code' in body;
    const seen: Record<string, unknown> = { case: name, class: e?.class ?? 'no error', status: e?.status, openaiShape: shaped };
    for (const k of ['type', 'code', 'param'] as const) if (w[k] !== undefined) seen[k] = e?.[k];
    return seen;
  });
  expect(got).toEqual(Object.entries(want).map(([name, w]) => ({ case: name, ...w, openaiShape: true })));
}

interface Choice { index: number; text?: string; delta?: { role?: string; content?: string | null }; finish_reason: string | null }
interface Chunk { id: string; object: string; model: string; choices: Choice[]; usage?: Usage | null }
interface Usage { prompt_tokens: number; completion_tokens: number; total_tokens: number }

const usage = (prompt: number, completion: number): Usage => ({ prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion });
/** The text pieces of a stream's chunks, in order (completions: text; chat: delta.content). */
const pieces = (chunks: Chunk[]): string[] => chunks.flatMap((c) => c.choices.map((ch) => ch.text ?? ch.delta?.content ?? '')).filter((t) => t !== '');
const finishes = (chunks: Chunk[]): (string | null)[] => chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason));

/** A stream as OpenAI writes one: one id and object throughout, the finish reason on the last choice only. */
function expectStream(chunks: Chunk[], object: string, model: string, g: Generated, withUsage?: Usage): void {
  expect(chunks.length).toBeGreaterThanOrEqual(2);
  expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  expect(chunks.every((c) => c.object === object && c.model === model)).toBe(true);
  expect(pieces(chunks)).toEqual(g.deltas.filter((d) => d !== ''));
  const reasons = finishes(chunks);
  expect(reasons.slice(0, -1).every((r) => r === null)).toBe(true);
  expect(reasons.at(-1)).toBe(g.finish);
  if (withUsage === undefined) {
    expect(chunks.every((c) => c.usage === undefined || c.usage === null)).toBe(true);
  } else {
    // stream_options.include_usage: one more chunk, with usage and no choices; none before it has usage.
    expect([chunks.at(-1)!.choices, chunks.at(-1)!.usage]).toEqual([[], withUsage]);
    expect(chunks.slice(0, -1).every((c) => c.usage === undefined || c.usage === null)).toBe(true);
  }
}

// ---- the gateway in front of Triton, through a proxy that shows the gRPC frames ------------------
let work: string;
let proxy: FaultProxy;
let gw: RunningGateway;
let base: string;
const results = new Map<Sdk, Map<string, Line>>();

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'tg-openai-'));
  writeFileSync(join(work, 'image.png'), IMAGE);
  writeFileSync(join(work, 'openai.yaml'), openaiConfig(ROOT));
  proxy = await FaultProxy.start({ port: Number(process.env.TRITON_GRPC!.split(':')[1]) });
  // No health checks once ready: the streams the proxy sees after that are the requests'.
  gw = await gatewayFor(['--config', join(work, 'openai.yaml'), '--backend', proxy.address, '--health-check-interval-ms', '600000']);
  base = `${gw.url}${PREFIX}`;
  const [py, node] = await Promise.all(SDKS.map((sdk) => driver(sdk, [base, 'unused', 'main', join(work, 'image.png')])));
  results.set('python', py!).set('node', node!);
});
afterAll(async () => {
  await gw?.close(2000);
  await proxy?.close();
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe.each(SDKS)('the official openai %s SDK', (sdk) => {
  const r = (): Map<string, Line> => results.get(sdk)!;

  test('models: list and retrieve; an unknown one is NotFoundError (404, model_not_found)', () => {
    const list = ok(r(), 'models.list') as { id: string; object: string; created: number; owned_by: string }[];
    expect(list.map((m) => m.id)).toEqual(expect.arrayContaining(['tiny_llm', 'tiny_llm_trtllm', 'tiny_embed']));
    for (const m of list) expect(m).toEqual({ id: m.id, object: 'model', created: expect.any(Number), owned_by: expect.any(String) });
    expect(ok(r(), 'models.retrieve')).toEqual({ id: 'tiny_llm', object: 'model', created: expect.any(Number), owned_by: expect.any(String) });
    expectRefused(r(), { 'models.retrieve unknown': { class: 'NotFoundError', status: 404, type: 'invalid_request_error', code: 'model_not_found' } });
    expect(r().get('models.retrieve unknown')!.error!.message).toContain('no_such_model');
  });

  describe.each(LLMS)('%s', (model) => {
    test('completion: max_tokens reached, finish_reason length, usage', () => {
      const c = ok(r(), `${model} completion`);
      const g = generate(3, 5);
      expect(c).toEqual({ id: expect.any(String), object: 'text_completion', created: expect.any(Number), model,
        choices: [{ index: 0, text: g.text, finish_reason: 'length', logprobs: null }], usage: usage(3, 5),
        ...(c.system_fingerprint === undefined ? {} : { system_fingerprint: c.system_fingerprint }) });
      expect(g.text).toBe(' delta epsilon zeta eta theta');
    });

    test('completion streamed: a chunk per token, [DONE]; with include_usage a last chunk of usage', () => {
      expectStream(ok(r(), `${model} completion stream`), 'text_completion', model, generate(3, 5));
      expectStream(ok(r(), `${model} completion stream usage`), 'text_completion', model, generate(3, 5), usage(3, 5));
    });

    test('stop sequence: the text cut before it, finish_reason stop, streamed and not', () => {
      const g = generate(1, 10, ['delta']);
      expect([g.text, g.completionTokens]).toEqual([' beta gamma ', 3]);
      const c = ok(r(), `${model} completion stop`);
      expect(c.choices).toEqual([{ index: 0, text: g.text, finish_reason: 'stop', logprobs: null }]);
      expect(c.usage).toEqual(usage(1, 3));
      expectStream(ok(r(), `${model} completion stop stream`), 'text_completion', model, g);
    });

    test('chat: the model\'s chat template, max_tokens, streamed (role first) and not, stop', () => {
      const c = ok(r(), `${model} chat`);
      // The prompt is the chat template's rendering: its size is what the model counted.
      const p = c.usage.prompt_tokens as number;
      expect(p).toBeGreaterThanOrEqual(6);
      const g = generate(p, 4);
      expect(c).toEqual({ id: expect.any(String), object: 'chat.completion', created: expect.any(Number), model,
        choices: [{ index: 0, message: expect.objectContaining({ role: 'assistant', content: g.text }), finish_reason: 'length', logprobs: null }],
        usage: usage(p, 4), ...(c.system_fingerprint === undefined ? {} : { system_fingerprint: c.system_fingerprint }) });
      const stream = ok(r(), `${model} chat stream`) as Chunk[];
      expectStream(stream, 'chat.completion.chunk', model, g);
      expect(stream[0]!.choices[0]!.delta!.role).toBe('assistant');
      expectStream(ok(r(), `${model} chat stream usage`), 'chat.completion.chunk', model, g, usage(p, 4));
      const stopped = ok(r(), `${model} chat stop`);
      const s = generate(p, 16, ['delta']);
      expect([stopped.choices[0].message.content, stopped.choices[0].finish_reason, stopped.usage]).toEqual([s.text, 'stop', usage(p, s.completionTokens)]);
    });
  });

  test('completion echo: the prompt, then the text', () => {
    const c = ok(r(), 'tiny_llm completion echo');
    expect([c.choices[0].text, c.usage]).toEqual([`one two three${generate(3, 2).text}`, usage(3, 2)]);
  });

  test('an image_url content part (base64 data: URL) reaches the model\'s image input; refused (400) by a model without one', () => {
    const c = ok(r(), 'tiny_llm chat image');
    const p = c.usage.prompt_tokens as number;
    const g = generate(p, 3, [], IMAGE_TOKEN);
    expect([c.choices[0].message.content, c.choices[0].finish_reason, c.usage]).toEqual([g.text, 'length', usage(p, 3)]);
    expect(g.text.startsWith(` ${IMAGE_TOKEN} `)).toBe(true);
    expectStream(ok(r(), 'tiny_llm chat image stream'), 'chat.completion.chunk', 'tiny_llm', g);
    expectRefused(r(), { 'tiny_llm_trtllm chat image': { class: 'BadRequestError', status: 400, type: 'invalid_request_error' } });
  });

  test('embeddings: floats, base64 (little-endian float32, the bytes exact) and the SDK\'s default (base64, decoded by it)', () => {
    const v = embedding('hello world');
    const expected = { object: 'list', model: 'tiny_embed', data: [{ object: 'embedding', index: 0, embedding: v }], usage: { prompt_tokens: 2, total_tokens: 2 } };
    expect(ok(r(), 'embed float')).toEqual(expected);
    expect(ok(r(), 'embed default')).toEqual(expected);
    const b = ok(r(), 'embed base64');
    expect(b).toEqual({ ...expected, data: [{ object: 'embedding', index: 0, embedding: expect.any(String) }] });
    expect(Buffer.from(b.data[0].embedding as string, 'base64')).toEqual(Buffer.from(new Float32Array(v).buffer));
    expect(ok(r(), 'embed list')).toEqual({ ...expected,
      data: [{ object: 'embedding', index: 0, embedding: v }, { object: 'embedding', index: 1, embedding: embedding('a b c') }],
      usage: { prompt_tokens: 5, total_tokens: 5 } });
  });

  test('errors: unknown model NotFoundError (404) on every route; logprobs on the trtllm convention, max_tokens -1 BadRequestError (400) naming the parameter', () => {
    const unknown: Refusal = { class: 'NotFoundError', status: 404, type: 'invalid_request_error', code: 'model_not_found' };
    const bad = (param: string): Refusal => ({ class: 'BadRequestError', status: 400, type: 'invalid_request_error', param });
    expectRefused(r(), {
      'completion unknown model': unknown, 'chat unknown model': unknown, 'embed unknown model': unknown,
      'chat logprobs': bad('logprobs'), 'completion max_tokens=-1': bad('max_tokens'),
    });
  });

  test('n=2: two generations, choices indexed 0 and 1, usage summed', () => {
    const c = ok(r(), 'completion n=2');
    expect((c.choices as Choice[]).map((ch) => [ch.index, ch.text, ch.finish_reason])).toEqual([[0, generate(1, 2).text, 'length'], [1, generate(1, 2).text, 'length']]);
    expect(c.usage).toEqual(usage(1, 4));
    const chat = ok(r(), 'chat n=2');
    expect((chat.choices as Choice[]).map((ch) => ch.index)).toEqual([0, 1]);
    expect(chat.usage.completion_tokens).toBe(4);
  });
});

describe('a client that leaves mid-stream: the upstream stream cancelled', () => {
  test.each(SDKS.flatMap((sdk) => LLMS.map((model) => [sdk, model] as const)))('%s SDK, %s: three chunks, then the connection closed: RST_STREAM CANCEL to Triton', async (sdk, model) => {
    const from = proxy.frames.length;
    const lines = await driver(sdk, [base, 'unused', `abort:${model}`]);
    const got = ok(lines, `${model} abort`) as { chunks: Chunk[]; ms: number[] };
    expect(pieces(got.chunks)).toEqual(generate(words(SLOW_PROMPT), 3).deltas);
    const frames = () => proxy.frames.slice(from);
    // The streams the gateway opened for this request (a late reset of an earlier request's stream is not this test's).
    const opened = (): Set<string> => new Set(frames().filter((f) => f.type === FRAME.HEADERS && f.direction === 'up').map((f) => `${f.conn}:${f.streamId}`));
    const resets = () => frames().filter((f) => f.type === FRAME.RST_STREAM && opened().has(`${f.conn}:${f.streamId}`));
    await waitUntil(() => resets().some((f) => f.direction === 'up'), 'a RST_STREAM to Triton', 10_000);
    const reset = resets();
    // The gateway reset one stream with CANCEL (RFC 9113 §7, 0x8); Triton never ended it.
    expect(reset.map((f) => [f.direction, f.errorCode])).toEqual([['up', 0x8]]);
    const stream = (f: { conn: number; streamId: number }): boolean => f.conn === reset[0]!.conn && f.streamId === reset[0]!.streamId;
    expect(frames().some((f) => stream(f) && f.direction === 'down' && f.type === FRAME.HEADERS && (f.flags & 1) === 1)).toBe(false);
    const data = frames().filter((f) => stream(f) && f.direction === 'down' && f.type === FRAME.DATA);
    expect(data.length).toBeGreaterThanOrEqual(3);
    // Nothing more came down that stream after the reset (its 200 tokens would take 10 s), but for at
    // most one response that was already on its way.
    expect(data.filter((f) => f.at > reset[0]!.at).length).toBeLessThanOrEqual(1);
    // And the gateway and Triton serve the next request.
    const next = await send(`${base}/completions`, { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ model, prompt: 'one two three', max_tokens: 2 }) });
    expect([next.status, JSON.parse(next.body.toString()).choices[0].text]).toEqual([200, generate(3, 2).text]);
  });
});

describe('a request that finishes ends its upstream stream as gRPC does: no reset', () => {
  test.each(LLMS)('%s: 10 completions streamed and 10 not, each stream ended by Triton\'s trailers, none reset', async (model) => {
    const from = proxy.frames.length;
    for (let i = 0; i < 20; i++) {
      const r = await send(`${base}/completions`, { headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ model, prompt: 'one two three', max_tokens: 3, stream: i % 2 === 0 }) });
      expect(r.status).toBe(200);
    }
    // A reset would follow the answer within a millisecond or so; leave room for a late one to show.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const frames = proxy.frames.slice(from);
    // The streams opened for these requests (a health check's or an earlier stream's frames may
    // fall in the window too: they are not this test's).
    const key = (f: { conn: number; streamId: number }): string => `${f.conn}:${f.streamId}`;
    const opened = new Set(frames.filter((f) => f.type === FRAME.HEADERS && f.direction === 'up').map(key));
    expect(opened.size).toBeGreaterThanOrEqual(20);
    const ours = frames.filter((f) => opened.has(key(f)));
    // A RST_STREAM after the trailers is a frame on a closed stream (RFC 9113 §5.1); before them it
    // tells Triton that a request it has answered was cancelled.
    expect(ours.filter((f) => f.type === FRAME.RST_STREAM).map((f) => [f.direction, f.errorCode, f.streamId])).toEqual([]);
    const ended = new Set(ours.filter((f) => f.type === FRAME.HEADERS && f.direction === 'down' && (f.flags & 1) === 1).map(key));
    expect([...opened].filter((k) => !ended.has(k))).toEqual([]);
  });
});

needs(CURL()).describe('curl -N: a stream as the README shows it', () => {
  const sse = (body: string): { events: string[]; done: boolean } => {
    expect(body.endsWith('\n\n')).toBe(true);
    const events = body.split('\n\n').filter((e) => e !== '');
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
    return { events: events.map((e) => e.slice(6)).filter((e) => e !== '[DONE]'), done: events.at(-1) === 'data: [DONE]' };
  };

  test.each([
    ['completions, HTTP/1.1', '--http1.1', 'completions', { prompt: 'one two three', max_tokens: 5 }],
    ['chat, HTTP/1.1', '--http1.1', 'chat/completions', { messages: [{ role: 'user', content: 'one two three' }], max_tokens: 5 }],
    ['completions, h2c', '--http2-prior-knowledge', 'completions', { prompt: 'one two three', max_tokens: 5 }],
    ['chat, h2c', '--http2-prior-knowledge', 'chat/completions', { messages: [{ role: 'user', content: 'one two three' }], max_tokens: 5 }],
  ] as const)('%s', async (_name, flag, route, body) => {
    const request = { model: 'tiny_llm', ...body };
    const r = await curl('-N', flag, '-H', 'Content-Type: application/json', '-d', JSON.stringify({ ...request, stream: true }), `${base}/${route}`);
    expect([r.exit, r.stderr]).toEqual([0, '']);
    expect([r.status, r.type.startsWith('text/event-stream')]).toEqual([200, true]);
    const { events, done } = sse(r.body.toString('utf8'));
    expect(done).toBe(true);
    // The same request not streamed says how many tokens the prompt (a chat: its template's rendering) was.
    const whole = await send(`${base}/${route}`, { headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(request) });
    expect(whole.status).toBe(200);
    const p = JSON.parse(whole.body.toString()).usage.prompt_tokens as number;
    expectStream(events.map((e) => JSON.parse(e) as Chunk), route === 'completions' ? 'text_completion' : 'chat.completion.chunk', 'tiny_llm', generate(p, 5));
  });
});

describe('Bearer API keys (auth.keysFile): the SDKs\' Authorization header', () => {
  let authed: RunningGateway;
  beforeAll(async () => {
    const keys = join(work, 'keys.yaml');
    const digest = (token: string): string => `sha256:${createHash('sha256').update(token).digest('hex')}`;
    writeFileSync(keys, ['keys:', `  - { id: sdk, token: "${digest(KEY)}", groups: "*" }`,
      `  - { id: embed-only, token: "${digest(LIMITED_KEY)}", groups: "*", models: [tiny_embed] }`, ''].join('\n'));
    authed = await gatewayFor(['--config', join(work, 'openai.yaml'), '--backend', process.env.TRITON_GRPC!, '--auth', '--auth-keys-file', keys]);
  });
  afterAll(async () => {
    await authed?.close(2000);
  });

  test.each(SDKS)('%s SDK: its key is served; a wrong key is AuthenticationError (401); a key for other models PermissionDeniedError (403)', async (sdk) => {
    const lines = await driver(sdk, [`${authed.url}${PREFIX}`, KEY, 'auth', `${KEY}x`, LIMITED_KEY]);
    expect(ok(lines, 'auth models.list')).toEqual(expect.arrayContaining(['tiny_llm', 'tiny_llm_trtllm', 'tiny_embed']));
    expect(ok(lines, 'auth completion').choices[0].text).toBe(generate(3, 2).text);
    expect(ok(lines, 'auth limited key embed').data[0].embedding).toEqual(embedding('hello world'));
    expectRefused(lines, {
      'auth wrong key models.list': { class: 'AuthenticationError', status: 401 },
      'auth wrong key completion': { class: 'AuthenticationError', status: 401 },
      'auth limited key completion': { class: 'PermissionDeniedError', status: 403 },
    });
  });
});

describe('openai.prefix /v1 (the path of clients that cannot add one): the SDKs there, and V1\'s status route beside', () => {
  let v1: RunningGateway;
  beforeAll(async () => {
    v1 = await gatewayFor(['--config', join(work, 'openai.yaml'), '--backend', process.env.TRITON_GRPC!, '--openai-prefix', '/v1']);
  });
  afterAll(async () => {
    await v1?.close(2000);
  });

  test.each(SDKS)('%s SDK with base URL …/v1: models, a model, a completion', async (sdk) => {
    const lines = await driver(sdk, [`${v1.url}/v1`, 'unused', 'basic']);
    expect(ok(lines, 'basic models.list')).toEqual(expect.arrayContaining(['tiny_llm', 'tiny_llm_trtllm', 'tiny_embed']));
    expect(ok(lines, 'basic models.retrieve')).toEqual({ id: 'tiny_llm', object: 'model', created: expect.any(Number), owned_by: expect.any(String) });
    expect(ok(lines, 'basic completion').choices[0].text).toBe(generate(3, 2).text);
  });

  test('GET /v1/models/simple (not an OpenAI id) is still V1\'s model status', async () => {
    const r = await send(`${v1.url}/v1/models/simple`);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body.toString())).toEqual({ model_version_status: [{ version: '1', state: 'AVAILABLE', status: { error_code: 'OK', error_message: '' } }] });
  });
});
