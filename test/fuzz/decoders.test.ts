// Fuzzing every decoder, generated and mutated bodies: a decoder refuses only
// with a GatewayError, never asks for a buffer above the configured budget, and a push decoder
// gives the same result however its input is cut. Valid tensors round-trip: the same tensor set
// sent as V2 JSON, base64 JSON and the binary extension frames the same message.
import { gzipSync, deflateSync } from 'node:zlib';
import { Readable } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { parseRoutes } from '../../gateway/config/routes';
import { Base64Decoder } from '../../gateway/decode/base64/base64';
import { BinaryExtensionDecoder } from '../../gateway/decode/binary-extension';
import { parseControlBody } from '../../gateway/decode/control/control-json';
import { decodeDeclarative } from '../../gateway/decode/dialects/declarative';
import { chooseFraming } from '../../gateway/decode/framing';
import { decodeGenerate } from '../../gateway/decode/generate';
import { readNumber } from '../../gateway/json/number-parse';
import { JsonSyntaxError, parseJson } from '../../gateway/json/reader';
import { RawDecoder } from '../../gateway/decode/raw-binary';
import { decodeIndexReady, decodeLoadParameters, decodeUnloadDependents } from '../../gateway/decode/control/repository';
import { decodeLogUpdate, decodeTraceUpdate } from '../../gateway/decode/control/settings';
import { decodeCudaRegister, decodeSystemRegister } from '../../gateway/decode/control/shared-memory';
import { decodeV1Predict } from '../../gateway/decode/dialects/v1-predict';
import { decodeWholeBody } from '../../gateway/decode/v2-body';
import { isGatewayError } from '../../gateway/errors';
import { DATATYPES, type Datatype, elementSize } from '../../gateway/infer/datatype';
import type { Frame, OpenSink } from '../../gateway/infer/framed-message';
import { Ledger } from '../../gateway/infer/ledger';
import { SlotWriter } from '../../gateway/infer/slot-writer';
import { declaredLength, readBody, requestEncoding } from '../../gateway/ingress/body';
import { frameInferHead } from '../../gateway/infer/frame-request';
import { inference } from '../../proto/services';
import { cutAt, cuts, dim, fuzz, jsonText, mutated, nestedText, outcome, withinBudget } from './harness';

/** limits.maxInputSizeBytes in these runs: every buffer a decoder asks for stays within it. */
const MAX_INPUT = 1 << 20;
const frame: Frame = (request, external) => frameInferHead(request, external);
const config = inference.ModelConfig.create({ name: 'm', output: [] });
const whole = { modelName: 'm', modelVersion: '', config, maxInputSizeBytes: MAX_INPUT, headerlessBinary: true };

/** Fills the slots of the framed message (no cut-through): the message the call would carry. */
function sinkInto(got: { message?: Buffer }): OpenSink {
  return (_request, framed, slots) => {
    got.message = framed.message;
    const w = new SlotWriter(framed.message, slots);
    return { write: (c, from = 0) => void w.write(c, from) };
  };
}

/** The framed message (hex) or the refusal: what decoding a body comes to. */
type Result = { message: string } | { code: string; message: string };

function wholeResult(chunks: Buffer[], length: number, ihcl: string | undefined): Result {
  const r = outcome(() => withinBudget(MAX_INPUT, () => decodeWholeBody(chunks, length, ihcl, whole, frame, new Ledger())));
  return 'ok' in r ? { message: r.ok.message.toString('hex') } : r;
}

// ---- generators of V2 requests, valid and hostile

