// The encoded head of an answer Triton gives again and again. A request taken from a kept head
// (decode/framed-heads.ts) is one object for every request sent with that header, and Triton
// answers it, as a rule, with the same ModelInferResponse fields each time — model name and
// version, the outputs' names, datatypes and shapes — where only the outputs' bytes differ. When
// every output goes back as binary, the answer's JSON header (encode/infer-response.ts) is a
// function of those fields, the outputs' lengths and the request alone. So an answer whose bytes
// outside its outputs' payloads are byte for byte the last one's, payloads at the same offsets,
// takes the JSON header and HTTP fields encoded then, its payloads as views where they lie. (It
// lives here, beside the answer's reader, so that the decode side's kept heads can hold one.)
//
// Why that is exact: a raw_output_contents entry is opaque bytes to the reader (infer/
// answer-reader.ts), so a message whose every other byte — tags, lengths, header fields — is the
// same, at the same offsets, reads to the same fields and the same output lengths, and encodes
// to the same JSON header. Only a message in one chunk whose outputs are each one view of it
// (the common case: a small answer in one DATA piece) is kept; anything else is read and encoded
// as ever.
import type { OutgoingHttpHeaders } from 'node:http';
import type { InferResponse } from './response';

/** A longer message outside its payloads is not kept (comparing it would cost about what reading it does). */
const MAX_SKELETON_BYTES = 2048;

export class AnswerHead {
  private constructor(
    /** The message's length, and its bytes outside the payloads (payloads zeroed: never compared). */
    readonly messageBytes: number,
    readonly skeleton: Buffer,
    /** Each payload's [start, end) in the message, in output order. */
    readonly bounds: Int32Array,
    /** The encoded JSON header: the answer's first part, shared by every answer that matches (never written). */
    readonly jsonHeader: Buffer,
    /** The answer's HTTP fields (frozen: a caller adding one copies them). */
    readonly headers: Readonly<OutgoingHttpHeaders>,
    /** The answer's body bytes: JSON header and payloads. */
    readonly bodyBytes: number,
  ) {}

  /**
   * The head of `message` as read into `response` and encoded into `jsonHeader` with every output
   * binary (`binary`: the outputs' views, one per output, in order); undefined when it is not kept.
   */
  static of(message: readonly Buffer[], response: InferResponse, binary: readonly Buffer[], jsonHeader: Buffer,
    headers: OutgoingHttpHeaders): AnswerHead | undefined {
    if (binary.length !== response.outputs.length || response.outputs.some((o, i) => o.data[0] !== binary[i])) return undefined;
    const s = skeletonOf(message, response);
    if (s === undefined) return undefined;
    return new AnswerHead(s.skeleton.length, s.skeleton, s.bounds, jsonHeader, Object.freeze({ ...headers }), jsonHeader.length + s.payloadBytes);
  }

  /** The body parts for `message` (the JSON header, then each payload as a view) when it matches; else undefined. */
  parts(message: readonly Buffer[]): Buffer[] | undefined {
    if (message.length !== 1) return undefined;
    const chunk = message[0]!;
    if (chunk.length !== this.messageBytes) return undefined;
    const { skeleton, bounds } = this;
    const n = bounds.length >> 1;
    let at = 0;
    for (let i = 0; i <= n; i++) {
      const end = i < n ? bounds[2 * i]! : chunk.length;
      for (let b = at; b < end; b++) if (chunk[b] !== skeleton[b]) return undefined;
      if (i < n) at = bounds[2 * i + 1]!;
    }
    const parts = new Array<Buffer>(1 + n);
    parts[0] = this.jsonHeader;
    for (let i = 0; i < n; i++) parts[i + 1] = chunk.subarray(bounds[2 * i], bounds[2 * i + 1]);
    return parts;
  }
}

/**
 * The message's bytes outside its payloads (payloads zeroed) and each payload's [start, end): a
 * message in one chunk whose every output is one view of it, after the previous one; undefined
 * for any other, or one longer than MAX_SKELETON_BYTES outside its payloads. (The compiled lane's
 * JSON answers are kept from it too: encode/json-answer-head.ts.)
 */
export function skeletonOf(message: readonly Buffer[], response: InferResponse): { skeleton: Buffer; bounds: Int32Array; payloadBytes: number } | undefined {
  if (message.length !== 1) return undefined;
  const chunk = message[0]!;
  const { outputs } = response;
  const bounds = new Int32Array(2 * outputs.length);
  let at = 0;
  let payloadBytes = 0;
  for (let i = 0; i < outputs.length; i++) {
    const o = outputs[i]!;
    if (o.data.length !== 1) return undefined;
    const view = o.data[0]!;
    // A view of this chunk (same memory), after the previous payload.
    const start = view.byteOffset - chunk.byteOffset;
    if (view.buffer !== chunk.buffer || start < at || start + view.length > chunk.length) return undefined;
    bounds[2 * i] = start;
    bounds[2 * i + 1] = at = start + view.length;
    payloadBytes += view.length;
  }
  if (chunk.length - payloadBytes > MAX_SKELETON_BYTES) return undefined;
  const skeleton = Buffer.from(chunk);
  for (let i = 0; i < outputs.length; i++) skeleton.fill(0, bounds[2 * i], bounds[2 * i + 1]);
  return { skeleton, bounds, payloadBytes };
}
