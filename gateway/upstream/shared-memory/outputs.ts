// Which outputs of a request Triton can write into its shared-memory region (upstream.sharedMemory),
// and how many bytes each takes. An output region too small fails the request at Triton ("should
// be at least N bytes to hold the results") and the call cannot be replayed, so only an output
// whose size is known before the call goes there: fixed dims and a fixed-size datatype in the
// model config (not BYTES), the batch dimension (max_batch_size > 0) taken from the inputs, as
// Triton's batcher does. And only one the answer carries as binary bytes (binary_data, the
// request's binary_data_output, or a raw request): those are copied into the answer as they are.
// Everything else goes the normal way, in the gRPC answer.
import { datatypeOfConfigEnum, elementCount, elementSize } from '../../infer/datatype';
import type { InferRequest, RequestedOutput } from '../../infer/request';
import type { inference } from '../../../proto/services';

export interface RegionOutput {
  readonly name: string;
  readonly byteSize: number;
}

/**
 * The outputs to place, in the order to place them; [] when none can go into a region. `binary`
 * says whether the answer carries an output as binary bytes (encode/infer-response.ts outputKind:
 * upstream/ does not import encode/).
 */
export function regionOutputs(config: inference.IModelConfig, request: InferRequest, binary: (name: string) => boolean): RegionOutput[] {
  const batch = batchSize(config, request);
  if (batch === undefined) return [];
  const out: RegionOutput[] = [];
  for (const o of config.output ?? []) {
    const name = o.name ?? '';
    if (!answered(request, name, binary)) continue;
    const size = fixedByteSize(o, batch);
    if (size !== undefined && size > 0) out.push({ name, byteSize: size });
  }
  return out;
}

/** Bytes of one config output with `batch` rows (1 when the model does not batch); undefined when not fixed. */
export function fixedByteSize(o: inference.IModelOutput, batch: number): number | undefined {
  const datatype = datatypeOfConfigEnum(Number(o.data_type ?? 0));
  if (datatype === undefined || datatype === 'BYTES') return undefined;
  const dims = (o.dims ?? []).map((d) => Number(d));
  if (dims.some((d) => !Number.isSafeInteger(d) || d < 0)) return undefined;
  return batch * elementCount(dims) * elementSize(datatype);
}

/**
 * The batch dimension: 1 for a model without batching, else the first dim every input shares
 * (Triton rejects a request whose inputs disagree; the gateway does not guess).
 */
function batchSize(config: inference.IModelConfig, request: InferRequest): number | undefined {
  if ((config.max_batch_size ?? 0) <= 0) return 1;
  let batch: number | undefined;
  for (const t of request.inputs) {
    const b = t.shape[0];
    if (b === undefined || (batch !== undefined && b !== batch)) return undefined;
    batch = b;
  }
  return batch;
}

/** Whether the answer carries `name` as binary bytes that Triton may write elsewhere. */
function answered(request: InferRequest, name: string, binary: (name: string) => boolean): boolean {
  if (request.outputs !== undefined) {
    const o = request.outputs.find((x) => x.name === name);
    if (o === undefined || o.sharedMemory || o.parameters.has('classification')) return false;
  }
  return binary(name);
}

/**
 * The requested outputs of the message sent to Triton: the client's, or every config output when
 * it listed none (the same outputs Triton answers then, in its own order), the placed ones with
 * the region's parameters.
 */
export function requestedOutputs(config: inference.IModelConfig, request: InferRequest, region: string,
  placed: ReadonlyMap<string, { readonly offset: number; readonly byteSize: number }>): RequestedOutput[] {
  const listed: readonly RequestedOutput[] = request.outputs
    ?? (config.output ?? []).map((o) => ({ name: o.name ?? '', parameters: new Map(), binary: undefined, sharedMemory: false }));
  return listed.map((o) => {
    const p = placed.get(o.name);
    if (p === undefined) return o;
    const parameters = new Map(o.parameters);
    parameters.delete('binary_data');
    parameters.set('shared_memory_region', { type: 'string', value: region });
    parameters.set('shared_memory_offset', { type: 'int64', value: BigInt(p.offset) });
    parameters.set('shared_memory_byte_size', { type: 'int64', value: BigInt(p.byteSize) });
    return { ...o, parameters };
  });
}
