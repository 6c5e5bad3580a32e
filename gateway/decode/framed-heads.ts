// The framed heads of binary-extension headers a model's clients send again and again. A client
// of the binary extension sends the same JSON header with every request of a shape (names,
// datatypes, shapes, binary_data_size: no payload), and with its payload cut through (left out of
// the head, sent by reference) the framed head depends on nothing else: the header's bytes, the
// body's length, the model's name, version and configuration. So a planned request whose header is
// byte for byte one seen before takes the request and the head decoded then, instead of decoding
// the JSON, building the request's objects and framing the protobuf again. A raw request's head
// (decode/raw-binary.ts) depends only on the model and the body's length: it is kept under an
// empty header (a binary-extension header is never empty), RAW_HEADS of them per configuration.
//
// What is kept is never written after it was framed: the head goes to the socket by reference
// (upstream/infer/cut-through.ts Gathered), the request is read-only (infer/request.ts). Only
// successes are kept: a header that is refused is decoded, and refused, every time. Bounded: at
// most MAX_HEADER_BYTES a header, MAX_HEADS per configuration (then the table starts again); a
// header with a request id (not empty) or a sequence id, new with every request as a rule, is not kept.
import type { AnswerHead } from '../infer/answer-heads';
import type { FramedHead, Slot } from '../infer/framed-message';
import type { InferRequest } from '../infer/request';

/** A longer header is not kept (its copy would cost more than the decode it saves). */
const MAX_HEADER_BYTES = 4096;
/** Heads kept per model configuration. */
const MAX_HEADS = 64;
/** Headers kept per (length, body length), the most recent last. */
const PER_KEY = 4;
/**
 * Raw heads kept per configuration, the most recent last: apart from the binary extension's, so
 * raw bodies of ever new lengths (uploads of a variable dim) push out only each other.
 */
const RAW_HEADS = 4;

/** A head as decoded and framed from `bytes`, for a body of `bodyBytes`. */
export interface KnownHead {
  readonly bytes: Buffer;
  readonly bodyBytes: number;
  readonly request: InferRequest;
  readonly framed: FramedHead;
  /** The binary inputs' slots (binary-extension.ts binarySlots). */
  readonly slots: readonly Slot[];
  /** The decode hop's bytes copied from the header into the head (JSON data and base64 in it). */
  readonly copied: number;
  /** The head of the last answer to this request, encoded (infer/answer-heads.ts): the answer side's. */
  answer: AnswerHead | undefined;
  /**
   * The message's pieces in wire order for a body read in one piece (KnownHead.wire): the head's
   * pieces between the cuts, and at each cut's index in `payloadAt` a place for the payload's view.
   * Undefined when a cut is empty (the general path skips empty pieces).
   */
  readonly wire: Wire | undefined;
  /** The message's length on the wire: the head's and the cuts'. */
  readonly sent: { readonly messageBytes: number };
}

/** KnownHead.wire: a template of the pieces (copied per request), with the payloads' places and lengths. */
export interface Wire {
  readonly pieces: readonly Buffer[];
  /** Where each cut's payload goes in `pieces`, in cut order. */
  readonly payloadAt: readonly number[];
}

interface Table {
  size: number;
  readonly byKey: Map<number, KnownHead[]>;
  /** Raw heads (an empty header), found by body length. */
  readonly raw: KnownHead[];
}

/** Per model configuration (a reloaded configuration starts afresh; the old one's table goes with it). */
export class FramedHeads {
  readonly #byConfig = new WeakMap<object, Table>();

  /** The head of `header[0, headerBytes)` for this model, version and body length, if it was kept. */
  find(config: object, modelName: string, modelVersion: string, header: Buffer, headerBytes: number, bodyBytes: number): KnownHead | undefined {
    if (headerBytes > MAX_HEADER_BYTES) return undefined;
    const table = this.#byConfig.get(config);
    const list = headerBytes === 0 ? table?.raw : table?.byKey.get(key(headerBytes, bodyBytes));
    if (list === undefined) return undefined;
    for (let i = list.length - 1; i >= 0; i--) {
      const k = list[i]!;
      if (k.bodyBytes === bodyBytes && k.request.modelName === modelName && k.request.modelVersion === modelVersion && same(k.bytes, header, headerBytes)) {
        return k;
      }
    }
    return undefined;
  }

  /**
   * Keeps `head`, decoded from `header[0, headerBytes)`; nothing writes into its framed head from
   * now on. Returns what was kept, or undefined.
   */
  keep(config: object, header: Buffer, headerBytes: number, head: Omit<KnownHead, 'bytes' | 'answer' | 'wire' | 'sent'>): KnownHead | undefined {
    // A request id or a sequence's id is most often new with each request: such a header is not
    // sent again, and keeping it would only push out those that are. An empty id is the same in
    // every request (perf_analyzer, through tritonclient's C++ HTTP client, sends `"id":""`): kept.
    if (headerBytes > MAX_HEADER_BYTES || (head.request.id !== undefined && head.request.id !== '') || head.request.parameters.has('sequence_id')) {
      return undefined;
    }
    let table = this.#byConfig.get(config);
    if (table === undefined || table.size >= MAX_HEADS) this.#byConfig.set(config, table = { size: 0, byKey: new Map(), raw: table?.raw ?? [] });
    let list: KnownHead[];
    if (headerBytes === 0) {
      list = table.raw;
      if (list.length >= RAW_HEADS) list.shift();
    } else {
      const k = key(headerBytes, head.bodyBytes);
      let l = table.byKey.get(k);
      if (l === undefined) table.byKey.set(k, l = []);
      list = l;
      if (list.length >= PER_KEY) list.shift();
      else table.size++;
    }
    const kept: KnownHead = { ...head, bytes: Buffer.from(header.subarray(0, headerBytes)), answer: undefined, wire: wireOf(head.framed),
      sent: { messageBytes: head.framed.cuts.reduce((n, c) => n + c.length, head.framed.message.length) } };
    list.push(kept);
    return kept;
  }
}

/** The wire template of a framed head (KnownHead.wire): its head split at the cuts, a place between each two. */
function wireOf(framed: FramedHead): Wire | undefined {
  const pieces: Buffer[] = [];
  const payloadAt: number[] = [];
  let at = 0;
  for (const cut of framed.cuts) {
    if (cut.length === 0) return undefined;
    if (cut.at > at) pieces.push(framed.message.subarray(at, cut.at));
    payloadAt.push(pieces.length);
    pieces.push(RAW_HEADER);
    at = cut.at;
  }
  if (at < framed.message.length) pieces.push(framed.message.subarray(at));
  return { pieces, payloadAt };
}

/** Empty: the header a raw request's head is kept under (decode/raw-binary.ts); a payload's place in a wire. */
export const RAW_HEADER = Buffer.alloc(0);

/** Whether `kept` is `header[0, n)` (a loop: Buffer#compare with offsets allocates on every call). */
function same(kept: Buffer, header: Buffer, n: number): boolean {
  if (kept.length !== n) return false;
  for (let i = 0; i < n; i++) if (kept[i] !== header[i]) return false;
  return true;
}

/** One number for the two lengths: a kept header is at most MAX_HEADER_BYTES, a body below 2^32 bytes. */
function key(headerBytes: number, bodyBytes: number): number {
  return headerBytes * 2 ** 32 + bodyBytes;
}