const datatype = fc.oneof({ weight: 8, arbitrary: fc.constantFrom(...DATATYPES) }, { weight: 1, arbitrary: fc.constantFrom('FLOAT32', 'int32', '') });
const leaf = fc.oneof(fc.integer({ min: -300, max: 300 }), fc.double(), fc.boolean(), fc.string({ maxLength: 6 }), fc.constant(null));
const data = fc.oneof(
  fc.array(leaf, { maxLength: 20 }),
  fc.array(fc.array(leaf, { maxLength: 4 }), { maxLength: 5 }),
  fc.base64String({ maxLength: 40 }),
  fc.record({ b64: fc.base64String({ maxLength: 40 }) }),
  leaf,
);
const hostileInput = fc.record({
  name: fc.constantFrom('INPUT0', 'INPUT1', 'X'),
  datatype,
  shape: fc.array(dim, { maxLength: 4 }),
  data: fc.option(data, { nil: undefined }),
  parameters: fc.option(
    fc.record({ binary_data_size: fc.option(fc.oneof(fc.nat(64), fc.constant(-1)), { nil: undefined }) }, { requiredKeys: [] }), { nil: undefined }),
}, { requiredKeys: ['name', 'datatype', 'shape'] });
const hostileHeader = fc.record({
  id: fc.option(fc.string({ maxLength: 5 }), { nil: undefined }),
  parameters: fc.option(fc.dictionary(fc.constantFrom('binary_data_output', 'content_type', 'triton_x', 'sequence_id', 'priority', 'p'), leaf), { nil: undefined }),
  inputs: fc.array(hostileInput, { maxLength: 3 }),
  outputs: fc.option(fc.array(fc.record({ name: fc.string({ maxLength: 4 }), parameters: fc.option(fc.dictionary(fc.constantFrom('binary_data', 'classification'), leaf)) }), { maxLength: 2 }), { nil: undefined }),
}, { requiredKeys: ['inputs'] }).map((h) => Buffer.from(jsonText(h)));

/** A header, sometimes mutated, with random binary bytes after it. */
const v2Body = fc.tuple(
  fc.oneof({ weight: 3, arbitrary: hostileHeader }, { weight: 2, arbitrary: hostileHeader.chain(mutated) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 80 }).map((u) => Buffer.from(u)) }),
  fc.uint8Array({ maxLength: 96 }).map((u) => Buffer.from(u)),
);

// ---- valid tensors, for the round trip

const values: Record<string, fc.Arbitrary<unknown>> = {
  BOOL: fc.boolean(), INT8: fc.integer({ min: -128, max: 127 }), UINT8: fc.integer({ min: 0, max: 255 }),
  INT16: fc.integer({ min: -32768, max: 32767 }), UINT16: fc.integer({ min: 0, max: 65535 }),
  INT32: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), UINT32: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
  INT64: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), UINT64: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
  FP32: fc.float({ noNaN: true, noDefaultInfinity: true }), FP64: fc.double({ noNaN: true, noDefaultInfinity: true }),
  BYTES: fc.string({ maxLength: 8, unit: 'binary' }),
};
const NUMERIC = Object.keys(values) as Datatype[];

function asTritonReads(v: number): number {
  const text = Buffer.from(JSON.stringify(v));
  return readNumber(text, 0, text.length, { integer: false, value: 0, big: undefined, negative: false }).value;
}

function tensorBytes(dt: Datatype, vs: readonly unknown[]): Buffer {
  if (dt === 'BYTES') return Buffer.concat(vs.map((v) => { const s = Buffer.from(v as string); const n = Buffer.alloc(4); n.writeUInt32LE(s.length); return Buffer.concat([n, s]); }));
  const b = Buffer.alloc(vs.length * elementSize(dt));
  vs.forEach((v, i) => {
    const at = i * elementSize(dt);
    switch (dt) {
      case 'BOOL': b[at] = v ? 1 : 0; break;
      case 'INT8': b.writeInt8(v as number, at); break;
      case 'UINT8': b.writeUInt8(v as number, at); break;
      case 'INT16': b.writeInt16LE(v as number, at); break;
      case 'UINT16': b.writeUInt16LE(v as number, at); break;
      case 'INT32': b.writeInt32LE(v as number, at); break;
      case 'UINT32': b.writeUInt32LE(v as number, at); break;
      case 'INT64': b.writeBigInt64LE(v as bigint, at); break;
      case 'UINT64': b.writeBigUInt64LE(v as bigint, at); break;
      // As Triton reads the JSON text (rapidjson's normal precision; test/unit/json/number-parse.test.ts).
      case 'FP32': b.writeFloatLE(asTritonReads(v as number), at); break;
      case 'FP64': b.writeDoubleLE(asTritonReads(v as number), at); break;
      default: throw new Error(dt);
    }
  });
  return b;
}

