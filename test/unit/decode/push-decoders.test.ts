// The push decoders of streamed bodies (binary extension, raw): fed whole and split into 1-, 2-,
// 3- and 7-byte chunks, they frame the same message, byte for byte, as the whole-body decoder —
// with the payload copied into slots, or handed to the sink for a cut-through call.
import { BinaryExtensionDecoder } from '../../../gateway/decode/binary-extension';
import { FramedHeads } from '../../../gateway/decode/framed-heads';
import { RawDecoder } from '../../../gateway/decode/raw-binary';
import { decodeWholeBody } from '../../../gateway/decode/v2-body';
import type { Frame, OpenSink } from '../../../gateway/infer/framed-message';
import type { InferRequest } from '../../../gateway/infer/request';
import { Ledger } from '../../../gateway/infer/ledger';
import { SlotWriter } from '../../../gateway/infer/slot-writer';
import { frameInferHead } from '../../../gateway/infer/frame-request';
import { inference } from '../../../proto/services';

const SPLITS = [0, 1, 2, 3, 7];

/** The body in chunks of `n` bytes (0: whole). */
function chunked(body: Buffer, n: number): Buffer[] {
  if (n === 0) return [body];
  const out: Buffer[] = [];
  for (let at = 0; at < body.length; at += n) out.push(body.subarray(at, Math.min(at + n, body.length)));
  return out;
}

const frame: Frame = (request, external) => frameInferHead(request, external);

/** Fills slots (no cuts), or records what the sink received (cuts): the wire the call would carry. */
function sinkFor(got: { message?: Buffer; wire: Buffer[] }): OpenSink {
  return (_request, framed, slots) => {
    got.message = framed.message;
    if (framed.cuts.length === 0) {
      const w = new SlotWriter(framed.message, slots);
      return { write: (c, from = 0) => void w.write(c, from) };
    }
    return { write: (c, from = 0) => void got.wire.push(c.subarray(from)) };
  };
}

/** The head with the sink's bytes put in at its cuts: the message a cut-through call sends. */
function spliced(head: Buffer, cuts: readonly { at: number; length: number }[], payload: Buffer): Buffer {
  const parts: Buffer[] = [];
  let h = 0;
  let p = 0;
  for (const c of cuts) {
    parts.push(head.subarray(h, c.at), payload.subarray(p, p + c.length));
    h = c.at;
    p += c.length;
  }
  parts.push(head.subarray(h));
  return Buffer.concat(parts);
}

const config = inference.ModelConfig.create({ name: 'm', output: [] });
const base = { modelName: 'm', modelVersion: '', config, maxInputSizeBytes: 1 << 20 };

describe('binary extension', () => {
  const a = Buffer.from([1, 2, 3, 4, 5, 6, 7, 8]);
  const c = Buffer.from(Array.from({ length: 300 }, (_, i) => i & 0xff));
  const header = Buffer.from(JSON.stringify({
    inputs: [
      { name: 'A', datatype: 'UINT8', shape: [8], parameters: { binary_data_size: 8 } },
      { name: 'B', datatype: 'INT32', shape: [2], data: [7, -1] },
      { name: 'C', datatype: 'UINT8', shape: [300], parameters: { binary_data_size: 300 } },
    ],
  }));
  const body = Buffer.concat([header, a, c]);
  const expected = decodeWholeBody([body], body.length, String(header.length), { ...base, headerlessBinary: false }, frame, new Ledger()).message;

  test.each(SPLITS)('chunks of %i bytes: the same message, payload copied into its slots', (n) => {
    const got: { message?: Buffer; wire: Buffer[] } = { wire: [] };
    const ledger = new Ledger();
    const d = new BinaryExtensionDecoder({ ...base, headerBytes: header.length, bodyBytes: body.length, external: false }, frame, sinkFor(got), ledger);
    for (const chunk of chunked(body, n)) d.push(chunk);
    expect(d.end().inputs.map((i) => i.name)).toEqual(['A', 'B', 'C']);
    expect(got.message!.equals(expected)).toBe(true);
    // A header split over chunks is gathered once (one copy, one allocation); in one chunk it is a view.
    expect(ledger.hops.decode.allocations).toBe(n === 0 ? 0 : 1);
  });

  test.each(SPLITS)('chunks of %i bytes, cut through: the head plus the forwarded bytes are the same message', (n) => {
    const got: { message?: Buffer; wire: Buffer[] } = { wire: [] };
    let cuts: readonly { at: number; length: number }[] = [];
    const open = sinkFor(got);
    const d = new BinaryExtensionDecoder({ ...base, headerBytes: header.length, bodyBytes: body.length, external: true }, frame,
      (request, framed, slots) => {
        cuts = framed.cuts;
        return open(request, framed, slots);
      }, new Ledger());
    for (const chunk of chunked(body, n)) d.push(chunk);
    d.end();
    expect(cuts.map((x) => x.length)).toEqual([8, 300]);
    expect(spliced(got.message!, cuts, Buffer.concat(got.wire)).equals(expected)).toBe(true);
  });

  test('a header that is not JSON fails as the whole-body decoder does, whatever the split', () => {
    const bad = Buffer.concat([Buffer.from('{"inputs":'), Buffer.alloc(4)]);
    for (const n of SPLITS) {
      const d = new BinaryExtensionDecoder({ ...base, headerBytes: 10, bodyBytes: bad.length, external: false }, frame, sinkFor({ wire: [] }), new Ledger());
      expect(() => chunked(bad, n).forEach((ch) => d.push(ch))).toThrow(expect.objectContaining({ code: 'GW_ERR_DECODE_MALFORMED' }));
    }
  });
});

