// decode/framed-heads.ts: a head is found again only for the same header bytes, body length,
// model name and version, and configuration; headers with ids are not kept (an empty one is); the table is bounded.
import { FramedHeads, type KnownHead } from '../../../gateway/decode/framed-heads';
import type { InferRequest } from '../../../gateway/infer/request';

const request = (over: Partial<InferRequest> = {}): InferRequest => ({
  modelName: 'm', modelVersion: '', id: undefined, parameters: new Map(), inputs: [], outputs: undefined, binaryDataOutput: false, ...over,
});
const head = (r = request(), bodyBytes = 100): Omit<KnownHead, 'bytes' | 'answer' | 'wire' | 'sent'> => ({
  bodyBytes, request: r, framed: { message: Buffer.alloc(8), slots: [], cuts: [] }, slots: [], copied: 0,
});

test('found for the same bytes, body length, model and configuration only', () => {
  const heads = new FramedHeads();
  const config = {};
  const h = Buffer.from('{"inputs":[]}xyz');
  const kept = head();
  heads.keep(config, h, 13, kept);
  expect(heads.find(config, 'm', '', Buffer.from('{"inputs":[]}abc'), 13, 100)?.request).toBe(kept.request);
  expect(heads.find(config, 'm', '', Buffer.from('{"inputs":[ ]}'), 13, 100)).toBeUndefined();
  expect(heads.find(config, 'm', '', h, 13, 101)).toBeUndefined();
  expect(heads.find(config, 'm', '1', h, 13, 100)).toBeUndefined();
  expect(heads.find(config, 'n', '', h, 13, 100)).toBeUndefined();
  expect(heads.find({}, 'm', '', h, 13, 100)).toBeUndefined();
  // The header's bytes were copied: the read they came from may be reused.
  h.fill(0);
  expect(heads.find(config, 'm', '', Buffer.from('{"inputs":[]}'), 13, 100)).toBeDefined();
});

test('a header with a request id or a sequence id is not kept', () => {
  const heads = new FramedHeads();
  const config = {};
  const h = Buffer.from('{"id":"1"}');
  heads.keep(config, h, h.length, head(request({ id: '1' })));
  heads.keep(config, h, h.length, head(request({ parameters: new Map([['sequence_id', { type: 'uint64', value: 7n }]]) })));
  expect(heads.find(config, 'm', '', h, h.length, 100)).toBeUndefined();
});

test('a header whose request id is empty (perf_analyzer sends `"id":""` with every request) is kept', () => {
  const heads = new FramedHeads();
  const config = {};
  const h = Buffer.from('{"id":"","inputs":[]}');
  const kept = head(request({ id: '' }));
  heads.keep(config, h, h.length, kept);
  expect(heads.find(config, 'm', '', h, h.length, 100)?.request).toBe(kept.request);
});

test('bounded: 4 headers per pair of lengths, the latest kept; past 64 heads a configuration starts afresh', () => {
  const heads = new FramedHeads();
  const config = {};
  const header = (i: number): Buffer => Buffer.from(`{"inputs":[${String(i).padStart(4, '0')}]}`);
  const found = (i: number, bodyBytes: number): boolean => heads.find(config, 'm', '', header(i), header(i).length, bodyBytes) !== undefined;
  for (let i = 0; i < 5; i++) heads.keep(config, header(i), header(i).length, head(request(), 100));
  expect([0, 1, 2, 3, 4].map((i) => found(i, 100))).toEqual([false, true, true, true, true]);
  // 4 heads so far; 60 more of other body lengths fill the table, the next starts it again.
  for (let b = 0; b < 60; b++) heads.keep(config, header(9), header(9).length, head(request(), b));
  expect([found(4, 100), found(9, 0), found(9, 59)]).toEqual([true, true, true]);
  heads.keep(config, header(9), header(9).length, head(request(), 60));
  expect([found(4, 100), found(9, 0), found(9, 59), found(9, 60)]).toEqual([false, false, false, true]);
});

test('the wire of a kept head: its pieces between the cuts, a place for each payload; none when a cut is empty', () => {
  const heads = new FramedHeads();
  const message = Buffer.from('0123456789');
  const keep = (cuts: { at: number; length: number }[], header: string): KnownHead =>
    heads.keep({}, Buffer.from(header), header.length, { ...head(), framed: { message, slots: [], cuts } })!;
  const k = keep([{ at: 0, length: 4 }, { at: 6, length: 2 }, { at: 6, length: 3 }], 'a');
  expect(k.sent.messageBytes).toBe(10 + 9);
  expect(k.wire!.payloadAt).toEqual([0, 2, 3]);
  expect(k.wire!.pieces.map((p) => p.toString())).toEqual(['', '012345', '', '', '6789']);
  const raw = keep([{ at: 10, length: 5 }], 'b');
  expect([raw.wire!.payloadAt, raw.wire!.pieces.map((p) => p.toString())]).toEqual([[1], ['0123456789', '']]);
  expect(keep([{ at: 3, length: 0 }], 'c').wire).toBeUndefined();
});

test('raw heads (an empty header): found by body length, 4 per configuration, pushing out only each other', () => {
  const heads = new FramedHeads();
  const config = {};
  const none = Buffer.alloc(0);
  const header = Buffer.from('{"inputs":[]}');
  heads.keep(config, header, header.length, head(request(), 100));
  for (let n = 1; n <= 5; n++) heads.keep(config, none, 0, head(request(), n));
  const raw = (n: number, version = ''): boolean => heads.find(config, 'm', version, none, 0, n) !== undefined;
  expect([1, 2, 3, 4, 5].map((n) => raw(n))).toEqual([false, true, true, true, true]);
  expect([raw(5, '1'), raw(100)]).toEqual([false, false]);
  // The binary extension's head stayed; 64 more of those start its table again, and the raw heads stay.
  expect(heads.find(config, 'm', '', header, header.length, 100)).toBeDefined();
  for (let b = 0; b < 64; b++) heads.keep(config, header, header.length, head(request(), 1000 + b));
  expect(heads.find(config, 'm', '', header, header.length, 100)).toBeUndefined();
  expect([2, 3, 4, 5].map((n) => raw(n))).toEqual([true, true, true, true]);
});
