// The BinaryStreamer reads Triton's ModelInferResponse from the DATA frames as they arrive (tags
// and varint lengths split anywhere) and streams the binary answer. Driven as the h2 data plane
// drives it: each piece through Receiver.data(piece, flow), the pieces it declines kept for the
// whole answer. Whole and in 1-, 2-, 3- and 7-byte pieces, a streamed answer is byte for byte the
// one the whole-answer encoder gives, its payload written as views of the pieces; where it cannot
// stream it declines before writing anything; where the answer breaks its header after the header
// went out, it fails the same way whatever the split.
import { EventEmitter } from 'node:events';
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { BinaryStreamer, mayStreamBinary, type StreamStart } from '../../../gateway/pipeline/binary-streamer';
import { encodeInferResponse } from '../../../gateway/encode/infer-response';
import type { InferRequest, RequestedOutput } from '../../../gateway/infer/request';
import type { Flow } from '../../../gateway/upstream/infer/data-plane';
import { readInferResponse } from '../../../gateway/infer/answer-reader';
import { inference } from '../../../proto/services';
import { firstDifference, isViewOf, splits } from '../../support/chunks';
import { nowNs } from '../../../gateway/infer/clock';

type OutputChoice = Pick<InferRequest, 'outputs' | 'binaryDataOutput' | 'base64Output'>;

/** What the streamer uses of a ServerResponse; `accept(k)` answers its k-th write (0-based). */
class FakeResponse extends EventEmitter {
  status: number | undefined;
  headers: OutgoingHttpHeaders | undefined;
  readonly writes: Buffer[] = [];
  /** Writes made before writeHead, or after end or destroy (none may be). */
  misplaced = 0;
  corks = 0;
  ended = false;
  destroyed: Error | undefined;
  constructor(private readonly accept: (k: number) => boolean = () => true) {
    super();
  }

  cork(): void {
    this.corks++;
  }

  uncork(): void {
    this.corks--;
  }

  writeHead(status: number, headers: OutgoingHttpHeaders): this {
    if (this.status !== undefined) throw new Error('writeHead twice');
    this.status = status;
    this.headers = headers;
    return this;
  }

  write(b: Buffer): boolean {
    if (this.status === undefined || this.ended || this.destroyed !== undefined) this.misplaced++;
    this.writes.push(b);
    return this.accept(this.writes.length - 1);
  }

  end(cb: () => void): this {
    this.ended = true;
    cb();
    return this;
  }

  destroy(err: Error): this {
    this.destroyed ??= err;
    return this;
  }

  get asResponse(): ServerResponse {
    return this as unknown as ServerResponse;
  }
}

function fakeFlow() {
  const calls = { pause: 0, resume: 0, cancel: 0 };
  const flow: Flow = {
    pause: () => void calls.pause++,
    resume: () => void calls.resume++,
    cancel: () => void calls.cancel++,
    buffered: () => 0,
    timing: () => ({ firstSentNs: 1, sentNs: 2, firstByteNs: 3, endNs: 0 }),
  };
  return { flow, calls };
}

const EXTRA_HEADERS = { 'Content-Type': 'application/octet-stream', 'X-Test': 'late' };

/** Feeds the pieces as the h2 call does: a piece the receiver does not take is kept for the whole answer. */
function drive(pieces: readonly Buffer[], choice: OutputChoice, accept?: (k: number) => boolean) {
  const res = new FakeResponse(accept);
  const { flow, calls } = fakeFlow();
  const starts: StreamStart[] = [];
  const streamer = new BinaryStreamer(res.asResponse, choice, {
    headers(start) {
      starts.push(start);
      return { ...EXTRA_HEADERS };
    },
  });
  const kept: Buffer[] = [];
  for (const p of pieces) if (streamer.data(p, flow) !== true) kept.push(p);
  return { res, calls, starts, streamer, kept };
}

