// Where the payload of a streamed request goes in the shared-memory mode (upstream/shared-memory/region-pool.ts):
// into the request's leased region, as it arrives, one write per body chunk; the ModelInferRequest
// names the region, offset and byte size of each such input (Triton reads them from there, and an
// input in shared memory takes no raw_input_contents entry, docs/architecture.md#the-grpc-messages). The decoder framed
// the request for cut-through (the payload left out of the head); this frames it again with the
// shared-memory parameters, copying what the head held (JSON-data inputs) into the new message.
// Outputs whose size the model config fixes (upstream/shared-memory/outputs.ts) are placed after
// the inputs: Triton writes them into the region, its answer carries no bytes for them, and the
// answer to the client is filled from the region (withOutputs) before the lease goes back.
import { releaseWhole } from '../../buffers/release';
import { GatewayError } from '../../errors';
import type { Allocate, FramedHead, PayloadSink } from '../../infer/framed-message';
import { elementCount, elementSize, isDatatype } from '../../infer/datatype';
import type { InferRequest, InputTensor } from '../../infer/request';
import type { InferResponse } from '../../infer/response';
import type { inference } from '../../../proto/services';
import { frameInferRequest } from '../../infer/frame-request';
import { regionOutputs, requestedOutputs } from './outputs';
import type { Lease, SharedMemoryPool, ShmFallbackReason } from './region-pool';
import type { Sent } from '../infer/upload';

/** What decides which outputs go into the region: the model config, and which outputs the answer has as binary. */
export interface OutputChoice {
  readonly config: inference.IModelConfig;
  readonly binary: (name: string) => boolean;
}

/** Offsets of tensors in a region: a cache line apart, as Triton's own clients place them. */
const ALIGN = 64;

interface Placed {
  /** Offset in the region. */
  readonly offset: number;
  readonly byteSize: number;
}

export class SharedMemoryUpload implements PayloadSink {
  readonly #lease: Lease;
  readonly #placed: readonly Placed[];
  readonly #message: Buffer;
  /** The input being written and how much of it is. */
  #i = 0;
  #filled = 0;
  /** Bytes of the head copied into the new message (JSON-data inputs). */
  readonly copiedHead: number;
  /** Tensor bytes handed to Triton through the region. */
  readonly sharedBytes: number;
  /** Outputs Triton writes into the region, by name. */
  readonly #outputs: ReadonlyMap<string, Placed>;
  /** Output bytes read from the region into the answer (withOutputs). */
  outputBytes = 0;

  /**
   * A sink for `request`, framed with `external[i]` payload bytes of input i left out of `framed`;
   * or why the request goes the normal way: an input is only partly out of the head (a raw BYTES
   * body, whose element length the head holds), none is out, or the pool has no region for it.
   * With the model's config (and which outputs the answer carries as binary), outputs of known size
   * are placed too when the region holds them.
   */
  static open(pool: SharedMemoryPool, request: InferRequest, framed: FramedHead, external: readonly number[],
    outputs?: OutputChoice): SharedMemoryUpload | ShmFallbackReason {
    const placed: (Placed | undefined)[] = [];
    let size = 0;
    for (let i = 0; i < request.inputs.length; i++) {
      const e = external[i] ?? 0;
      if (e === 0) {
        placed.push(undefined);
        continue;
      }
      if (e !== request.inputs[i]!.byteSize) return 'ineligible';
      size = Math.ceil(size / ALIGN) * ALIGN;
      placed.push({ offset: size, byteSize: e });
      size += e;
    }
    if (size === 0) return 'ineligible';
    const placedOutputs = new Map<string, Placed>();
    let withOutputs = size;
    for (const o of outputs === undefined ? [] : regionOutputs(outputs.config, request, outputs.binary)) {
      withOutputs = Math.ceil(withOutputs / ALIGN) * ALIGN;
      placedOutputs.set(o.name, { offset: withOutputs, byteSize: o.byteSize });
      withOutputs += o.byteSize;
    }
    // Outputs that do not fit with the inputs come back the normal way.
    if (withOutputs > pool.regionBytes) placedOutputs.clear();
    const lease = pool.lease(placedOutputs.size > 0 ? withOutputs : size);
    if (typeof lease === 'string') return lease;
    return new SharedMemoryUpload(lease, request, framed, placed, placedOutputs, outputs?.config);
  }

