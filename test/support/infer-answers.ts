// ModelInferResponses for the answer reader's differential tests: random messages encoded by
// protobufjs (with what protobufjs itself never writes: unpacked dims, repeated map keys, oneof
// members twice, unknown fields and groups), and the reader they are checked against — the split
// of answer-reader.ts's nextOutput, then protobufjs's decode of the header fields and the
// conversion the gateway made of it before it read them by hand.
import fc from 'fast-check';
import Long from 'long';
import { inference } from '../../proto/services';
import { END, nextOutput } from '../../gateway/infer/answer-reader';
import { GatewayError, isGatewayError } from '../../gateway/errors';
import { WireReader } from '../../gateway/grpc/wire';
import type { ParamValue } from '../../gateway/infer/request';
import type { InferResponse, OutputTensor, ResponseParams } from '../../gateway/infer/response';

// ---- the reference: protobufjs's decode and the old conversion

const NO_PARAMS: ResponseParams = Object.freeze({});

function fromInferParameter(v: inference.InferParameter): ParamValue | undefined {
  switch (v.parameter_choice) {
    case 'bool_param': return { type: 'bool', value: v.bool_param === true };
    case 'int64_param': return { type: 'int64', value: BigInt(String(v.int64_param)) };
    case 'uint64_param': return { type: 'uint64', value: BigInt(String(v.uint64_param)) };
    case 'double_param': return { type: 'double', value: v.double_param ?? 0 };
    case 'string_param': return { type: 'string', value: v.string_param ?? '' };
    default: return undefined;
  }
}

function fromParameters(m: Record<string, inference.IInferParameter> | null | undefined): ResponseParams {
  if (m === null || m === undefined) return NO_PARAMS;
  const keys = Object.keys(m);
  if (keys.length === 0) return NO_PARAMS;
  const out: Record<string, ParamValue | undefined> = {};
  for (const k of keys) out[k] = fromInferParameter(m[k] as inference.InferParameter);
  return out;
}

const dimOf = (d: number | Long): number => (typeof d === 'number' ? d : d.toNumber());