const tensor = fc.constantFrom(...NUMERIC).chain((dt) => fc.tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 4 })).chain(([r, c]) =>
  fc.array(values[dt]!, { minLength: r * c, maxLength: r * c }).map((vs) => ({ dt, shape: [r, c], vs }))));
const tensorSet = fc.uniqueArray(tensor, { minLength: 1, maxLength: 3, selector: (t) => t.dt }).map((ts) => ts.map((t, i) => ({ ...t, name: `IN${i}` })));

describe('V2 bodies: JSON reader, V2 header, JSON data, base64, binary extension, framing', () => {
  fuzz('the JSON reader throws only its syntax error', 400, fc.oneof(fc.uint8Array({ maxLength: 64 }).map((u) => Buffer.from(u)), hostileHeader.chain(mutated)), (b) => {
    try {
      parseJson(b, 0, b.length);
    } catch (err) {
      if (!(err instanceof JsonSyntaxError)) throw err;
    }
  });

  fuzz('any body: a GatewayError or a message, within the budget', 500, fc.tuple(v2Body, fc.boolean()), ([[header, binary], withIhcl]) => {
    const body = Buffer.concat([header, binary]);
    wholeResult([body], body.length, withIhcl ? String(header.length) : undefined);
  });

  fuzz('binary extension: pushed in any chunking, the whole-body result', 400, fc.tuple(v2Body, cuts), ([[header, binary], points]) => {
    const body = Buffer.concat([header, binary]);
    const expected = wholeResult([body], body.length, String(header.length));
    const pushed = (chunks: Buffer[]): Result => {
      const got: { message?: Buffer } = {};
      const r = outcome(() => withinBudget(MAX_INPUT, () => {
        const options = { ...whole, headerBytes: header.length, bodyBytes: body.length, external: false };
        const d = new BinaryExtensionDecoder(options, frame, sinkInto(got), new Ledger());
        for (const c of chunks) d.push(c);
        return d.end();
      }));
      return 'ok' in r ? { message: got.message!.toString('hex') } : r;
    };
    if (header.length === 0 || binary.length === 0) return; // not a binary-extension framing
    const one = pushed([body]);
    expect(pushed(cutAt(body, points))).toEqual(one);
    // Refusals agree with the whole-body decoder; so do messages (the same bytes framed).
    if ('code' in expected) expect(one).toMatchObject({ code: expected.code });
    else expect(one).toEqual(expected);
  });

  fuzz('a valid tensor set frames one message as JSON, base64 JSON and binary', 300, tensorSet, (set) => {
    const bin = set.map((t) => tensorBytes(t.dt, t.vs));
    const binInputs = set.map((t, i) => ({ name: t.name, datatype: t.dt, shape: t.shape, parameters: { binary_data_size: bin[i]!.length } }));
    const binHeader = Buffer.from(jsonText({ inputs: binInputs }));
    const binBody = Buffer.concat([binHeader, ...bin]);
    const reference = wholeResult([binBody], binBody.length, String(binHeader.length));
    expect(reference).toHaveProperty('message');
    const asJson = Buffer.from(jsonText({ inputs: set.map((t) => ({ name: t.name, datatype: t.dt, shape: t.shape, data: t.vs })) }));
    expect(wholeResult([asJson], asJson.length, undefined)).toEqual(reference);
    const asB64 = Buffer.from(jsonText({ inputs: set.map((t, i) => ({ name: t.name, datatype: t.dt, shape: t.shape, data: t.dt === 'BYTES' ? t.vs : { b64: bin[i]!.toString('base64') } })) }));
    expect(wholeResult([asB64], asB64.length, undefined)).toEqual(reference);
  });

  fuzz('the base64 push decoder: any chunking, the one-chunk result; valid text decodes as Buffer does', 500,
    fc.tuple(fc.oneof(fc.uint8Array({ maxLength: 48 }).map((u) => Buffer.from(Buffer.from(u).toString('base64'))), fc.uint8Array({ maxLength: 48 }).map((u) => Buffer.from(Buffer.from(u).toString('base64'))).chain(mutated)), cuts),
    ([text, points]) => {
      const run = (chunks: Buffer[]): { bytes: string; n: number } | { code: string; message: string } => {
        const expected = Buffer.from(text.toString('latin1'), 'base64').length;
        const target = Buffer.alloc(expected);
        const r = outcome(() => {
          const d = new Base64Decoder(target, 0, expected, 'input \'X\'');
          for (const c of chunks) d.push(c, 0, c.length);
          return d.end();
        });
        return 'ok' in r ? { bytes: target.toString('hex'), n: r.ok } : r;
      };
      const one = run([text]);
      expect(run(cutAt(text, points))).toEqual(one);
      if (/^[A-Za-z0-9+/]*={0,2}$/.test(text.toString('latin1')) && text.length % 4 === 0) {
        expect(one).toEqual({ bytes: Buffer.from(text.toString('latin1'), 'base64').toString('hex'), n: Buffer.from(text.toString('latin1'), 'base64').length });
      }
    });

  fuzz('raw: pushed in any chunking, the whole-body result', 300,
    fc.tuple(fc.constantFrom(...DATATYPES), fc.array(fc.integer({ min: -1, max: 4 }), { maxLength: 3 }), fc.nat(4),
      fc.uint8Array({ maxLength: 64 }).map((u) => Buffer.from(u)), cuts),
    ([dt, dims, batch, body, points]) => {
      const cfg = inference.ModelConfig.create({ name: 'r', max_batch_size: batch, output: [], input: [{ name: 'IN', data_type: inference.DataType[`TYPE_${dt === 'BYTES' ? 'STRING' : dt}` as keyof typeof inference.DataType], dims }] });
      const run = (chunks: Buffer[]): Result => {
        const got: { message?: Buffer } = {};
        const r = outcome(() => withinBudget(MAX_INPUT, () => {
          const d = new RawDecoder({ config: cfg, modelName: 'r', modelVersion: '', bodyBytes: body.length, maxInputSizeBytes: MAX_INPUT, external: false }, frame, sinkInto(got));
          for (const c of chunks) d.push(c);
          return d.end();
        }));
        return 'ok' in r ? { message: got.message!.toString('hex') } : r;
      };
      expect(run(cutAt(body, points))).toEqual(run([body]));
    });
});

