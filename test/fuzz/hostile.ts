// The hostile requests of the HTTP fuzz properties (http.test.ts), one arbitrary per request form,
// for a gateway on the demo backend (--demo) with ROUTES as its declarative routes. bench/fuzz-burst.ts
// samples the same arbitraries to send a burst of them to a gateway process and read its memory.
import { gzipSync, deflateSync } from 'node:zlib';
import fc from 'fast-check';
import { dim, jsonText, mutated, nestedText } from './harness';

/** The declarative route the `declarative` and `deep` requests use (`--routes`). */
export const ROUTES = JSON.stringify([{ path: '/api/r', model: 'simple', inputs: { INPUT0: { from: '/a', decode: 'numbers' }, INPUT1: { from: '/b', decode: 'numbers' } } }]);

export interface Hostile {
  readonly path: string;
  readonly body: Buffer;
  readonly headers: Record<string, string | number>;
}

const leaf = fc.oneof(fc.integer({ min: -5, max: 5 }), fc.string({ maxLength: 4 }), fc.boolean(), fc.constant(null));
const inputs = fc.array(fc.record({
  name: fc.constantFrom('INPUT0', 'INPUT1'), datatype: fc.constantFrom('INT32', 'BYTES', 'FP32', 'X'), shape: fc.array(dim, { maxLength: 3 }),
  data: fc.oneof(fc.array(leaf, { maxLength: 16 }), fc.base64String({ maxLength: 12 })),
}), { maxLength: 2 });

const v2 = inputs.map((i) => ({ path: '/v2/models/simple/infer', body: Buffer.from(jsonText({ inputs: i })), headers: {} }));
/** The binary extension, with a BYTES input of a hostile shape and one element. */
const binary = fc.tuple(fc.array(dim, { minLength: 1, maxLength: 3 }), fc.constantFrom('identity_bytes', 'simple_string', 'simple')).map(([shape, model]) => {
  const tensor = Buffer.from([1, 0, 0, 0, 0x61]);
  const header = Buffer.from(jsonText({ inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape, parameters: { binary_data_size: tensor.length } }] }));
  return { path: `/v2/models/${model}/infer`, body: Buffer.concat([header, tensor]), headers: { 'Inference-Header-Content-Length': header.length } };
});
/**
 * Numbers as a hostile client writes them where Triton wants sizes: exponents, fractions, past 53,
 * 63 and 64 bits, negative (`[1e20]`, `[18446744073709551616]`, `[-4611686018427387904,-4]`).
 */
const hostileNumber = fc.constantFrom('1e20', '1E3', '2.5', '-0', '-1', '-4', '0', '1', '3', '4', '16', '2147483648', '4294967296',
  '9007199254740993', '4611686018427387904', '-4611686018427387904', '9223372036854775807', '9223372036854775808',
  '18446744073709551615', '18446744073709551616', '1' + '0'.repeat(40), 'true', 'null', '"2"');
