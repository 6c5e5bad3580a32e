// The two zoos are twins: for every model, our reference backend and real Triton (PyTriton,
// test/triton/zoo.py) return the same model metadata over gRPC; the tiny LLMs and the embedder
// also the same model config and the same answers, streamed or not. And the gateway, pointed at
// real Triton, answers the health probes.
import { createHash } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { Client, credentials, Metadata } from '@grpc/grpc-js';
import { frameBytesElements, unframeBytesElements } from '../../gateway/infer/bytes-element';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { createZoo, newZooStats } from '../../gateway/reference-backend/zoo';
import type { ControlPlane } from '../../gateway/upstream/control/control-plane';
import { type inference, inferenceService } from '../../proto/services';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { grpcClient } from '../support/upstream';
import { int32 } from '../support/int32';

const TRITON_GRPC = process.env.TRITON_GRPC!;
/** Models PyTriton cannot declare (BF16 has no numpy dtype). */
const REFERENCE_ONLY = new Set(['identity_bf16']);
const MODELS = createZoo(newZooStats(), 0)
  .map((m) => m.name).filter((n) => !REFERENCE_ONLY.has(n));

let reference: ReferenceBackend;
let ours: ControlPlane;
let triton: ControlPlane;

beforeAll(async () => {
  reference = await startReferenceBackend();
  ours = grpcClient(reference.address);
  triton = grpcClient(TRITON_GRPC);
});
afterAll(async () => {
  ours.close();
  triton.close();
  await reference.close();
});

describe('zoo twins: reference backend and real Triton', () => {
  test('real Triton is the version we target', async () => {
    const meta = await triton.call('ServerMetadata', {});
    expect(meta.name).toBe('triton');
    expect(meta.version).toBe(process.env.TRITON_VERSION);
    const mine = await ours.call('ServerMetadata', {});
    expect(mine.toJSON()).toEqual(meta.toJSON());
  });

  test.each(MODELS)('%s: same model metadata', async (name) => {
    const [a, b] = await Promise.all([ours.call('ModelMetadata', { name }), triton.call('ModelMetadata', { name })]);
    expect(a.toJSON()).toEqual(b.toJSON());
  });

  test('Triton serves no model the reference zoo lacks', async () => {
    const index = await triton.call('RepositoryIndex', { ready: true });
    const names = index.models.map((m) => m.name).sort();
    expect(names).toEqual([...MODELS].sort());
  });
});

describe('zoo twins: the same answers to bad requests', () => {
  const simple = (overrides: Record<string, unknown>) => ({
    model_name: 'simple',
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
    raw_input_contents: [int32(16), int32(16)],
    ...overrides,
  });
  const bytes = (elements: Buffer, shape: number[]) => ({
    model_name: 'identity_bytes', inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape }], raw_input_contents: [elements],
  });
  const cases: [string, Record<string, unknown>][] = [
    ['unknown model', { model_name: 'nonexistent' }],
    ['unknown version', simple({ model_version: '2' })],
    ['bad version string', simple({ model_version: 'abc' })],
    ['one input missing', simple({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }], raw_input_contents: [int32(16)] })],
    ['raw data missing', simple({ raw_input_contents: [int32(16)] })],
    ['wrong datatype', simple({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }] })],
    ['wrong byte size', simple({ id: 'my-id', raw_input_contents: [int32(15), int32(16)] })],
    ['wrong shape', simple({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 15] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }], raw_input_contents: [int32(15), int32(16)] })],
    ['no batch dim', simple({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [16] }, { name: 'INPUT1', datatype: 'INT32', shape: [16] }] })],
    ['batch too large', simple({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [9, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [9, 16] }], raw_input_contents: [int32(144), int32(144)] })],
    ['unknown input', simple({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUTX', datatype: 'INT32', shape: [1, 16] }] })],
    ['unknown output', simple({ outputs: [{ name: 'NOPE' }] })],
    ['truncated BYTES element', bytes(Buffer.from([10, 0, 0, 0, 97, 98, 99]), [1, 1])],
    ['too few BYTES elements', bytes(Buffer.from([1, 0, 0, 0, 97, 1, 0, 0, 0, 98]), [1, 3])],
    ['too many BYTES elements', bytes(Buffer.from([1, 0, 0, 0, 97, 1, 0, 0, 0, 98]), [1, 1])],
    // (The rank mismatch of identity_fp32_nobatch is checked through the gateway, in the
    // differential suite: Triton's message ends in a blank, which grpc-js's strict HTTP/2
    // header validation drops, so this grpc-js client would see an empty message.)
  ];

  test.each(cases)('%s', async (_name, request) => {
    const outcome = async (c: ControlPlane) => {
      try {
        await c.call('ModelInfer', request);
        return { ok: true };
      } catch (err) {
        const e = err as { status: number; message: string };
        return { status: e.status, message: e.message };
      }
    };
    expect(await outcome(ours)).toEqual(await outcome(triton));
  });

  test('ModelReady of an unknown model is false, not an error', async () => {
    const [a, b] = await Promise.all([ours.call('ModelReady', { name: 'nonexistent' }), triton.call('ModelReady', { name: 'nonexistent' })]);
    expect([a.ready, b.ready]).toEqual([false, false]);
  });
});

