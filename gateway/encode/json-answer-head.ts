// A JSON answer the compiled lane prints itself (ingress/http1/lane.ts, gateway/native/lane.c):
// its outputs' bytes outside the ModelInferResponse kept as infer/answer-heads.ts keeps a binary
// answer's, and the answer's JSON text around the outputs' values. Here, beside the encoders that
// wrote that text, since finding the values in it takes their printer (json/number-print.ts).
import type { OutgoingHttpHeaders } from 'node:http';
import { skeletonOf } from '../infer/answer-heads';
import type { InferResponse } from '../infer/response';
import { MAX_TRITON_DOUBLE_LENGTH, writeTritonFp32 } from '../json/number-print';
import { otherElements } from './infer-response';

/**
 * A JSON answer the compiled lane can print itself (ingress/http1/lane.ts): every output FP32 or
 * of an integer type, its values printed in `body` (the answer as encoded) between a '[' and a ']'
 * — V2's `"data":[…]`, or V1's outputs of one row, flat (`{"predictions":[[…]]}`, or
 * `{"predictions":[{"LEN":[…],"SUM":[…]}]}`). The lane matches
 * Triton's next answer against the skeleton and prints it as `texts[0]`, the first output's
 * values, `texts[1]`, … — the same bytes, since lane.c's printers are this file's printers' twins
 * (FP32: test/unit/json/number-print-native.test.ts).
 */
export interface JsonAnswerHead {
  readonly skeleton: Buffer;
  readonly bounds: Int32Array;
  readonly headers: Readonly<OutgoingHttpHeaders>;
  /** The body's text around the outputs' values. */
  readonly texts: readonly Buffer[];
  /** Each output's element type: its index in PRINTED_KINDS (lane.c's K_*). */
  readonly kinds: readonly number[];
}

/** The element types whose values lane.c prints, in lane.c's order (its K_* values). */
const PRINTED_KINDS = ['FP32', 'INT8', 'UINT8', 'INT16', 'UINT16', 'INT32', 'UINT32', 'INT64', 'UINT64'];
const KIND_BYTES = [4, 1, 1, 2, 2, 4, 4, 8, 8];

/** Whether lane.c prints values of `datatype` (a JSON answer of such outputs may be kept: jsonAnswerHead). */
export function printedByLane(datatype: string | undefined): boolean {
  return datatype !== undefined && PRINTED_KINDS.includes(datatype);
}

const DATA_KEY = Buffer.from('"data":', 'latin1');

/**
 * The JSON answer head of `message` read into `response` and encoded as `body` (`v1`: V1 predict's
 * answer, each output's values flat, in order, with no number around them), or undefined.
 */
export function jsonAnswerHead(message: readonly Buffer[], response: InferResponse, body: Buffer, headers: OutgoingHttpHeaders,
  v1 = false): JsonAnswerHead | undefined {
  const kinds = response.outputs.map((o) => PRINTED_KINDS.indexOf(o.datatype));
  if (kinds.some((k, i) => k < 0 || response.outputs[i]!.byteLength % KIND_BYTES[k]! !== 0)) return undefined;
  const s = skeletonOf(message, response);
  if (s === undefined) return undefined;
  const texts: Buffer[] = [];
  let from = 0;
  for (const [n, o] of response.outputs.entries()) {
    const values = valuesText(o.data[0]!, kinds[n]!);
    const at = values.length;
    const found = body.indexOf(values, from);
    if (found < 0 || (!v1 && (found < DATA_KEY.length || !body.subarray(found - DATA_KEY.length, found).equals(DATA_KEY)))) return undefined;
    texts.push(Buffer.from(body.subarray(from, found + 1)));
    from = found + at - 1;
  }
  texts.push(Buffer.from(body.subarray(from)));
  // V1's text around its values is structure alone: a digit there would be a number the lane would repeat.
  if (v1 && texts.some((t) => /[0-9]/.test(t.toString('latin1')))) return undefined;
  return { skeleton: s.skeleton, bounds: s.bounds, headers: Object.freeze({ ...headers }), texts, kinds };
}

/** `[…]`: an output's values, of PRINTED_KINDS[kind], as the answer's encoder prints them. */
function valuesText(view: Buffer, kind: number): Buffer {
  if (kind !== 0) return Buffer.from(`[${otherElements(view, view.length / KIND_BYTES[kind]!, PRINTED_KINDS[kind]!)}]`, 'latin1');
  const values = Buffer.allocUnsafe((view.length / 4) * (MAX_TRITON_DOUBLE_LENGTH + 1) + 2);
  let at = 0;
  values[at++] = 0x5b; // [
  for (let i = 0; i < view.length; i += 4) {
    if (i > 0) values[at++] = 0x2c; // ,
    at = writeTritonFp32(view.readFloatLE(i), values, at);
  }
  values[at++] = 0x5d; // ]
  return values.subarray(0, at);
}
