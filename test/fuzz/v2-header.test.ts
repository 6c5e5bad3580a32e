// The V2 header's two readers, differentially: whatever the known-shape reader
// (decode/v2-header-known.ts) takes, the generic one (readV2Header on json/reader.ts) reads to the
// same request, plans and framed message; whatever it gives up on, decodeV2Header answers as the
// generic reader does (the same request or the same refusal). Headers generated in the binary
// extension's and JSON data's forms, valid and hostile, then mutated byte by byte.
import fc from 'fast-check';
import { fillJsonSlots, type InputPlan } from '../../gateway/decode/json-data';
import { decodeV2Header, type DecodedHeader, type HeaderContext, readV2Header } from '../../gateway/decode/v2-header';
import { readKnownHeader } from '../../gateway/decode/v2-header-known';
import { DATATYPES } from '../../gateway/infer/datatype';
import { frameInferRequest } from '../../gateway/infer/frame-request';
import { dim, fuzz, jsonText, mutated, outcome } from './harness';

const name = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('INPUT0', 'INPUT1', 'OUTPUT0', 'OUTPUT1') },
  { weight: 1, arbitrary: fc.string({ maxLength: 4 }) },
  { weight: 1, arbitrary: fc.constantFrom('é', '\u0000', '__proto__', '\ud800', 'a"b', 'a\\b') },
);
const datatype = fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...DATATYPES) }, { weight: 1, arbitrary: fc.constantFrom('FLOAT32', '', 7) });
const uintish = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 40 }) },
  { weight: 1, arbitrary: fc.constantFrom(-1, 1.5, '3', true, null, 2 ** 53, 2n ** 53n + 1n, 2n ** 64n, 1e20) },
);
const leaf = fc.oneof(fc.integer({ min: -300, max: 300 }), fc.double(), fc.boolean(), fc.string({ maxLength: 4 }), fc.constant(null));
const data = fc.oneof(
  { weight: 4, arbitrary: fc.array(fc.integer({ min: -300, max: 300 }), { maxLength: 12 }) },
  { weight: 1, arbitrary: fc.array(fc.double(), { maxLength: 6 }) },
  { weight: 1, arbitrary: fc.array(fc.array(leaf, { maxLength: 3 }), { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.array(fc.string({ maxLength: 5 }), { maxLength: 4 }) },
  { weight: 1, arbitrary: fc.base64String({ maxLength: 24 }) },
  { weight: 1, arbitrary: fc.record({ b64: fc.base64String({ maxLength: 24 }) }) },
  { weight: 1, arbitrary: leaf },
);
const inputParameters = fc.oneof(
  { weight: 6, arbitrary: fc.record({ binary_data_size: uintish }) },
  { weight: 1, arbitrary: fc.constant({}) },
  { weight: 1, arbitrary: fc.constantFrom({ content_type: 'base64' }, { shared_memory_region: 'r', shared_memory_byte_size: 4 }, 3) },
);
const input = fc.record(
  { name, datatype, shape: fc.oneof({ weight: 6, arbitrary: fc.array(dim, { maxLength: 3 }) }, { weight: 1, arbitrary: fc.constantFrom([1.5], ['2'], 4) }),
    parameters: inputParameters, data },
  { requiredKeys: ['name', 'datatype', 'shape'] },
);
const output = fc.record(
  { name, parameters: fc.oneof(fc.record({ binary_data: fc.oneof(fc.boolean(), fc.constant(1)) }), fc.constantFrom({}, { classification: 2 }, { content_type: 'base64' })) },
  { requiredKeys: ['name'] },
);
const header = fc.record({
  id: fc.oneof(fc.string({ maxLength: 4 }), fc.constant(7)),
  parameters: fc.oneof(fc.record({ binary_data_output: fc.oneof(fc.boolean(), fc.constant('x')) }), fc.constantFrom({}, { sequence_id: 3 }, { triton_x: 1 })),
  inputs: fc.oneof({ weight: 8, arbitrary: fc.array(input, { maxLength: 3 }) }, { weight: 1, arbitrary: fc.constantFrom('x', {}, [1]) }),
  outputs: fc.oneof({ weight: 4, arbitrary: fc.array(output, { maxLength: 3 }) }, { weight: 1, arbitrary: fc.constantFrom(5, [null]) }),
  extra: fc.constant(1),
}, { requiredKeys: [] });

/** Key order as given or reversed: the reader takes members in any order. */
const ordered = <T extends object>(o: T, reverse: boolean): T => (reverse ? Object.fromEntries(Object.entries(o).reverse()) as T : o);

/** A header clients send: binary-extension or JSON-data inputs with distinct names, plain outputs. */
const validInput = fc.tuple(fc.nat(2), fc.integer({ min: 0, max: 8 }), fc.constantFrom('UINT8', 'INT32', 'FP32', 'BYTES', 'BOOL'), fc.boolean(), fc.boolean())
  .map(([form, n, dt, strings, reverse]) => {
    const shape = [1, n];
    if (form === 0) return ordered({ name: '', datatype: 'UINT8', shape, parameters: { binary_data_size: n } }, reverse);
    const data = dt === 'BYTES' ? Array.from({ length: n }, (_, i) => (strings ? `s${i}` : 'é')) : dt === 'BOOL' ? Array.from({ length: n }, (_, i) => i % 2 === 0)
      : Array.from({ length: n }, (_, i) => (dt === 'FP32' ? i / 4 : i * 3));
    return ordered(form === 1 ? { name: '', datatype: dt, shape, data } : { name: '', datatype: dt, shape, data, parameters: {} }, reverse);
  });
const validHeader = fc.record({
  id: fc.oneof(fc.string({ maxLength: 4 }), fc.constant('')),
  parameters: fc.oneof(fc.record({ binary_data_output: fc.boolean() }), fc.constant({})),
  inputs: fc.array(validInput, { minLength: 1, maxLength: 3 }).map((a) => a.map((i, k) => ({ ...i, name: `INPUT${k}` }))),
  outputs: fc.array(fc.record({ name: fc.constantFrom('OUTPUT0', 'OUTPUT1'), parameters: fc.oneof(fc.record({ binary_data: fc.boolean() }), fc.constant({})) },
    { requiredKeys: ['name'] }), { maxLength: 3 }),
}, { requiredKeys: ['inputs'] });

/** Σ binary_data_size of the inputs that give a small one: the binary section a valid request carries. */
function declared(h: { inputs?: unknown }): number {
  let sum = 0;
  if (Array.isArray(h.inputs)) {
    for (const i of h.inputs as { parameters?: { binary_data_size?: unknown } }[]) {
      const n = i.parameters?.binary_data_size;
      if (typeof n === 'number' && Number.isInteger(n) && n >= 0 && n < 1000) sum += n;
    }
  }
  return sum;
}

/** A generated header as text: compact or indented, with `extra` dropped most of the time. */
type Header = { inputs?: unknown; extra?: number };
const asHeader = (h: Header): Header => h;
const anyHeader = fc.oneof({ weight: 1, arbitrary: header.map(asHeader) }, { weight: 3, arbitrary: validHeader.map(asHeader) });
const text = fc.tuple(anyHeader, fc.boolean(), fc.nat(9)).map(([h, pretty, keep]) => {
  const { extra, ...rest } = h;
  const v = keep === 0 && extra !== undefined ? h : rest;
  return { body: Buffer.from(pretty ? JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? Number(x) : x), 1) : jsonText(v)), sum: declared(h) };
});