/** What the whole-answer path sends for `message`: the JSON header and the binary bytes. */
function wholeAnswer(message: Buffer, choice: OutputChoice): { header: Buffer; binary: Buffer } {
  const encoded = encodeInferResponse(readInferResponse([message]), choice);
  return { header: encoded.header, binary: Buffer.concat(encoded.binary) };
}

const bytes = (n: number, seed: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 29 + seed) & 0xff));
const encode = (m: inference.IModelInferResponse): Buffer => Buffer.from(inference.ModelInferResponse.encode(m).finish());

/** Varint bytes of n. */
function varint(n: number): number[] {
  const out: number[] = [];
  for (; n >= 0x80; n = Math.floor(n / 128)) out.push((n & 0x7f) | 0x80);
  out.push(n);
  return out;
}

const ALL_BINARY: OutputChoice = { outputs: undefined, binaryDataOutput: true };
const requested = (name: string, binary: boolean | undefined): RequestedOutput => ({ name, parameters: new Map(), binary, sharedMemory: false });

const header: inference.IModelInferResponse = {
  model_name: 'streamer',
  model_version: '3',
  id: 'ïd-1',
  // Parameters come before the outputs on the wire (field 4 < 5); one long enough for a 2-byte length.
  parameters: {
    sequence_end: { bool_param: true },
    note: { string_param: 'n'.repeat(300) },
    count: { int64_param: 42 },
  },
};

// Entries whose length varints take 1, 2 and 3 bytes, in several orders, with empty outputs.
const fixtures: Record<string, inference.IModelInferResponse> = {
  'small outputs': {
    ...header,
    outputs: [{ name: 'A', datatype: 'UINT8', shape: [2, 4] }, { name: 'B', datatype: 'INT32', shape: [3] }],
    raw_output_contents: [bytes(8, 1), bytes(12, 2)],
  },
  'entries of ≥ 128 and ≥ 16384 bytes': {
    ...header,
    outputs: [
      { name: 'SMALL', datatype: 'INT8', shape: [5] },
      { name: 'MID', datatype: 'FP32', shape: [50] },
      { name: 'LARGE', datatype: 'FP16', shape: [100, 100] },
      { name: 'EMPTY', datatype: 'INT64', shape: [0, 3] },
    ],
    raw_output_contents: [bytes(5, 3), bytes(200, 4), bytes(20000, 5), Buffer.alloc(0)],
  },
  'a first entry of ≥ 16384 bytes (its 3-byte length split in the head)': {
    ...header,
    outputs: [{ name: 'LARGE', datatype: 'UINT16', shape: [8200] }, { name: 'MID', datatype: 'FP64', shape: [20] }],
    raw_output_contents: [bytes(16400, 6), bytes(160, 7)],
  },
  'an empty first output': {
    ...header,
    outputs: [{ name: 'EMPTY', datatype: 'BOOL', shape: [0] }, { name: 'X', datatype: 'BF16', shape: [70] }, { name: 'Z', datatype: 'UINT64', shape: [] }],
    raw_output_contents: [Buffer.alloc(0), bytes(140, 8), bytes(8, 9)],
  },
  'no id, no parameters': {
    model_name: 'm',
    outputs: [{ name: 'ONE', datatype: 'UINT32', shape: [1, 1] }],
    raw_output_contents: [bytes(4, 10)],
  },
};

describe('mayStreamBinary', () => {
  test('outputs binary by default, or every requested output binary', () => {
    expect(mayStreamBinary({ outputs: undefined, binaryDataOutput: true })).toBe(true);
    expect(mayStreamBinary({ outputs: undefined, binaryDataOutput: false })).toBe(false);
    expect(mayStreamBinary({ outputs: [], binaryDataOutput: true })).toBe(true);
    expect(mayStreamBinary({ outputs: [requested('A', true), requested('B', true)], binaryDataOutput: false })).toBe(true);
    expect(mayStreamBinary({ outputs: [requested('A', true), requested('B', undefined)], binaryDataOutput: true })).toBe(false);
    expect(mayStreamBinary({ outputs: [requested('A', false)], binaryDataOutput: true })).toBe(false);
  });
});

