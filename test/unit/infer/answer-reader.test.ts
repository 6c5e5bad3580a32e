// readInferResponse over the chunks of Triton's answer: the same ModelInferResponse split into 1-,
// 2-, 3- and 7-byte chunks (so tags, varint lengths and payloads straddle chunk boundaries) gives
// the same response; output bytes are views of the chunks; fields it does not know are skipped; a
// message cut anywhere inside a field is refused. The header fields read by hand give what
// protobufjs's decode gave, on random messages and mutations of them, however they are split.
import { Reader } from 'protobufjs/minimal';
import { inference } from '../../../proto/services';
import type { InferResponse } from '../../../gateway/infer/response';
import { readInferResponse } from '../../../gateway/infer/answer-reader';
import fc from 'fast-check';
import { firstDifference, isViewOf, splitEvery, splits } from '../../support/chunks';
import { field, inferAnswer, len, outcomeOf, referenceRead, varint as varint64 } from '../../support/infer-answers';

const bytes = (n: number, seed: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff));

// Entry lengths chosen for their varint sizes: 1 byte (8, 0), 2 bytes (200), 3 bytes (20000).
const raws = [bytes(8, 1), bytes(200, 2), bytes(20000, 3), Buffer.alloc(0)];
const properties: inference.IModelInferResponse = {
  model_name: 'simple',
  model_version: '7',
  id: 'req-é', // a multi-byte UTF-8 character to split
  parameters: {
    sequence_end: { bool_param: true },
    count: { int64_param: -3 },
    note: { string_param: 'x'.repeat(130) }, // a parameter entry whose length takes 2 bytes
    ratio: { double_param: 0.25 },
  },
  outputs: [
    { name: 'OUT8', datatype: 'UINT8', shape: [8] },
    { name: 'OUT200', datatype: 'INT8', shape: [2, 100], parameters: { binary_data_size: { int64_param: 200 } } },
    { name: 'OUT20000', datatype: 'FP32', shape: [5000] },
    { name: 'EMPTY', datatype: 'FP32', shape: [0] },
  ],
};
const message = Buffer.from(inference.ModelInferResponse.encode({ ...properties, raw_output_contents: raws }).finish());

/**
 * The response with each output's views joined (as hex: quick to compare), to compare responses
 * read from different chunkings.
 */
function flat(r: InferResponse): unknown {
  return { ...r, outputs: r.outputs.map((o) => ({ ...o, data: Buffer.concat(o.data as Buffer[]).toString('hex') })) };
}

function refusal(chunks: Buffer[]): { code: string; message: string } {
  try {
    readInferResponse(chunks);
  } catch (err) {
    const e = err as { code: string; message: string };
    return { code: e.code, message: e.message };
  }
  throw new Error('readInferResponse accepted the message');
}

const TRUNCATED = { code: 'GW_ERR_UPSTREAM_PROTOCOL', message: 'upstream sent a truncated ModelInferResponse' };

/** Offsets where a top-level field ends (a message cut there is shorter, not truncated). */
function fieldEnds(m: Buffer): Set<number> {
  const r = Reader.create(m);
  const ends = new Set<number>([0]);
  while (r.pos < r.len) {
    r.skipType(r.uint32() & 7);
    ends.add(r.pos);
  }
  return ends;
}

/** Varint bytes of n. */
function varint(n: number): number[] {
  const out: number[] = [];
  for (; n >= 0x80; n = Math.floor(n / 128)) out.push((n & 0x7f) | 0x80);
  out.push(n);
  return out;
}