describe('zoo twins: the APIs besides inference answer as Triton\'s', () => {
  const key = `/tg-twins-${process.pid}`;
  beforeAll(() => writeFileSync(`/dev/shm${key}`, Buffer.alloc(4096)));
  afterAll(async () => {
    await Promise.allSettled([ours, triton].map((c) => c.call('SystemSharedMemoryUnregister', { name: '' })));
    rmSync(`/dev/shm${key}`, { force: true });
  });
  type Call = [string, (c: ControlPlane) => Promise<{ toJSON(): unknown }>];
  const outcome = async (c: ControlPlane, call: Call[1]) => {
    try {
      return { ok: (await call(c)).toJSON() };
    } catch (err) {
      const e = err as { status: number; message: string };
      return { status: e.status, message: e.message };
    }
  };
  const place = (region: string, offset: number, size: number) => ({
    shared_memory_region: { string_param: region }, shared_memory_offset: { int64_param: offset }, shared_memory_byte_size: { int64_param: size },
  });
  const simpleShm = (region: string, offset: number, size: number, outputs: inference.ModelInferRequest.IInferRequestedOutputTensor[] = []) => ({
    model_name: 'simple', outputs,
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: place(region, offset, size) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
    raw_input_contents: [Buffer.alloc(64, 1)],
  });
  // In order: each step on both servers, the same outcome.
  const steps: Call[] = [
    ['register', (c) => c.call('SystemSharedMemoryRegister', { name: 'twin', key, offset: 0, byte_size: 4096 })],
    ['register again', (c) => c.call('SystemSharedMemoryRegister', { name: 'twin', key, offset: 0, byte_size: 4096 })],
    ['register a missing object', (c) => c.call('SystemSharedMemoryRegister', { name: 'x', key: '/tg-twins-no-such-object', offset: 0, byte_size: 8 })],
    ['register past the end', (c) => c.call('SystemSharedMemoryRegister', { name: 'x', key, offset: 4000, byte_size: 200 })],
    ['status of one', (c) => c.call('SystemSharedMemoryStatus', { name: 'twin' })],
    ['status of an unknown region', (c) => c.call('SystemSharedMemoryStatus', { name: 'x' })],
    ['infer: an input in an unknown region', (c) => c.call('ModelInfer', simpleShm('x', 0, 64))],
    ['infer: an offset past the region', (c) => c.call('ModelInfer', simpleShm('twin', 4096, 64))],
    ['infer: offset + size past the region', (c) => c.call('ModelInfer', simpleShm('twin', 4090, 64))],
    ['infer: a byte size that does not fit the input', (c) => c.call('ModelInfer', simpleShm('twin', 0, 60))],
    ['infer: an output region too small', (c) => c.call('ModelInfer', simpleShm('twin', 0, 64, [{ name: 'OUTPUT0', parameters: place('twin', 1024, 32) }]))],
    ['infer: input and output in the region', (c) => c.call('ModelInfer', simpleShm('twin', 0, 64, [{ name: 'OUTPUT0', parameters: place('twin', 1024, 64) }, { name: 'OUTPUT1' }]))],
    ['unregister', (c) => c.call('SystemSharedMemoryUnregister', { name: 'twin' })],
    ['unregister an unknown region', (c) => c.call('SystemSharedMemoryUnregister', { name: 'twin' })],
    ['statistics of an unknown model', (c) => c.call('ModelStatistics', { name: 'nonexistent', version: '' })],
    ['statistics of an unknown version', (c) => c.call('ModelStatistics', { name: 'simple', version: '7' })],
    ['register a key of Triton\'s python backend', (c) => c.call('SystemSharedMemoryRegister', { name: 'y', key: '/triton_python_backend_shm_region_1', offset: 0, byte_size: 8 })],
    ['repository index of a named repository', (c) => c.call('RepositoryIndex', { repository_name: 'models', ready: false })],
    ['trace: the file is not settable', (c) => c.call('TraceSetting', { model_name: '', settings: { trace_file: { value: ['/tmp/t'] } } })],
    ['trace: OFF with another level', (c) => c.call('TraceSetting', { model_name: '', settings: { trace_level: { value: ['OFF', 'TENSORS'] } } })],
    ['trace: a rate that is no number', (c) => c.call('TraceSetting', { model_name: '', settings: { trace_rate: { value: ['x'] } } })],
    ['trace: an unknown model', (c) => c.call('TraceSetting', { model_name: 'nonexistent', settings: {} })],
    ['log: the file is not settable', (c) => c.call('LogSettings', { settings: { log_file: { string_param: '/tmp/l' } } })],
    ['log: a level of the wrong type', (c) => c.call('LogSettings', { settings: { log_error: { string_param: 'no' } } })],
  ];
  test('every step', async () => {
    const mine: unknown[] = [];
    const theirs: unknown[] = [];
    for (const [name, call] of steps) {
      mine.push({ name, ...(await outcome(ours, call)) });
      theirs.push({ name, ...(await outcome(triton, call)) });
    }
    expect(mine).toEqual(theirs);
  });
});

