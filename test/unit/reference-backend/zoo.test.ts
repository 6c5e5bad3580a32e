// The reference zoo's tiny LLMs and embedder, run directly (no server): the generation rule
// (generate() in gateway/reference-backend/zoo.ts: words, max tokens, stop strings, the image
// token), streaming and not, in the twins test/conformance/zoo-twins.test.ts compares with real Triton.
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { frameBytesElements, unframeBytesElements } from '../../../gateway/infer/bytes-element';
import { createZoo, generate, ModelError, type ModelSpec, newZooStats, type Tensor, type ZooEvents } from '../../../gateway/reference-backend/zoo';
import { int32 } from '../../support/int32';

const model = (name: string, stats = newZooStats(), events = new EventEmitter<ZooEvents>()): ModelSpec =>
  createZoo(stats, 0, events).find((m) => m.name === name)!;

const text = (...values: string[]): Tensor => ({ datatype: 'BYTES', shape: [values.length], data: frameBytesElements(values.map((v) => Buffer.from(v))) });
const bool = (v: boolean): Tensor => ({ datatype: 'BOOL', shape: [1], data: Buffer.from([v ? 1 : 0]) });
const i32 = (v: number): Tensor => ({ datatype: 'INT32', shape: [1], data: int32([v]) });

/** Every response of a decoupled model, its outputs read: BYTES as text, counts as numbers. */
async function run(m: ModelSpec, inputs: Record<string, Tensor>, signal = new AbortController().signal): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for await (const r of m.stream!(new Map(Object.entries(inputs)), { parameters: new Map(), signal })) {
    out.push(Object.fromEntries([...r].map(([k, t]) => [k, t.datatype === 'BYTES'
      ? (unframeBytesElements(t.data) as { elements: Buffer[] }).elements.map((e) => e.toString())
      : t.datatype === 'UINT32' ? t.data.readUInt32LE(0) : t.data.readInt32LE(0)])));
  }
  return out;
}
const texts = (rs: Record<string, unknown>[]): string[] => rs.map((r) => (r.text_output as string[])[0]!);

describe('the generation rule', () => {
  const steps = (prompt: string, max: number, stops: string[] = [], image = ''): [string, string | undefined][] =>
    [...generate(Buffer.from(prompt), max, stops.map((s) => Buffer.from(s)), Buffer.from(image))].map((s) => [s.delta.toString(), s.finish]);

  test('token i is VOCAB[(prompt words + i) % 16], each after one space; "length" on the last', () => {
    expect(steps('', 3)).toEqual([[' alpha', undefined], [' beta', undefined], [' gamma', 'length']]);
    expect(steps(' two\twords\n', 2)).toEqual([[' gamma', undefined], [' delta', 'length']]);
    // the vocabulary cycles: nothing but max tokens or a stop string ends a generation
    expect(steps('a b c d e f g h i j k l m n o', 3).map(([d]) => d)).toEqual([' pi', ' alpha', ' beta']);
  });

  test('words are split on ASCII whitespace only (a no-break space joins)', () => {
    expect(steps('h\u00e9llo w\u00a0rld', 1)).toEqual([[' gamma', 'length']]);
    expect(steps('a\vb\fc\rd', 1)).toEqual([[' epsilon', 'length']]);
  });

  test('a stop string cuts the text before its earliest occurrence; the token that completed it counts', () => {
    expect(steps('', 16, ['gamma'])).toEqual([[' alpha', undefined], [' beta', undefined], [' ', 'stop']]);
    // two stop strings: the earliest occurrence wins, not the first listed
    expect(steps('', 16, ['lta', 'elt'])).toEqual([[' alpha', undefined], [' beta', undefined], [' gamma', undefined], [' d', 'stop']]);
    // across tokens: what was sent stays sent, the last delta is empty
    expect(steps('', 16, ['ha be'])).toEqual([[' alpha', undefined], ['', 'stop']]);
    // an empty stop string is ignored; "stop" wins over "length" on the same token
    expect(steps('', 2, ['', 'beta'])).toEqual([[' alpha', undefined], [' ', 'stop']]);
  });

  test('an image replaces the first token by its length and the first 8 hex digits of its sha256', () => {
    const img = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0]);
    const sha = createHash('sha256').update(img).digest('hex').slice(0, 8);
    const got = [...generate(Buffer.from('see'), 3, [], img)].map((s) => s.delta.toString());
    expect(got).toEqual([` [image:5:${sha}]`, ' gamma', ' delta']);
  });
});

