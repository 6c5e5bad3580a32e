// The Forwarder (cut-through): whatever the body's chunking, the call receives the head's pieces
// and the body's bytes interleaved exactly at the cuts — body bytes as views of the chunks, never
// copies — then the end; push reports back-pressure whenever a write it made asked to wait.
import type { InferRequest } from '../../../../gateway/infer/request';
import type { StreamingCall } from '../../../../gateway/upstream/infer/data-plane';
import { Forwarder } from '../../../../gateway/upstream/infer/cut-through';
import { frameInferHead, frameInferRequest } from '../../../../gateway/infer/frame-request';
import { CHUNK_SIZES, firstDifference, isViewOf, splitEvery, splits } from '../../../support/chunks';

const input = (name: string, byteSize: number) => ({ name, datatype: 'UINT8', shape: [byteSize], parameters: new Map(), byteSize });
const request: InferRequest = {
  modelName: 'm',
  modelVersion: '',
  id: '',
  parameters: new Map(),
  inputs: [input('A', 8), input('HELD', 4), input('EMPTY', 0), input('B', 300), input('PART', 10), input('C', 20000)],
  outputs: undefined,
  binaryDataOutput: true,
};
// A, B and C come whole from the body, PART's last 6 bytes do; HELD and PART's first 4 are in the head.
const external = [8, 0, 0, 300, 6, 20000];
const payloads = request.inputs.map((t, i) => Buffer.from(Array.from({ length: t.byteSize! }, (_, k) => (k * 13 + i * 7 + 1) & 0xff)));

const head = frameInferHead(request, external);
payloads.forEach((p, i) => {
  const slot = head.slots[i]!;
  p.copy(head.message, slot.offset, 0, slot.length); // what the head holds of each input
});
const body = Buffer.concat(payloads.map((p, i) => p.subarray(p.length - external[i]!)));
const wire = (() => {
  const f = frameInferRequest(request);
  payloads.forEach((p, i) => p.copy(f.message, f.slots[i]!.offset));
  return f.message;
})();

interface Recorded {
  readonly call: StreamingCall;
  /** Everything written, `end`'s piece last. */
  readonly writes: Buffer[];
  readonly ended: () => boolean;
}

/** A call that keeps what it is given, by reference; `accept(k)` answers its k-th write (0-based). */
function recordingCall(accept: (k: number) => boolean = () => true): Recorded {
  const writes: Buffer[] = [];
  let ended = false;
  let k = 0;
  const call: StreamingCall = {
    write: (p) => {
      if (ended) throw new Error('write after end');
      writes.push(p);
      return accept(k++);
    },
    end: (p) => {
      if (ended) throw new Error('ended twice');
      writes.push(p);
      ended = true;
    },
    onDrain: (resume) => resume(),
    cancel: () => undefined,
    release: () => undefined,
    response: new Promise(() => undefined),
  };
  return { call, writes, ended: () => ended };
}

/**
 * The writes as runs of head bytes and body bytes (every chunk is a view of `body`): [kind, length],
 * consecutive runs of a kind merged.
 */
function runs(writes: readonly Buffer[]): [string, number][] {
  const out: [string, number][] = [];
  for (const w of writes) {
    const kind = isViewOf(w, head.message) ? 'head' : isViewOf(w, body) ? 'body' : 'copy';
    if (w.length === 0) continue;
    const last = out[out.length - 1];
    if (last !== undefined && last[0] === kind) last[1] += w.length;
    else out.push([kind, w.length]);
  }
  return out;
}

