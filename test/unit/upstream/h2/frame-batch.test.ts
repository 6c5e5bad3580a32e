// upstream/h2/frames.ts FrameBatch: what a connection writes in one batch goes to the socket as few
// writes, in order, and nothing handed on is written over.
import {
  BATCH_COPY_BYTES, DATA, END_STREAM, FrameBatch, FrameReader, type FrameSink, HEADERS, RST_STREAM,
} from '../../../../gateway/upstream/h2/frames';

/** A target that keeps each write as given (by reference), and a copy of it as it was then. */
class Target {
  readonly writes: Buffer[] = [];
  readonly copies: Buffer[] = [];
  write(chunk: Buffer): boolean {
    this.writes.push(chunk);
    this.copies.push(Buffer.from(chunk));
    return true;
  }
}

/** The frames in `octets`: type, flags, stream and payload. */
function framesOf(octets: Buffer): { type: number; flags: number; stream: number; payload: Buffer }[] {
  const out: { type: number; flags: number; stream: number; payload: Buffer }[] = [];
  let cur: { type: number; flags: number; stream: number; payload: Buffer[] } | undefined;
  const sink: FrameSink = {
    frameStart: (_length, type, flags, stream) => { cur = { type, flags, stream, payload: [] }; return true; },
    dataPiece: (chunk, from, to) => { cur!.payload.push(Buffer.from(chunk.subarray(from, to))); },
    frameEnd: (payload) => {
      out.push({ type: cur!.type, flags: cur!.flags, stream: cur!.stream, payload: payload ?? Buffer.concat(cur!.payload) });
      return true;
    },
  };
  new FrameReader(sink).push(octets);
  return out;
}

describe('FrameBatch', () => {
  test('frames and small payloads of a batch are one write, in order', () => {
    const t = new Target();
    const b = new FrameBatch(t);
    const block = Buffer.from([0x88, 0x5f, 0x10]);
    b.frame(HEADERS, 0x4, 1, block);
    b.header(3, DATA, 0, 1);
    b.push(Buffer.from('abc'));
    b.frame(HEADERS, 0x5, 1, Buffer.from([0xff, 0x88, 0x40]), 1, 2);
    expect(t.writes).toHaveLength(0);
    expect(b.gathered).toBe(9 + 3 + 9 + 3 + 9 + 1);
    b.flush();
    expect(t.writes).toHaveLength(1);
    expect(b.gathered).toBe(0);
    const frames = framesOf(t.writes[0]!);
    expect(frames.map((f) => [f.type, f.flags, f.stream, f.payload.toString('hex')])).toEqual([
      [HEADERS, 0x4, 1, '885f10'], [DATA, 0, 1, Buffer.from('abc').toString('hex')], [HEADERS, 0x5, 1, '88'],
    ]);
    b.flush();
    expect(t.writes).toHaveLength(1); // nothing gathered: no write
  });

  test('a large payload goes by reference, after what was gathered before it', () => {
    const t = new Target();
    const b = new FrameBatch(t);
    const big = Buffer.alloc(BATCH_COPY_BYTES + 1, 7);
    b.header(big.length, DATA, END_STREAM, 3);
    b.push(big);
    b.frame(RST_STREAM, 0, 5, Buffer.from([0, 0, 0, 8]));
    b.flush();
    expect(t.writes).toHaveLength(3);
    expect(t.writes[1]).toBe(big);
    const frames = framesOf(Buffer.concat(t.writes));
    expect(frames.map((f) => [f.type, f.flags, f.stream, f.payload.length])).toEqual([[DATA, END_STREAM, 3, big.length], [RST_STREAM, 0, 5, 4]]);
  });

  test('what was handed on is never written over, across many batches and a full slab', () => {
    const t = new Target();
    const b = new FrameBatch(t);
    for (let i = 0; i < 3000; i++) {
      const payload = Buffer.alloc(1 + (i % BATCH_COPY_BYTES), i & 0xff);
      b.header(payload.length, DATA, 0, 2 * i + 1);
      b.push(payload);
      if (i % 3 === 0) b.flush();
    }
    b.flush();
    // Every write still holds what it held when it was made.
    t.writes.forEach((w, i) => expect(w.equals(t.copies[i]!)).toBe(true));
    const frames = framesOf(Buffer.concat(t.writes));
    expect(frames).toHaveLength(3000);
    frames.forEach((f, i) => {
      expect(f.stream).toBe(2 * i + 1);
      expect(f.payload.length).toBe(1 + (i % BATCH_COPY_BYTES));
      expect(f.payload.every((x) => x === (i & 0xff))).toBe(true);
    });
  });

  test('a frame larger than the slab gets a slab of its own', () => {
    const t = new Target();
    const b = new FrameBatch(t);
    const block = Buffer.alloc(40_000, 1);
    b.header(0, DATA, END_STREAM, 1);
    b.frame(HEADERS, 0x4, 3, block);
    b.flush();
    // The first frame's run went out when the second needed a slab of its own.
    expect(t.writes).toHaveLength(2);
    const frames = framesOf(Buffer.concat(t.writes));
    expect(frames.map((f) => [f.type, f.flags, f.stream, f.payload.length])).toEqual([[DATA, END_STREAM, 1, 0], [HEADERS, 0x4, 3, 40_000]]);
    expect(frames[1]!.payload.equals(block)).toBe(true);
  });
});