describe('V1, declarative, generate', () => {
  const model = { name: 'm', version: '', inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 2] }, { name: 'y', datatype: 'BYTES', shape: [-1] }] };
  const one = { name: 'm', version: '', inputs: [{ name: 'x', datatype: 'INT32', shape: [-1, -1] }] };
  const v1Value = fc.letrec((tie) => ({
    v: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('v'), { maxLength: 4 }), fc.record({ b64: fc.base64String({ maxLength: 12 }) }), fc.dictionary(fc.constantFrom('x', 'y', 'b64'), tie('v'), { maxKeys: 3 })),
  })).v;
  const v1Body = fc.oneof(
    fc.record({ instances: v1Value }), fc.record({ inputs: v1Value }), v1Value,
  ).map(jsonText);
  const v1Text = fc.oneof(
    { weight: 4, arbitrary: v1Body },
    { weight: 1, arbitrary: fc.tuple(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('1', '{"a":1}', '[]', '"s"')).map(([d, l]) => `{"instances":${nestedText(d, l)}}`) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 20_000 }).map((d) => `{"instances":[${'{"x":'.repeat(d)}1${'}'.repeat(d)}]}`) },
  );

  fuzz('V1 predict: a GatewayError or a request that fills within the budget', 400, fc.oneof(v1Text, v1Text.chain((t) => mutated(Buffer.from(t)).map(String))), (text) => {
    for (const m of [model, one]) {
      outcome(() => withinBudget(MAX_INPUT, () => {
        const d = decodeV1Predict(text, m, MAX_INPUT);
        const sizes = d.request.inputs.map((i) => i.byteSize ?? 0);
        const message = Buffer.alloc(sizes.reduce((a, b) => a + b, 0));
        let at = 0;
        d.fill(message, sizes.map((n) => { const s = { offset: at }; at += n; return s; }));
      }));
    }
  });

  const routes = parseRoutes([{ path: '/r', model: 'm', inputs: { x: { from: '/a', decode: 'numbers' }, y: { from: '/b', decode: 'base64' } }, parameters: { p: '/p' } }]);
  if (!('value' in routes)) throw new Error('route');
  const md = { name: 'm', inputs: model.inputs, outputs: [] };
  fuzz('declarative: a GatewayError or a request, within the budget', 400,
    fc.oneof(fc.record({ a: v1Value, b: v1Value, p: leaf }).map(jsonText),
      fc.integer({ min: 1, max: 20_000 }).map((d) => `{"a":${nestedText(d, '1')},"b":"AAAA"}`),
      fc.record({ a: v1Value, b: v1Value }).chain((v) => mutated(Buffer.from(jsonText(v))).map(String))),
    (text) => {
      outcome(() => withinBudget(MAX_INPUT, () => decodeDeclarative(text, routes.value[0]!, md, MAX_INPUT)));
    });

  fuzz('generate: a GatewayError or a framed request, within the budget', 400,
    fc.oneof(fc.record({ x: v1Value, y: v1Value, parameters: v1Value, id: leaf }, { requiredKeys: [] }).map(jsonText),
      fc.integer({ min: 1, max: 20_000 }).map((d) => `{"x":${nestedText(d, '1')}}`),
      fc.record({ x: v1Value }).chain((v) => mutated(Buffer.from(jsonText(v))).map(String))),
    (text) => {
      outcome(() => withinBudget(MAX_INPUT, () => decodeGenerate(Buffer.from(text), md, 'm', '', MAX_INPUT, frame)));
    });
});