/** Number and string tokens near the reader's edges: leading zeros, signs, fractions, 2^53, escapes. */
const trickyNumber = fc.constantFrom('01', '-0', '0.0', '1.0', '1e0', '1E1', '-1', '9007199254740992', '9007199254740993', '999999999999999',
  '1000000000000000', '1e400', 'NaN', 'Infinity', '18446744073709551616', '0x1');
const trickyString = fc.constantFrom('"INPUT\\u0030"', '"IN\\"PUT0"', '"\\ud800"', '"a\tb"', '"\u0000"', '"é"', '"__proto__"', '"id"', '"inputs"');

/** A valid header with its k-th number, or k-th string, swapped for a tricky token. */
const spliced = fc.tuple(text, fc.nat(), fc.boolean(), trickyNumber, trickyString).map(([t, k, num, n, s]) => {
  const src = t.body.toString('utf8');
  const re = num ? /\d+/g : /"[^"\\]*"/g;
  const spots = [...src.matchAll(re)];
  if (spots.length === 0) return t;
  const m = spots[k % spots.length]!;
  return { body: Buffer.from(src.slice(0, m.index) + (num ? n : s) + src.slice(m.index + m[0].length)), sum: t.sum };
});

const ctxOf = (binaryBytes: number, headerless: boolean, maxInputSizeBytes: number): HeaderContext =>
  ({ modelName: 'm', modelVersion: '1', binaryBytes, headerless, maxInputSizeBytes });

