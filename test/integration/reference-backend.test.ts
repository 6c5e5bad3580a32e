// The reference backend answers the Triton protocol with Triton's semantics.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Client, credentials, Metadata } from '@grpc/grpc-js';
import { frameBytesElements, unframeBytesElements } from '../../gateway/infer/bytes-element';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { EventEmitter } from 'node:events';
import { createZoo, FAILING_MESSAGE, newZooStats, type ZooEvents } from '../../gateway/reference-backend/zoo';
import type { ControlPlane } from '../../gateway/upstream/control/control-plane';
import { type inference, inferenceService } from '../../proto/services';
import { callError, grpcClient } from '../support/upstream';
import { nextEvent } from '../support/wait';
import { int32, readInt32 } from '../support/int32';

let backend: ReferenceBackend;
let client: ControlPlane;

beforeAll(async () => {
  backend = await startReferenceBackend();
  client = grpcClient(backend.address);
});
afterAll(async () => {
  client.close();
  await backend.close();
});

const range = (n: number, f: (i: number) => number): number[] => Array.from({ length: n }, (_, i) => f(i));

function simpleRequest(overrides: Record<string, unknown> = {}) {
  return {
    model_name: 'simple',
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
    ],
    raw_input_contents: [int32(range(16, (i) => i)), int32(range(16, () => 1))],
    ...overrides,
  };
}