/** A V2 JSON input whose shape, element count, data and binary_data_size disagree. */
const inconsistent = fc.record({
  model: fc.constantFrom('simple', 'identity_fp32', 'identity_bytes', 'identity_int32'),
  datatype: fc.constantFrom('INT32', 'FP32', 'FP64', 'BYTES', 'UINT8', 'BOOL'),
  shape: fc.array(hostileNumber, { maxLength: 3 }),
  data: fc.array(fc.oneof(fc.integer({ min: -3, max: 3 }).map(String), hostileNumber), { maxLength: 6 }),
  nested: fc.boolean(),
  binary: fc.option(hostileNumber, { nil: undefined }),
  tail: fc.nat(12),
}).map((r) => {
  const data = r.nested ? `[[${r.data.join(',')}]]` : `[${r.data.join(',')}]`;
  const content = r.binary === undefined ? `"data":${data}` : `"parameters":{"binary_data_size":${r.binary}}`;
  const header = Buffer.from(`{"inputs":[{"name":"INPUT0","datatype":"${r.datatype}","shape":[${r.shape.join(',')}],${content}}]}`);
  if (r.binary === undefined) return { path: `/v2/models/${r.model}/infer`, body: header, headers: {} };
  return { path: `/v2/models/${r.model}/infer`, body: Buffer.concat([header, Buffer.alloc(r.tail, 1)]), headers: { 'Inference-Header-Content-Length': header.length } };
});
const compressed = fc.tuple(v2, fc.constantFrom('gzip', 'deflate')).chain(([h, e]) => {
  const c = e === 'gzip' ? gzipSync(h.body) : deflateSync(h.body);
  return fc.oneof(mutated(c), fc.nat().map((k) => c.subarray(0, k % c.length)), fc.constant(h.body))
    .map((body) => ({ path: h.path, body, headers: { 'Content-Encoding': e } }));
});
const bomb = fc.integer({ min: (1 << 20) + 1, max: 8 << 20 }).map((n) => ({ path: '/v2/models/simple/infer', body: gzipSync(Buffer.alloc(n, 0x20)), headers: { 'Content-Encoding': 'gzip' } }));
const DEEP_PATHS = ['/v1/models/simple:predict', '/api/r', '/v2/models/simple/infer', '/v2/models/simple/generate'];
const deep = fc.tuple(fc.integer({ min: 1, max: 30_000 }), fc.constantFrom(...DEEP_PATHS))
  .map(([d, path]) => ({ path, body: Buffer.from(path.includes('predict') ? `{"instances":${nestedText(d, '1')}}` : `{"a":${nestedText(d, '1')},"inputs":${nestedText(d, '1')}}`), headers: {} }));
const v1 = fc.oneof(fc.record({ instances: fc.array(fc.array(leaf, { maxLength: 16 }), { maxLength: 3 }) }), fc.record({ inputs: fc.dictionary(fc.constantFrom('INPUT0', 'INPUT1'), fc.array(leaf)) }))
  .map((b) => ({ path: '/v1/models/simple:predict', body: Buffer.from(jsonText(b)), headers: {} }));
const declarative = fc.record({ a: fc.oneof(leaf, fc.array(leaf, { maxLength: 16 })), b: fc.array(fc.integer(), { minLength: 16, maxLength: 16 }) },
  { requiredKeys: [] })
  .map((b) => ({ path: '/api/r', body: Buffer.from(jsonText(b)), headers: {} }));
const generate = fc.dictionary(fc.constantFrom('INPUT0', 'INPUT1', 'parameters', 'id'), fc.oneof(leaf, fc.array(leaf, { maxLength: 16 })))
  .map((b) => ({ path: '/v2/models/simple/generate', body: Buffer.from(jsonText(b)), headers: {} }));
const headers = fc.tuple(v2, fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('-1', '0', '99999999999', '+3', ' 7')), fc.constantFrom('gzip', 'br', 'identity', ''))
  .map(([h, ihcl, ce]) => ({ ...h, headers: { 'Inference-Header-Content-Length': ihcl.replace(/[^\x20-\x7e]/g, ''), 'Content-Encoding': ce, 'Accept-Encoding': ce } }));

/** Each form: its name, its arbitrary and how many inputs the property runs in `npm test`. */
export const targets: [string, fc.Arbitrary<Hostile>, number][] = [
  ['V2 JSON, generated and mutated', fc.oneof(v2, v2.chain((h) => mutated(h.body).map((body) => ({ ...h, body })))), 150],
  ['binary extension: shapes past 32 bits', binary, 100],
  ['V2 JSON and binary: shape, data and binary_data_size that disagree, hostile numbers', fc.oneof(inconsistent, inconsistent.chain((h) => mutated(h.body).map((body) => ({ ...h, body })))), 200],
  ['gzip/deflate: corrupt, truncated, uncompressed', compressed, 100],
  ['gzip bombs', bomb, 10],
  ['nested past the depth bound (V1, declarative, V2, generate)', deep, 40],
  ['V1 predict', fc.oneof(v1, v1.chain((h) => mutated(h.body).map((body) => ({ ...h, body })))), 100],
  ['declarative', fc.oneof(declarative, declarative.chain((h) => mutated(h.body).map((body) => ({ ...h, body })))), 100],
  ['generate', fc.oneof(generate, generate.chain((h) => mutated(h.body).map((body) => ({ ...h, body })))), 100],
  ['headers: Inference-Header-Content-Length, Content-Encoding, Accept-Encoding', headers, 100],
];