/** What readInferResponse answered before it read the header by hand. */
export function referenceRead(chunks: readonly Buffer[]): InferResponse {
  const r = new WireReader(chunks);
  const header: Buffer[] = [];
  const raws: { views: Buffer[]; length: number }[] = [];
  for (;;) {
    const length = nextOutput(r, header);
    if (length === END) break;
    if (length < 0) throw new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a truncated ModelInferResponse');
    const views: Buffer[] = [];
    if (!r.views(length, views)) throw new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a truncated ModelInferResponse');
    raws.push({ views, length });
  }
  let msg: inference.ModelInferResponse;
  try {
    msg = inference.ModelInferResponse.decode(Buffer.concat(header));
  } catch (err) {
    throw new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream sent a ModelInferResponse that does not decode: ${(err as Error).message}`);
  }
  return {
    modelName: msg.model_name,
    modelVersion: msg.model_version,
    id: msg.id,
    parameters: fromParameters(msg.parameters),
    outputs: msg.outputs.map((o, i): OutputTensor => ({
      name: o.name ?? '',
      datatype: o.datatype ?? '',
      shape: (o.shape ?? []).map((d) => dimOf(d)),
      parameters: fromParameters(o.parameters),
      data: raws[i]?.views ?? [],
      byteLength: raws[i]?.length ?? 0,
    })),
  };
}

/**
 * A response as plain data to compare: parameters as the encoder walks them (for…in, inherited
 * keys included) with their prototype, bigints as text, output bytes joined as hex.
 */
export function plain(r: InferResponse): unknown {
  const params = (p: ResponseParams): unknown => {
    const walked: unknown[] = [];
    for (const k in p) walked.push([k, p[k] === undefined ? 'none' : { ...p[k], value: String(p[k].value), raw: p[k].value }]);
    const proto = Object.getPrototypeOf(p) as unknown;
    return { walked, own: Object.keys(p), proto: proto === Object.prototype ? 'object' : JSON.stringify(proto, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v)) };
  };
  return {
    modelName: r.modelName,
    modelVersion: r.modelVersion,
    id: r.id,
    parameters: params(r.parameters),
    outputs: r.outputs.map((o) => ({
      name: o.name, datatype: o.datatype, shape: [...o.shape], parameters: params(o.parameters),
      data: Buffer.concat(o.data as Buffer[]).toString('hex'), views: o.data.map((v) => v.length), byteLength: o.byteLength,
    })),
  };
}

/** What reading comes to: the plain response, or the refusal's code. */
export function outcomeOf(read: () => InferResponse): { ok: unknown } | { code: string } {
  try {
    return { ok: plain(read()) };
  } catch (err) {
    if (!isGatewayError(err)) throw err;
    return { code: err.code };
  }
}

// ---- hand-written wire bytes

export function varint(n: bigint | number): number[] {
  let v = BigInt.asUintN(64, BigInt(n));
  const out: number[] = [];
  for (; v >= 0x80n; v >>= 7n) out.push(Number(v & 0x7fn) | 0x80);
  out.push(Number(v));
  return out;
}

export const field = (n: number, wire: number): number[] => varint(n * 8 + wire);
export const len = (n: number, body: readonly number[]): number[] => [...field(n, 2), ...varint(body.length), ...body];

// ---- generators

const text = fc.oneof(
  fc.constantFrom('', 'simple', 'OUTPUT0', 'FP32', '__proto__', '1', '0', 'constructor', 'triton_final_response', 'é', '\u{1F600}', '\uFEFFx'),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 6 }),
);
/** Bytes where a string goes: valid UTF-8 mostly, sometimes not. */
const textBytes = fc.oneof(
  { weight: 6, arbitrary: text.map((s) => [...Buffer.from(s, 'utf8')]) },
  { weight: 1, arbitrary: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 8 }) },
  { weight: 1, arbitrary: fc.constantFrom([0xc3, 0x28], [0xed, 0xa0, 0x80], [0xef, 0xbb, 0xbf], [0xf4, 0x90, 0x80, 0x80], [0xc0, 0x80], [0x41, 0xe2, 0x82]) },
);
const int64 = fc.oneof(
  fc.constantFrom(0n, 1n, -1n, 2n ** 53n, 2n ** 53n + 1n, -(2n ** 53n) - 1n, 2n ** 63n - 1n, -(2n ** 63n), 2n ** 32n, 2n ** 31n, -(2n ** 31n), 2n ** 64n - 1n),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
  fc.integer({ min: 0, max: 5000 }).map(BigInt),
);
const double = fc.oneof(fc.double(), fc.constantFrom(-0, 0, NaN, Infinity, 1e300, 5e-324));

/** An unknown field (numbers past the schema's, or a known number with another wire type); groups sometimes. */
const bytesOf = (n: number): fc.Arbitrary<number[]> => fc.array(fc.integer({ min: 0, max: 255 }), { minLength: n, maxLength: n });
const unknownField = (numbers: fc.Arbitrary<number>): fc.Arbitrary<number[]> => fc.oneof(
  fc.tuple(numbers, int64).map(([n, v]) => [...field(n, 0), ...varint(v)]),
  fc.tuple(numbers, bytesOf(8)).map(([n, b]) => [...field(n, 1), ...b]),
  fc.tuple(numbers, bytesOf(4)).map(([n, b]) => [...field(n, 5), ...b]),
  fc.tuple(numbers, fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 6 })).map(([n, b]) => len(n, b)),
  fc.tuple(numbers, fc.integer({ min: 1, max: 30 }), int64).map(([n, m, v]) => [...field(n, 3), ...field(m, 0), ...varint(v), ...field(n, 4)]),
);
const anyNumber = fc.oneof(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 10, max: 536870911 }));

/** One InferParameter's bytes: members in any order and number (the last one seen is the oneof's). */
const parameterBytes = fc.array(fc.oneof(
  fc.boolean().map((b) => [...field(1, 0), ...varint(b ? 1 : 0)]),
  int64.map((v) => [...field(1, 0), ...varint(v)]),
  int64.map((v) => [...field(2, 0), ...varint(v)]),
  textBytes.map((b) => len(3, b)),
  double.map((d) => { const b = Buffer.alloc(8); b.writeDoubleLE(d); return [...field(4, 1), ...b]; }),
  int64.map((v) => [...field(5, 0), ...varint(v)]),
  unknownField(anyNumber),
), { maxLength: 3 }).map((members) => members.flat());

/** A map entry (key 1, value 2), either or both sometimes missing or twice. */
const mapEntry = (n: number): fc.Arbitrary<number[]> => fc.array(fc.oneof(
  { weight: 3, arbitrary: textBytes.map((b) => len(1, b)) },
  { weight: 3, arbitrary: parameterBytes.map((b) => len(2, b)) },
  { weight: 1, arbitrary: unknownField(fc.integer({ min: 3, max: 40 })) },
), { maxLength: 4 }).map((body) => len(n, body.flat()));

const contentsBytes = fc.array(fc.oneof(
  fc.tuple(fc.integer({ min: 1, max: 5 }), fc.array(int64, { maxLength: 4 })).map(([n, vs]) => len(n, vs.flatMap((v) => varint(v)))),
  fc.tuple(fc.integer({ min: 1, max: 5 }), int64).map(([n, v]) => [...field(n, 0), ...varint(v)]),
  fc.tuple(fc.constantFrom(6, 7), fc.integer({ min: 0, max: 17 })).map(([n, k]) => len(n, Array<number>(k).fill(7))),
  fc.constant([...field(6, 5), 0, 0, 0x80, 0x3f]),
  fc.constant([...field(7, 1), 0, 0, 0, 0, 0, 0, 0xf0, 0x3f]),
  textBytes.map((b) => len(8, b)),
  unknownField(fc.integer({ min: 1, max: 40 })),
), { maxLength: 4 }).map((parts) => parts.flat());

/** One InferOutputTensor: its fields in any order and number, dims packed or one by one. */
const outputBytes = fc.array(fc.oneof(
  { weight: 3, arbitrary: textBytes.map((b) => len(1, b)) },
  { weight: 3, arbitrary: textBytes.map((b) => len(2, b)) },
  { weight: 3, arbitrary: fc.array(int64, { maxLength: 4 }).map((ds) => len(3, ds.flatMap((d) => varint(d)))) },
  { weight: 2, arbitrary: int64.map((d) => [...field(3, 0), ...varint(d)]) },
  { weight: 2, arbitrary: mapEntry(4) },
  { weight: 1, arbitrary: contentsBytes.map((b) => len(5, b)) },
  { weight: 1, arbitrary: unknownField(fc.integer({ min: 1, max: 40 })) },
), { maxLength: 6 }).map((parts) => len(5, parts.flat()));

/** Top-level fields other than outputs and entries (no groups: the reader refuses them at the top). */
const topUnknown = fc.oneof(
  fc.tuple(fc.integer({ min: 7, max: 100000 }), int64).map(([n, v]) => [...field(n, 0), ...varint(v)]),
  fc.tuple(fc.integer({ min: 1, max: 100000 }).filter((n) => n !== 6), fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 6 })).map(([n, b]) => len(n, b)),
  fc.tuple(fc.integer({ min: 7, max: 100 }), bytesOf(4)).map(([n, b]) => [...field(n, 5), ...b]),
);

const protobufjsOutput = fc.record({
  name: text,
  datatype: text,
  shape: fc.array(int64.map((d) => Long.fromString(String(BigInt.asIntN(64, d)))), { maxLength: 3 }),
});

/**
 * A ModelInferResponse: header fields as protobufjs writes them, hand-written ones and raw
 * entries, in any order.
 */
export const inferAnswer: fc.Arbitrary<Buffer> = fc.array(fc.oneof(
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom(1, 2, 3), textBytes).map(([n, b]) => len(n, b)) },
  { weight: 2, arbitrary: mapEntry(4) },
  { weight: 3, arbitrary: outputBytes },
  { weight: 2, arbitrary: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 12 }).map((b) => len(6, b)) },
  { weight: 1, arbitrary: topUnknown },
  {
    weight: 1,
    arbitrary: fc.record({ model_name: text, id: text, outputs: fc.array(protobufjsOutput, { maxLength: 2 }) })
      .map((m) => [...inference.ModelInferResponse.encode(m).finish()]),
  },
), { maxLength: 8 }).map((parts) => Buffer.from(parts.flat()));
