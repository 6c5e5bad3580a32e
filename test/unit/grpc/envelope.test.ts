import fc from 'fast-check';
import Long from 'long';
import * as protobuf from 'protobufjs/minimal.js';
import { inference } from '../../../proto/services';
import { sequenceKey } from '../../../gateway/pipeline/steps';
import type { ParamValue } from '../../../gateway/infer/request';
import { EnvelopeScanner } from '../../../gateway/grpc/envelope';
import { MAX_NAME_BYTES, MAX_PARAMETER_ENTRY_BYTES, type MessageFacts, type MessageFields, readMessage } from '../../../gateway/grpc/fields';
import { CHUNK_SIZES, splitEvery, splits } from '../../support/chunks';
import { grpcMessage } from '../../support/grpc-peer';

const frame = grpcMessage;
const infer = (name: string): Uint8Array => inference.ModelInferRequest.encode({ model_name: name, id: 'x', raw_input_contents: [Buffer.alloc(40, 1)] }).finish();
const INFER: MessageFields = { name: 1, sequence: true };

/** What the scanner reports: each message's facts as its last byte passes, and how many chunks had passed then. */
function scan(chunks: readonly Buffer[], fields: MessageFields = INFER, max = 1 << 20): { facts: MessageFacts[]; at: number[]; tooLarge?: number } {
  const facts: MessageFacts[] = [];
  const at: number[] = [];
  let pushed = 0;
  const s = new EnvelopeScanner(max, fields, {
    message: (f) => {
      facts.push(f);
      at.push(pushed);
    },
  });
  for (const c of chunks) {
    pushed++;
    const step = s.push(c);
    if (step.tooLarge !== undefined) return { facts, at, tooLarge: step.tooLarge };
  }
  return { facts, at };
}

/** A message's top-level fields, each as its bytes (tag included), read with protobufjs's own Reader. */
function fieldsOf(m: Uint8Array): Buffer[] {
  const r = protobuf.Reader.create(m);
  const out: Buffer[] = [];
  while (r.pos < r.len) {
    const start = r.pos;
    const tag = r.uint32();
    r.skipType(tag & 7);
    out.push(Buffer.from(m.subarray(start, r.pos)));
  }
  return out;
}
const stringField = (n: number, s: string | Buffer): Buffer => {
  const w = protobuf.Writer.create();
  w.uint32((n << 3) | 2).bytes(Buffer.isBuffer(s) ? s : Buffer.from(s));
  return Buffer.from(w.finish());
};

describe('EnvelopeScanner', () => {
  const stream = Buffer.concat([frame(infer('simple')), frame(new Uint8Array(0)), frame(infer('é_model')), frame(Buffer.from([0x12, 0x01, 0x61]))]);

  test.each(splits(stream))('reads every message whole, in any chunking, several per chunk: %s', (_label, chunks) => {
    const r = scan(chunks);
    expect(r.facts.map((f) => f.name)).toEqual(['simple', '', 'é_model', '']);
    expect(r.tooLarge).toBeUndefined();
  });

  test('a message is reported in the push that holds its last byte, not before', () => {
    const one = frame(infer('simple'));
    const r = scan(splitEvery(one, 7));
    expect(r.at).toEqual([Math.ceil(one.length / 7)]);
  });

  test.each(splits(Buffer.concat([frame(infer('a')), frame(Buffer.alloc(2000))])))('a declared length over the bound is reported before its bytes: %s', (_l, chunks) => {
    const r = scan(chunks, INFER, 1000);
    expect(r.tooLarge).toBe(2000);
    expect(r.facts.map((f) => f.name)).toEqual(['a']);
  });

  test('a compressed message is not read: unreadable', () => {
    expect(scan([frame(infer('simple'), true)]).facts).toEqual([{ name: undefined, unreadable: 'the message is compressed' }]);
  });
});