describe('readInferResponse', () => {
  const whole = readInferResponse([message]);

  test('the header fields and every output, with its bytes and length', () => {
    expect(whole.modelName).toBe('simple');
    expect(whole.modelVersion).toBe('7');
    expect(whole.id).toBe('req-é');
    expect(Object.keys(whole.parameters).sort()).toEqual(['count', 'note', 'ratio', 'sequence_end']);
    expect(whole.parameters.note).toEqual({ type: 'string', value: 'x'.repeat(130) });
    expect(whole.parameters.count).toEqual({ type: 'int64', value: -3n });
    expect(whole.outputs.map((o) => [o.name, o.datatype, o.shape, o.byteLength])).toEqual([
      ['OUT8', 'UINT8', [8], 8], ['OUT200', 'INT8', [2, 100], 200], ['OUT20000', 'FP32', [5000], 20000], ['EMPTY', 'FP32', [0], 0],
    ]);
    expect(whole.outputs[1]!.parameters.binary_data_size).toEqual({ type: 'int64', value: 200n });
    whole.outputs.forEach((o, i) => expect(firstDifference(Buffer.concat(o.data as Buffer[]), raws[i]!)).toBeUndefined());
  });

  test.each(splits(message))('the message %s reads the same, outputs as views of the chunks', (_, chunks) => {
    const r = readInferResponse(chunks);
    expect(flat(r)).toEqual(flat(whole));
    // Each view lies inside one chunk; views come in chunk order, so one pass finds them all.
    let c = 0;
    const copies = r.outputs.flatMap((o) => o.data).filter((v) => {
      while (c < chunks.length && !isViewOf(v, chunks[c]!)) c++;
      return c === chunks.length;
    });
    expect(copies).toEqual([]);
    for (const o of r.outputs) expect(o.data.reduce((n, v) => n + v.length, 0)).toBe(o.byteLength);
  });

  test('a whole message gives each output one view of it', () => {
    for (const o of whole.outputs.slice(0, 3)) {
      expect(o.data).toHaveLength(1);
      expect(isViewOf(o.data[0]!, message)).toBe(true);
    }
  });

  test('chunks of uneven sizes, empty ones included, read the same', () => {
    const cuts = [0, 0, 1, 5, 5, 6, 40, 300, 301, 9000, message.length];
    const chunks = cuts.slice(1).map((c, i) => message.subarray(cuts[i], c));
    expect(flat(readInferResponse(chunks))).toEqual(flat(whole));
  });

  test('no chunks at all is the empty message', () => {
    const r = readInferResponse([]);
    expect(r).toEqual({ modelName: '', modelVersion: '', id: '', parameters: {}, outputs: [] });
  });

  test('outputs without an entry have no bytes; entries without an output are ignored', () => {
    const fewer = Buffer.from(inference.ModelInferResponse.encode({ ...properties, raw_output_contents: raws.slice(0, 2) }).finish());
    const r = readInferResponse(splitEvery(fewer, 3));
    expect(r.outputs.map((o) => o.byteLength)).toEqual([8, 200, 0, 0]);
    expect(r.outputs[2]!.data).toEqual([]);
    const more = Buffer.from(inference.ModelInferResponse.encode({ outputs: properties.outputs!.slice(0, 1), raw_output_contents: raws }).finish());
    expect(readInferResponse(splitEvery(more, 7)).outputs.map((o) => o.byteLength)).toEqual([8]);
  });

  describe('fields it does not know', () => {
    // Unknown fields of every wire type, before the header, between header fields and among the
    // entries. The fixed64/fixed32 values hold bytes that would read as field-6 tags were their
    // extent misjudged.
    const unknown = Buffer.from([
      ...varint((20 << 3) | 0), ...varint(300),
      ...varint((21 << 3) | 1), 0x32, 0x32, 0x32, 0x32, 0x32, 0x32, 0x32, 0x32,
      ...varint((22 << 3) | 5), 0x32, 0x05, 0x32, 0x05,
      ...varint((2000 << 3) | 2), 3, 0x32, 0x01, 0x00,
    ]);
    const ends = [...fieldEnds(message)].sort((a, b) => a - b);
    // Before everything, after model_name, after the outputs, between the first entries, at the end.
    const at = [0, ends[1]!, ends[ends.length - 5]!, ends[ends.length - 4]!, message.length];
    const parts: Buffer[] = [];
    at.forEach((p, i) => parts.push(message.subarray(i === 0 ? 0 : at[i - 1]!, p), unknown));
    parts.push(message.subarray(at[at.length - 1]));
    const withUnknown = Buffer.concat(parts);

    test.each(splits(withUnknown))('are skipped, the rest read the same (%s)', (_, chunks) => {
      expect(flat(readInferResponse(chunks))).toEqual(flat(whole));
    });
  });

  describe('refusals', () => {
    // Every cut of a message with short entries: inside a field it is truncated, at a field's end
    // it is a shorter message. Whole and in 3-byte chunks.
    const small = Buffer.from(inference.ModelInferResponse.encode({ ...properties, raw_output_contents: [raws[0]!, raws[1]!] }).finish());
    const ends = fieldEnds(small);

    test.each([['whole', small.length], ['3-byte chunks', 3]])('a message cut at any byte inside a field is truncated (%s)', (_, n) => {
      for (let cut = 1; cut < small.length; cut++) {
        const chunks = splitEvery(small.subarray(0, cut), n);
        if (ends.has(cut)) expect(() => readInferResponse(chunks)).not.toThrow();
        else expect(refusal(chunks)).toEqual(TRUNCATED);
      }
    });

    test('an entry cut short in the large message (in 7-byte chunks) is truncated', () => {
      for (const cut of [message.length - 1, message.length - 10000, message.length - 19999]) {
        expect(refusal(splitEvery(message.subarray(0, cut), 7))).toEqual(TRUNCATED);
      }
    });

    test('a varint longer than 10 bytes is refused', () => {
      expect(refusal([Buffer.alloc(11, 0x80)])).toEqual(TRUNCATED);
      expect(refusal(splitEvery(Buffer.from([0x0a, ...Array<number>(10).fill(0xff), 0x01]), 1))).toEqual(TRUNCATED);
    });

    test.each([3, 4, 6, 7])('wire type %i is refused', (wire) => {
      expect(refusal([Buffer.from([(1 << 3) | wire, 0, 0, 0, 0, 0, 0, 0, 0])])).toEqual(TRUNCATED);
    });

    test('a header field whose content is not a valid message is an upstream protocol error', () => {
      // outputs (field 5) holding a tag whose length runs past its end; model_name not UTF-8.
      const MALFORMED = { code: 'GW_ERR_UPSTREAM_PROTOCOL', message: expect.stringMatching(/^upstream sent a ModelInferResponse that does not decode: /) };
      expect(refusal([Buffer.from([0x2a, 3, 0x0a, 0x05, 0x41])])).toEqual(MALFORMED);
      expect(refusal(splitEvery(Buffer.from([0x0a, 2, 0xc3, 0x28]), 1))).toEqual(MALFORMED);
    });
  });

  describe('the header read by hand gives what protobufjs decoded', () => {
    const same = (m: Buffer, chunks: Buffer[]): void => {
      expect(outcomeOf(() => readInferResponse(chunks))).toEqual(outcomeOf(() => referenceRead(chunks)));
    };

    test('random messages, whole and split in two at every offset', () => {
      fc.assert(fc.property(inferAnswer, (m) => {
        same(m, [m]);
        for (let at = 0; at <= m.length; at++) same(m, [m.subarray(0, at), m.subarray(at)]);
        same(m, splitEvery(m, 1));
      }), { seed: 2718, numRuns: 400 });
    });

    test('random mutations: the same accept or refuse, and the same response', () => {
      const edited = inferAnswer.chain((m) => fc.tuple(fc.constant(m), fc.array(fc.record({ at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }), op: fc.constantFrom('set', 'insert', 'delete') }), { minLength: 1, maxLength: 3 })));
      fc.assert(fc.property(edited, ([m, edits]) => {
        let b = Buffer.from(m);
        for (const e of edits) {
          const at = b.length === 0 ? 0 : e.at % b.length;
          if (e.op === 'set' && b.length > 0) b[at] = e.byte;
          else if (e.op === 'insert') b = Buffer.concat([b.subarray(0, at), Buffer.from([e.byte]), b.subarray(at)]);
          else b = Buffer.concat([b.subarray(0, at), b.subarray(at + 1)]);
        }
        same(b, [b]);
        same(b, splitEvery(b, 3));
      }), { seed: 3141, numRuns: 2000 });
    });

    // Cases the generators reach rarely, each compared with protobufjs.
    const output = (...parts: number[][]): number[] => len(5, parts.flat());
    const param = (key: string, ...value: number[][]): number[] => len(4, [...len(1, [...Buffer.from(key)]), ...value.map((v) => len(2, v)).flat()]);
    const cases: [string, number[]][] = [
      ['dims past 2^53, negative, and int64 extremes, packed', output(len(3, [2n ** 53n + 1n, -5n, -(2n ** 63n), 2n ** 63n - 1n, 2n ** 64n - 1n].flatMap((d) => varint64(d))))],
      ['dims one by one after packed ones', output(len(3, varint64(2)), [...field(3, 0), ...varint64(3)], len(3, varint64(4)))],
      ['a repeated key: the last value, in the first place', [...param('a', [...field(1, 0), 1]), ...param('b', [...field(2, 0), 5]), ...param('a', [...field(2, 0), ...varint64(-2n)])]],
      ['integer-like keys', [...param('b', [...field(1, 0), 1]), ...param('2', [...field(1, 0), 0]), ...param('1', [...field(5, 0), ...varint64(2n ** 64n - 1n)])]],
      ['two values in one entry merge: the member seen last', [...param('x', [...field(2, 0), 7], [...field(1, 0), 1], [])]],
      ['a value without members, an entry without a value', [...param('x', []), ...len(4, len(1, [0x79]))]],
      ['__proto__ as a key', [...param('__proto__', [...field(1, 0), 1]), ...param('k', [...field(1, 0), 0])]],
      ['__proto__ twice, the last without a value', [...param('__proto__', [...field(1, 0), 1]), ...param('__proto__', [])]],
      ['a bool whose only set bit is past 64', [...param('b', [...field(1, 0), 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02])]],
      ['a varint of eleven bytes in a parameter', [...param('b', [...field(2, 0), ...Array<number>(10).fill(0x80), 0])]],
      ['a group in an output, nested', output([...field(9, 3), ...field(10, 3), ...field(1, 0), 1, ...field(10, 4), ...field(9, 4)], len(1, [0x41]))],
      ['a group closed by another field number', output([...field(9, 3), ...field(10, 4)])],
      ['groups nested past the recursion limit', output([...Array.from({ length: 101 }, () => field(9, 3)).flat(), ...Array.from({ length: 101 }, () => field(9, 4)).flat()])],
      ['groups nested up to the recursion limit', output([...Array.from({ length: 99 }, () => field(9, 3)).flat(), ...Array.from({ length: 99 }, () => field(9, 4)).flat()])],
      ['field number 0 in an output', output([0, 0])],
      ['a tag of five bytes, its last below 16', output([0x8a, 0x80, 0x80, 0x80, 0x00, 0x01, 0x41])],
      ['a tag of five bytes, its last 16', output([0x8a, 0x80, 0x80, 0x80, 0x10, 0x01, 0x41])],
      ['a top-level tag of five bytes', [0x8a, 0x80, 0x80, 0x80, 0x00, 0x01, 0x41]],
      ['a top-level tag of six bytes', [0x8a, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01, 0x41]],
      ['a top-level length of six bytes', [0x0a, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00, 0x41]],
      ['a length of five bytes, its last 8', output([0x0a, 0x81, 0x80, 0x80, 0x80, 0x08])],
      ['contents: packed floats not a multiple of 4', output(len(5, len(6, [1, 2, 3])))],
      ['contents: packed doubles, bools and bytes', output(len(5, [...len(7, Array<number>(16).fill(0)), ...len(1, [1, 0x80, 0x01]), ...len(8, [1, 2])]))],
      ['contents: a packed varint cut at its end', output(len(5, len(3, [0x80])))],
      ['invalid UTF-8 in a name', output(len(1, [0xed, 0xa0, 0x80]))],
      ['a byte order mark in a datatype', output(len(2, [0xef, 0xbb, 0xbf, 0x41]))],
      ['a long non-ASCII id', len(3, [...Buffer.from('é'.repeat(40))])],
      ['a double NaN and -0', [...param('n', [...field(4, 1), 0, 0, 0, 0, 0, 0, 0xf8, 0x7f]), ...param('z', [...field(4, 1), 0, 0, 0, 0, 0, 0, 0, 0x80])]],
      ['a double cut short', [...param('n', [...field(4, 1), 0, 0, 0])]],
    ];
    test.each(cases)('%s', (_, bytes) => {
      const m = Buffer.from(bytes);
      same(m, [m]);
      same(m, splitEvery(m, 1));
    });
  });
});
