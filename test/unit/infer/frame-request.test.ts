import Long from 'long';
import { inference } from '../../../proto/services';
import type { InferRequest, ParamValue } from '../../../gateway/infer/request';
import type { StreamingCall } from '../../../gateway/upstream/infer/data-plane';
import { Forwarder } from '../../../gateway/upstream/infer/cut-through';
import { frameInferHead, frameInferRequest } from '../../../gateway/infer/frame-request';

// The reference: the header fields as the protobufjs message object, encoded by protobufjs.
function toInferParameter(p: ParamValue): inference.IInferParameter {
  switch (p.type) {
    case 'bool': return { bool_param: p.value };
    case 'string': return { string_param: p.value };
    case 'double': return { double_param: p.value };
    case 'int64': return { int64_param: longOf(p.value, false) };
    case 'uint64': return { uint64_param: longOf(p.value, true) };
  }
}

function longOf(v: bigint, unsigned: boolean): number | Long {
  if (v >= -9007199254740991n && v <= 9007199254740991n) return Number(v);
  const u = BigInt.asUintN(64, v);
  return Long.fromBits(Number(u & 0xffffffffn) | 0, Number(u >> 32n) | 0, unsigned);
}

function parameterMap(m: ReadonlyMap<string, ParamValue>): Record<string, inference.IInferParameter> | undefined {
  if (m.size === 0) return undefined;
  const out: Record<string, inference.IInferParameter> = {};
  for (const [k, v] of m) out[k] = toInferParameter(v);
  return out;
}

function headerMessage(req: InferRequest): inference.IModelInferRequest {
  const msg: inference.IModelInferRequest = { model_name: req.modelName };
  if (req.modelVersion !== '') msg.model_version = req.modelVersion;
  if (req.id !== undefined && req.id !== '') msg.id = req.id;
  const params = parameterMap(req.parameters);
  if (params) msg.parameters = params;
  msg.inputs = req.inputs.map((t) => {
    const input: inference.ModelInferRequest.IInferInputTensor = { name: t.name, datatype: t.datatype, shape: [...t.shape] };
    const p = parameterMap(t.parameters);
    if (p) input.parameters = p;
    return input;
  });
  if (req.outputs !== undefined) {
    msg.outputs = req.outputs.map((o) => {
      const out: inference.ModelInferRequest.IInferRequestedOutputTensor = { name: o.name };
      const p = parameterMap(o.parameters);
      if (p) out.parameters = p;
      return out;
    });
  }
  return msg;
}

/** The framed head of `req` without payload entries against protobufjs's encoding of its header fields. */
function expectHeaderAsProtobufjs(req: InferRequest): void {
  const framed = frameInferRequest(req);
  const expected = Buffer.from(inference.ModelInferRequest.encode(headerMessage(req)).finish());
  expect(framed.message.readUInt32BE(1)).toBe(expected.length);
  expect(framed.message.subarray(5).toString('hex')).toBe(expected.toString('hex'));
}

const request: InferRequest = {
  modelName: 'simple',
  modelVersion: '3',
  id: 'abc',
  parameters: new Map([
    ['sequence_id', { type: 'int64', value: -2n }],
    ['priority', { type: 'uint64', value: 18446744073709551615n }],
    ['flag', { type: 'bool', value: true }],
    ['ratio', { type: 'double', value: 0.5 }],
    ['name', { type: 'string', value: 'x' }],
  ]),
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 2], parameters: new Map(), byteSize: 8 },
    { name: 'EMPTY', datatype: 'FP32', shape: [1, 0], parameters: new Map(), byteSize: 0 },
    { name: 'SHM', datatype: 'FP32', shape: [1], parameters: new Map([['shared_memory_region', { type: 'string', value: 'r' }]]), byteSize: undefined },
    { name: 'BIG', datatype: 'UINT8', shape: [1, 300], parameters: new Map(), byteSize: 300 },
  ],
  outputs: [{ name: 'OUTPUT0', parameters: new Map([['classification', { type: 'int64', value: 3n }]]), binary: true, sharedMemory: false }],
  binaryDataOutput: false,
};

