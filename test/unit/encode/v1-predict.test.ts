// V1 answers against a plain model of them: every element printed on its own (formatTritonFp64 for
// the floating-point types, the digits or text otherwise), nested by the shape with brackets and
// commas — for each datatype, the shapes that meet the writer's edges (scalars, empty dims, a dim
// of one, three dims), rows (`predictions`), columns (`outputs`) and several outputs.
import { encodeV1Predict, outputValues } from '../../../gateway/encode/v1-predict';
import type { InferResponse, OutputTensor } from '../../../gateway/infer/response';
import { formatTritonFp64 } from '../../../gateway/json/number-print';

const out = (name: string, datatype: string, shape: number[], data: Buffer): OutputTensor => ({
  name, datatype, shape, parameters: {}, data: [data], byteLength: data.length,
});
const res = (...outputs: OutputTensor[]): InferResponse => ({ modelName: 'm', modelVersion: '1', id: '', parameters: {}, outputs });
const count = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** Values that test the printer: signs of zero, the non-finite ones, tiny and huge, and ordinary fractions. */
const SPECIAL = [0, -0, 0.1, -2.5, 1 / 3, 1e-7, 123456.789, 3.4e38, NaN, Infinity, -Infinity, 1e-45];

/** An output of `datatype` and `shape`, and each element's text as a V1 answer prints it. */
function sample(name: string, datatype: string, shape: number[]): { o: OutputTensor; texts: string[] } {
  const n = count(shape);
  const values = Array.from({ length: n }, (_, i) => SPECIAL[i % SPECIAL.length]! * (1 + i / 7));
  switch (datatype) {
    case 'FP32': {
      const a = Float32Array.from(values);
      return { o: out(name, datatype, shape, Buffer.from(a.buffer)), texts: [...a].map(formatTritonFp64) };
    }
    case 'FP64': {
      const a = Float64Array.from(values);
      return { o: out(name, datatype, shape, Buffer.from(a.buffer)), texts: [...a].map(formatTritonFp64) };
    }
    case 'FP16': {
      // 1.0, -2.0, 0.5, +Inf, a subnormal: each exact in half precision.
      const halves = [0x3c00, 0xc000, 0x3800, 0x7c00, 0x0001];
      const h = Uint16Array.from({ length: n }, (_, i) => halves[i % halves.length]!);
      const value = [1, -2, 0.5, Infinity, 2 ** -24];
      return { o: out(name, datatype, shape, Buffer.from(h.buffer)), texts: [...h].map((_, i) => formatTritonFp64(value[i % value.length]!)) };
    }
    case 'BF16': {
      const f = Float32Array.from(values);
      const h = Uint16Array.from(new Uint32Array(f.buffer), (w) => w >>> 16);
      const widened = Float32Array.from(h, (x) => new Float32Array(Uint32Array.of(x << 16).buffer)[0]!);
      return { o: out(name, datatype, shape, Buffer.from(h.buffer)), texts: [...widened].map(formatTritonFp64) };
    }
    case 'INT64': {
      const a = BigInt64Array.from({ length: n }, (_, i) => BigInt(i) * -3_000_000_000_000n);
      return { o: out(name, datatype, shape, Buffer.from(a.buffer)), texts: [...a].map(String) };
    }
    case 'BOOL': {
      const a = Buffer.from(Array.from({ length: n }, (_, i) => i % 2));
      return { o: out(name, datatype, shape, a), texts: [...a].map((b) => (b === 0 ? 'false' : 'true')) };
    }
    default: { // BYTES: text, and bytes that are not UTF-8
      const els = Array.from({ length: n }, (_, i) => (i % 2 === 0 ? Buffer.from(`é${i}"`) : Buffer.from([0xff, i & 0xff])));
      const data = Buffer.concat(els.flatMap((e) => [Buffer.from(Uint32Array.of(e.length).buffer), e]));
      return {
        o: out(name, 'BYTES', shape, data),
        texts: els.map((e, i) => (i % 2 === 0 ? JSON.stringify(e.toString()) : `{"b64":"${e.toString('base64')}"}`)),
      };
    }
  }
}