describe('the reader: as protobuf reads the message (Triton\'s C++ parser)', () => {
  const read = (b: Buffer, fields: MessageFields = INFER): MessageFacts => readMessage(b, 0, b.length, fields);

  test('field 1 anywhere, the last copy winning; the attacks of a name moved to the end or sent twice', () => {
    const normal = Buffer.from(infer('identity_fp32'));
    const moved = Buffer.concat(fieldsOf(normal).reverse());
    expect(read(moved).name).toBe('identity_fp32');
    expect(read(Buffer.concat([stringField(1, 'simple'), normal])).name).toBe('identity_fp32');
    expect(read(Buffer.concat([normal, stringField(1, 'simple')])).name).toBe('simple');
    expect(inference.ModelInferRequest.decode(Buffer.concat([stringField(1, 'simple'), normal])).model_name).toBe('identity_fp32');
  });

  test('repository load/unload parameters (field 3): counted, and unload_dependents read, split in any pieces', () => {
    const REPO: MessageFields = { name: 2, sequence: false, repositoryParameters: true };
    const unload = (on: boolean): Buffer => Buffer.from(inference.RepositoryModelUnloadRequest.encode({ model_name: 'simple', parameters: { unload_dependents: { bool_param: on } } }).finish());
    const load = Buffer.from(inference.RepositoryModelLoadRequest.encode({ model_name: 'simple', parameters: { config: { string_param: '{}' }, 'file:1/model.py': { bytes_param: Buffer.from('x') } } }).finish());
    const bare = Buffer.from(inference.RepositoryModelLoadRequest.encode({ model_name: 'simple' }).finish());
    const cases: [Buffer, MessageFacts][] = [
      [unload(true), { name: 'simple', parameterCount: 1, unloadDependents: true }],
      [unload(false), { name: 'simple', parameterCount: 1, unloadDependents: false }],
      // Any entry saying true counts, although protobuf keeps the last.
      [Buffer.concat([unload(true), unload(false)]), { name: 'simple', parameterCount: 2, unloadDependents: true }],
      [load, { name: 'simple', parameterCount: 2, unloadDependents: false }],
      [bare, { name: 'simple', parameterCount: 0, unloadDependents: false }],
      // An entry too large to read: assumed to unload the dependents.
      [Buffer.concat([bare, Buffer.from(inference.RepositoryModelUnloadRequest.encode({ parameters: { big: { string_param: 'x'.repeat(MAX_PARAMETER_ENTRY_BYTES) } } }).finish())]),
        { name: 'simple', parameterCount: 1, unloadDependents: true }],
    ];
    for (const [m, facts] of cases) {
      expect(read(m, REPO)).toEqual(facts);
      for (const size of CHUNK_SIZES) {
        const seen: MessageFacts[] = [];
        const scanner = new EnvelopeScanner(1 << 20, REPO, { message: (f) => seen.push(f) });
        const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), m]);
        framed.writeUInt32BE(m.length, 1);
        for (const piece of splitEvery(framed, size)) scanner.push(piece);
        expect(seen).toEqual([facts]);
      }
    }
  });

  test('upstream.sharedMemory: a tensor\'s shared_memory_region under the prefix, inputs and outputs, contents skipped, in any split', () => {
    const SHM: MessageFields = { ...INFER, reservedRegion: (name) => name.replace(/^\/+/, '').startsWith('tg-') };
    const region = (name: string): Record<string, inference.IInferParameter> => ({ shared_memory_region: { string_param: name } });
    const enc = (r: inference.IModelInferRequest): Buffer => Buffer.from(inference.ModelInferRequest.encode(r).finish());
    const cases: [Buffer, MessageFacts][] = [
      [enc({ model_name: 'm', inputs: [{ name: 'A', contents: { int_contents: [1, 2, 3] }, parameters: region('tg-1-0') }] }), { name: 'm', reservedRegion: 'tg-1-0' }],
      [enc({ model_name: 'm', outputs: [{ name: 'O', parameters: region('/tg-1-2') }] }), { name: 'm', reservedRegion: '/tg-1-2' }],
      [enc({ model_name: 'm', inputs: [{ name: 'A', parameters: region('mine') }], outputs: [{ name: 'O', parameters: region('tgx') }] }), { name: 'm' }],
      // The tensor's own name (field 1) is not the model's; fields after the tensors are the message's again.
      [Buffer.concat([enc({ inputs: [{ name: 'A', parameters: { other: { int64_param: 1 } } }] }), enc({ model_name: 'last' })]), { name: 'last' }],
      // A parameters entry too large to read might name one.
      [enc({ model_name: 'm', inputs: [{ name: 'A', parameters: { big: { string_param: 'x'.repeat(MAX_PARAMETER_ENTRY_BYTES) } } }] }), { name: 'm', reservedRegion: '' }],
    ];
    for (const [m, facts] of cases) {
      expect(read(m, SHM)).toEqual(facts);
      for (const size of CHUNK_SIZES) {
        const seen: MessageFacts[] = [];
        const scanner = new EnvelopeScanner(1 << 20, SHM, { message: (f) => seen.push(f) });
        const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), m]);
        framed.writeUInt32BE(m.length, 1);
        for (const piece of splitEvery(framed, size)) scanner.push(piece);
        expect(seen).toEqual([facts]);
      }
    }
    // Without the prefix the tensors are skipped whole, as before.
    expect(read(cases[0]![0], INFER)).toEqual({ name: 'm' });
    // A tensor whose field runs past its end is not what protobuf would read: unreadable.
    const broken = Buffer.from([0x0a, 0x01, 0x6d, 0x2a, 0x02, 0x0a, 0x05, 0x41, 0x42, 0x43]);
    expect(read(broken, SHM).name).toBeUndefined();
  });

  test('padded varints are read as protobuf reads them: a tag of 0x8a 0x00 is field 1', () => {
    const padded = Buffer.concat([Buffer.from(infer('simple')), Buffer.from([0x8a, 0x00, 0x05]), Buffer.from('other')]);
    expect(read(padded).name).toBe('other');
    expect(inference.ModelInferRequest.decode(padded).model_name).toBe('other');
  });

  test('field 1 of another wire type is an unknown field to protobuf: skipped', () => {
    const b = Buffer.concat([stringField(1, 'simple'), Buffer.from([0x08, 0x05]), Buffer.from([0x0d, 1, 2, 3, 4]), Buffer.from([0x09, 1, 2, 3, 4, 5, 6, 7, 8])]);
    expect(read(b).name).toBe('simple');
  });

  test('what cannot be read is unreadable, never guessed', () => {
    expect(read(Buffer.from([0x0a, 0x05, 0x61])).unreadable).toBe('a field runs past the end of the message');
    expect(read(Buffer.from([0x0a])).unreadable).toBe('the message ends inside a field');
    expect(read(Buffer.from([0x0a, 0x80])).unreadable).toBe('the message ends inside a field');
    expect(read(Buffer.from([0x0b, 0x0c])).unreadable).toBe('a group');
    expect(read(Buffer.from([0x0e])).unreadable).toBe('wire type 6');
    expect(read(Buffer.from([0x02, 0x00])).unreadable).toBe('field number 0');
    expect(read(Buffer.from([0x8a, 0x80, 0x80, 0x80, 0x80, 0x01])).unreadable).toBe('a varint is too long');
    expect(read(stringField(1, Buffer.from([0xff, 0xfe]))).unreadable).toBe('the model name is not UTF-8');
    const long = Buffer.concat([stringField(1, 'x'.repeat(MAX_NAME_BYTES + 1)), stringField(1, 'simple')]);
    expect(read(long)).toEqual({ name: undefined, unreadable: `the model name is longer than ${MAX_NAME_BYTES} bytes` });
    expect(read(stringField(1, 'x'.repeat(MAX_NAME_BYTES))).name).toBe('x'.repeat(MAX_NAME_BYTES));
  });

  test('a declared field length is checked against the message before anything is kept', () => {
    // 2^31 declared for field 1 inside a 7-byte message: refused, nothing allocated for it.
    expect(read(Buffer.from([0x0a, 0x80, 0x80, 0x80, 0x80, 0x08, 0x00])).unreadable).toBe('a field runs past the end of the message');
  });

  test('field 2 for the repository and trace requests', () => {
    const load = Buffer.from(inference.RepositoryModelLoadRequest.encode({ repository_name: 'simple', model_name: 'identity_fp32' }).finish());
    expect(read(load, { name: 2, sequence: false }).name).toBe('identity_fp32');
    const trace = Buffer.from(inference.TraceSettingRequest.encode({ settings: { trace_level: { value: ['TIMESTAMPS'] } }, model_name: 'm' }).finish());
    expect(read(Buffer.concat(fieldsOf(trace).reverse()), { name: 2, sequence: false }).name).toBe('m');
    expect(read(Buffer.from(inference.TraceSettingRequest.encode({ settings: { trace_level: { value: ['OFF'] } } }).finish()), { name: 2, sequence: false }).name).toBe('');
  });
});