describe('control JSON', () => {
  const control = fc.oneof(
    fc.dictionary(fc.constantFrom('ready', 'parameters', 'unload_dependents', 'key', 'offset', 'byte_size', 'raw_handle', 'device_id',
      'trace_level', 'trace_rate', 'log_info', 'log_format', 'log_verbose_level', 'trace_file', 'x'), fc.oneof(leaf, fc.array(leaf, { maxLength: 3 }), fc.dictionary(fc.string({ maxLength: 4 }), leaf, { maxKeys: 3 }))).map(jsonText),
    fc.integer({ min: 1, max: 20_000 }).map((d) => `{"parameters":${nestedText(d, '1')}}`),
  ).chain((t) => fc.oneof(fc.constant(Buffer.from(t)), mutated(Buffer.from(t))));
  const decoders: ((b: Buffer) => unknown)[] = [
    (b) => parseControlBody(b, true), decodeIndexReady, decodeLoadParameters, decodeUnloadDependents, decodeTraceUpdate, decodeLogUpdate,
    decodeSystemRegister, decodeCudaRegister,
  ];
  fuzz('every control decoder: a GatewayError or a value', 400, control, (b) => {
    for (const d of decoders) outcome(() => withinBudget(MAX_INPUT, () => d(b)));
  });
});