describe('tiny_llm (the vLLM backend\'s tensors)', () => {
  test('only the prompt: one response, the prompt leading the text, 16 tokens, "length"', async () => {
    const rs = await run(model('tiny_llm'), { text_input: text('hello world') });
    expect(rs).toEqual([{
      text_output: ['hello world gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi alpha beta'],
      num_input_tokens: 2, num_output_tokens: 16, finish_reason: ['length'],
    }]);
  });

  test('streamed: one response per token, counts and finish reason on each; no prompt by default', async () => {
    const rs = await run(model('tiny_llm'), { text_input: text('x'), stream: bool(true), sampling_parameters: text('{"max_tokens":3,"temperature":0.2,"whatever":{}}') });
    expect(rs).toEqual([
      { text_output: [' beta'], num_input_tokens: 1, num_output_tokens: 1, finish_reason: [''] },
      { text_output: [' gamma'], num_input_tokens: 1, num_output_tokens: 1, finish_reason: [''] },
      { text_output: [' delta'], num_input_tokens: 1, num_output_tokens: 1, finish_reason: ['length'] },
    ]);
  });

  test('exclude_input_in_output: true drops the prompt, false puts it before the first delta even when streaming', async () => {
    expect(texts(await run(model('tiny_llm'), { text_input: text('x'), exclude_input_in_output: bool(true), sampling_parameters: text('{"max_tokens":2}') })))
      .toEqual([' beta gamma']);
    expect(texts(await run(model('tiny_llm'), { text_input: text('x'), stream: bool(true), exclude_input_in_output: bool(false), sampling_parameters: text('{"max_tokens":2}') })))
      .toEqual(['x beta', ' gamma']);
  });

  test('stop strings, a string or a list; not streamed the counts cover every token', async () => {
    const one = await run(model('tiny_llm'), { text_input: text(''), exclude_input_in_output: bool(true), sampling_parameters: text('{"stop":"delta"}') });
    expect(one).toEqual([{ text_output: [' alpha beta gamma '], num_input_tokens: 0, num_output_tokens: 4, finish_reason: ['stop'] }]);
    const list = await run(model('tiny_llm'), { text_input: text(''), stream: bool(true), sampling_parameters: text('{"stop":["nope","eta"],"max_tokens":null}') });
    expect(texts(list)).toEqual([' alpha', ' b']);
    expect(list.at(-1)!.finish_reason).toEqual(['stop']);
  });

  test('an image; an empty one is none', async () => {
    const img = 'GIF89a';
    const sha = createHash('sha256').update(img).digest('hex').slice(0, 8);
    expect(texts(await run(model('tiny_llm'), { text_input: text('p'), image: text(img), exclude_input_in_output: bool(true), sampling_parameters: text('{"max_tokens":2}') })))
      .toEqual([` [image:6:${sha}] gamma`]);
    expect(texts(await run(model('tiny_llm'), { text_input: text('p'), image: text(''), exclude_input_in_output: bool(true), sampling_parameters: text('{"max_tokens":1}') })))
      .toEqual([' beta']);
  });

  test.each([
    ['{"max_tokens":0}', 'ValueError: max_tokens must be an integer between 1 and 4096'],
    ['{"max_tokens":4097}', 'ValueError: max_tokens must be an integer between 1 and 4096'],
    ['{"max_tokens":1.5}', 'ValueError: max_tokens must be an integer between 1 and 4096'],
    ['{"max_tokens":true}', 'ValueError: max_tokens must be an integer between 1 and 4096'],
    ['{"max_tokens":"2"}', 'ValueError: max_tokens must be an integer between 1 and 4096'],
    ['{"max_tokens":', 'ValueError: sampling_parameters must be a JSON object'],
    ['\ufeff{}', 'ValueError: sampling_parameters must be a JSON object'],
    ['null', 'ValueError: sampling_parameters must be a JSON object'],
    ['[]', 'ValueError: sampling_parameters must be a JSON object'],
    ['{"stop":5}', 'ValueError: stop must be a string or a list of strings'],
    ['{"stop":["a",null]}', 'ValueError: stop must be a string or a list of strings'],
  ])('sampling_parameters %s: %s', async (params, message) => {
    await expect(run(model('tiny_llm'), { text_input: text('a'), sampling_parameters: text(params) })).rejects.toEqual(new ModelError(13, message));
  });

  test('max_tokens 3.0 is 3 (JSON does not tell them apart)', async () => {
    const rs = await run(model('tiny_llm'), { text_input: text('a'), sampling_parameters: text('{"max_tokens":3.0}') });
    expect(rs[0]!.num_output_tokens).toBe(3);
  });

  test('without text_input (optional inputs can stand in for it in Triton\'s input count): a model error', async () => {
    await expect(run(model('tiny_llm'), { stream: bool(true) })).rejects.toEqual(new ModelError(13, 'ValueError: the request has no text_input'));
  });

  test('a cancelled stream stops at the next token and is counted', async () => {
    const stats = newZooStats();
    const events = new EventEmitter<ZooEvents>();
    const m = model('tiny_llm', stats, events);
    const ctl = new AbortController();
    const seen: string[] = [];
    events.on('stream-cancelled', () => seen.push('cancelled'));
    const got: string[] = [];
    const started = Date.now();
    for await (const r of m.stream!(new Map([['text_input', text('go slowly')], ['stream', bool(true)]]), { parameters: new Map(), signal: ctl.signal })) {
      got.push((unframeBytesElements(r.get('text_output')!.data) as { elements: Buffer[] }).elements[0]!.toString());
      if (got.length === 2) ctl.abort();
    }
    expect(got).toEqual([' gamma', ' delta']);
    expect([stats.streamCancellations, seen]).toEqual([1, ['cancelled']]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(50); // `slowly`: a wait before each token after the first
  });
});

describe('tiny_llm_trtllm (TensorRT-LLM\'s tensors)', () => {
  test('max_tokens and stop_words inputs, INT32 counts, no finish reason; sampling inputs ignored', async () => {
    const f32 = (v: number): Tensor => ({ datatype: 'FP32', shape: [1], data: Buffer.from(new Float32Array([v]).buffer) });
    const rs = await run(model('tiny_llm_trtllm'), {
      text_input: text('a b'), max_tokens: i32(8), stream: bool(true), stop_words: text('zzz', 'epsilon'), temperature: f32(0.3), top_p: f32(1),
      exclude_input_in_output: bool(true),
    });
    expect(rs).toEqual([
      { text_output: [' gamma'], num_input_tokens: 2, num_output_tokens: 1 },
      { text_output: [' delta'], num_input_tokens: 2, num_output_tokens: 1 },
      { text_output: [' '], num_input_tokens: 2, num_output_tokens: 1 },
    ]);
    expect(texts(await run(model('tiny_llm_trtllm'), { text_input: text('a b'), max_tokens: i32(2) }))).toEqual(['a b gamma delta']);
    expect(texts(await run(model('tiny_llm_trtllm'), { text_input: text('a'), max_tokens: i32(1), stop_words: text() }))).toEqual(['a beta']);
  });

  test('max_tokens out of range, or missing: a model error', async () => {
    await expect(run(model('tiny_llm_trtllm'), { text_input: text('a'), max_tokens: i32(0) }))
      .rejects.toEqual(new ModelError(13, 'ValueError: max_tokens must be an integer between 1 and 4096'));
    await expect(run(model('tiny_llm_trtllm'), { text_input: text('a'), stream: bool(false) }))
      .rejects.toEqual(new ModelError(13, 'ValueError: the request has no max_tokens'));
  });
});

describe('tiny_embed', () => {
  test.each(['hello', '', 'h\u00e9llo  world\n'])('%j: embedding[j] = (sha256[j] - 128) / 128, its word count', async (s) => {
    const out = await model('tiny_embed').execute(new Map([['text_input', text(s)]]), { parameters: new Map(), signal: new AbortController().signal });
    const e = out.get('embedding')!;
    const digest = createHash('sha256').update(s).digest();
    expect([e.datatype, e.shape]).toEqual(['FP32', [8]]);
    expect(Array.from({ length: 8 }, (_, j) => e.data.readFloatLE(j * 4))).toEqual([...digest.subarray(0, 8)].map((x) => (x - 128) / 128));
    expect(out.get('num_input_tokens')!.data.readInt32LE(0)).toBe(s.split(/[ \n]+/).filter((w) => w !== '').length);
  });
});