describe('frameInferRequest', () => {
  test('byte-identical to protobufjs encoding the whole message, with the gRPC prefix', () => {
    const framed = frameInferRequest(request);
    const payloads = [Buffer.from([1, 0, 0, 0, 2, 0, 0, 0]), Buffer.alloc(0), Buffer.alloc(300, 7)];
    let k = 0;
    framed.slots.forEach((slot) => {
      if (slot === undefined) return;
      payloads[k++]!.copy(framed.message, slot.offset);
    });
    const expected = inference.ModelInferRequest.encode({ ...headerMessage(request), raw_input_contents: payloads }).finish();
    expect(framed.message[0]).toBe(0);
    expect(framed.message.readUInt32BE(1)).toBe(expected.length);
    expect(framed.message.subarray(5)).toEqual(Buffer.from(expected));
  });

  test('no entry for shared-memory inputs, an empty entry for empty tensors', () => {
    const framed = frameInferRequest(request);
    expect(framed.slots.map((s) => s?.length)).toEqual([8, 0, undefined, 300]);
    const decoded = inference.ModelInferRequest.decode(framed.message.subarray(5));
    expect(decoded.raw_input_contents.map((b) => b.length)).toEqual([8, 0, 300]);
    expect(decoded.parameters.priority!.uint64_param!.toString()).toBe('18446744073709551615');
    expect(decoded.parameters.sequence_id!.int64_param!.toString()).toBe('-2');
  });
});

describe('the header fields, written by hand', () => {
  const input = (name: string, shape: number[], parameters = new Map<string, ParamValue>()): InferRequest['inputs'][number] => ({
    name, datatype: 'FP32', shape, parameters, byteSize: undefined,
  });
  const bare: InferRequest = { modelName: 'm', modelVersion: '', id: undefined, parameters: new Map(), inputs: [], outputs: undefined, binaryDataOutput: false };
  const long = 'é'.repeat(20) + 'x'.repeat(30);

  test.each<[string, InferRequest]>([
    ['no version, id, parameters or outputs', bare],
    ['empty names, datatypes and id', { ...bare, modelName: '', id: '', inputs: [{ ...input('', []), datatype: '' }], outputs: [] }],
    ['an empty output list and an output without a name', { ...bare, outputs: [{ name: '', parameters: new Map(), binary: undefined, sharedMemory: false }] }],
    ['non-ASCII, astral and lone-surrogate strings, short and long', {
      ...bare, modelName: 'modèle-😀', id: `\ud800x${'y'.repeat(45)}\udc00`, inputs: [input('入力', [2]), input(long, [1]), input('\udbff', [3])],
    }],
    ['integer-like and __proto__ parameter keys (the order and the drop of an object\'s keys)', {
      ...bare, parameters: new Map<string, ParamValue>([['b', { type: 'bool', value: false }], ['7', { type: 'string', value: '' }],
        ['__proto__', { type: 'int64', value: 1n }], ['0', { type: 'double', value: -0 }], ['', { type: 'uint64', value: 0n }]]),
    }],
    ['64-bit parameters at their limits', {
      ...bare, parameters: new Map<string, ParamValue>([['a', { type: 'int64', value: -9223372036854775808n }], ['b', { type: 'int64', value: 9223372036854775807n }],
        ['c', { type: 'uint64', value: 2n ** 53n }], ['d', { type: 'int64', value: -(2n ** 53n) + 1n }], ['e', { type: 'double', value: Number.NaN }]]),
    }],
    ['large and long shapes, input and output parameters', {
      ...bare, inputs: [input('big', [2 ** 40, 0, 127, 128, 2 ** 31, Number.MAX_SAFE_INTEGER], new Map([['shared_memory_offset', { type: 'int64', value: 300n }]])),
        input('long', Array.from({ length: 200 }, (_, i) => i * 1000))],
      outputs: [{ name: 'o', parameters: new Map([['classification', { type: 'uint64', value: 5n }], ['x'.repeat(200), { type: 'string', value: long }]]), binary: true, sharedMemory: false }],
    }],
  ])('%s: byte-identical to protobufjs', (_name, req) => {
    expectHeaderAsProtobufjs(req);
  });
});