/** A request stream carrying `chunks`, with headers. */
class FakeRequest extends Readable {
  complete = false;
  constructor(readonly headers: Record<string, string>) {
    super();
  }
  override _read(): void {}
  send(chunks: readonly Buffer[]): this {
    for (const c of chunks) this.push(c);
    this.complete = true;
    this.push(null);
    return this;
  }
}

describe('gzip/deflate and headers', () => {
  const MAX_INFLATED = 4096;
  const payload = fc.uint8Array({ maxLength: 3000 }).map((u) => Buffer.from(u));
  const compressed = fc.tuple(fc.constantFrom<'gzip' | 'deflate'>('gzip', 'deflate'), payload).map(([e, p]) => ({
    encoding: e, payload: p, body: e === 'gzip' ? gzipSync(p) : deflateSync(p),
  }));
  const bomb = fc.tuple(fc.constantFrom<'gzip' | 'deflate'>('gzip', 'deflate'), fc.integer({ min: MAX_INFLATED + 1, max: 4 << 20 }))
    .map(([e, n]) => ({ encoding: e, payload: undefined, body: (e === 'gzip' ? gzipSync : deflateSync)(Buffer.alloc(n)) }));
  const broken = compressed.chain((c) => fc.oneof(mutated(c.body), fc.nat().map((k) => c.body.subarray(0, c.body.length === 0 ? 0 : k % c.body.length)))
    .map((body) => ({ encoding: c.encoding, payload: undefined, body })));

  fuzz('a body inflates to what was compressed, or is refused with a GatewayError; never past the limit', 300,
    fc.tuple(fc.oneof(compressed, bomb, broken), cuts), async ([c, points]) => {
      const req = new FakeRequest({ 'content-encoding': c.encoding }).send(cutAt(c.body, points));
      try {
        const got = await readBody(req as unknown as IncomingMessage, { maxBodyBytes: 8 << 20, maxInputSizeBytes: MAX_INFLATED }, c.encoding);
        expect(got.length).toBeLessThanOrEqual(MAX_INFLATED);
        const inflated = Buffer.concat(got.chunks);
        // Mutated bytes may still inflate (a flipped bit in stored data); then whatever came out is within the limit.
        if (c.payload !== undefined) expect(inflated.equals(c.payload)).toBe(true);
        else if (c.body.length === 0) expect(inflated.length).toBe(0);
      } catch (err) {
        if (!isGatewayError(err)) throw err;
        if (c.payload !== undefined) expect(err.code).toBe('GW_ERR_REQUEST_DECOMPRESSED_TOO_LARGE');
      }
    });

  const headerValue = fc.oneof(fc.string({ maxLength: 24 }), fc.constantFrom('', ' 12', '+5', '-1', '0x10', '1e3', '2147483648', '99999999999999999999', 'gzip', 'deflate', 'GZIP', 'br', 'identity', 'gzip, deflate'));
  fuzz('Content-Length, Content-Encoding, Inference-Header-Content-Length: a GatewayError or a value', 1000,
    fc.tuple(headerValue, headerValue, headerValue, fc.option(fc.nat(1 << 24), { nil: undefined }), fc.boolean()), ([cl, ce, ihcl, declared, encoded]) => {
      const req = new FakeRequest({ 'content-length': cl, 'content-encoding': ce }) as unknown as IncomingMessage;
      outcome(() => declaredLength(req, { maxBodyBytes: 1 << 24, maxInputSizeBytes: MAX_INPUT }));
      outcome(() => requestEncoding(req));
      const f = outcome(() => chooseFraming(ihcl, declared, encoded, MAX_INPUT));
      if ('ok' in f && f.ok.kind === 'binary') expect(f.ok.headerBytes).toBeLessThanOrEqual(MAX_INPUT);
    });
});