describe('raw', () => {
  const uint8 = inference.ModelConfig.create({
    name: 'r', max_batch_size: 0, output: [], input: [{ name: 'IN', data_type: inference.DataType.TYPE_UINT8, dims: [-1] }],
  });
  const bytes = inference.ModelConfig.create({
    name: 's', max_batch_size: 4, output: [], input: [{ name: 'S', data_type: inference.DataType.TYPE_STRING, dims: [1] }],
  });
  const body = Buffer.from(Array.from({ length: 100 }, (_, i) => (i * 7) & 0xff));

  test.each(SPLITS.flatMap((n) => [[n, 'UINT8'], [n, 'BYTES']] as const))('chunks of %i bytes (%s): the same message', (n, kind) => {
    const cfg = kind === 'UINT8' ? uint8 : bytes;
    const options = { ...base, config: cfg, modelName: cfg.name, bodyBytes: body.length };
    const expected = decodeWholeBody([body], body.length, '0', { ...options, headerlessBinary: false }, frame, new Ledger()).message;
    for (const external of [false, true]) {
      const got: { message?: Buffer; wire: Buffer[] } = { wire: [] };
      let cuts: readonly { at: number; length: number }[] = [];
      const open = sinkFor(got);
      const d = new RawDecoder({ ...options, external }, frame, (request, framed, slots) => {
        cuts = framed.cuts;
        return open(request, framed, slots);
      });
      for (const chunk of chunked(body, n)) d.push(chunk);
      const request = d.end();
      expect(request.inputs[0]!.shape).toEqual(kind === 'UINT8' ? [100] : [1, 1]);
      const message = external ? spliced(got.message!, cuts, Buffer.concat(got.wire)) : got.message!;
      expect(message.equals(expected)).toBe(true);
    }
  });

  test('the request kept for a configuration serves only the same body length, name and version', () => {
    const fp32 = inference.ModelConfig.create({
      name: 'f', max_batch_size: 8, output: [], input: [{ name: 'X', data_type: inference.DataType.TYPE_FP32, dims: [-1, 2] }],
    });
    const deduce = (bodyBytes: number, modelVersion: string): InferRequest =>
      new RawDecoder({ ...base, config: fp32, modelName: 'f', modelVersion, bodyBytes, external: false }, frame, sinkFor({ wire: [] })).request;
    const first = deduce(16, '');
    expect(deduce(16, '')).toBe(first);
    expect(deduce(32, '').inputs[0]!.shape).toEqual([1, 4, 2]);
    expect(deduce(16, '2')).toMatchObject({ modelVersion: '2', inputs: [{ shape: [1, 2, 2], byteSize: 16 }] });
    expect(deduce(16, '')).toMatchObject({ modelVersion: '', inputs: [{ shape: [1, 2, 2], byteSize: 16 }] });
    // Too large is refused every time, before the kept request is looked at.
    expect(() => deduce(2 << 20, '')).toThrow(expect.objectContaining({ code: 'GW_ERR_DECODE_TOO_LARGE' }));
  });

  test('kept heads: the same model and body length take the head framed before; anything else is framed', () => {
    const heads = new FramedHeads();
    let framedCount = 0;
    const counting: Frame = (request, external) => (framedCount++, frameInferHead(request, external));
    const send = (cfg: inference.ModelConfig, payload: Buffer, over: { external?: boolean; maxInputSizeBytes?: number; modelVersion?: string } = {}) => {
      const got: { message?: Buffer; wire: Buffer[] } = { wire: [] };
      let cuts: readonly { at: number; length: number }[] = [];
      const open = sinkFor(got);
      const d = new RawDecoder({ ...base, config: cfg, modelName: cfg.name, bodyBytes: payload.length, external: true, heads, ...over }, counting,
        (request, framed, slots) => ((cuts = framed.cuts), open(request, framed, slots)));
      d.push(payload);
      d.end();
      const expected = decodeWholeBody([payload], payload.length, '0', { ...base, config: cfg, modelName: cfg.name, headerlessBinary: false,
        modelVersion: over.modelVersion ?? '' }, frame, new Ledger()).message;
      const message = cuts.length > 0 ? spliced(got.message!, cuts, Buffer.concat(got.wire)) : got.message!;
      expect(message.equals(expected)).toBe(true);
      return { head: got.message, known: d.known };
    };
    for (const cfg of [uint8, bytes]) {
      framedCount = 0;
      const first = send(cfg, body);
      expect(first.known).toBeDefined();
      // Another body of the same length: the same head, nothing framed, the payload its own.
      const second = send(cfg, Buffer.from(body).reverse());
      expect([second.head, second.known, framedCount]).toEqual([first.head, first.known, 1]);
      // Another length, version or configuration: framed anew.
      expect(send(cfg, body.subarray(1)).head).not.toBe(first.head);
      expect(send(cfg, body, { modelVersion: '3' }).head).not.toBe(first.head);
      expect(framedCount).toBe(3);
    }
    // Not cut through (slots filled in place): nothing kept.
    expect(send(uint8, body.subarray(2), { external: false }).known).toBeUndefined();
    // A limit below the kept length refuses it, kept head or not.
    expect(() => send(uint8, body, { maxInputSizeBytes: 10 })).toThrow(expect.objectContaining({ code: 'GW_ERR_DECODE_TOO_LARGE' }));
  });

  test('a model with two inputs cannot be deduced, before any byte is read', () => {
    const two = inference.ModelConfig.create({ name: 't', output: [], input: [{ name: 'A', data_type: 2, dims: [1] }, { name: 'B', data_type: 2, dims: [1] }] });
    expect(() => new RawDecoder({ ...base, config: two, bodyBytes: 4, external: false }, frame, sinkFor({ wire: [] })))
      .toThrow(expect.objectContaining({ code: 'GW_ERR_DECODE_RAW_UNDEDUCIBLE' }));
  });
});