describe('frameInferHead and the Forwarder (cut-through)', () => {
  // A call that keeps what it is given, by reference, and can refuse more (back-pressure).
  function recordingCall(acceptUpTo = Infinity) {
    const pieces: Buffer[] = [];
    let ended = false;
    let written = 0;
    const call: StreamingCall = {
      write: (p) => {
        if (ended) throw new Error('write after end');
        pieces.push(p);
        written += p.length;
        return written < acceptUpTo;
      },
      end: (p) => {
        pieces.push(p);
        ended = true;
      },
      onDrain: (resume) => resume(),
      cancel: () => undefined,
      release: () => undefined,
      response: new Promise(() => undefined),
    };
    return { call, pieces, ended: () => ended };
  }

  const payloads = [Buffer.from([1, 0, 0, 0, 2, 0, 0, 0]), Buffer.alloc(0), Buffer.from(Array.from({ length: 300 }, (_, i) => i & 0xff))];
  const full = (): Buffer => {
    const f = frameInferRequest(request);
    let k = 0;
    f.slots.forEach((slot) => {
      if (slot !== undefined) payloads[k++]!.copy(f.message, slot.offset);
    });
    return f.message;
  };

  test.each([1, 3, 7, 64, 1000])('head + body chunks of %i bytes forwarded by reference = the whole framed message', (piece) => {
    // INPUT0 and BIG come from the body; EMPTY has no bytes; SHM has no entry.
    const head = frameInferHead(request, [8, 0, 0, 300]);
    expect(head.cuts.map((c) => c.length)).toEqual([8, 300]);
    expect(head.message.readUInt32BE(1)).toBe(full().length - 5); // the prefix counts what the head leaves out
    const { call, pieces, ended } = recordingCall();
    const fwd = new Forwarder(call, head.message, head.cuts);
    const body = Buffer.concat([payloads[0]!, payloads[2]!]);
    for (let at = 0; at < body.length; at += piece) fwd.push(body.subarray(at, at + piece));
    expect(fwd.done).toBe(true);
    expect(ended()).toBe(true);
    expect(fwd.forwarded).toBe(body.length);
    expect(Buffer.concat(pieces)).toEqual(full());
    // Payload pieces are views of the body, not copies.
    const inBody = (p: Buffer): boolean => p.buffer === body.buffer && p.byteOffset >= body.byteOffset && p.byteOffset < body.byteOffset + body.length;
    const bodyPieces = pieces.filter(inBody);
    expect(bodyPieces.reduce((n, p) => n + p.length, 0)).toBe(body.length);
  });

  test('a chunk that completes one cut and starts the next is split between them; the rest after the last cut is not taken', () => {
    const head = frameInferHead(request, [8, 0, 0, 300]);
    const { call, pieces } = recordingCall();
    const fwd = new Forwarder(call, head.message, head.cuts);
    const body = Buffer.concat([payloads[0]!, payloads[2]!, Buffer.from('extra')]);
    fwd.push(body, 0);
    expect(fwd.done).toBe(true);
    expect(Buffer.concat(pieces)).toEqual(full());
  });

  test('no cuts: the whole head is written and the call ended at once', () => {
    const head = frameInferHead(request, []);
    const { call, pieces, ended } = recordingCall();
    const fwd = new Forwarder(call, head.message, head.cuts);
    expect(fwd.done).toBe(true);
    expect(ended()).toBe(true);
    expect(pieces).toEqual([head.message]);
  });

  test('push reports back-pressure when the call refuses more', () => {
    const head = frameInferHead(request, [8, 0, 0, 300]);
    const { call } = recordingCall(head.message.length + 50);
    const fwd = new Forwarder(call, head.message, head.cuts);
    expect(fwd.push(Buffer.alloc(8))).toBe(true);
    expect(fwd.push(Buffer.alloc(100))).toBe(false);
  });
});