/** The model: texts [from, …) nested by shape. */
function nested(texts: readonly string[], shape: readonly number[], from: number): string {
  if (shape.length === 0) return texts[from]!;
  const [d, ...rest] = shape as [number, ...number[]];
  return `[${Array.from({ length: d }, (_, i) => nested(texts, rest, from + i * count(rest))).join(',')}]`;
}

const DATATYPES = ['FP32', 'FP64', 'FP16', 'BF16', 'INT64', 'BOOL', 'BYTES'];
const SHAPES = [[], [1], [7], [0], [2, 0], [3, 1], [2, 3], [2, 3, 4], [1, 1000]];

describe('encodeV1Predict', () => {
  test('columns (outputs): one output bare, every datatype and shape', () => {
    for (const dt of DATATYPES) {
      for (const shape of SHAPES) {
        const { o, texts } = sample('Y', dt, shape);
        expect(encodeV1Predict(res(o), false).toString()).toBe(`{"outputs":${nested(texts, shape, 0)}}`);
        expect(outputValues(res(o), undefined).toString()).toBe(nested(texts, shape, 0));
      }
    }
  });

  test('rows (predictions): each row of dim 0, one output bare, several by name', () => {
    for (const dt of DATATYPES) {
      for (const shape of SHAPES.filter((s) => s.length > 0)) {
        const { o, texts } = sample('Y', dt, shape);
        const rest = shape.slice(1);
        const rows = Array.from({ length: shape[0]! }, (_, r) => nested(texts, rest, r * count(rest)));
        expect(encodeV1Predict(res(o), true).toString()).toBe(`{"predictions":[${rows.join(',')}]}`);
        const second = sample('Z"2', 'FP32', [shape[0]!, 2]);
        const both = rows.map((row, r) => `{"Y":${row},"Z\\"2":${nested(second.texts, [2], r * 2)}}`);
        expect(encodeV1Predict(res(o, second.o), true).toString()).toBe(`{"predictions":[${both.join(',')}]}`);
        if (shape[0]! > 0) expect(outputValues(res(o, second.o), 0).toString()).toBe(both[0]);
      }
    }
  });

  test('several outputs as columns: an object by output name', () => {
    const a = sample('A', 'FP32', [2, 2]);
    const b = sample('B', 'BYTES', [3]);
    expect(encodeV1Predict(res(a.o, b.o), false).toString())
      .toBe(`{"outputs":{"A":${nested(a.texts, [2, 2], 0)},"B":${nested(b.texts, [3], 0)}}}`);
  });

  test('rows with a scalar output beside: its value in the one row; outputs of different first dims refused', () => {
    for (const dt of DATATYPES) {
      const scalar = sample('S', dt, []);
      const pair = sample('P', 'FP32', [1, 2]);
      expect(encodeV1Predict(res(pair.o, scalar.o), true).toString())
        .toBe(`{"predictions":[{"P":${nested(pair.texts, [2], 0)},"S":${scalar.texts[0]}}]}`);
      expect(outputValues(res(pair.o, scalar.o), 0).toString()).toBe(`{"P":${nested(pair.texts, [2], 0)},"S":${scalar.texts[0]}}`);
      const two = sample('T', 'FP32', [2, 2]);
      expect(() => encodeV1Predict(res(two.o, scalar.o), true)).toThrow(/output 'S' has no row 1/);
      expect(() => encodeV1Predict(res(two.o, sample('U', dt, [1, 3]).o), true)).toThrow(/output 'U' has no row 1/);
    }
  });

  test('an output whose bytes do not match its shape is refused', () => {
    expect(() => encodeV1Predict(res(out('Y', 'FP32', [3], Buffer.alloc(8))), true)).toThrow(/do not match its shape/);
  });
});
