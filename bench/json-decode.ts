// Micro-benchmark: the JSON request path's decode (reader + V2 header + values into the framed
// message) against JSON.parse + a Float32Array fill, on classifier_fp32's 150,528 floats; and the
// same floats printed as Triton prints them, per value as strings and as the V2 response encoder
// writes an FP32 output's `data`.
// Run (bench/RESULTS.md):
//   npx tsc -p tsconfig.json --outDir dist-bench
//   cp proto/generated/*.js proto/generated/*.json dist-bench/proto/generated/
//   node_modules/.bin/node dist-bench/bench/json-decode.js
import { writeJsonData } from '../gateway/decode/json-data';
import { decodeV2Header } from '../gateway/decode/v2-header';
import { encodeInferResponse } from '../gateway/encode/infer-response';
import { formatTritonFp32 } from '../gateway/json/number-print';
import { frameInferRequest } from '../gateway/infer/frame-request';
import type { InferResponse } from '../gateway/infer/response';

const n = 3 * 224 * 224;
const values = Array.from({ length: n }, (_, i) => Math.fround(Math.sin(i) * 100));
const request = (data: number[]): Buffer => Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 3, 224, 224], data }] }));
const body = request(values);
const unitBody = request(values.map((v) => Math.fround(Math.abs(v) / 100))); // (0, 1): "0.ddd…" tokens

function ours(b: Buffer = body): void {
  const d = decodeV2Header(b, 0, b.length, { modelName: 'm', modelVersion: '', binaryBytes: 0, maxInputSizeBytes: 64 << 20 });
  const f = frameInferRequest(d.request);
  const plan = d.plans[0]!;
  if (plan.kind !== 'json') throw new Error('plan');
  writeJsonData(b, plan.data, 'FP32', f.message, f.slots[0]!.offset, plan.elementCount);
}

function baseline(): void {
  const j = JSON.parse(body.toString('utf8')) as { inputs: { data: number[] }[] };
  const out = new Float32Array(n);
  const data = j.inputs[0]!.data;
  for (let i = 0; i < n; i++) out[i] = data[i]!;
}

function encode(): void {
  const buf = Buffer.alloc(n * 4);
  for (let i = 0; i < n; i++) buf.writeFloatLE(values[i]!, i * 4);
  const parts: string[] = new Array<string>(n);
  for (let i = 0; i < n; i++) parts[i] = formatTritonFp32(buf.readFloatLE(i * 4));
  parts.join(',');
}

/** An FP32 output of the given values as the upstream reader hands it to the encoder. */
function fp32Response(of: (i: number) => number): InferResponse {
  const bytes = Buffer.alloc(n * 4);
  for (let i = 0; i < n; i++) bytes.writeFloatLE(of(i), i * 4);
  return {
    modelName: 'classifier_fp32', modelVersion: '1', id: '', parameters: {},
    outputs: [{ name: 'OUTPUT', datatype: 'FP32', shape: [1, n], parameters: {}, data: [bytes], byteLength: n * 4 }],
  };
}
const response = fp32Response((i) => values[i]!);
const probabilities = fp32Response((i) => Math.abs(Math.sin(i * 1.7)) * 0.999); // (0, 1): the longer path

function encodeResponse(r: InferResponse): void {
  encodeInferResponse(r, { outputs: undefined, binaryDataOutput: false, base64Output: false });
}

function time(name: string, fn: () => void, runs = 15): void {
  for (let i = 0; i < 3; i++) fn();
  const t: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = process.hrtime.bigint();
    fn();
    t.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  t.sort((a, b) => a - b);
  console.log(`${name.padEnd(44)} median ${t[Math.floor(runs / 2)]!.toFixed(2)} ms  min ${t[0]!.toFixed(2)} ms`);
}

console.log(`body ${(body.length / 1e6).toFixed(2)} MB, ${n} FP32 values, node ${process.version}`);
time('tensorgate decode into framed message', () => ours());
time('  the same, values in (0, 1)', () => ours(unitBody));
time('JSON.parse + Float32Array fill (baseline)', baseline);
time('tensorgate encode FP32 as Triton prints', encode);
time('tensorgate V2 JSON response, FP32 output', () => encodeResponse(response));
time('  the same, values in (0, 1)', () => encodeResponse(probabilities));