/** A tensor's elements, readable: BYTES as UTF-8 text, numbers as numbers. */
function decode(datatype: string, raw: Uint8Array): unknown[] {
  const b = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  switch (datatype) {
    case 'BYTES': {
      const u = unframeBytesElements(b);
      return u.ok ? u.elements.map((e) => e.toString('utf8')) : ['(malformed)'];
    }
    case 'INT32': return Array.from({ length: b.length / 4 }, (_, i) => b.readInt32LE(i * 4));
    case 'UINT32': return Array.from({ length: b.length / 4 }, (_, i) => b.readUInt32LE(i * 4));
    case 'FP32': return Array.from({ length: b.length / 4 }, (_, i) => b.readFloatLE(i * 4));
    default: return [b.toString('hex')];
  }
}

/** A model error's exception line (PyTriton sends the whole Python traceback; the reference its last line). */
const exceptionLine = (message: string): string => [...message.matchAll(/^[A-Za-z]+Error: .*$/gm)].at(-1)?.[0] ?? message;

type Answer = { id?: string; model?: string; final?: boolean; outputs?: Record<string, unknown>; error?: string };

const answerOf = (r: inference.IModelInferResponse): Answer => ({
  id: r.id ?? '', model: `${r.model_name}/${r.model_version}`, final: r.parameters?.triton_final_response?.bool_param ?? undefined,
  outputs: Object.fromEntries((r.outputs ?? []).map((o, i) => [o.name, {
    datatype: o.datatype, shape: (o.shape ?? []).map(Number), data: decode(o.datatype ?? '', r.raw_output_contents?.[i] ?? new Uint8Array()),
  }])),
});

