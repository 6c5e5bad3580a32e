import { inference } from '../../../proto/services';
import { sequenceKey } from '../../../gateway/routes/steps';
import type { ParamValue } from '../../../gateway/infer/request';
import { EnvelopeScanner, firstStringField, sequenceKeyOf } from '../../../gateway/upstream/grpc-envelope';
import { splits } from '../../support/chunks';

const frame = (message: Uint8Array, compressed = false): Buffer => {
  const b = Buffer.alloc(5 + message.length);
  b[0] = compressed ? 1 : 0;
  b.writeUInt32BE(message.length, 1);
  b.set(message, 5);
  return b;
};
const infer = (name: string): Uint8Array => inference.ModelInferRequest.encode({ model_name: name, id: 'x', raw_input_contents: [Buffer.alloc(40, 1)] }).finish();

/** What the scanner reports over `chunks`: the messages' lengths and the names readable where each begins. */
function scan(chunks: readonly Buffer[], max = 1 << 20): { lengths: number[]; names: (string | undefined)[]; tooLarge?: number } {
  const lengths: number[] = [];
  const names: (string | undefined)[] = [];
  const s = new EnvelopeScanner(max, (chunk, at, length, compressed) => {
    lengths.push(length);
    names.push(compressed ? undefined : firstStringField(chunk, at, length));
  });
  for (const c of chunks) {
    const step = s.push(c);
    if (step.tooLarge !== undefined) return { lengths, names, tooLarge: step.tooLarge };
  }
  return { lengths, names };
}

describe('EnvelopeScanner', () => {
  const stream = Buffer.concat([frame(infer('simple')), frame(new Uint8Array(0)), frame(infer('é_model')), frame(Buffer.from([0x12, 0x01, 0x61]))]);

  test.each(splits(stream))('finds every message boundary: %s', (_label, chunks) => {
    const r = scan(chunks);
    expect(r.lengths).toEqual([infer('simple').length, 0, infer('é_model').length, 3]);
    expect(r.tooLarge).toBeUndefined();
  });

  test('reads the model name where the first chunk of a message holds it; not across chunks, never by buffering', () => {
    expect(scan([stream]).names).toEqual(['simple', '', 'é_model', '']);
    // Split after the prefix: the name is in the next chunk, and the scanner does not look there.
    expect(scan([stream.subarray(0, 5), stream.subarray(5)]).names[0]).toBeUndefined();
    expect(scan([stream.subarray(0, 9), stream.subarray(9)]).names[0]).toBeUndefined();
  });

  test.each(splits(Buffer.concat([frame(infer('a')), frame(Buffer.alloc(2000))])))('a declared length over the bound is reported before its bytes: %s', (_l, chunks) => {
    const r = scan(chunks, 1000);
    expect(r.tooLarge).toBe(2000);
    expect(r.lengths).toEqual([infer('a').length]);
  });

  test('a compressed message is passed, its name not read', () => {
    expect(scan([frame(infer('simple'), true)]).names).toEqual([undefined]);
  });
});

describe('firstStringField', () => {
  test('a name in the message bounds only; truncated varints and strings are not readable', () => {
    const m = Buffer.from([0x0a, 0x03, 0x61, 0x62, 0x63]);
    expect(firstStringField(m, 0, 5)).toBe('abc');
    expect(firstStringField(m, 0, 4)).toBeUndefined();
    expect(firstStringField(m.subarray(0, 4), 0, 5)).toBeUndefined();
    expect(firstStringField(Buffer.from([0x0a, 0x80]), 0, 200)).toBeUndefined();
    expect(firstStringField(Buffer.from([0x0a, 0x80, 0x01, ...Buffer.alloc(128, 0x7a)]), 0, 131)).toBe('z'.repeat(128));
    expect(firstStringField(Buffer.alloc(0), 0, 10)).toBeUndefined();
  });
});

describe('sequenceKeyOf: a ModelInfer call\'s sequence, read from its first chunk', () => {
  const msg = (parameters: Record<string, inference.IInferParameter> | undefined): Buffer => frame(inference.ModelInferRequest.encode({
    model_name: 'seq_model', model_version: '1', id: 'req-1', parameters,
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)],
  }).finish());
  const of = (b: Buffer): string | undefined => sequenceKeyOf(b, 5, b.readUInt32BE(1));
  /** REST's key for the same model and parameter (routes/steps.ts): both protocols pick the same backend. */
  const rest = (p: ParamValue): string | undefined => sequenceKey({
    modelName: 'seq_model', modelVersion: '', id: undefined, parameters: new Map([['sequence_id', p]]), inputs: [], outputs: undefined, binaryDataOutput: false,
  });

  test('int64, uint64 and string ids give REST\'s key for the same sequence', () => {
    expect(of(msg({ sequence_start: { bool_param: true }, sequence_id: { int64_param: 42 } }))).toBe(rest({ type: 'int64', value: 42n }));
    expect(of(msg({ sequence_id: { int64_param: -2 } }))).toBe(rest({ type: 'int64', value: -2n }));
    expect(of(msg({ sequence_id: { uint64_param: 7 } }))).toBe(rest({ type: 'uint64', value: 7n }));
    expect(of(msg({ sequence_id: { string_param: 'user-9' }, priority: { uint64_param: 1 } }))).toBe(rest({ type: 'string', value: 'user-9' }));
    expect(of(msg({ sequence_id: { int64_param: 42 } }))).toBe('seq_model\u0000n:42');
  });

  test('no sequence: no parameters, other parameters, an id of 0 or ""', () => {
    expect(of(msg(undefined))).toBeUndefined();
    expect(of(msg({ priority: { uint64_param: 1 } }))).toBeUndefined();
    expect(of(msg({ sequence_id: { int64_param: 0 } }))).toBeUndefined();
    expect(of(msg({ sequence_id: { string_param: '' } }))).toBeUndefined();
    expect(rest({ type: 'int64', value: 0n })).toBeUndefined();
  });

  test('a first chunk that ends inside the fields before the inputs: not known (round robin)', () => {
    const whole = msg({ sequence_id: { int64_param: 42 } });
    const cut = whole.indexOf(Buffer.from('sequence_id')) + 4;
    expect(of(whole.subarray(0, cut))).toBeUndefined();
    expect(sequenceKeyOf(Buffer.from([0x0a, 0xff]), 0, 2)).toBeUndefined(); // a length past the end
  });
});