describe('sequence keys: a ModelInfer call\'s sequence, last-wins like the name', () => {
  const msg = (parameters: Record<string, inference.IInferParameter> | undefined): Buffer => Buffer.from(inference.ModelInferRequest.encode({
    model_name: 'seq_model', model_version: '1', id: 'req-1', parameters,
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)],
  }).finish());
  const of = (b: Buffer): string | undefined => readMessage(b, 0, b.length, INFER).sequenceKey;
  /** REST's key for the same model and parameter (pipeline/steps.ts): both protocols pick the same backend. */
  const rest = (p: ParamValue, model = 'seq_model'): string | undefined => sequenceKey({
    modelName: model, modelVersion: '', id: undefined, parameters: new Map([['sequence_id', p]]), inputs: [], outputs: undefined, binaryDataOutput: false,
  });

  test('int64, uint64 and string ids give REST\'s key for the same sequence', () => {
    expect(of(msg({ sequence_start: { bool_param: true }, sequence_id: { int64_param: 42 } }))).toBe(rest({ type: 'int64', value: 42n }));
    expect(of(msg({ sequence_id: { int64_param: -2 } }))).toBe(rest({ type: 'int64', value: -2n }));
    expect(of(msg({ sequence_id: { uint64_param: 7 } }))).toBe(rest({ type: 'uint64', value: 7n }));
    expect(of(msg({ sequence_id: { string_param: 'user-9' }, priority: { uint64_param: 1 } }))).toBe(rest({ type: 'string', value: 'user-9' }));
    expect(of(msg({ sequence_id: { int64_param: 42 } }))).toBe('seq_model\u0000n:42');
  });

  test('no sequence: no parameters, other parameters, an id of 0 or "", a double', () => {
    expect(of(msg(undefined))).toBeUndefined();
    expect(of(msg({ priority: { uint64_param: 1 } }))).toBeUndefined();
    expect(of(msg({ sequence_id: { int64_param: 0 } }))).toBeUndefined();
    expect(of(msg({ sequence_id: { string_param: '' } }))).toBeUndefined();
    expect(of(msg({ sequence_id: { double_param: 3 } }))).toBeUndefined();
    expect(rest({ type: 'int64', value: 0n })).toBeUndefined();
  });

  test('the model named last and the sequence_id entry sent last make the key', () => {
    const b = Buffer.concat([msg({ sequence_id: { int64_param: 1 } }), Buffer.from(inference.ModelInferRequest.encode({
      model_name: 'other', parameters: { sequence_id: { int64_param: 9 } },
    }).finish())]);
    expect(of(b)).toBe(rest({ type: 'int64', value: 9n }, 'other'));
  });

  test(`a parameters entry over ${MAX_PARAMETER_ENTRY_BYTES} bytes makes the sequence unknown (round robin)`, () => {
    expect(of(msg({ sequence_id: { string_param: 'x'.repeat(MAX_PARAMETER_ENTRY_BYTES) } }))).toBeUndefined();
    expect(of(msg({ sequence_id: { string_param: 'x'.repeat(100) } }))).toBe(rest({ type: 'string', value: 'x'.repeat(100) }));
  });
});