  private constructor(lease: Lease, request: InferRequest, framed: FramedHead, placed: readonly (Placed | undefined)[],
    outputs: ReadonlyMap<string, Placed>, config: inference.IModelConfig | undefined) {
    this.#lease = lease;
    this.#outputs = outputs;
    this.#placed = placed.filter((p) => p !== undefined);
    const region = lease.region.name;
    const inputs = request.inputs.map((t, i): InputTensor => {
      const p = placed[i];
      if (p === undefined) return t;
      const parameters = new Map(t.parameters);
      parameters.set('shared_memory_region', { type: 'string', value: region });
      parameters.set('shared_memory_offset', { type: 'int64', value: BigInt(p.offset) });
      parameters.set('shared_memory_byte_size', { type: 'int64', value: BigInt(p.byteSize) });
      return { ...t, parameters, byteSize: undefined };
    });
    const shm = frameInferRequest({
      ...request, inputs, outputs: outputs.size > 0 ? requestedOutputs(config!, request, region, outputs) : request.outputs,
    });
    let copied = 0;
    for (let i = 0; i < inputs.length; i++) {
      const from = framed.slots[i];
      const to = shm.slots[i];
      if (from === undefined || to === undefined) continue;
      framed.message.copy(shm.message, to.offset, from.offset, from.offset + from.length);
      copied += from.length;
    }
    this.copiedHead = copied;
    this.sharedBytes = this.#placed.reduce((n, p) => n + p.byteSize, 0);
    this.#message = shm.message;
  }

  /**
   * chunk[from..]: the next payload bytes, in input order. A chunk that is all payload (`from` 0),
   * written whole into the region, is read by nothing else afterwards: its memory is handed back
   * at once (buffers/release.ts), as the cut-through upload does (upstream/infer/upload.ts), rather
   * than when a collection finds it.
   */
  write(chunk: Buffer, from = 0): void {
    let at = from;
    while (at < chunk.length && this.#i < this.#placed.length) {
      const p = this.#placed[this.#i]!;
      const n = Math.min(chunk.length - at, p.byteSize - this.#filled);
      this.#lease.write(chunk, at, at + n, p.offset + this.#filled);
      at += n;
      this.#filled += n;
      if (this.#filled === p.byteSize) {
        this.#i++;
        this.#filled = 0;
      }
    }
    if (from === 0 && at === chunk.length) releaseWhole(chunk);
  }

  /** The message to send once the body has been read. */
  finish(): Sent {
    return { message: this.#message, messageBytes: this.#message.length };
  }

  /** Triton writes outputs into the region: the answer is filled from it (withOutputs), the lease held till then. */
  get hasOutputs(): boolean {
    return this.#outputs.size > 0;
  }

  /**
   * Triton's answer with the outputs it wrote into the region read from there (one copy, into
   * `allocate`d memory), each as long as its shape says and no longer than its place.
   */
  withOutputs(response: InferResponse, allocate: Allocate): InferResponse {
    return {
      ...response,
      outputs: response.outputs.map((o) => {
        const p = this.#outputs.get(o.name);
        if (p === undefined) return o;
        const bytes = isDatatype(o.datatype) && o.datatype !== 'BYTES' ? elementCount(o.shape) * elementSize(o.datatype) : undefined;
        if (bytes === undefined || bytes > p.byteSize || o.byteLength !== 0) {
          throw new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream output '${o.name}' (${o.datatype} [${o.shape.join(',')}]) does not fit the ${p.byteSize} bytes its shared-memory place was given`);
        }
        const data = allocate(bytes);
        this.#lease.read(data, p.offset);
        this.outputBytes += bytes;
        return { ...o, data: [data], byteLength: bytes };
      }),
    };
  }

  /** The region goes back to the pool: after Triton answered, or the request failed on any path. */
  release(): void {
    this.#lease.release();
  }
}