describe.each(Object.entries(fixtures))('BinaryStreamer, %s', (_, fixture) => {
  const message = encode(fixture);
  const names = fixture.outputs!.map((o) => o.name!);
  const choices: [string, OutputChoice][] = [
    ['binary_data_output', ALL_BINARY],
    ['each output asked for binary', { outputs: names.map((n) => requested(n, true)), binaryDataOutput: false }],
  ];

  describe.each(choices)('%s', (_c, choice) => {
    const expected = wholeAnswer(message, choice);

    test.each(splits(message))('%s: streams the whole-answer bytes, payload by reference', async (_s, pieces) => {
      const { res, calls, starts, streamer } = drive(pieces, choice);
      expect(streamer.streaming).toBe(true);
      expect(starts).toEqual([{ headerBytes: expected.header.length, binaryBytes: expected.binary.length, timing: expect.anything() }]);
      expect(res.status).toBe(200);
      // The headers are the caller's (pipeline/answer-streamer.ts sets Content-Length from `starts`).
      expect(res.headers).toEqual(EXTRA_HEADERS);
      expect(firstDifference(res.writes[0]!, expected.header)).toBeUndefined();
      expect(firstDifference(Buffer.concat(res.writes.slice(1)), expected.binary)).toBeUndefined();
      expect(streamer.written).toBe(expected.binary.length);
      // Every payload write is a view of one piece; views come in piece order.
      let p = 0;
      const copies = res.writes.slice(1).filter((w) => {
        while (p < pieces.length && !isViewOf(w, pieces[p]!)) p++;
        return p === pieces.length;
      });
      expect(copies).toEqual([]);
      await expect(streamer.finish()).resolves.toBeUndefined();
      expect(res.ended).toBe(true);
      expect(res.destroyed).toBeUndefined();
      expect(res.misplaced).toBe(0);
      expect(calls).toEqual({ pause: 0, resume: 0, cancel: 0 });
      await new Promise<void>((resolve) => process.nextTick(resolve));
      expect(res.corks).toBe(0); // the header's cork is let go on the next tick
    });
  });
});

describe('BinaryStreamer back-pressure', () => {
  const message = encode(fixtures['entries of ≥ 128 and ≥ 16384 bytes']!);

  test.each(splits(message))('%s: a refused write pauses the call until the response drains', (_, pieces) => {
    // The response refuses every third write (the header write's answer is not looked at).
    const { res, calls, streamer } = drive(pieces, ALL_BINARY, (k) => k % 3 !== 2);
    expect(streamer.streaming).toBe(true);
    const refused = res.writes.filter((_w, k) => k % 3 === 2 && k > 0).length;
    expect(refused).toBeGreaterThan(0);
    expect(calls.pause).toBe(refused);
    expect(calls.resume).toBe(0);
    res.emit('drain');
    expect(calls.resume).toBe(refused);
    res.emit('drain');
    expect(calls.resume).toBe(refused); // once per refusal
  });
});