/** One request on a ModelStreamInfer call (with the empty final response), every answer until the call ends. */
async function streamed(address: string, request: Record<string, unknown>): Promise<Answer[]> {
  const client = new Client(address, credentials.createInsecure());
  try {
    const m = inferenceService.ModelStreamInfer;
    const call = client.makeBidiStreamRequest(m.path, m.requestSerialize, m.responseDeserialize, new Metadata(), { deadline: Date.now() + 10_000 });
    const got: Answer[] = [];
    call.on('data', (r: inference.IModelStreamInferResponse) => {
      got.push(r.error_message ? { error: exceptionLine(r.error_message) } : answerOf(r.infer_response!));
    });
    call.on('error', () => undefined); // the status tells
    const ended = new Promise<number>((resolve) => call.on('status', (st: { code: number }) => resolve(st.code)));
    call.write({ parameters: { triton_enable_empty_final_response: { bool_param: true } }, ...request });
    call.end();
    expect(await ended).toBe(0);
    return got;
  } finally {
    client.close();
  }
}

const text = (name: string, ...values: (string | Buffer)[]) => ({ name, datatype: 'BYTES', shape: [values.length], data: frameBytesElements(values.map((v) => Buffer.from(v))) });
const bool = (name: string, v: boolean) => ({ name, datatype: 'BOOL', shape: [1], data: Buffer.from([v ? 1 : 0]) });
const i32 = (name: string, v: number) => ({ name, datatype: 'INT32', shape: [1], data: int32([v]) });
const f32 = (name: string, v: number) => ({ name, datatype: 'FP32', shape: [1], data: Buffer.from(new Float32Array([v]).buffer) });
const u64 = (name: string, v: bigint) => ({ name, datatype: 'UINT64', shape: [1], data: Buffer.from(new BigUint64Array([v]).buffer) });
type In = ReturnType<typeof text>;
const request = (model: string, ...inputs: In[]) => ({
  model_name: model, id: 'twin-1',
  inputs: inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })), raw_input_contents: inputs.map((i) => i.data),
});
const sampling = (p: unknown): In => text('sampling_parameters', JSON.stringify(p));
// Bytes as an image's: zeros inside and at the end (a BYTES element is a length, not a C string).
const IMAGE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52, 0xff, 0]);