/** What a decoded header comes to: the request, its plans' ranges and the framed message (JSON data filled in). */
function summary(body: Buffer, d: DecodedHeader): unknown {
  const framed = outcome(() => {
    const f = frameInferRequest(d.request, (n) => Buffer.alloc(n)); // zeroed: binary slots stay unwritten here
    fillJsonSlots(body, d.plans, d.request, f.slots, f.message);
    return f.message.toString('hex');
  });
  const plans = d.plans.map((p: InputPlan) => (p.kind === 'json' ? { kind: p.kind, start: p.data.start, end: p.data.end, count: p.elementCount } : p));
  return { request: d.request, plans, headerEnd: d.headerEnd, framed };
}

const cases = fc.tuple(
  fc.oneof(
    { weight: 3, arbitrary: text }, { weight: 2, arbitrary: spliced },
    { weight: 2, arbitrary: text.chain((t) => mutated(t.body).map((body) => ({ body, sum: t.sum }))) },
  ),
  // Mostly what a valid request carries: the declared binary bytes, no suffix, a large budget.
  fc.constantFrom(0, 0, 0, 0, 1, -1), fc.boolean(), fc.constantFrom(1 << 20, 1 << 20, 1 << 20, 16), fc.constantFrom('', '', '', ' ', '\n\0', 'xy'),
);

/** Cases the known-shape reader took in the property (it must take a share of them to test anything). */
let taken = 0;
let seen = 0;

describe('the known-shape V2 header reader against the generic one', () => {
  fuzz('the same request, plans and framed message, or the same refusal', 3000, cases, ([t, extra, headerless, max, suffix]) => {
    const body = Buffer.concat([t.body, Buffer.from(suffix)]);
    const ctx = ctxOf(Math.max(0, t.sum + extra), headerless, max);
    const known = readKnownHeader(body, 0, body.length, ctx);
    // A summary fills the JSON slots, which gives the numbers back (once per decoded header).
    const r = outcome(() => readV2Header(body, 0, body.length, ctx));
    const generic = 'ok' in r ? summary(body, r.ok) : r;
    seen++;
    if (known !== undefined) {
      taken++;
      expect(summary(body, known)).toEqual(generic);
    }
    const both = outcome(() => decodeV2Header(body, 0, body.length, ctx));
    expect('ok' in both ? summary(body, both.ok) : both).toEqual(generic);
  });

  test('the property gave the known-shape reader a share of its cases', () => {
    expect(taken).toBeGreaterThan(seen / 8);
  });

  test('takes the headers clients send (binary extension, JSON data, ids, binary_data_output, repeated outputs)', () => {
    const headers = [
      '{"inputs":[{"name":"INPUT0","datatype":"UINT8","shape":[1,64],"parameters":{"binary_data_size":64}}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}',
      '{ "id" : "r1", "parameters": {"binary_data_output": true},\n "inputs": [ {"name": "x", "shape": [2], "datatype": "INT32", "data": [1, 2]} ] }',
      '{"inputs":[{"name":"a","datatype":"BYTES","shape":[1],"data":["hé"]},{"name":"b","datatype":"FP32","shape":[1],"data":"AACAPw=="}],"outputs":[{"name":"o"},{"name":"o"}]}',
    ];
    for (const h of headers) {
      const body = Buffer.from(h);
      const ctx = ctxOf(h.includes('binary_data_size') ? 64 : 0, false, 1 << 20);
      const known = readKnownHeader(body, 0, body.length, ctx);
      expect(known).toBeDefined();
      expect(summary(body, known!)).toEqual(summary(body, readV2Header(body, 0, body.length, ctx)));
    }
  });
});
