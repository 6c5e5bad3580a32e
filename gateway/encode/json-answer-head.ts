// A JSON answer the compiled lane prints itself (ingress/http1/lane.ts, gateway/native/lane.c):
// its outputs' bytes outside the ModelInferResponse kept as infer/answer-heads.ts keeps a binary
// answer's, and the answer's JSON text around the outputs' values. Here, beside the encoders that
// wrote that text, since finding the values in it takes their printer (json/number-print.ts).
import type { OutgoingHttpHeaders } from 'node:http';
import { skeletonOf } from '../infer/answer-heads';
import type { InferResponse } from '../infer/response';
import { MAX_TRITON_DOUBLE_LENGTH, writeTritonFp32 } from '../json/number-print';

/**
 * A JSON answer the compiled lane can print itself (ingress/http1/lane.ts): every output FP32,
 * its values printed by json/number-print.ts in `body` (the answer as encoded) between a '[' and
 * a ']' — V2's `"data":[…]`, or V1's one output, flat (`{"predictions":[[…]]}`). The lane
 * matches Triton's next answer against the skeleton and prints it as `texts[0]`, the first
 * output's values, `texts[1]`, … — the same bytes, since lane.c's printer is this file's
 * printer's twin (test/unit/json/number-print-native.test.ts).
 */
export interface JsonAnswerHead {
  readonly skeleton: Buffer;
  readonly bounds: Int32Array;
  readonly headers: Readonly<OutgoingHttpHeaders>;
  /** The body's text around the outputs' values. */
  readonly texts: readonly Buffer[];
}

const DATA_KEY = Buffer.from('"data":', 'latin1');

/**
 * The JSON answer head of `message` read into `response` and encoded as `body` (`v1`: V1 predict's
 * answer, its one output's values flat, with no number around them), or undefined.
 */
export function jsonAnswerHead(message: readonly Buffer[], response: InferResponse, body: Buffer, headers: OutgoingHttpHeaders,
  v1 = false): JsonAnswerHead | undefined {
  if (response.outputs.some((o) => o.datatype !== 'FP32' || o.byteLength % 4 !== 0) || (v1 && response.outputs.length !== 1)) return undefined;
  const s = skeletonOf(message, response);
  if (s === undefined) return undefined;
  const texts: Buffer[] = [];
  let from = 0;
  for (const o of response.outputs) {
    const view = o.data[0]!;
    const values = Buffer.allocUnsafe((view.length / 4) * (MAX_TRITON_DOUBLE_LENGTH + 1) + 2);
    let at = 0;
    values[at++] = 0x5b; // [
    for (let i = 0; i < view.length; i += 4) {
      if (i > 0) values[at++] = 0x2c; // ,
      at = writeTritonFp32(view.readFloatLE(i), values, at);
    }
    values[at++] = 0x5d; // ]
    const found = body.indexOf(values.subarray(0, at), from);
    if (found < 0 || (!v1 && (found < DATA_KEY.length || !body.subarray(found - DATA_KEY.length, found).equals(DATA_KEY)))) return undefined;
    texts.push(Buffer.from(body.subarray(from, found + 1)));
    from = found + at - 1;
  }
  texts.push(Buffer.from(body.subarray(from)));
  // V1's text around its values is structure alone: a digit there would be a number the lane would repeat.
  if (v1 && texts.some((t) => /[0-9]/.test(t.toString('latin1')))) return undefined;
  return { skeleton: s.skeleton, bounds: s.bounds, headers: Object.freeze({ ...headers }), texts };
}
