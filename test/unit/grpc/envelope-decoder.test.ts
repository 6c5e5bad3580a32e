// The one reader of the gRPC Length-Prefixed-Message prefix (grpc/envelope.ts EnvelopeDecoder),
// which the h2 data plane's answers, the pass-through's requests and Health/Check all go through:
// fed whole and in 1-, 2-, 3- and 7-byte chunks, so that a prefix and a message break at every
// byte; the message's bytes handed on as views of the chunks, never copies.
import { EnvelopeDecoder, type EnvelopeEvents } from '../../../gateway/grpc/envelope';
import { isViewOf, splits } from '../../support/chunks';
import { grpcMessage } from '../../support/grpc-peer';

interface Seen {
  readonly prefixes: [boolean, number][];
  readonly messages: Buffer[];
  readonly views: boolean;
  readonly boundary: boolean[];
  readonly stoppedAt?: number;
}

/** Every event of a decoder fed `chunks`; `stop(n)` true stops it at the n-th prefix (0-based). */
function decode(chunks: readonly Buffer[], stop: (n: number, compressed: boolean, length: number) => boolean = () => false): Seen {
  const prefixes: [boolean, number][] = [];
  const messages: Buffer[] = [];
  let parts: Buffer[] = [];
  let views = true;
  let current: Buffer | undefined;
  const on: EnvelopeEvents = {
    prefix: (compressed, length) => {
      if (stop(prefixes.length, compressed, length)) return false;
      prefixes.push([compressed, length]);
      parts = [];
      return true;
    },
    data: (chunk, from, to) => {
      expect(from).toBeGreaterThanOrEqual(0);
      expect(to).toBeLessThanOrEqual(chunk.length);
      expect(to).toBeGreaterThan(from);
      views &&= chunk === current;
      parts.push(chunk.subarray(from, to));
    },
    end: () => { messages.push(Buffer.concat(parts)); },
  };
  const d = new EnvelopeDecoder(on);
  const boundary: boolean[] = [];
  for (const [i, c] of chunks.entries()) {
    current = c;
    if (!d.push(c)) return { prefixes, messages, views, boundary, stoppedAt: i };
    boundary.push(d.atBoundary);
  }
  return { prefixes, messages, views, boundary };
}

describe('EnvelopeDecoder', () => {
  const a = Buffer.from('first message');
  const b = Buffer.alloc(300, 7); // a length with a byte other than the last set
  const stream = Buffer.concat([grpcMessage(a), grpcMessage(new Uint8Array(0)), grpcMessage(b, true), grpcMessage(Buffer.from([1]))]);

  test.each(splits(stream))('every prefix and every message, whole, in any chunking: %s', (_label, chunks) => {
    const seen = decode(chunks);
    expect(seen.prefixes).toEqual([[false, a.length], [false, 0], [true, 300], [false, 1]]);
    expect(seen.messages).toEqual([a, Buffer.alloc(0), b, Buffer.from([1])]);
    expect(seen.views).toBe(true); // each range is of the chunk being pushed
    expect(seen.boundary.at(-1)).toBe(true);
  });

  test.each(splits(grpcMessage(a)))('between messages only at the end of one: %s', (_label, chunks) => {
    const seen = decode(chunks);
    expect(seen.boundary).toEqual(chunks.map((_, i) => i === chunks.length - 1));
  });

  test('a message is ended in the push that holds its last byte, and an empty one at its prefix', () => {
    const one = grpcMessage(a);
    const ends: number[] = [];
    let pushes = 0;
    const d = new EnvelopeDecoder({ prefix: () => true, end: () => ends.push(pushes) });
    for (const c of [one.subarray(0, 5), one.subarray(5, 6), one.subarray(6), grpcMessage(new Uint8Array(0))]) {
      pushes++;
      d.push(c);
    }
    expect(ends).toEqual([3, 4]);
  });

  test('the ranges handed on are views of the chunk, never copies', () => {
    const whole = Buffer.concat([grpcMessage(a), grpcMessage(b)]);
    const ranges: Buffer[] = [];
    new EnvelopeDecoder({ prefix: () => true, data: (c, from, to) => ranges.push(c.subarray(from, to)) }).push(whole);
    expect(ranges.map((r) => isViewOf(r, whole))).toEqual([true, true]);
    expect(ranges.map((r) => r.byteOffset - whole.byteOffset)).toEqual([5, 5 + a.length + 5]);
  });

  test('the length is read as 4 bytes big-endian, up to 2^32 - 1, before any of the message', () => {
    const prefix = Buffer.from([0, 0xff, 0xff, 0xff, 0xff]);
    const seen = decode([prefix.subarray(0, 2), prefix.subarray(2), Buffer.from([1, 2, 3])]);
    expect(seen.prefixes).toEqual([[false, 2 ** 32 - 1]]);
    expect(seen.boundary).toEqual([false, false, false]);
  });

  test.each(splits(stream))('prefix() false stops it: nothing more is read, later pushes are refused: %s', (_label, chunks) => {
    const seen = decode(chunks, (n) => n === 2);
    expect(seen.prefixes).toEqual([[false, a.length], [false, 0]]);
    expect(seen.messages).toEqual([a, Buffer.alloc(0)]);
    expect(seen.stoppedAt).toBeDefined();
  });

  test('a stopped decoder stays stopped', () => {
    const d = new EnvelopeDecoder({ prefix: () => false });
    expect(d.push(grpcMessage(a))).toBe(false);
    expect(d.push(grpcMessage(a))).toBe(false);
  });

  test('an empty chunk changes nothing', () => {
    const d = new EnvelopeDecoder({ prefix: () => true });
    expect(d.push(Buffer.alloc(0))).toBe(true);
    expect(d.atBoundary).toBe(true);
    d.push(Buffer.from([0, 0]));
    expect(d.push(Buffer.alloc(0))).toBe(true);
    expect(d.atBoundary).toBe(false);
  });
});
