// The binary extension (docs/architecture.md#binary-extension): a JSON header of Inference-Header-Content-Length bytes,
// then each binary input's bytes in input order. Decoded as a push decoder while the body arrives
// (`push(chunk)` … `end()`): the header is gathered (a view when one chunk holds it), decoded and
// framed, and every later byte goes to the sink the caller opens for the framed message — into
// the binary slots (the one user-space copy of the binary path, docs/architecture.md#copies) or upstream by
// reference (cut-through). A body read whole is decoded by decodeWholeBody (decode/v2-body.ts),
// which copies its binary section with fillBinarySlots.
import { GatewayError } from '../errors';
import type { Frame, OpenSink, PayloadSink, Slot } from '../infer/framed-message';
import type { Ledger } from '../infer/ledger';
import type { InferRequest } from '../infer/request';
import type { inference } from '../../proto/services';
import type { FramedHeads, KnownHead } from './framed-heads';
import { fillJsonSlots, type InputPlan } from './json-data';
import { type HeaderContext, decodeV2Header, refuseBytesClassification } from './v2-header';

const NO_EXTERNAL: readonly number[] = [];

/** Bytes of each input that come from the binary section (cut-through: left out of the framed head). */
function externalBytes(plans: readonly InputPlan[], request: InferRequest): number[] {
  const out = new Array<number>(plans.length);
  for (let i = 0; i < plans.length; i++) out[i] = plans[i]!.kind === 'binary' ? request.inputs[i]!.byteSize ?? 0 : 0;
  return out;
}

/** The slots of the inputs whose bytes come from the binary section, in input order. */
export function binarySlots(plans: readonly InputPlan[], slots: readonly (Slot | undefined)[]): Slot[] {
  const out: Slot[] = [];
  for (let i = 0; i < plans.length; i++) if (plans[i]!.kind === 'binary') out.push(slots[i]!);
  return out;
}

/**
 * Copies the binary section (starting `offset` bytes into the body) into the slots of the inputs
 * planned as binary. Sizes were checked by the header decoder. Returns the bytes copied.
 */
export function fillBinarySlots(
  chunks: readonly Buffer[], offset: number, plans: readonly InputPlan[], slots: readonly (Slot | undefined)[], message: Buffer,
): number {
  let ci = 0;
  let at = offset;
  // Find the chunk holding `offset`.
  while (ci < chunks.length && at >= chunks[ci]!.length) {
    at -= chunks[ci]!.length;
    ci++;
  }
  let copied = 0;
  for (let i = 0; i < plans.length; i++) {
    if (plans[i]!.kind !== 'binary') continue;
    const slot = slots[i]!;
    let left = slot.length;
    let to = slot.offset;
    while (left > 0) {
      const c = chunks[ci]!;
      const n = Math.min(left, c.length - at);
      c.copy(message, to, at, at + n);
      to += n;
      left -= n;
      at += n;
      if (at === c.length) {
        ci++;
        at = 0;
      }
    }
    copied += slot.length;
  }
  return copied;
}

/** The first n bytes of the body as one buffer: a view when the first chunk holds them. */
export function prefixBytes(chunks: readonly Buffer[], n: number, ledger: Ledger): Buffer {
  const first = chunks[0];
  if (first !== undefined && first.length >= n) return first.subarray(0, n);
  ledger.copied('decode', n);
  ledger.allocated('decode');
  return Buffer.concat(chunks, n);
}

export interface StreamOptions {
  /** Inference-Header-Content-Length and Content-Length. */
  readonly headerBytes: number;
  readonly bodyBytes: number;
  readonly modelName: string;
  readonly modelVersion: string;
  readonly maxInputSizeBytes: number;
  /** The model's configuration (what Triton would refuse to run). */
  readonly config: inference.IModelConfig;
  /** Leave the binary inputs' bytes out of the framed head: the sink sends them upstream as they arrive. */
  readonly external: boolean;
  /** With `external`: heads decoded before, taken again for a header sent again (decode/framed-heads.ts). */
  readonly heads?: FramedHeads | undefined;
}

export class BinaryExtensionDecoder {
  /** The chunks of a header that came in more than one (none while a chunk holds it whole). */
  #head: Buffer[] | undefined;
  #headLength = 0;
  #sink: PayloadSink | undefined;
  #request: InferRequest | undefined;
  /** The kept head the request is (decode/framed-heads.ts): found, or kept now; undefined when not kept. */
  known: KnownHead | undefined;

  constructor(private readonly options: StreamOptions, private readonly frame: Frame, private readonly open: OpenSink,
    private readonly ledger: Ledger) {}

  push(chunk: Buffer): void {
    if (this.#sink !== undefined) {
      this.#sink.write(chunk);
      return;
    }
    const h = this.options.headerBytes;
    if (this.#head === undefined && chunk.length >= h) {
      // The header read in place: its offsets are the chunk's, which ends past it.
      this.#sink = this.#decodeHeader(chunk);
      this.#sink.write(chunk, h);
      return;
    }
    (this.#head ??= []).push(chunk);
    this.#headLength += chunk.length;
    if (this.#headLength < h) return;
    this.#sink = this.#decodeHeader(prefixBytes(this.#head, h, this.ledger));
    // The rest of the chunk that completed the header is the start of the binary section.
    this.#sink.write(chunk, h - (this.#headLength - chunk.length));
    this.#head = undefined;
  }

  /** The body ended (its length was checked by the reader); returns the decoded request. */
  end(): InferRequest {
    if (this.#request === undefined) throw new GatewayError('GW_ERR_REQUEST_ABORTED', 'the body ended inside the inference header');
    return this.#request;
  }

  /** Decodes the header, header[0, headerBytes), and frames the request; returns the sink for the rest. */
  #decodeHeader(header: Buffer): PayloadSink {
    const o = this.options;
    this.ledger.start('decode');
    const h = o.headerBytes;
    const heads = o.external ? o.heads : undefined;
    const known = heads?.find(o.config, o.modelName, o.modelVersion, header, h, o.bodyBytes);
    if (known !== undefined) {
      this.ledger.copied('decode', known.copied);
      this.#request = known.request;
      this.known = known;
      this.ledger.end('decode');
      return this.open(known.request, known.framed, known.slots);
    }
    const decoded = decodeV2Header(header, 0, h, {
      modelName: o.modelName, modelVersion: o.modelVersion, binaryBytes: o.bodyBytes - h, maxInputSizeBytes: o.maxInputSizeBytes,
    } satisfies HeaderContext);
    refuseBytesClassification(decoded.request, o.config);
    const request = decoded.request;
    const binary = o.external ? externalBytes(decoded.plans, request) : NO_EXTERNAL;
    const framed = this.frame(request, binary);
    const copied = fillJsonSlots(header, decoded.plans, request, framed.slots, framed.message);
    this.ledger.copied('decode', copied);
    this.#request = request;
    // Cut through, the decoder's work ends with the header: the rest is forwarded as it comes.
    if (o.external) this.ledger.end('decode');
    const slots = binarySlots(decoded.plans, framed.slots);
    this.known = heads?.keep(o.config, header, h, { bodyBytes: o.bodyBytes, request, framed, slots, copied });
    return this.open(request, framed, slots);
  }
}
