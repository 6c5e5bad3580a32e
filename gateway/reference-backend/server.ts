// The reference backend: a Triton-protocol gRPC server (grpc-js, our proto) serving the demo
// zoo with Triton's semantics — the checks Triton's core makes on a ModelInfer request, in the
// same order, with the same gRPC codes and messages, and raw_output_contents always. It powers
// `--demo` and the fast tests; conformance tests use real Triton.
import { EventEmitter } from 'node:events';
import {
  type handleUnaryCall, type ServerDuplexStream, Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData, status,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { grpcHealth, healthService, inference, inferenceService } from '../../proto/services';
import { unframeBytesElements } from '../infer/bytes-element';
import { configTypeEnum, type Datatype, elementCount, elementSize, isDatatype } from '../infer/datatype';
import { createZoo, ModelError, type ModelSpec, type Tensor, type ZooEvents, type ZooStats } from './zoo';

export interface ReferenceBackend {
  /** host:port the server listens on. */
  readonly address: string;
  readonly stats: ZooStats;
  /** Emits the zoo's ZooEvents as they happen (tests wait on them instead of polling `stats`). */
  readonly events: EventEmitter<ZooEvents>;
  /** Lets calls in flight finish for `deadlineMs` (default 2000), then cancels them and closes every connection. */
  close(deadlineMs?: number): Promise<void>;
}

export interface ReferenceBackendOptions {
  readonly host?: string;
  /** 0 = a free port. */
  readonly port?: number;
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

class CallError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

type Param = bigint | number | string | boolean;

export async function startReferenceBackend(options: ReferenceBackendOptions = {}): Promise<ReferenceBackend> {
  const stats: ZooStats = { slowCancellations: 0, streamCancellations: 0, streamCalls: 0, inferCalls: 0 };
  const events = new EventEmitter<ZooEvents>();
  const models = new Map(createZoo(stats, 1 << 30, events).map((m) => [m.name, m]));
  const server = new Server({
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
  });

  const lookup = (name: string, version: string): ModelSpec => {
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
  };

  const unary = <Req, Res>(fn: (req: Req, call: ServerUnaryCall<Req, Res>) => Res | Promise<Res>): handleUnaryCall<Req, Res> =>
    (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
      Promise.resolve()
        .then(() => fn(call.request, call))
        .then((res) => callback(null, res))
        .catch((err: unknown) => {
          if (err instanceof CallError || err instanceof ModelError) {
            callback({ code: err instanceof CallError ? err.code : err.grpcCode, details: err.message });
          } else {
            callback({ code: status.INTERNAL, details: `reference backend: ${String(err)}` });
          }
        });
    };

  const impl: UntypedServiceImplementation = {
    ServerLive: unary(() => ({ live: true })),
    ServerReady: unary(() => ({ ready: true })),
    ServerMetadata: unary(() => ({ name: SERVER_NAME, version: SERVER_VERSION, extensions: SERVER_EXTENSIONS })),
    // Triton answers an unknown model or version with ready=false, not an error.
    ModelReady: unary((req: inference.ModelReadyRequest) => ({
      ready: models.has(req.name) && (req.version === '' || req.version === VERSION),
    })),
    ModelMetadata: unary((req: inference.ModelMetadataRequest) => {
      const m = lookup(req.name, req.version);
      const shape = (dims: readonly number[]): number[] => (m.maxBatchSize > 0 ? [-1, ...dims] : [...dims]);
      return {
        name: m.name,
        versions: [VERSION],
        platform: 'python',
        inputs: m.inputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: shape(t.dims) })),
        outputs: m.outputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: shape(t.dims) })),
      };
    }),
    ModelConfig: unary((req: inference.ModelConfigRequest) => ({ config: modelConfig(lookup(req.name, req.version)) })),
    ModelInfer: unary(async (req: inference.ModelInferRequest, call) => {
      stats.inferCalls++;
      const tp = call.metadata.get('traceparent')[0];
      stats.lastTraceparent = tp === undefined ? undefined : String(tp);
      const m = lookup(req.model_name, req.model_version);
      if (m.decoupled === true) {
        throw new CallError(status.UNIMPLEMENTED, "ModelInfer RPC doesn't support models with decoupled transaction policy");
      }
      const ctl = new AbortController();
      call.on('cancelled', () => ctl.abort());
      return infer(m, req, ctl.signal);
    }),
    // Each request on the stream is answered by its responses, each marked triton_final_response;
    // per-request errors are error_message and the stream stays open (as Triton's).
    ModelStreamInfer: (call: ServerDuplexStream<inference.ModelInferRequest, inference.IModelStreamInferResponse>) => {
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
          try {
            const m = lookup(req.model_name, req.model_version);
            if (m.decoupled === true) {
              await infer(m, req, ctl.signal, (r) => {
                if (!ctl.signal.aborted) call.write({ infer_response: { ...r, parameters: final(false) } });
              });
              if (emptyFinal && !ctl.signal.aborted) {
                call.write({ infer_response: { model_name: m.name, model_version: VERSION, id: req.id, parameters: final(true) } });
              }
            } else {
              const r = await infer(m, req, ctl.signal);
              call.write({ infer_response: { ...r, parameters: final(true) } });
            }
          } catch (err) {
            if (ctl.signal.aborted) return;
            const message = err instanceof CallError || err instanceof ModelError ? err.message : `reference backend: ${String(err)}`;
            call.write({ error_message: message });
          }
        });
      });
      call.on('end', () => {
        void pending.then(() => {
          if (!ctl.signal.aborted) call.end();
        });
      });
    },
  };
  server.addService(inferenceService, impl);
  server.addService(healthService, {
    Check: unary(() => ({ status: grpcHealth.health.v1.HealthCheckResponse.ServingStatus.SERVING })),
  });

  const host = options.host ?? '127.0.0.1';
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${host}:${options.port ?? 0}`, ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  });
  return {
    address: `${host}:${port}`,
    stats,
    events,
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
    }),
  };
}

function modelConfig(m: ModelSpec): inference.IModelConfig {
  return {
    name: m.name,
    backend: 'python',
    max_batch_size: m.maxBatchSize,
    input: m.inputs.map((t) => ({ name: t.name, data_type: configTypeEnum(t.datatype), dims: [...t.dims] })),
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

/** Triton's core checks on a request, then the model, then the response. */
async function infer(
  m: ModelSpec, req: inference.ModelInferRequest, signal: AbortSignal, emit?: (r: inference.IModelInferResponse) => void,
): Promise<inference.IModelInferResponse> {
  const rid = `[request id: ${req.id === '' ? '<id_unknown>' : req.id}] `;
  const fail = (code: number, msg: string): never => {
    throw new CallError(code, rid + msg);
  };
  const parameters = new Map<string, Param>();
  for (const [k, v] of Object.entries(req.parameters ?? {})) {
    const value = paramValue(v);
    if (value !== undefined) parameters.set(k, value);
  }

  // The gRPC frontend pairs inputs with raw_input_contents by position.
  const given = new Map<string, Tensor>();
  req.inputs.forEach((input, i) => {
    const name = input.name ?? '';
    const raw = req.raw_input_contents[i];
    if (raw === undefined) {
      throw new CallError(status.INVALID_ARGUMENT, `unable to find data for input tensor '${name}' for model '${m.name}' in request.`);
    }
    if (given.has(name)) fail(status.INVALID_ARGUMENT, `input '${name}' already exists in request`);
    const shape = (input.shape ?? []).map((d) => Number(d));
    given.set(name, { datatype: (input.datatype ?? '') as Datatype, shape, data: Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength) });
  });

  const requested: string[] = [];
  for (const o of req.outputs) {
    const name = o.name ?? '';
    if (!m.outputs.some((s) => s.name === name)) throw new CallError(status.INVALID_ARGUMENT, `unexpected inference output '${name}' for model '${m.name}'`);
    if (requested.includes(name)) fail(status.INVALID_ARGUMENT, `output '${name}' already exists in request`);
    requested.push(name);
  }

  for (const name of given.keys()) {
    if (!m.inputs.some((s) => s.name === name)) throw new CallError(status.INVALID_ARGUMENT, `unexpected inference input '${name}' for model '${m.name}'`);
  }
  if (given.size !== m.inputs.length) {
    const names = [...given.keys()];
    const missing = m.inputs.filter((s) => !given.has(s.name)).map((s) => `'${s.name}'`);
    fail(status.INVALID_ARGUMENT, `expected ${m.inputs.length} inputs but got ${given.size} inputs for model '${m.name}'. `
      + `Got input(s) [${names.map((n) => `'${n}'`).join(', ')}], but missing required input(s) [${missing.join(', ')}]. `
      + 'Please provide all required input(s).');
  }

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

  // Triton returns outputs in the order the model produces them, whatever the request's order.
  const names = m.outputs.map((s) => s.name).filter((n) => requested.length === 0 || requested.includes(n));
  if (emit !== undefined && m.stream !== undefined) {
    // Decoupled: every yielded set of outputs is one response.
    for await (const outputs of m.stream(given, { parameters, signal })) emit(response(m, req, names, outputs));
    return {};
  }
  return response(m, req, names, await m.execute(given, { parameters, signal }));
}

function response(
  m: ModelSpec, req: inference.ModelInferRequest, names: readonly string[], outputs: ReadonlyMap<string, Tensor>,
): inference.IModelInferResponse {
  const tensors = names.map((n) => {
    const t = outputs.get(n);
    if (t === undefined) throw new CallError(status.INTERNAL, `${m.name} produced no output ${n}`);
    return { name: n, t };
  });
  return {
    model_name: m.name,
    model_version: VERSION,
    id: req.id,
    outputs: tensors.map(({ name, t }) => ({ name, datatype: t.datatype, shape: [...t.shape] })),
    raw_output_contents: tensors.map(({ t }) => t.data),
  };
}