describe('Forwarder', () => {
  test('the head leaves out what the cuts stand for', () => {
    expect(head.cuts).toEqual([
      { at: expect.any(Number), length: 8 }, { at: expect.any(Number), length: 300 },
      { at: expect.any(Number), length: 6 }, { at: expect.any(Number), length: 20000 },
    ]);
    expect(head.message.length + body.length).toBe(wire.length);
    expect(head.message.readUInt32BE(1)).toBe(wire.length - 5);
  });

  test.each(splits(body))('body %s: head pieces and body views interleave at the cuts, then the end', (_, chunks) => {
    const { call, writes, ended } = recordingCall();
    const fwd = new Forwarder(call, head.message, head.cuts);
    expect(fwd.done).toBe(false);
    // Per push: [ended before it, its answer, done after it].
    const steps = chunks.map((c) => [ended(), fwd.push(c), fwd.done]);
    expect(steps).toEqual(chunks.map((_c, i) => [false, true, i === chunks.length - 1]));
    expect(ended()).toBe(true);
    expect(fwd.forwarded).toBe(body.length);
    expect(firstDifference(Buffer.concat(writes), wire)).toBeUndefined();
    // Head bytes up to each cut, the cut's bytes from the body (by reference), and so on.
    const expected: [string, number][] = [];
    let at = 0;
    for (const cut of head.cuts) {
      expected.push(['head', cut.at - at], ['body', cut.length]);
      at = cut.at;
    }
    if (at < head.message.length) expected.push(['head', head.message.length - at]);
    expect(runs(writes)).toEqual(expected);
  });

  test.each(CHUNK_SIZES)('push(chunk, from) with %i-byte chunks after a prefix the caller kept', (n) => {
    // As for a binary-extension body: the chunk that completes the JSON header starts the binary part.
    const { call, writes } = recordingCall();
    const fwd = new Forwarder(call, head.message, head.cuts);
    const first = Buffer.concat([Buffer.from('{"json":1}'), body.subarray(0, n)]);
    fwd.push(first, 10);
    for (const c of splitEvery(body.subarray(n), n)) fwd.push(c);
    expect(fwd.done).toBe(true);
    expect(fwd.forwarded).toBe(body.length);
    expect(firstDifference(Buffer.concat(writes), wire)).toBeUndefined();
    expect(writes.some((w) => isViewOf(w, first.subarray(0, 10)))).toBe(false);
  });

  test('bytes past the last cut are neither written nor counted', () => {
    const { call, writes } = recordingCall();
    const fwd = new Forwarder(call, head.message, head.cuts);
    fwd.push(body.subarray(0, body.length - 3));
    fwd.push(Buffer.concat([body.subarray(body.length - 3), Buffer.from('surplus')]));
    fwd.push(Buffer.from('more'));
    expect(fwd.done).toBe(true);
    expect(fwd.forwarded).toBe(body.length);
    expect(firstDifference(Buffer.concat(writes), wire)).toBeUndefined();
  });

  test('no cuts: the whole head is written with the end, at once', () => {
    const whole = frameInferHead(request, []);
    const { call, writes, ended } = recordingCall();
    const fwd = new Forwarder(call, whole.message, whole.cuts);
    expect(fwd.done).toBe(true);
    expect(ended()).toBe(true);
    expect(writes).toEqual([whole.message]);
    expect(fwd.push(Buffer.from('x'))).toBe(true);
    expect(fwd.forwarded).toBe(0);
  });

  describe('back-pressure', () => {
    // For every write a push makes, a call that refuses exactly that write: the push that made it
    // returns false, every other push true.
    test.each(CHUNK_SIZES)('%i-byte chunks: push is false exactly when one of its writes was', (n) => {
      const chunks = splitEvery(body.subarray(0, 400), n).concat(splitEvery(body.subarray(400), 4096));
      // Which writes (by index) each push makes, with a call that accepts everything.
      const probe = recordingCall();
      const fwd = new Forwarder(probe.call, head.message, head.cuts);
      const before = probe.writes.length;
      const spans = chunks.map((c): [number, number] => {
        const from = probe.writes.length;
        fwd.push(c);
        return [from, probe.writes.length];
      });
      const writesInPushes = spans.filter(([a, b]) => b - a > 1).length;
      expect(writesInPushes).toBeGreaterThan(0); // some pushes write a body view and a head piece
      for (let k = before; k < probe.writes.length - 1; k++) { // the last is end(), which has no answer
        const { call } = recordingCall((w) => w !== k);
        const f = new Forwarder(call, head.message, head.cuts);
        const answers = chunks.map((c) => f.push(c));
        expect(answers).toEqual(spans.map(([a, b]) => !(k >= a && k < b)));
      }
    });

    test('a call that keeps refusing: every push that writes is false', () => {
      const { call } = recordingCall(() => false);
      const f = new Forwarder(call, head.message, head.cuts);
      for (const c of splitEvery(body, 1000)) expect(f.push(c)).toBe(false);
      expect(f.done).toBe(true);
      expect(f.push(Buffer.from('after'))).toBe(true); // nothing written
    });

    test('the end after the last cut is not a refusal', () => {
      const { call, ended } = recordingCall();
      const f = new Forwarder(call, head.message, head.cuts);
      f.push(body.subarray(0, body.length - 1));
      expect(f.push(body.subarray(body.length - 1))).toBe(true);
      expect(ended()).toBe(true);
    });
  });
});