describe('BinaryStreamer declines before writing anything', () => {
  // The answer is then encoded whole from the pieces the call kept: all of them.
  const cases: [string, Buffer, OutputChoice][] = [
    ['an output asked for as JSON', encode(fixtures['small outputs']!),
      { outputs: [requested('A', true), requested('B', undefined)], binaryDataOutput: true }],
    ['an output not binary by default', encode(fixtures['small outputs']!), { outputs: [requested('A', true)], binaryDataOutput: false }],
    ['a BYTES output', encode({ ...header, outputs: [{ name: 'S', datatype: 'BYTES', shape: [1] }], raw_output_contents: [Buffer.from([1, 0, 0, 0, 0x61])] }), ALL_BINARY],
    ['a datatype it does not know', encode({ ...header, outputs: [{ name: 'S', datatype: 'FP8', shape: [4] }], raw_output_contents: [bytes(4, 1)] }), ALL_BINARY],
    ['a first output longer than its shape', encode({ ...header, outputs: [{ name: 'A', datatype: 'FP32', shape: [50] }], raw_output_contents: [bytes(201, 1)] }), ALL_BINARY],
    ['a first output shorter than its shape', encode({ ...header, outputs: [{ name: 'A', datatype: 'FP32', shape: [50] }], raw_output_contents: [bytes(199, 1)] }), ALL_BINARY],
    ['only empty outputs', encode({ ...header, outputs: [{ name: 'A', datatype: 'FP32', shape: [0] }, { name: 'B', datatype: 'INT8', shape: [2, 0] }], raw_output_contents: [Buffer.alloc(0), Buffer.alloc(0)] }), ALL_BINARY],
    ['entries but no outputs in the header', encode({ ...header, raw_output_contents: [bytes(8, 1)] }), ALL_BINARY],
    ['a header protobufjs refuses', Buffer.from([0x2a, 3, 0x0a, 0x05, 0x41, 0x32, 2, 0, 0]), ALL_BINARY],
    ['a group (wire type 3) in the header', Buffer.from([0x0b, 0x0c, 0x32, 2, 0, 0]), ALL_BINARY],
  ];

  describe.each(cases)('%s', (_, message, choice) => {
    test.each(splits(message))('%s', (_s, pieces) => {
      const { res, starts, streamer, kept, calls } = drive(pieces, choice);
      expect(streamer.streaming).toBe(false);
      expect(kept).toEqual(pieces);
      expect(starts).toEqual([]);
      expect(res.status).toBeUndefined();
      expect(res.writes).toEqual([]);
      expect(res.destroyed).toBeUndefined();
      expect(calls).toEqual({ pause: 0, resume: 0, cancel: 0 });
    });
  });

  test.each(splits(encode({ ...header, outputs: [{ name: 'A', datatype: 'FP32', shape: [2] }] })))(
    'an answer without entries (outputs in shared memory) never starts, %s', (_, pieces) => {
      const { res, streamer, kept } = drive(pieces, ALL_BINARY);
      expect(streamer.streaming).toBe(false);
      expect(kept).toEqual(pieces);
      expect(res.writes).toEqual([]);
    });
});

describe('BinaryStreamer skips header fields it does not know', () => {
  // Unknown fields of every wire type before the outputs: the head parser steps over them by
  // their extent (fixed64/fixed32 values full of field-6 tags), protobufjs ignores them.
  const known = encode(fixtures['small outputs']!);
  const unknown = Buffer.from([
    ...varint((20 << 3) | 0), ...varint(1 << 20),
    ...varint((21 << 3) | 1), 0x32, 0x32, 0x32, 0x32, 0x32, 0x32, 0x32, 0x32,
    ...varint((22 << 3) | 5), 0x32, 0x08, 0x32, 0x08,
    ...varint((2000 << 3) | 2), 2, 0x32, 0x08,
  ]);
  const message = Buffer.concat([unknown, known]);
  const expected = wholeAnswer(known, ALL_BINARY);

  test.each(splits(message))('%s', async (_, pieces) => {
    const { res, streamer } = drive(pieces, ALL_BINARY);
    expect(streamer.streaming).toBe(true);
    expect(firstDifference(Buffer.concat(res.writes), Buffer.concat([expected.header, expected.binary]))).toBeUndefined();
    await streamer.finish();
  });
});

