// infer/answer-heads.ts: an answer whose bytes outside its payloads are byte for byte the kept
// one's, payloads at the same offsets, gives the parts the reader and encoder would have given —
// the JSON header encoded then, its own payloads as views; any other byte, length, chunking or
// output form is not matched (and not kept), so it is read and encoded as ever.
import { inference } from '../../../proto/services';
import { AnswerHead } from '../../../gateway/infer/answer-heads';
import { encodeInferResponse } from '../../../gateway/encode/infer-response';
import { readInferResponse } from '../../../gateway/infer/answer-reader';
import type { InferRequest } from '../../../gateway/infer/request';
import { binaryAnswerHeaders } from '../../../gateway/pipeline/infer-dialect';

const request = (binaryDataOutput: boolean): InferRequest => ({
  modelName: 'm', modelVersion: '', id: undefined, parameters: new Map(), inputs: [], outputs: undefined, binaryDataOutput,
});

const answer = (a: Buffer, b: Buffer, over: Partial<inference.IModelInferResponse> = {}): Buffer => Buffer.from(inference.ModelInferResponse.encode({
  model_name: 'm', model_version: '1',
  outputs: [{ name: 'A', datatype: 'UINT8', shape: [a.length] }, { name: 'B', datatype: 'INT8', shape: [1, b.length] }],
  raw_output_contents: [a, b], ...over,
}).finish());

/** What reading and encoding `message` gives: the JSON header, then the binary outputs. */
function encoded(message: Buffer, req: InferRequest): { parts: Buffer[]; head: AnswerHead | undefined } {
  const response = readInferResponse([message]);
  const e = encodeInferResponse(response, req);
  return { parts: [e.header, ...e.binary], head: AnswerHead.of([message], response, e.binary, e.header, binaryAnswerHeaders(undefined, e.header.length)) };
}

const A = Buffer.from([1, 2, 3, 4]);
const B = Buffer.from([5, 6, 7, 8, 9, 10]);

test('the same bytes outside the payloads: the kept JSON header, the new payloads as views of the new message', () => {
  const req = request(true);
  const { head, parts } = encoded(answer(A, B), req);
  expect(head).toBeDefined();
  expect(head!.headers).toEqual({ 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': parts[0]!.length });
  expect(head!.bodyBytes).toBe(parts[0]!.length + A.length + B.length);
  const next = answer(Buffer.from([9, 9, 9, 9]), Buffer.from([0, 0, 0, 0, 0, 1]));
  const got = head!.parts([next])!;
  expect(got.map((p) => p.toString('hex'))).toEqual(encoded(next, req).parts.map((p) => p.toString('hex')));
  expect(got[0]).toBe(parts[0]); // shared, not encoded again
  for (const p of got.slice(1)) expect(p.buffer).toBe(next.buffer);
});

test('any other byte, length or chunking is not matched', () => {
  const { head } = encoded(answer(A, B), request(true));
  const cases = [
    answer(A, B, { model_version: '2' }), // a header field
    answer(A, B, { id: 'x' }),
    answer(Buffer.from([1, 2, 3]), Buffer.from([5, 6, 7, 8, 9, 10, 11])), // same total, payloads moved
    answer(A, Buffer.from([5, 6, 7, 8, 9])), // shorter
    answer(A, B, { outputs: [{ name: 'A', datatype: 'UINT8', shape: [4] }, { name: 'B', datatype: 'INT8', shape: [6, 1] }] }),
  ];
  for (const m of cases) expect(head!.parts([m])).toBeUndefined();
  const same = answer(A, B);
  expect(head!.parts([same.subarray(0, 10), same.subarray(10)])).toBeUndefined();
  // One byte of the skeleton flipped, anywhere outside the payloads.
  const payloads = new Set<number>();
  const a = same.indexOf(A), b = same.indexOf(B);
  for (let i = 0; i < A.length; i++) payloads.add(a + i);
  for (let i = 0; i < B.length; i++) payloads.add(b + i);
  for (let i = 0; i < same.length; i++) {
    if (payloads.has(i)) continue;
    const m = Buffer.from(same);
    m[i] = m[i]! ^ 0x01;
    expect(head!.parts([m])).toBeUndefined();
  }
});

test('not kept: JSON outputs, a message in several chunks, an output in several views', () => {
  expect(encoded(answer(A, B), request(false)).head).toBeUndefined();
  const m = answer(A, B);
  const chunks = [m.subarray(0, m.length - 3), m.subarray(m.length - 3)]; // B's bytes split across two chunks
  const response = readInferResponse(chunks);
  const e = encodeInferResponse(response, request(true));
  expect(AnswerHead.of(chunks, response, e.binary, e.header, {})).toBeUndefined();
  // An output asked for as JSON beside a binary one: its data is in the JSON header.
  const mixed: InferRequest = { ...request(true), outputs: [
    { name: 'A', parameters: new Map(), binary: undefined, sharedMemory: false },
    { name: 'B', parameters: new Map(), binary: true, sharedMemory: false },
  ] };
  const r2 = readInferResponse([m]);
  const e2 = encodeInferResponse(r2, mixed);
  expect(AnswerHead.of([m], r2, e2.binary, e2.header, {})).toBeUndefined();
});