describe('fuzz: the reader agrees with protobufjs on mutated encodings, in every chunking', () => {
  const name = fc.string({ minLength: 0, maxLength: 24, unit: 'grapheme' });
  const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
  const unknownField = fc.tuple(fc.integer({ min: 100, max: 5000 }), fc.constantFrom(0, 1, 2, 5), fc.uint8Array({ maxLength: 20 }), u64)
    .map(([n, wire, bytes, v]) => {
      const w = protobuf.Writer.create().uint32((n << 3) | wire);
      if (wire === 0) w.uint64(Long.fromString(v.toString(), true));
      else if (wire === 1) w.fixed64(1);
      else if (wire === 5) w.fixed32(1);
      else w.bytes(bytes);
      return Buffer.from(w.finish());
    });
  const param = fc.oneof(
    fc.record({ int64_param: fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n }) }),
    fc.record({ uint64_param: fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }) }),
    fc.record({ string_param: fc.string({ maxLength: 12 }) }),
    fc.record({ bool_param: fc.boolean() }),
  );
  const toParam = (p: Record<string, unknown>): inference.IInferParameter => {
    const [k, v] = Object.entries(p)[0]!;
    return { [k]: typeof v === 'bigint' ? Long.fromString(v.toString(), k === 'uint64_param') : v };
  };
  /** An InferParameter decoded by protobufjs as the key's value (REST's form, via pipeline/steps.ts). */
  const restKey = (model: string, p: { parameter_choice?: string } | undefined): string | undefined => {
    if (p === undefined) return undefined;
    const choice = p.parameter_choice;
    const raw = choice === undefined ? undefined : (p as Record<string, unknown>)[choice];
    let value: ParamValue;
    if (choice === 'int64_param') value = { type: 'int64', value: BigInt(String(raw)) };
    else if (choice === 'uint64_param') value = { type: 'uint64', value: BigInt.asUintN(64, BigInt(Long.fromValue(raw as number).toUnsigned().toString())) };
    else if (choice === 'string_param') value = { type: 'string', value: raw as string };
    else return undefined;
    return sequenceKey({ modelName: model, modelVersion: '', id: undefined, parameters: new Map([['sequence_id', value]]), inputs: [], outputs: undefined, binaryDataOutput: false });
  };

  test('ModelInferRequest: fields shuffled, field 1 and sequence_id duplicated, unknown fields; split into 1, 2, 3, 7 bytes; several messages per chunk', () => {
    fc.assert(fc.property(
      name, fc.array(name, { maxLength: 3 }), fc.array(param, { maxLength: 3 }), fc.array(unknownField, { maxLength: 4 }),
      fc.array(fc.nat(), { minLength: 12, maxLength: 12 }), fc.constantFrom(...CHUNK_SIZES),
      (model, extraNames, seqs, unknown, order, chunk) => {
        const base = Buffer.from(inference.ModelInferRequest.encode({
          model_name: model, model_version: '1', id: 'r', parameters: { priority: { uint64_param: 1 } },
          inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1] }], raw_input_contents: [Buffer.alloc(8, 7)],
        }).finish());
        const parts = [
          ...fieldsOf(base),
          ...extraNames.map((n) => stringField(1, n)),
          ...seqs.map((p) => Buffer.from(inference.ModelInferRequest.encode({ parameters: { sequence_id: toParam(p) } }).finish())),
          ...unknown,
        ];
        // A shuffle driven by the generated numbers (reproducible from the seed).
        for (let i = parts.length - 1; i > 0; i--) {
          const j = order[i % order.length]! % (i + 1);
          [parts[i], parts[j]] = [parts[j]!, parts[i]!];
        }
        const message = Buffer.concat(parts);
        const truth = inference.ModelInferRequest.decode(message);
        const expected = truth.model_name;
        const key = restKey(expected, truth.parameters.sequence_id);
        const stream = Buffer.concat([frame(message), frame(infer('after'))]);
        for (const chunks of [[stream], splitEvery(stream, chunk)]) {
          const r = scan(chunks);
          expect(r.facts.map((f) => f.name)).toEqual([expected, 'after']);
          expect(r.facts[0]!.sequenceKey).toBe(key);
        }
      },
    ), { numRuns: 300 });
  });

  test('ModelConfig, ModelMetadata, RepositoryModelLoad, TraceSetting: the name field\'s last copy, any order', () => {
    const kinds = [
      { fields: { name: 1, sequence: false }, encode: (n: string) => inference.ModelConfigRequest.encode({ name: n, version: '2' }).finish(), decode: (b: Uint8Array) => inference.ModelConfigRequest.decode(b).name },
      { fields: { name: 1, sequence: false }, encode: (n: string) => inference.ModelMetadataRequest.encode({ name: n, version: '' }).finish(), decode: (b: Uint8Array) => inference.ModelMetadataRequest.decode(b).name },
      { fields: { name: 2, sequence: false }, encode: (n: string) => inference.RepositoryModelLoadRequest.encode({ repository_name: 'r', model_name: n, parameters: { config: { string_param: '{}' } } }).finish(), decode: (b: Uint8Array) => inference.RepositoryModelLoadRequest.decode(b).model_name },
      { fields: { name: 2, sequence: false }, encode: (n: string) => inference.TraceSettingRequest.encode({ settings: { trace_rate: { value: ['1'] } }, model_name: n }).finish(), decode: (b: Uint8Array) => inference.TraceSettingRequest.decode(b).model_name },
    ];
    const names = fc.array(name, { minLength: 1, maxLength: 4 });
    fc.assert(fc.property(fc.constantFrom(...kinds), names, fc.array(unknownField, { maxLength: 3 }), fc.boolean(), fc.constantFrom(...CHUNK_SIZES),
      (kind, names, unknown, reverse, chunk) => {
        let parts = [...names.flatMap((n) => fieldsOf(kind.encode(n))), ...unknown];
        if (reverse) parts = parts.reverse();
        const message = Buffer.concat(parts);
        const r = scan(splitEvery(frame(message), chunk), kind.fields);
        expect(r.facts.map((f) => f.name)).toEqual([kind.decode(message)]);
      },
    ), { numRuns: 200 });
  });
});