describe('BinaryStreamer breaks an answer that does not fit its header', () => {
  // After the header went out, the only way to say it is a closed connection: the response is
  // destroyed, the call cancelled, finish() rejects. What was written before is a prefix of the
  // streamed answer; the error is the same whatever the split.
  const outputs = [{ name: 'A', datatype: 'UINT8', shape: [8] }, { name: 'B', datatype: 'FP32', shape: [50] }];
  const good = encode({ ...header, outputs, raw_output_contents: [bytes(8, 1), bytes(200, 2)] });
  const expected = wholeAnswer(good, ALL_BINARY);
  const streamedAnswer = Buffer.concat([expected.header, expected.binary]);
  const during = (message: string) => ({ code: 'GW_ERR_UPSTREAM_PROTOCOL', status: 502, message, at: 'data' });
  const atEnd = (message: string) => ({ code: 'GW_ERR_UPSTREAM_PROTOCOL', status: 502, message, at: 'finish' });

  const cases: [string, Buffer, ReturnType<typeof during>][] = [
    ['a later output longer than its shape', encode({ ...header, outputs, raw_output_contents: [bytes(8, 1), bytes(201, 2)] }),
      during('upstream output 1 has 201 bytes where its shape says 200')],
    ['a later output shorter than its shape', encode({ ...header, outputs, raw_output_contents: [bytes(8, 1), bytes(199, 2)] }),
      during('upstream output 1 has 199 bytes where its shape says 200')],
    ['a later output of ≥ 16384 bytes where its shape says 200', encode({ ...header, outputs, raw_output_contents: [bytes(8, 1), bytes(16384, 2)] }),
      during('upstream output 1 has 16384 bytes where its shape says 200')],
    ['more entries than outputs', encode({ ...header, outputs, raw_output_contents: [bytes(8, 1), bytes(200, 2), bytes(3, 3)] }),
      during('upstream answer has more than its outputs after the header')],
    ['another field after the entries', Buffer.concat([good, Buffer.from([0x0a, 1, 0x61])]),
      during('upstream answer has more than its outputs after the header')],
    ['fewer entries than outputs', encode({ ...header, outputs, raw_output_contents: [bytes(8, 1)] }),
      atEnd('upstream answer ended inside an output')],
    ['an answer cut inside an output', good.subarray(0, good.length - 1), atEnd('upstream answer ended inside an output')],
    ['an answer cut inside a length', good.subarray(0, good.length - 201), atEnd('upstream answer ended inside an output')],
    ['an answer cut after a tag', good.subarray(0, good.length - 202), atEnd('upstream answer ended inside an output')],
  ];

  describe.each(cases)('%s', (_, message, failure) => {
    test.each(splits(message))('%s', async (_s, pieces) => {
      const { res, calls, streamer } = drive(pieces, ALL_BINARY);
      expect(streamer.streaming).toBe(true);
      const written = Buffer.concat(res.writes);
      expect(firstDifference(written, streamedAnswer.subarray(0, written.length))).toBeUndefined();
      if (failure.at === 'data') {
        expect(res.destroyed).toBeDefined();
        expect(calls.cancel).toBe(1);
      } else {
        expect(res.destroyed).toBeUndefined();
        expect(calls.cancel).toBe(0);
      }
      const rejected = await streamer.finish().then(() => undefined, (e: { code: string; status: number; message: string }) => e);
      expect(rejected).toBe(res.destroyed);
      expect({ code: rejected?.code, status: rejected?.status, message: rejected?.message, at: failure.at }).toEqual(failure);
      expect(res.ended).toBe(false);
    });
  });
});

describe('BinaryStreamer times its encoding', () => {
  test('encodeStartNs: set when it starts reading Triton\'s header, before the headers are asked for', () => {
    const message = encode(Object.values(fixtures)[0]!);
    const before = nowNs();
    let asked = 0;
    const res = new FakeResponse();
    const { flow } = fakeFlow();
    const streamer = new BinaryStreamer(res.asResponse, ALL_BINARY, {
      headers() {
        asked = nowNs();
        return { ...EXTRA_HEADERS };
      },
    });
    expect(streamer.encodeStartNs).toBe(0);
    streamer.data(message, flow);
    expect(streamer.streaming).toBe(true);
    expect(streamer.encodeStartNs).toBeGreaterThanOrEqual(before);
    expect(streamer.encodeStartNs).toBeLessThan(asked);
  });
});
