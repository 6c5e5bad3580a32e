// The reference backend: a Triton-protocol gRPC server (grpc-js, our proto) serving the demo
// zoo with Triton's semantics — the checks Triton's core makes on a ModelInfer request, in the
// same order, with the same gRPC codes and messages, and raw_output_contents always. It powers
// `--demo`, `--demo-backend` and the fast tests; conformance tests use real Triton. Besides
// inference it answers every Triton API the gateway's README shows: the repository index,
// model statistics (counted, statistics.ts), system shared memory (the files really read and
// written, system-shared-memory.ts, so the gateway's shared-memory mode runs on it), trace and
// log settings (kept, settings.ts). CUDA shared memory answers as a Triton without GPUs.
import { EventEmitter } from 'node:events';
import {
  type handleUnaryCall, type ServerDuplexStream, Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData, status,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { grpcHealth, healthService, inference, inferenceService } from '../../proto/services';
import { unframeBytesElements } from '../infer/bytes-element';
import { configTypeEnum, type Datatype, elementCount, elementSize, isDatatype } from '../infer/datatype';
import { LogSettings, SettingError, TraceSettings } from './settings';
import { ModelStatisticsBook, type RequestTimes } from './statistics';
import { ShmError, SystemSharedMemory } from './system-shared-memory';
import { createZoo, ModelError, type ModelSpec, newZooStats, type Tensor, type ZooEvents, type ZooStats } from './zoo';

export interface ReferenceBackend {
  /** host:port the server listens on. */
  readonly address: string;
  readonly stats: ZooStats;
  /** Emits the zoo's ZooEvents as they happen (tests wait on them instead of polling `stats`). */
  readonly events: EventEmitter<ZooEvents>;
  /** The registered system shared-memory regions and the bytes read from and written to them. */
  readonly sharedMemory: SystemSharedMemory;
  /** Faults a test sets while it runs: inferDelayMs, how long each ModelInfer call waits first (a slow Triton). */
  readonly faults: BackendFaults;
  /** Lets calls in flight finish for `deadlineMs` (default 2000), then cancels them and closes every connection. */
  close(deadlineMs?: number): Promise<void>;
}

export interface BackendFaults {
  inferDelayMs: number;
  /** grpc.health.v1 Check answers NOT_SERVING (a Triton whose health checks fail while it still answers calls). */
  notServing: boolean;
}

export interface ReferenceBackendOptions {
  readonly host?: string;
  /** 0 = a free port. */
  readonly port?: number;
  /** Where shm_open finds a key's object: /dev/shm (tests may point elsewhere). */
  readonly shmDir?: string;
}

const VERSION = '1';
const MAX_MESSAGE_BYTES = 2 ** 31 - 1; // Triton's gRPC server limit, both directions
export const SERVER_NAME = 'triton';
export const SERVER_VERSION = '2.51.0';
/** The extensions real Triton 2.51 lists in ServerMetadata. */
export const SERVER_EXTENSIONS = [
  'classification', 'sequence', 'model_repository', 'model_repository(unload_dependents)',
  'schedule_policy', 'model_configuration', 'system_shared_memory', 'cuda_shared_memory',
  'binary_tensor_data', 'parameters', 'statistics', 'trace', 'logging',
];

const codeOf = (err: unknown): number | undefined =>
  (err instanceof CallError || err instanceof ShmError || err instanceof SettingError ? err.code : err instanceof ModelError ? err.grpcCode : undefined);

class CallError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

type Param = bigint | number | string | boolean;

/** What the zoo's handlers share: the models, their statistics, the shared-memory regions, the settings. */
interface Zoo {
  readonly stats: ZooStats;
  readonly models: ReadonlyMap<string, ModelSpec>;
  readonly shm: SystemSharedMemory;
  readonly book: ModelStatisticsBook;
  readonly trace: TraceSettings;
  readonly logging: LogSettings;
  readonly faults: BackendFaults;
}

export async function startReferenceBackend(options: ReferenceBackendOptions = {}): Promise<ReferenceBackend> {
  const stats = newZooStats();
  const events = new EventEmitter<ZooEvents>();
  const models = new Map(createZoo(stats, 1 << 30, events).map((m) => [m.name, m]));
  const shm = new SystemSharedMemory(options.shmDir);
  const faults: BackendFaults = { inferDelayMs: 0, notServing: false };
  const zoo: Zoo = { stats, models, shm, book: new ModelStatisticsBook([...models.keys()]), trace: new TraceSettings(), logging: new LogSettings(), faults };
  const server = new Server({
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
  });
  const impl: UntypedServiceImplementation = {
    ...controlMethods(zoo),
    ModelInfer: modelInfer(zoo),
    ModelStreamInfer: (call: ServerDuplexStream<inference.ModelInferRequest, inference.IModelStreamInferResponse>) => modelStreamInfer(zoo, call),
  };
  server.addService(inferenceService, impl);
  server.addService(healthService, {
    Check: unary(() => ({ status: grpcHealth.health.v1.HealthCheckResponse.ServingStatus[faults.notServing ? 'NOT_SERVING' : 'SERVING'] })),
  });

  const host = options.host ?? '127.0.0.1';
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${options.port ?? 0}`, ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  });
  return {
    address: `${host}:${port}`,
    stats,
    faults,
    events,
    sharedMemory: shm,
    close: (deadlineMs = 2000) => new Promise<void>((resolve) => {
      // In-flight calls (e.g. a sleeping `slow`) must not hold the shutdown forever.
      const force = setTimeout(() => {
        server.forceShutdown();
        resolve();
      }, deadlineMs);
      server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
      });
    }).finally(() => shm.close()),
  };
}

/** Every RPC but the two inference ones: metadata, readiness, statistics, the repository, shared memory, settings. */
function controlMethods(zoo: Zoo): UntypedServiceImplementation {
  const { models, shm, book, trace, logging } = zoo;
  return {
    ServerLive: unary(() => ({ live: true })),
    ServerReady: unary(() => ({ ready: true })),
    ServerMetadata: unary(() => ({ name: SERVER_NAME, version: SERVER_VERSION, extensions: SERVER_EXTENSIONS })),
    // Triton answers an unknown model or version with ready=false, not an error.
    ModelReady: unary((req: inference.ModelReadyRequest) => ({
      ready: models.has(req.name) && (req.version === '' || req.version === VERSION),
    })),
    ModelMetadata: unary((req: inference.ModelMetadataRequest) => {
      const m = lookup(models, req.name, req.version);
      const shape = (dims: readonly number[]): number[] => (m.maxBatchSize > 0 ? [-1, ...dims] : [...dims]);
      return {
        name: m.name,
        versions: [VERSION],
        platform: 'python',
        inputs: m.inputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: shape(t.dims) })),
        outputs: m.outputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: shape(t.dims) })),
      };
    }),
    ModelConfig: unary((req: inference.ModelConfigRequest) => ({ config: modelConfig(lookup(models, req.name, req.version)) })),
    ModelStatistics: unary((req: inference.ModelStatisticsRequest) => {
      if (req.name === '') return { model_stats: book.statistics([], VERSION) };
      // Triton's own words here, not lookup()'s (conformance: zoo-twins.test.ts).
      if (!models.has(req.name)) throw new CallError(status.INVALID_ARGUMENT, `requested model '${req.name}' is not available`);
      if (req.version !== '' && req.version !== VERSION) {
        throw new CallError(status.INVALID_ARGUMENT, `requested model version is not available for model '${req.name}'`);
      }
      return { model_stats: book.statistics([req.name], VERSION) };
    }),
    // Every model of the zoo is loaded, version 1, READY (the zoo cannot be changed at run time).
    RepositoryIndex: unary((req: inference.RepositoryIndexRequest) => {
      if (req.repository_name !== '') throw new CallError(status.UNIMPLEMENTED, "'repository_name' specification is not supported");
      return { models: [...models.keys()].sort().map((name) => ({ name, version: VERSION, state: 'READY', reason: '' })) };
    }),
    SystemSharedMemoryRegister: unary((req: inference.SystemSharedMemoryRegisterRequest) => {
      shm.register(req.name, req.key, Number(req.offset), Number(req.byte_size));
      return {};
    }),
    SystemSharedMemoryStatus: unary((req: inference.SystemSharedMemoryStatusRequest) => ({
      regions: Object.fromEntries(shm.status(req.name).map((r) => [r.name, r])),
    })),
    SystemSharedMemoryUnregister: unary((req: inference.SystemSharedMemoryUnregisterRequest) => {
      shm.unregister(req.name);
      return {};
    }),
    // As a Triton built without GPUs: nothing registered, and nothing can be.
    CudaSharedMemoryStatus: unary((req: inference.CudaSharedMemoryStatusRequest) => {
      if (req.name !== '') throw new CallError(status.NOT_FOUND, `Unable to find cuda shared memory region: '${req.name}'`);
      return { regions: {} };
    }),
    CudaSharedMemoryRegister: unary((req: inference.CudaSharedMemoryRegisterRequest) => {
      throw new CallError(status.INVALID_ARGUMENT, `failed to register CUDA shared memory region: '${req.name}', GPUs not supported`);
    }),
    CudaSharedMemoryUnregister: unary(() => ({})),
    TraceSetting: unary((req: inference.TraceSettingRequest) => {
      if (req.model_name !== '' && !models.has(req.model_name)) {
        throw new CallError(status.INVALID_ARGUMENT, `Request for unknown model : ${req.model_name}`);
      }
      return { settings: trace.update(req.model_name, req.settings ?? {}) };
    }),
    LogSettings: unary((req: inference.LogSettingsRequest) => ({ settings: logging.update(req.settings ?? {}) })),
  };
}

/** ModelInfer: counted in the zoo's stats and the model's statistics; the call's cancel aborts the model. */
function modelInfer(zoo: Zoo): handleUnaryCall<inference.ModelInferRequest, inference.IModelInferResponse> {
  const { stats, shm, book } = zoo;
  return unary(async (req: inference.ModelInferRequest, call) => {
    const received = process.hrtime.bigint();
    stats.inferCalls++;
    const tp = call.metadata.get('traceparent')[0];
    stats.lastTraceparent = tp === undefined ? undefined : String(tp);
    const m = lookup(zoo.models, req.model_name, req.model_version);
    if (m.decoupled === true) {
      throw new CallError(status.UNIMPLEMENTED, "ModelInfer RPC doesn't support models with decoupled transaction policy");
    }
    const ctl = new AbortController();
    let answered = false;
    call.on('cancelled', () => {
      if (!answered) stats.inferCancellations++;
      ctl.abort();
    });
    if (zoo.faults.inferDelayMs > 0) await new Promise((r) => setTimeout(r, zoo.faults.inferDelayMs));
    try {
      return await infer(m, req, ctl.signal, { shm, counted: (batch, times) => book.succeeded(m.name, batch, times), received });
    } catch (err) {
      book.failed(m.name, received);
      throw err;
    } finally {
      answered = true;
    }
  });
}

/**
 * ModelStreamInfer: each request on the stream is answered by its responses, each marked
 * triton_final_response; per-request errors are error_message and the stream stays open (as Triton's).
 */
function modelStreamInfer(zoo: Zoo, call: ServerDuplexStream<inference.ModelInferRequest, inference.IModelStreamInferResponse>): void {
  const { stats, shm, book } = zoo;
  stats.streamCalls++;
  const tp = call.metadata.get('traceparent')[0];
  stats.lastTraceparent = tp === undefined ? undefined : String(tp);
  const ctl = new AbortController();
  call.on('cancelled', () => ctl.abort());
  let pending = Promise.resolve();
  const final = (v: boolean): Record<string, inference.IInferParameter> => ({ triton_final_response: { bool_param: v } });
  call.on('data', (req: inference.ModelInferRequest) => {
    pending = pending.then(async () => {
      const emptyFinal = req.parameters?.triton_enable_empty_final_response?.bool_param === true;
      const received = process.hrtime.bigint();
      // Each request of the stream counts in the model's statistics as a ModelInfer does.
      const env: InferEnv = { shm, received, counted: (batch, times) => book.succeeded(req.model_name, batch, times) };
      try {
        const m = lookup(zoo.models, req.model_name, req.model_version);
        if (m.decoupled === true) {
          await infer(m, req, ctl.signal, env, (r) => {
            if (!ctl.signal.aborted) call.write({ infer_response: { ...r, parameters: final(false) } });
          });
          if (emptyFinal && !ctl.signal.aborted) {
            // Triton's empty final response names the model but not its version
            call.write({ infer_response: { model_name: m.name, model_version: '', id: req.id, parameters: final(true) } });
          }
        } else {
          const r = await infer(m, req, ctl.signal, env);
          call.write({ infer_response: { ...r, parameters: final(true) } });
        }
      } catch (err) {
        book.failed(req.model_name, received);
        if (ctl.signal.aborted) return;
        const message = codeOf(err) !== undefined ? (err as Error).message : `reference backend: ${String(err)}`;
        call.write({ error_message: message });
      }
    });
  });
  call.on('end', () => {
    void pending.then(() => {
      if (!ctl.signal.aborted) call.end();
    });
  });
}

/**
 * The model a request names, as Triton finds it: an unknown name or version is NOT_FOUND, a
 * version that is not a number INVALID_ARGUMENT.
 */
function lookup(models: ReadonlyMap<string, ModelSpec>, name: string, version: string): ModelSpec {
  const m = models.get(name);
  if (m === undefined) throw new CallError(status.NOT_FOUND, `Request for unknown model: '${name}' is not found`);
  if (version !== '' && !/^[+-]?\d+/.test(version)) {
    throw new CallError(status.INVALID_ARGUMENT,
      `failed to get model version from specified version string '${version}' (details: stol), version should be an integral value > 0`);
  }
  if (version !== '' && version !== VERSION) {
    throw new CallError(status.NOT_FOUND, `Request for unknown model: '${name}' version ${version} is not found`);
  }
  return m;
}

/** A unary handler from a function of the request: its result answered, a CallError (or model error) as the status. */
function unary<Req, Res>(fn: (req: Req, call: ServerUnaryCall<Req, Res>) => Res | Promise<Res>): handleUnaryCall<Req, Res> {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
    Promise.resolve()
      .then(() => fn(call.request, call))
      .then((res) => callback(null, res))
      .catch((err: unknown) => {
        const code = codeOf(err);
        if (code !== undefined) {
          callback({ code, details: (err as Error).message });
        } else {
          callback({ code: status.INTERNAL, details: `reference backend: ${String(err)}` });
        }
      });
  };
}

function modelConfig(m: ModelSpec): inference.IModelConfig {
  return {
    name: m.name,
    backend: 'python',
    max_batch_size: m.maxBatchSize,
    input: m.inputs.map((t) => ({
      name: t.name, data_type: configTypeEnum(t.datatype), dims: [...t.dims], ...(t.optional === true ? { optional: true } : {}),
    })),
    output: m.outputs.map((t) => ({ name: t.name, data_type: configTypeEnum(t.datatype), dims: [...t.dims] })),
    ...(m.maxBatchSize > 0 ? { dynamic_batching: {} } : {}),
    ...(m.decoupled === true ? { model_transaction_policy: { decoupled: true } } : {}),
    instance_group: [{ name: m.name, kind: 2 /* KIND_CPU */, count: 1 }],
  };
}

function paramValue(p: inference.IInferParameter): Param | undefined {
  switch (p.parameter_choice) {
    case 'bool_param': return p.bool_param ?? false;
    case 'int64_param': return BigInt(String(p.int64_param ?? 0));
    case 'uint64_param': return BigInt.asUintN(64, BigInt(String(p.uint64_param ?? 0)));
    case 'double_param': return p.double_param ?? 0;
    case 'string_param': return p.string_param ?? '';
    default: return undefined;
  }
}

const shapeText = (s: readonly number[]): string => `[${s.join(',')}]`;

const BATCH_DIM_NOTE = 'NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be '
  + 'prepended to each input shape. If you want to specify the full shape including the batch dim in your input '
  + 'dims config, try setting max_batch_size to zero. See the model configuration docs for more info on max_batch_size.';

/** What infer() reads inputs from and writes outputs to, and whom it tells how a request went. */
interface InferEnv {
  readonly shm: SystemSharedMemory;
  /** A request answered: its batch size and stage times (ModelInfer's statistics). */
  readonly counted?: (batch: number, times: RequestTimes) => void;
  readonly received?: bigint;
}

/** A tensor's shared_memory_* parameters, checked as Triton's ParseSharedMemoryParams does; undefined without. */
function shmPlace(name: string, parameters: Readonly<Record<string, inference.IInferParameter>> | null | undefined):
  { region: string; offset: number; byteSize: number } | undefined {
  const p = parameters ?? {};
  const region = p.shared_memory_region;
  for (const [key, type] of [['shared_memory_offset', 'int64_param'], ['shared_memory_byte_size', 'int64_param']] as const) {
    if (p[key] === undefined) continue;
    if (region === undefined) {
      throw new CallError(status.INVALID_ARGUMENT, `'${key}' can not be specified without 'shared_memory_region' parameter for tensor '${name}'`);
    }
    if (p[key].parameter_choice !== type) {
      throw new CallError(status.INVALID_ARGUMENT, `invalid value type for '${key}' parameter for tensor '${name}', expected ${type}.`);
    }
  }
  if (region === undefined) return undefined;
  if (region.parameter_choice !== 'string_param') {
    throw new CallError(status.INVALID_ARGUMENT, `invalid value type for 'shared_memory_region' parameter for tensor '${name}', expected string_param.`);
  }
  return {
    region: region.string_param ?? '',
    offset: Number(p.shared_memory_offset?.int64_param ?? 0),
    byteSize: Number(p.shared_memory_byte_size?.int64_param ?? 0),
  };
}

type Fail = (code: number, msg: string) => never;
type OutputPlace = { region: string; offset: number; byteSize: number };

/** Triton's core checks on a request, then the model, then the response. */
async function infer(
  m: ModelSpec, req: inference.ModelInferRequest, signal: AbortSignal, env: InferEnv, emit?: (r: inference.IModelInferResponse) => void,
): Promise<inference.IModelInferResponse> {
  const received = env.received ?? process.hrtime.bigint();
  const rid = `[request id: ${req.id === '' ? '<id_unknown>' : req.id}] `;
  const fail = (code: number, msg: string): never => {
    throw new CallError(code, rid + msg);
  };
  const parameters = new Map<string, Param>();
  for (const [k, v] of Object.entries(req.parameters ?? {})) {
    const value = paramValue(v);
    if (value !== undefined) parameters.set(k, value);
  }
  const given = givenInputs(m, req, env, fail);
  const { requested, outputPlaces } = requestedOutputs(m, req, env, fail);
  checkInputNames(m, given, fail);
  const batch = checkInputs(m, given, fail);

  // Triton returns outputs in the order the model produces them, whatever the request's order.
  const names = m.outputs.map((s) => s.name).filter((n) => requested.length === 0 || requested.includes(n));
  const place = (outputs: ReadonlyMap<string, Tensor>): inference.IModelInferResponse => response(m, req, names, outputs, env.shm, outputPlaces);
  if (emit !== undefined && m.stream !== undefined) {
    // Decoupled: every yielded set of outputs is one response; the model's time is the stream's.
    const streamStart = process.hrtime.bigint();
    for await (const outputs of m.stream(given, { parameters, signal })) emit(place(outputs));
    const streamEnd = process.hrtime.bigint();
    env.counted?.(batch ?? 1, { received, inferStart: streamStart, inferEnd: streamEnd, done: streamEnd });
    return {};
  }
  const inferStart = process.hrtime.bigint();
  const outputs = await m.execute(given, { parameters, signal });
  const inferEnd = process.hrtime.bigint();
  const answer = place(outputs);
  env.counted?.(batch ?? 1, { received, inferStart, inferEnd, done: process.hrtime.bigint() });
  return answer;
}

/**
 * The gRPC frontend takes an input's bytes from its shared-memory region, or else from the
 * next raw_input_contents entry (entries pair with the inputs not in shared memory, in order).
 */
function givenInputs(m: ModelSpec, req: inference.ModelInferRequest, env: InferEnv, fail: Fail): Map<string, Tensor> {
  const given = new Map<string, Tensor>();
  let rawIndex = 0;
  for (const input of req.inputs) {
    const name = input.name ?? '';
    const place = shmPlace(name, input.parameters);
    let data: Buffer;
    if (place !== undefined) {
      data = env.shm.read(place.region, place.offset, place.byteSize);
    } else {
      const raw = req.raw_input_contents[rawIndex++];
      if (raw === undefined) {
        throw new CallError(status.INVALID_ARGUMENT, `unable to find data for input tensor '${name}' for model '${m.name}' in request.`);
      }
      data = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    }
    if (given.has(name)) fail(status.INVALID_ARGUMENT, `input '${name}' already exists in request`);
    const shape = (input.shape ?? []).map((d) => Number(d));
    given.set(name, { datatype: (input.datatype ?? '') as Datatype, shape, data });
  }
  return given;
}

/** The outputs asked for, and those to write into shared memory. */
function requestedOutputs(
  m: ModelSpec, req: inference.ModelInferRequest, env: InferEnv, fail: Fail,
): { requested: string[]; outputPlaces: Map<string, OutputPlace> } {
  const requested: string[] = [];
  /** Outputs to write into shared memory, checked before the model runs (Triton's InferAllocatorPayload). */
  const outputPlaces = new Map<string, OutputPlace>();
  for (const o of req.outputs) {
    const name = o.name ?? '';
    const place = shmPlace(name, o.parameters);
    if (place !== undefined) {
      env.shm.room(place.region, place.offset, place.byteSize);
      outputPlaces.set(name, place);
    }
  }
  for (const o of req.outputs) {
    const name = o.name ?? '';
    if (!m.outputs.some((s) => s.name === name)) throw new CallError(status.INVALID_ARGUMENT, `unexpected inference output '${name}' for model '${m.name}'`);
    if (requested.includes(name)) fail(status.INVALID_ARGUMENT, `output '${name}' already exists in request`);
    requested.push(name);
  }
  return { requested, outputPlaces };
}

/** No input the model does not have, and none of its required ones missing (optional inputs may be). */
function checkInputNames(m: ModelSpec, given: ReadonlyMap<string, Tensor>, fail: Fail): void {
  for (const name of given.keys()) {
    if (!m.inputs.some((s) => s.name === name)) throw new CallError(status.INVALID_ARGUMENT, `unexpected inference input '${name}' for model '${m.name}'`);
  }
  // Triton counts the inputs, it does not check which ones came: with optional inputs a request may
  // leave out a required one if it brings as many optional ones (the model finds it missing).
  const required = m.inputs.filter((s) => s.optional !== true);
  if (given.size < required.length) {
    const names = [...given.keys()];
    const missing = required.filter((s) => !given.has(s.name)).map((s) => `'${s.name}'`);
    // Triton's words differ when the model has optional inputs
    const expected = required.length === m.inputs.length
      ? `expected ${m.inputs.length} inputs` : `expected number of inputs between ${required.length} and ${m.inputs.length}`;
    fail(status.INVALID_ARGUMENT, `${expected} but got ${given.size} inputs for model '${m.name}'. `
      + `Got input(s) [${names.map((n) => `'${n}'`).join(', ')}], but missing required input(s) [${missing.join(', ')}]. `
      + 'Please provide all required input(s).');
  }
}

/** Each input's batch size, datatype, shape and bytes against the model's; the batch size (batching models). */
function checkInputs(m: ModelSpec, given: ReadonlyMap<string, Tensor>, fail: Fail): number | undefined {
  let batch: number | undefined;
  for (const [name, t] of given) {
    const s = m.inputs.find((x) => x.name === name)!;
    let dims = t.shape;
    if (m.maxBatchSize > 0) {
      const b = t.shape[0];
      if (b === undefined || b < 1 || b > m.maxBatchSize) {
        fail(status.INVALID_ARGUMENT, `inference request batch-size must be <= ${m.maxBatchSize} for '${m.name}'`);
      }
      if (batch !== undefined && b !== batch) fail(status.INVALID_ARGUMENT, `input '${name}' batch size does not match other inputs for '${m.name}'`);
      batch = b;
      dims = t.shape.slice(1);
    }
    if (!isDatatype(t.datatype) || t.datatype !== s.datatype) {
      fail(status.INVALID_ARGUMENT, `inference input '${name}' data-type is '${t.datatype}', but model '${m.name}' expects '${s.datatype}'`);
    }
    const fits = dims.length === s.dims.length && dims.every((d, i) => s.dims[i] === -1 || s.dims[i] === d);
    if (!fits) {
      const expected = m.maxBatchSize > 0 ? [-1, ...s.dims] : s.dims;
      fail(status.INVALID_ARGUMENT, `unexpected shape for input '${name}' for model '${m.name}'. Expected ${shapeText(expected)}, got ${shapeText(t.shape)}. `
        + (m.maxBatchSize > 0 ? BATCH_DIM_NOTE : ''));
    }
    checkInputBytes(m, name, t, s, fail);
  }
  return batch;
}

/** An input's bytes: BYTES elements framed and counted as the shape says, else the shape's byte size. */
function checkInputBytes(m: ModelSpec, name: string, t: Tensor, s: ModelSpec['inputs'][number], fail: Fail): void {
  const count = elementCount(t.shape);
  if (s.datatype === 'BYTES') {
    const u = unframeBytesElements(t.data);
    if (!u.ok) {
      if (u.problem === 'length') {
        fail(status.INVALID_ARGUMENT, `incomplete string length for inference input '${name}' for model '${m.name}', expecting 4 bytes but only ${u.available} bytes available. Please make sure the string length is included.`);
      } else {
        throw new CallError(status.INVALID_ARGUMENT, `incomplete string data for inference input '${name}', expecting string of length ${u.expected} but only ${u.available} bytes available`);
      }
    } else if (u.elements.length < count) {
      fail(status.INVALID_ARGUMENT, `expected ${count} string elements for inference input '${name}' for model '${m.name}', got ${u.elements.length}`);
    } else if (u.elements.length > count) {
      fail(status.INVALID_ARGUMENT, `unexpected number of string elements ${u.elements.length} for inference input '${name}' for model '${m.name}', expecting ${count}`);
    }
  } else {
    const expected = count * elementSize(s.datatype);
    if (t.data.byteLength !== expected) {
      fail(status.INVALID_ARGUMENT, `input byte size mismatch for input '${name}' for model '${m.name}'. Expected ${expected}, got ${t.data.byteLength}`);
    }
  }
}

/**
 * The answer: every output named with its datatype and shape, its bytes in raw_output_contents
 * or, for an output placed in shared memory, written there with an empty raw_output_contents entry
 * in its place (Triton's gRPC ResponseAllocatorHelper keeps one entry per output).
 */
function response(
  m: ModelSpec, req: inference.ModelInferRequest, names: readonly string[], outputs: ReadonlyMap<string, Tensor>,
  shm: SystemSharedMemory, places: ReadonlyMap<string, { region: string; offset: number; byteSize: number }>,
): inference.IModelInferResponse {
  // An optional output (one the model sets only when asked, as the vLLM backend's additional outputs)
  // is left out of an answer that has none, unless the request named it.
  const given = names.filter((n) => outputs.has(n) || m.outputs.find((s) => s.name === n)?.optional !== true || (req.outputs ?? []).some((o) => o.name === n));
  const tensors = given.map((n) => {
    const t = outputs.get(n);
    if (t === undefined) throw new CallError(status.INTERNAL, `${m.name} produced no output ${n}`);
    const p = places.get(n);
    if (p !== undefined && t.data.byteLength > p.byteSize) {
      throw new CallError(status.INTERNAL, `shared memory size specified with the request for output '${n}' (${p.byteSize} bytes) should be at least ${t.data.byteLength} bytes to hold the results`);
    }
    return { name: n, t, p };
  });
  for (const { t, p } of tensors) if (p !== undefined && t.data.byteLength > 0) shm.write(p.region, p.offset, t.data);
  return {
    model_name: m.name,
    model_version: VERSION,
    id: req.id,
    outputs: tensors.map(({ name, t }) => ({ name, datatype: t.datatype, shape: [...t.shape] })),
    raw_output_contents: tensors.map(({ t, p }) => (p === undefined ? t.data : Buffer.alloc(0))),
  };
}