describe('reference backend', () => {
  test('server health and metadata', async () => {
    expect((await client.call('ServerLive', {})).live).toBe(true);
    expect((await client.call('ServerReady', {})).ready).toBe(true);
    const meta = await client.call('ServerMetadata', {});
    expect(meta.name).toBe('triton');
    expect(meta.extensions).toContain('binary_tensor_data');
  });

  test('model metadata has a -1 batch dim when the model batches', async () => {
    const m = await client.call('ModelMetadata', { name: 'simple' });
    expect(m.toJSON()).toEqual({
      name: 'simple', versions: ['1'], platform: 'python',
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: ['-1', '16'] }, { name: 'INPUT1', datatype: 'INT32', shape: ['-1', '16'] }],
      outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: ['-1', '16'] }, { name: 'OUTPUT1', datatype: 'INT32', shape: ['-1', '16'] }],
    });
    const nb = await client.call('ModelMetadata', { name: 'identity_fp32_nobatch' });
    expect(nb.inputs[0]!.shape!.map(Number)).toEqual([-1, -1]);
    const bf16 = await client.call('ModelMetadata', { name: 'identity_bf16' });
    expect(bf16.inputs[0]!.datatype).toBe('BF16');
  });

  test('model config carries what raw-input deduction needs', async () => {
    const { config } = await client.call('ModelConfig', { name: 'identity_bytes' });
    expect(config!.max_batch_size).toBe(8);
    expect(config!.input![0]!.data_type).toBe(13);
    expect(config!.input![0]!.dims!.map(Number)).toEqual([-1]);
  });

  test('simple: sum and difference, raw_output_contents always', async () => {
    const r = await client.call('ModelInfer', simpleRequest({ id: 'r1' }));
    expect([r.model_name, r.model_version, r.id]).toEqual(['simple', '1', 'r1']);
    expect(r.outputs.map((o) => [o.name, o.datatype, o.shape!.map(Number)])).toEqual([
      ['OUTPUT0', 'INT32', [1, 16]], ['OUTPUT1', 'INT32', [1, 16]],
    ]);
    expect(readInt32(r.raw_output_contents[0]!)).toEqual(range(16, (i) => i + 1));
    expect(readInt32(r.raw_output_contents[1]!)).toEqual(range(16, (i) => i - 1));
  });

  test('requested outputs only, in request order', async () => {
    const r = await client.call('ModelInfer', simpleRequest({ outputs: [{ name: 'OUTPUT1' }] }));
    expect(r.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
  });

  test('simple_string works on decimal text', async () => {
    const text = (xs: number[]) => frameBytesElements(xs.map((x) => Buffer.from(String(x))));
    const r = await client.call('ModelInfer', {
      model_name: 'simple_string',
      inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 16] }, { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16] }],
      raw_input_contents: [text(range(16, (i) => i)), text(range(16, () => 2))],
    });
    const u = unframeBytesElements(Buffer.from(r.raw_output_contents[0]!));
    expect(u.ok && u.elements.map(String)).toEqual(range(16, (i) => i + 2).map(String));
  });

  test('identity over every datatype keeps the bytes', async () => {
    for (const [model, datatype, size] of [['identity_fp16', 'FP16', 2], ['identity_bf16', 'BF16', 2], ['identity_uint64', 'UINT64', 8], ['identity_bool', 'BOOL', 1]] as const) {
      const data = Buffer.from(range(3 * size, (i) => (i * 37) & 1));
      const r = await client.call('ModelInfer', {
        model_name: model, inputs: [{ name: 'INPUT0', datatype, shape: [1, 3] }], raw_input_contents: [data],
      });
      expect(Buffer.from(r.raw_output_contents[0]!)).toEqual(data);
    }
  });

  test('image_stats, blob_len, classifier_fp32', async () => {
    const img = Buffer.from(range(1000, (i) => i % 256));
    const s = await client.call('ModelInfer', { model_name: 'image_stats', inputs: [{ name: 'IMAGE', datatype: 'UINT8', shape: [1, 1000] }], raw_input_contents: [img] });
    expect(Buffer.from(s.raw_output_contents[0]!).readBigInt64LE(0)).toBe(1000n);
    expect(Buffer.from(s.raw_output_contents[1]!).readBigUInt64LE(0)).toBe(BigInt(img.reduce((a, b) => a + b, 0)));

    const blob = await client.call('ModelInfer', {
      model_name: 'blob_len', inputs: [{ name: 'BLOB', datatype: 'BYTES', shape: [2, 1] }],
      raw_input_contents: [frameBytesElements([Buffer.alloc(5), Buffer.alloc(0)])],
    });
    const lens = Buffer.from(blob.raw_output_contents[0]!);
    expect([lens.readBigInt64LE(0), lens.readBigInt64LE(8)]).toEqual([5n, 0n]);

    const x = Buffer.alloc(3 * 224 * 224 * 4);
    for (let i = 0; i < 3 * 224 * 224; i++) x.writeFloatLE(i / 7, i * 4);
    const c = await client.call('ModelInfer', { model_name: 'classifier_fp32', inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224] }], raw_input_contents: [x] });
    expect(c.outputs[0]!.shape!.map(Number)).toEqual([1, 1000]);
    expect(Buffer.from(c.raw_output_contents[0]!).readFloatLE(4)).toBe(Math.fround(Math.fround(1 / 7) + Math.fround(1001 / 7)));
  });

  test('big_output answers more than grpc-js\'s 4 MiB default', async () => {
    const n = Buffer.alloc(8);
    n.writeBigInt64LE(6_000_000n);
    const r = await client.call('ModelInfer', { model_name: 'big_output', inputs: [{ name: 'N', datatype: 'INT64', shape: [1] }], raw_input_contents: [n] });
    const data = r.raw_output_contents[0]!;
    expect(data.byteLength).toBe(6_000_000);
    expect([data[250], data[251], data[5_999_999]]).toEqual([250, 0, 5_999_999 % 251]);
  });

  test('failing is INTERNAL with its fixed message', async () => {
    const e = await callError(client.call('ModelInfer', { model_name: 'failing', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 1] }], raw_input_contents: [Buffer.alloc(4)] }));
    expect(e.status).toBe(500);
    expect(e.message).toMatch(/^Failed to process the request\(s\) for model 'failing_0_0', message: TritonModelException: Model execute error: /);
    expect(e.message).toContain(`RuntimeError: ${FAILING_MESSAGE}`);
  });

  test('slow honours delay_ms and records a cancellation', async () => {
    const req = (delay: number) => ({
      model_name: 'slow', parameters: { delay_ms: { int64_param: delay } },
      inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)],
    });
    const t0 = Date.now();
    await client.call('ModelInfer', req(50));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(45);

    const before = backend.stats.slowCancellations;
    const ctl = new AbortController();
    const started = nextEvent(backend.events, 'slow-started');
    const call = callError(client.call('ModelInfer', req(5000), ctl.signal));
    await started;
    const cancelled = nextEvent(backend.events, 'slow-cancelled');
    ctl.abort();
    expect((await call).code).toBe('GW_ERR_UPSTREAM_CANCELLED');
    await cancelled;
    expect(backend.stats.slowCancellations).toBe(before + 1);
  });

  test('slow: a call cancelled before the model ran (queued past a short deadline) counts as cancelled too', async () => {
    const stats = newZooStats();
    const events = new EventEmitter<ZooEvents>();
    const slow = createZoo(stats, 1 << 20, events).find((m) => m.name === 'slow')!;
    const ctl = new AbortController();
    ctl.abort();
    const cancelled = nextEvent(events, 'slow-cancelled', 1000);
    const t0 = Date.now();
    await slow.execute(new Map([['INPUT0', { datatype: 'FP32', shape: [1], data: Buffer.alloc(4) }]]), { parameters: new Map([['delay_ms', 5000]]), signal: ctl.signal });
    await cancelled;
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(stats.slowCancellations).toBe(1);
  });

  describe('the tiny LLMs (decoupled, over ModelStreamInfer) and the embedder', () => {
    const bytes = (name: string, v: string) => ({ input: { name, datatype: 'BYTES', shape: [1] }, data: frameBytesElements([Buffer.from(v)]) });
    const flag = (name: string, v: boolean) => ({ input: { name, datatype: 'BOOL', shape: [1] }, data: Buffer.from([v ? 1 : 0]) });
    const request = (model: string, ...ins: { input: object; data: Buffer }[]) => ({
      model_name: model, inputs: ins.map((i) => i.input), raw_input_contents: ins.map((i) => i.data),
    });

    /** Opens a ModelStreamInfer call, sends one request, gives each response's text_output as it comes. */
    function stream(req: object, onText: (t: string, call: { cancel(): void }) => void): Promise<{ code: number; details: string }> {
      const c = new Client(backend.address, credentials.createInsecure());
      const m = inferenceService.ModelStreamInfer;
      const call = c.makeBidiStreamRequest(m.path, m.requestSerialize, m.responseDeserialize, new Metadata());
      call.on('error', () => undefined);
      call.on('data', (r: inference.IModelStreamInferResponse) => {
        const raw = r.infer_response?.raw_output_contents?.[0];
        onText(raw === undefined ? `error: ${r.error_message}` : (unframeBytesElements(Buffer.from(raw)) as { elements: Buffer[] }).elements[0]!.toString(), call);
      });
      const done = new Promise<{ code: number; details: string }>((resolve) => call.on('status', (st) => resolve(st)));
      call.write(req);
      call.end();
      return done.finally(() => c.close());
    }

    test('model config: decoupled, no batching, the optional inputs flagged', async () => {
      const { config } = await client.call('ModelConfig', { name: 'tiny_llm' });
      expect([config!.max_batch_size, config!.model_transaction_policy?.decoupled]).toEqual([0, true]);
      expect(config!.input!.map((i) => `${i.name}${i.optional === true ? '?' : ''}`)).toEqual([
        'text_input', 'stream?', 'sampling_parameters?', 'exclude_input_in_output?', 'return_num_input_tokens?', 'return_num_output_tokens?', 'return_finish_reason?', 'return_logprobs?',
        'image?',
      ]);
      const trt = await client.call('ModelConfig', { name: 'tiny_llm_trtllm' });
      expect(trt.config!.input!.filter((i) => i.optional !== true).map((i) => i.name)).toEqual(['text_input', 'max_tokens']);
      const embed = await client.call('ModelConfig', { name: 'tiny_embed' });
      expect(embed.config!.input!.map((i) => [i.name, i.optional])).toEqual([['text_input', false]]);
    });

    test('a streamed generation, one response per token; optional inputs left out', async () => {
      const got: string[] = [];
      const st = await stream(request('tiny_llm', bytes('text_input', 'a b c'), flag('stream', true), bytes('sampling_parameters', '{"max_tokens":3}')), (t) => got.push(t));
      expect([st.code, got]).toEqual([0, [' delta', ' epsilon', ' zeta']]);
    });

    test('fewer inputs than the required ones: Triton\'s words for a model with optional inputs', async () => {
      const got: string[] = [];
      await stream(request('tiny_llm_trtllm', bytes('text_input', 'a')), (t) => got.push(t));
      expect(got).toEqual(["error: [request id: <id_unknown>] expected number of inputs between 2 and 14 but got 1 inputs for model 'tiny_llm_trtllm'. "
        + "Got input(s) ['text_input'], but missing required input(s) ['max_tokens']. Please provide all required input(s)."]);
    });

    test('a client that cancels mid-stream stops the generation, counted', async () => {
      const before = backend.stats.streamCancellations;
      const cancelled = nextEvent(backend.events, 'stream-cancelled');
      const got: string[] = [];
      const st = await stream(request('tiny_llm', bytes('text_input', 'go slowly'), flag('stream', true)), (t, call) => {
        got.push(t);
        if (got.length === 2) call.cancel();
      });
      await cancelled;
      expect([st.code, got, backend.stats.streamCancellations - before]).toEqual([1, [' gamma', ' delta'], 1]);
    });

    test('tiny_embed answers ModelInfer', async () => {
      const r = await client.call('ModelInfer', request('tiny_embed', bytes('text_input', 'hello')));
      const e = Buffer.from(r.raw_output_contents[0]!);
      // sha256("hello") begins 2c f2 4d ba 5f b0 a3 0e: (byte - 128) / 128
      expect(Array.from({ length: 8 }, (_, j) => e.readFloatLE(j * 4)))
        .toEqual([-0.65625, 0.890625, -0.3984375, 0.453125, -0.2578125, 0.375, 0.2734375, -0.890625]);
    });
  });

  describe('Triton\'s errors', () => {
    test.each([
      ['unknown model', { model_name: 'nope' }, 404, "Request for unknown model: 'nope' is not found"],
      ['unknown version', { model_version: '2' }, 404, "Request for unknown model: 'simple' version 2 is not found"],
      ['missing raw data', { raw_input_contents: [int32(range(16, () => 0))] }, 400,
        "unable to find data for input tensor 'INPUT1' for model 'simple' in request."],
      ['unknown output', { outputs: [{ name: 'NOPE' }] }, 400, "unexpected inference output 'NOPE' for model 'simple'"],
      ['wrong datatype', { inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }] }, 400,
        "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP32', but model 'simple' expects 'INT32'"],
      ['wrong byte size', { id: 'b', raw_input_contents: [int32(range(15, () => 0)), int32(range(16, () => 0))] }, 400,
        "[request id: b] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60"],
    ])('%s', async (_name, overrides, status, message) => {
      const e = await callError(client.call('ModelInfer', simpleRequest(overrides)));
      expect([e.status, e.message]).toEqual([status, message]);
    });

    test('metadata of an unknown model is NOT_FOUND', async () => {
      const e = await callError(client.call('ModelMetadata', { name: 'nope' }));
      expect([e.status, e.message]).toEqual([404, "Request for unknown model: 'nope' is not found"]);
    });
  });

  describe('the APIs besides inference (the README shows them all)', () => {
    test('repository index: every zoo model, version 1, READY; a repository name is refused as Triton refuses it', async () => {
      const r = (await client.call('RepositoryIndex', { repository_name: '', ready: true })).toJSON() as { models: { name: string; version: string; state: string }[] };
      expect(r.models).toContainEqual({ name: 'simple', version: '1', state: 'READY' });
      expect(r.models.map((m) => m.name)).toEqual([...r.models.map((m) => m.name)].sort());
      expect(r.models.every((m) => m.state === 'READY' && m.version === '1')).toBe(true);
      const e = await callError(client.call('RepositoryIndex', { repository_name: 'models', ready: false }));
      expect(e.message).toBe("'repository_name' specification is not supported");
    });

    test('statistics count what happened: rows, executions, success and fail with durations, per batch size', async () => {
      type Stats = { inference_count?: string; execution_count?: string; last_inference?: string;
        inference_stats: Record<string, { count?: string; ns?: string }>; batch_stats?: { batch_size: string; compute_infer: { count?: string } }[]; };
      const stats = async (): Promise<Stats> => ((await client.call('ModelStatistics', { name: 'simple', version: '' })).toJSON() as { model_stats: Stats[] }).model_stats[0]!;
      const n = (x: string | undefined): number => Number(x ?? 0);
      const before = await stats();
      const t0 = Date.now();
      await client.call('ModelInfer', simpleRequest({
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [3, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [3, 16] }],
        raw_input_contents: [int32(range(48, (i) => i)), int32(range(48, () => 1))],
      }));
      await callError(client.call('ModelInfer', simpleRequest({ raw_input_contents: [int32(range(15, () => 0)), int32(range(16, () => 0))] })));
      const after = await stats();
      expect(n(after.inference_count) - n(before.inference_count)).toBe(3);
      expect(n(after.execution_count) - n(before.execution_count)).toBe(1);
      expect(n(after.inference_stats.success!.count) - n(before.inference_stats.success!.count)).toBe(1);
      expect(n(after.inference_stats.fail!.count) - n(before.inference_stats.fail!.count)).toBe(1);
      expect(n(after.inference_stats.success!.ns)).toBeGreaterThan(n(before.inference_stats.success!.ns));
      expect(n(after.inference_stats.compute_infer!.count) - n(before.inference_stats.compute_infer!.count)).toBe(1);
      expect(n(after.last_inference)).toBeGreaterThanOrEqual(t0);
      expect(after.batch_stats?.find((b) => b.batch_size === '3')?.compute_infer.count).toBe('1');
      const all = (await client.call('ModelStatistics', { name: '', version: '' })).toJSON() as { model_stats: { name: string }[] };
      expect(all.model_stats.map((m) => m.name)).toContain('identity_fp32');
      const e = await callError(client.call('ModelStatistics', { name: 'nope', version: '' }));
      expect([e.status, e.message]).toEqual([400, "requested model 'nope' is not available"]);
    });

    test('trace settings: global and per model, a cleared model setting falls back to the global one', async () => {
      const get = async (model_name: string, settings: Record<string, { value: string[] }> = {}): Promise<Record<string, string[]>> => {
        const r = (await client.call('TraceSetting', { model_name, settings })).toJSON() as { settings: Record<string, { value?: string[] }> };
        return Object.fromEntries(Object.entries(r.settings).map(([k, v]) => [k, v.value ?? []]));
      };
      expect(await get('')).toEqual({ trace_level: ['OFF'], trace_rate: ['1000'], trace_count: ['-1'], log_frequency: ['0'], trace_file: [''], trace_mode: ['triton'] });
      expect(await get('', { trace_level: { value: ['TIMESTAMPS'] }, trace_rate: { value: ['10'] } })).toMatchObject({ trace_level: ['TIMESTAMPS'], trace_rate: ['10'] });
      expect(await get('simple', { trace_count: { value: ['5'] } })).toMatchObject({ trace_level: ['TIMESTAMPS'], trace_count: ['5'] });
      expect(await get('simple', { trace_count: { value: [] } })).toMatchObject({ trace_count: ['-1'] });
      expect(await get('', { trace_level: { value: [] }, trace_rate: { value: [] } })).toMatchObject({ trace_level: ['OFF'], trace_rate: ['1000'] });
      const refused: [Record<string, { value: string[] }>, string][] = [
        [{ trace_file: { value: ['/tmp/t'] } }, 'trace file location can not be updated through network protocol'],
        [{ trace_level: { value: ['OFF', 'TENSORS'] } }, "Expect only one trace level 'OFF' is specified"],
        [{ trace_rate: { value: ['x'] } }, "Unable to parse 'trace_rate', got: x"],
        [{ trace_rate: { value: ['1', '2'] } }, "expect only 1 value for 'trace_rate'"],
      ];
      for (const [settings, message] of refused) {
        expect((await callError(client.call('TraceSetting', { model_name: '', settings }))).message).toBe(message);
      }
      expect((await callError(client.call('TraceSetting', { model_name: 'nope', settings: {} }))).message).toBe('Request for unknown model : nope');
    });

    test('log settings are kept; a wrong type changes nothing', async () => {
      const r = (await client.call('LogSettings', { settings: { log_verbose_level: { uint32_param: 2 }, log_info: { bool_param: false } } })).toJSON();
      expect(r).toEqual({ settings: {
        log_file: { string_param: '' }, log_info: { bool_param: false }, log_warning: { bool_param: true }, log_error: { bool_param: true },
        log_verbose_level: { uint32_param: 2 }, log_format: { string_param: 'default' },
      } });
      const e = await callError(client.call('LogSettings', { settings: { log_error: { string_param: 'no' }, log_warning: { bool_param: false } } }));
      expect(e.message).toBe("expect boolean for 'log_error'");
      expect((await client.call('LogSettings', { settings: {} })).toJSON()).toMatchObject({ settings: { log_warning: { bool_param: true }, log_verbose_level: { uint32_param: 2 } } });
      await client.call('LogSettings', { settings: { log_verbose_level: { uint32_param: 0 }, log_info: { bool_param: true } } });
    });

    describe('system shared memory: regions read and written through /dev/shm', () => {
      const name = `tg-it-refbackend-${process.pid}`;
      const file = `/dev/shm/${name}`;
      beforeAll(() => writeFileSync(file, Buffer.alloc(4096)));
      afterAll(async () => {
        await client.call('SystemSharedMemoryUnregister', { name: '' });
        rmSync(file, { force: true });
      });

      test('register, status, inputs read from the region, outputs written into it, unregister', async () => {
        // INPUT0 in the region at 64, INPUT1 as raw_input_contents (entries pair with the inputs not in a region).
        const input0 = Buffer.concat([Buffer.alloc(64), int32(range(16, (i) => i * 10))]);
        writeFileSync(file, Buffer.concat([input0, Buffer.alloc(4096 - input0.length)]));
        await client.call('SystemSharedMemoryRegister', { name: 'r', key: `/${name}`, offset: 0, byte_size: 4096 });
        const status = (await client.call('SystemSharedMemoryStatus', { name: '' })).toJSON();
        expect(status).toEqual({ regions: { r: { name: 'r', key: `/${name}`, byte_size: '4096' } } });
        const region = (offset: number, size: number) => ({
          shared_memory_region: { string_param: 'r' }, shared_memory_offset: { int64_param: offset }, shared_memory_byte_size: { int64_param: size },
        });
        const r = await client.call('ModelInfer', simpleRequest({
          inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: region(64, 64) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
          raw_input_contents: [int32(range(16, () => 1))],
          outputs: [{ name: 'OUTPUT0', parameters: region(1024, 64) }, { name: 'OUTPUT1' }],
        }));
        expect(r.outputs.map((o) => o.name)).toEqual(['OUTPUT0', 'OUTPUT1']);
        expect(r.raw_output_contents.map((b) => b.byteLength)).toEqual([0, 64]); // one entry per output, as Triton's
        expect(readInt32(r.raw_output_contents[1]!)).toEqual(range(16, (i) => i * 10 - 1));
        expect(readInt32(readFileSync(file).subarray(1024, 1088))).toEqual(range(16, (i) => i * 10 + 1));
        expect(backend.sharedMemory.bytesRead).toBeGreaterThanOrEqual(64);
        expect(backend.sharedMemory.bytesWritten).toBeGreaterThanOrEqual(64);
        await client.call('SystemSharedMemoryUnregister', { name: 'r' });
        await client.call('SystemSharedMemoryUnregister', { name: 'r' }); // an unknown name is no error
        expect((await client.call('SystemSharedMemoryStatus', { name: '' })).toJSON()).toEqual({});
      });

      test('Triton\'s errors', async () => {
        await client.call('SystemSharedMemoryRegister', { name: 'e', key: name, offset: 0, byte_size: 128 });
        const expectError = async (p: Promise<unknown>, message: string): Promise<void> => {
          expect((await callError(p)).message).toBe(message);
        };
        await expectError(client.call('SystemSharedMemoryRegister', { name: 'e', key: name, offset: 0, byte_size: 128 }), "shared memory region 'e' already in manager");
        await expectError(client.call('SystemSharedMemoryRegister', { name: 'x', key: '/tg-it-no-such-object', offset: 0, byte_size: 8 }),
          "Unable to open shared memory region: '/tg-it-no-such-object'");
        await expectError(client.call('SystemSharedMemoryRegister', { name: 'x', key: name, offset: 4000, byte_size: 200 }), `Invalid shared memory region: '${name}'`);
        await expectError(client.call('SystemSharedMemoryStatus', { name: 'x' }), "Unable to find system shared memory region: 'x'");
        await expectError(client.call('CudaSharedMemoryRegister', { name: 'c', raw_handle: Buffer.alloc(64), device_id: 0, byte_size: 8 }),
          "failed to register CUDA shared memory region: 'c', GPUs not supported");
        const inShm = (region: string, offset: number, size: number) => simpleRequest({
          inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: {
            shared_memory_region: { string_param: region }, shared_memory_offset: { int64_param: offset }, shared_memory_byte_size: { int64_param: size },
          } }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
          raw_input_contents: [int32(range(16, () => 1))],
        });
        await expectError(client.call('ModelInfer', inShm('nope', 0, 64)), "Unable to find shared memory region: 'nope'");
        await expectError(client.call('ModelInfer', inShm('e', 128, 64)), "Invalid offset for shared memory region: 'e'");
        await expectError(client.call('ModelInfer', inShm('e', 100, 64)), "Invalid offset + byte size for shared memory region: 'e'");
        await expectError(client.call('ModelInfer', inShm('e', 0, 60)), "[request id: <id_unknown>] input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60");
        await expectError(client.call('ModelInfer', simpleRequest({
          outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: { string_param: 'e' }, shared_memory_byte_size: { int64_param: 32 } } }],
        })), "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 bytes to hold the results");
        await client.call('SystemSharedMemoryUnregister', { name: 'e' });
      });
    });
  });
});