describe('zoo twins: the tiny LLMs and the embedder answer as on real Triton', () => {
  const NEW = ['tiny_llm', 'tiny_llm_trtllm', 'tiny_embed'];

  test.each(NEW)('%s: same model config (batching, decoupled, inputs with their optional flag, outputs)', async (name) => {
    const shape = (c: inference.IModelConfig) => ({
      max_batch_size: c.max_batch_size ?? 0,
      decoupled: c.model_transaction_policy?.decoupled ?? false,
      input: (c.input ?? []).map((t) => ({ name: t.name, data_type: t.data_type, dims: (t.dims ?? []).map(Number), optional: t.optional ?? false })),
      output: (c.output ?? []).map((t) => ({ name: t.name, data_type: t.data_type, dims: (t.dims ?? []).map(Number) })),
    });
    const [a, b] = await Promise.all([ours.call('ModelConfig', { name }), triton.call('ModelConfig', { name })]);
    expect(shape(a.config!)).toEqual(shape(b.config!));
  });

  const TOOL = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } }, required: ['city', 'days'] } } };
  const SCHEMA = { type: 'object', required: ['a', 'b', 'c', 'd', 'e'], $defs: { A: { type: 'object', required: ['x'], properties: { x: { type: 'boolean' } } } },
    properties: { a: { $ref: '#/$defs/A' }, b: { type: 'array', minItems: 2, items: { enum: ['q', 'r'] } }, c: { const: 'k' }, d: { type: ['number', 'null'], exclusiveMinimum: 2.5 }, e: { anyOf: [{ type: 'string', minLength: 2 }] }, f: { type: 'string' } } };
  const cases: [string, ReturnType<typeof request>][] = [
    ['tiny_llm: only the prompt (not streamed: the prompt leads the text, 16 tokens, "length")', request('tiny_llm', text('text_input', 'hello world'))],
    ['tiny_llm: streamed, max_tokens 4, input excluded', request('tiny_llm', text('text_input', 'one two three'), bool('stream', true), sampling({ max_tokens: 4, temperature: 0.5, top_p: 1, seed: 3, future_key: [1] }), bool('exclude_input_in_output', true))],
    ['tiny_llm: streamed without exclude_input_in_output (vLLM: no prompt when streaming)', request('tiny_llm', text('text_input', 'x'), bool('stream', true), sampling({ max_tokens: 2 }))],
    ['tiny_llm: streamed, exclude_input_in_output false: the prompt leads the first delta', request('tiny_llm', text('text_input', 'x y'), bool('stream', true), sampling({ max_tokens: 2 }), bool('exclude_input_in_output', false))],
    ['tiny_llm: streamed, stop string within a token', request('tiny_llm', text('text_input', 'a'), bool('stream', true), sampling({ stop: 'delta' }), bool('exclude_input_in_output', true))],
    ['tiny_llm: streamed, stop string across tokens (text already sent stays sent)', request('tiny_llm', text('text_input', 'a'), bool('stream', true), sampling({ stop: ['ta ga', 'nothing'] }), bool('exclude_input_in_output', true))],
    ['tiny_llm: not streamed, the earliest of two stop strings, max_tokens 5', request('tiny_llm', text('text_input', 'a b'), sampling({ max_tokens: 5, stop: ['zeta', 'lta e', ''] }), bool('exclude_input_in_output', true))],
    ['tiny_llm: max_tokens reached on the token that completes a stop string: "stop"', request('tiny_llm', text('text_input', 'a'), sampling({ max_tokens: 2, stop: 'gamma' }), bool('exclude_input_in_output', true))],
    ['tiny_llm: an image replaces the first token', request('tiny_llm', text('text_input', 'look at this'), text('image', IMAGE), sampling({ max_tokens: 3 }), bool('exclude_input_in_output', true), bool('stream', true))],
    ['tiny_llm: an empty image is no image', request('tiny_llm', text('text_input', 'look'), text('image', ''), sampling({ max_tokens: 2 }), bool('exclude_input_in_output', true))],
    ['tiny_llm: the return_* flags (outputs are always all there)', request('tiny_llm', text('text_input', 'q'), sampling({ max_tokens: 1 }), bool('return_num_input_tokens', false), bool('return_num_output_tokens', true), bool('return_finish_reason', false))],
    ['tiny_llm: UTF-8 prompt, words split on ASCII whitespace only', request('tiny_llm', text('text_input', 'héllo\tw\u00a0rld\n\v\f x  '), sampling({ max_tokens: 2, max_tokens_extra: null }))],
    ['tiny_llm: slowly (waits between tokens)', request('tiny_llm', text('text_input', 'go slowly'), bool('stream', true), sampling({ max_tokens: 3 }), bool('exclude_input_in_output', true))],
    ['tiny_llm: max_tokens 0', request('tiny_llm', text('text_input', 'a'), sampling({ max_tokens: 0 }))],
    ['tiny_llm: max_tokens 2.5', request('tiny_llm', text('text_input', 'a'), sampling({ max_tokens: 2.5 }))],
    ['tiny_llm: max_tokens 3.0 is 3', request('tiny_llm', text('text_input', 'a'), text('sampling_parameters', '{"max_tokens": 3.0, "stop": null}'))],
    ['tiny_llm: max_tokens past the limit', request('tiny_llm', text('text_input', 'a'), sampling({ max_tokens: 4097 }))],
    ['tiny_llm: max_tokens a string', request('tiny_llm', text('text_input', 'a'), sampling({ max_tokens: '3' }))],
    ['tiny_llm: sampling_parameters not JSON', request('tiny_llm', text('text_input', 'a'), text('sampling_parameters', '{"max_tokens":'))],
    ['tiny_llm: sampling_parameters NaN', request('tiny_llm', text('text_input', 'a'), text('sampling_parameters', '{"max_tokens": NaN}'))],
    ['tiny_llm: sampling_parameters not an object', request('tiny_llm', text('text_input', 'a'), sampling([1]))],
    ['tiny_llm: stop not strings', request('tiny_llm', text('text_input', 'a'), sampling({ stop: ['a', 1] }))],
    ['tiny_llm: no prompt (core check, with optional inputs)', request('tiny_llm', bool('stream', true))],
    ['tiny_llm: an unknown input', request('tiny_llm', text('text_input', 'a'), bool('streaming', true))],
    ['tiny_llm_trtllm: not streamed (the prompt leads), max_tokens 3', request('tiny_llm_trtllm', text('text_input', 'a b c'), i32('max_tokens', 3))],
    ['tiny_llm_trtllm: streamed with stop_words and every sampling input', request('tiny_llm_trtllm', text('text_input', 'a b c'), i32('max_tokens', 8), bool('stream', true),
      text('stop_words', 'nothing', 'zeta', ''), f32('temperature', 0.7), f32('top_p', 0.9), f32('frequency_penalty', 0), f32('presence_penalty', 0.1), u64('seed', 42n),
      bool('exclude_input_in_output', true), bool('return_num_input_tokens', true), bool('return_num_output_tokens', true))],
    // (stop_words with no element, shape [0]: real Triton never answers — PyTriton 0.7.0 fails on a
    // zero-size tensor, and a decoupled model's failure is lost. The reference takes it as no stop words.)
    ['tiny_llm_trtllm: max_tokens 0', request('tiny_llm_trtllm', text('text_input', 'a'), i32('max_tokens', 0))],
    ['tiny_llm_trtllm: max_tokens missing (core check)', request('tiny_llm_trtllm', text('text_input', 'a'))],
    ['tiny_llm: a prompt offering tools (Hermes\' <tools>): a call of the first, arguments minimal, in pieces', request('tiny_llm',
      text('text_input', `<s><|system|>\n<tools>\n${JSON.stringify(TOOL)}\n{"type": "function", "function": {"name": "other"}}\n</tools>\n<|user|>\nhi\n<|assistant|>\n`),
      bool('stream', true), sampling({ max_tokens: 16 }), bool('exclude_input_in_output', true))],
    ['tiny_llm: tools, and a tool result already: words', request('tiny_llm', text('text_input', `<tools>\n${JSON.stringify(TOOL)}\n</tools>\n<tool_response>\nsunny\n</tool_response>`), sampling({ max_tokens: 3 }), bool('exclude_input_in_output', true))],
    ['tiny_llm: a tool call cut at max_tokens', request('tiny_llm', text('text_input', `<tools>\n${JSON.stringify(TOOL)}\n</tools>`), sampling({ max_tokens: 2 }), bool('exclude_input_in_output', true))],
    ['tiny_llm: guided_decoding json: a minimal instance ($ref, enum, const, arrays, numbers)', request('tiny_llm', text('text_input', 'a'), bool('stream', true), sampling({ max_tokens: 20, guided_decoding: { json: SCHEMA } }), bool('exclude_input_in_output', true))],
    ['tiny_llm: guided_decoding json_object, as JSON text', request('tiny_llm', text('text_input', 'a'), sampling({ guided_decoding: '{"json_object": true}' }), bool('exclude_input_in_output', true))],
    ['tiny_llm: guided_decoding regex (not followed)', request('tiny_llm', text('text_input', 'a'), sampling({ guided_decoding: { regex: 'a+' } }))],
    ['tiny_llm_trtllm: guided decoding json_schema', request('tiny_llm_trtllm', text('text_input', 'a'), i32('max_tokens', 20), text('guided_decoding_guide_type', 'json_schema'), text('guided_decoding_guide', JSON.stringify(SCHEMA)), bool('exclude_input_in_output', true))],
    ['tiny_llm_trtllm: guided decoding json', request('tiny_llm_trtllm', text('text_input', 'a'), i32('max_tokens', 20), text('guided_decoding_guide_type', 'json'), bool('stream', true), bool('exclude_input_in_output', true))],
    ['tiny_embed: a text', request('tiny_embed', text('text_input', 'hello world'))],
    ['tiny_embed: empty text', request('tiny_embed', text('text_input', ''))],
  ];

  test.each(cases)('%s', async (_name, req) => {
    const [mine, theirs] = await Promise.all([streamed(reference.address, req), streamed(TRITON_GRPC, req)]);
    expect(mine).toEqual(theirs);
    expect(theirs.length).toBeGreaterThan(0);
  }, 30_000);

  test('tiny_embed over ModelInfer: the same bytes, the documented values', async () => {
    const req = request('tiny_embed', text('text_input', 'The quick brown fox'));
    const [a, b] = await Promise.all([ours.call('ModelInfer', req), triton.call('ModelInfer', req)]);
    expect(answerOf(a)).toEqual(answerOf(b));
    const digest = createHash('sha256').update('The quick brown fox').digest();
    expect(answerOf(b).outputs).toEqual({
      embedding: { datatype: 'FP32', shape: [8], data: [...digest.subarray(0, 8)].map((x) => (x - 128) / 128) },
      num_input_tokens: { datatype: 'INT32', shape: [1], data: [4] },
    });
  });

  test('a decoupled tiny LLM over ModelInfer: the same refusal', async () => {
    const req = request('tiny_llm', text('text_input', 'a'));
    const outcome = async (c: ControlPlane) => c.call('ModelInfer', req).then(() => 'ok', (e: { status: number; message: string }) => `${e.status} ${e.message}`);
    expect(await outcome(ours)).toEqual(await outcome(triton));
  });
});

describe('gateway in front of real Triton', () => {
  let gw: RunningGateway;
  beforeAll(async () => { gw = await gatewayFor(['--backend', TRITON_GRPC]); });
  afterAll(() => gw.close());

  test.each(['live', 'ready'])('GET /v2/health/%s → 200, empty body, as Triton\'s own HTTP', async (what) => {
    const viaGateway = await fetch(`${gw.url}/v2/health/${what}`);
    const direct = await fetch(`http://${process.env.TRITON_HTTP}/v2/health/${what}`);
    expect([viaGateway.status, await viaGateway.text()]).toEqual([direct.status, await direct.text()]);
    expect(viaGateway.status).toBe(200);
  });
});

describe('telemetry in front of real Triton', () => {
  test('with tracing on, Triton takes the traceparent and answers', async () => {
    const gw = await gatewayFor(['--backend', TRITON_GRPC, '--tracing', '--otlp-endpoint', 'http://127.0.0.1:9/v1/traces']);
    try {
      const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: [1, 2] }] });
      const r = await fetch(`${gw.url}/v2/models/identity_fp32/infer`, {
        method: 'POST', body, headers: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      });
      expect(r.status).toBe(200);
      expect(r.headers.get('server-timing')).toMatch(/triton;dur=/);
    } finally {
      await gw.close(); // the collector address is closed: shutdown must still be quick
    }
  }, 15_000);
});
