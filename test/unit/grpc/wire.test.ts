// The protobuf wire module: varints written byte for byte as protobufjs writes them and read back
// at every length (1–10 bytes, up to 2^53 as numbers, 64 bits as bigints), tags, every wire type
// stepped over, and the readers over chunk lists with a boundary at every byte (a varint split
// between two chunks; a byte at a time through PushVarint).
import Long from 'long';
import { Writer } from 'protobufjs/minimal';
import { I32, I64, LEN, PushVarint, tagOf, VARINT, varint64, varintSize, WireReader, writeVarint } from '../../../gateway/grpc/wire';
import { splits } from '../../support/chunks';

/** protobufjs's varint of n (a uint64 field's value, exact for every integer up to 2^64 - 1). */
const reference = (n: bigint): Buffer => Buffer.from(Writer.create().uint64(Long.fromString(n.toString(), true)).ldelim().finish().subarray(1));

/** Every varint length's first and last value: 2^(7k) - 1 and 2^(7k), up to 2^53 (numbers), with 2^53 - 1. */
const NUMBERS = [0, 1, 127, 128, 255, 300, 16383, 16384, 2 ** 21 - 1, 2 ** 21, 2 ** 28 - 1, 2 ** 28, 2 ** 31 - 1, 2 ** 32,
  2 ** 35 - 1, 2 ** 35, 2 ** 42 - 1, 2 ** 42, 2 ** 49 - 1, 2 ** 49, 2 ** 53 - 1, 2 ** 53];

const written = (n: number): Buffer => {
  const b = Buffer.alloc(varintSize(n) + 2, 0xee);
  expect(writeVarint(b, 1, n)).toBe(1 + varintSize(n));
  return b.subarray(1, 1 + varintSize(n));
};

describe('writeVarint and varintSize', () => {
  test.each(NUMBERS)('%d: the bytes protobufjs writes, its size, nothing else touched', (n) => {
    const b = Buffer.alloc(varintSize(n) + 2, 0xee);
    const end = writeVarint(b, 1, n);
    expect(end - 1).toBe(varintSize(n));
    expect(b[0]).toBe(0xee);
    expect(b[end]).toBe(0xee);
    expect(b.subarray(1, end)).toEqual(reference(BigInt(n)));
  });

  test('sizes step at every multiple of seven bits', () => {
    for (let k = 1; k <= 7; k++) {
      expect(varintSize(2 ** (7 * k) - 1)).toBe(k);
      expect(varintSize(2 ** (7 * k))).toBe(k + 1);
    }
    expect(varintSize(2 ** 53)).toBe(8);
  });
});

describe('reading varints', () => {
  test.each(NUMBERS)('%d: read back whole, split at every byte, and pushed a byte at a time', (n) => {
    const b = written(n);
    for (let cut = 0; cut <= b.length; cut++) {
      const r = new WireReader([b.subarray(0, cut), b.subarray(cut)]);
      expect(r.varint()).toBe(n);
      expect(r.offset).toBe(b.length);
      expect(r.done()).toBe(true);
    }
    const p = new PushVarint();
    b.forEach((byte, i) => expect(p.add(byte)).toBe(i === b.length - 1));
    expect([p.value, p.length]).toEqual([n, b.length]);
    p.reset();
    expect(p.add(0x05)).toBe(true);
    expect(p.value).toBe(5);
    expect(varint64(b, 0, b.length)).toBe(BigInt(n));
  });

  // Nine and ten bytes: 64-bit values (an int64's negative numbers take ten). As numbers they are
  // approximate above 2^53 (a power of two stays exact); varint64 reads the 64 bits.
  test.each([
    [2n ** 56n, 9], [2n ** 63n - 1n, 9], [2n ** 63n, 10], [2n ** 64n - 1n, 10], [BigInt.asUintN(64, -1n), 10], [BigInt.asUintN(64, -(2n ** 63n)), 10],
  ])('%s: %d bytes, read whole and split at every byte', (n, length) => {
    const b = reference(n);
    expect(b.length).toBe(length);
    expect(varint64(b, 0, b.length)).toBe(n);
    for (let cut = 0; cut <= b.length; cut++) {
      const r = new WireReader([b.subarray(0, cut), b.subarray(cut)]);
      expect(r.varint()).toBe(Number(n));
      expect(r.offset).toBe(length);
    }
  });

  test('a varint that runs past the chunks, or past its bound, is -1', () => {
    expect(new WireReader([Buffer.from([0x80]), Buffer.from([0xff])]).varint()).toBe(-1);
    expect(new WireReader([]).varint()).toBe(-1);
    const eleven = Buffer.from([...Array<number>(10).fill(0x80), 0x01]);
    expect(new WireReader([eleven]).varint()).toBe(-1);
    // Tags and lengths are read with a bound of five (32 bits).
    const six = Buffer.from([0x80, 0x80, 0x80, 0x80, 0x80, 0x01]);
    expect(new WireReader([six]).varint(5)).toBe(-1);
    expect(new WireReader([six]).varint()).toBe(2 ** 35);
  });
});

describe('tags', () => {
  test('field number times eight plus the wire type, as protobufjs writes them', () => {
    expect(tagOf(6, LEN)).toBe(0x32);
    expect(tagOf(7, LEN)).toBe(0x3a);
    expect(tagOf(1, VARINT)).toBe(0x08);
    for (const [field, wire] of [[1, VARINT], [15, I64], [16, LEN], [2047, I32], [2 ** 29 - 1, LEN]] as const) {
      const expected = Buffer.from(Writer.create().uint32((field << 3 | wire) >>> 0).finish());
      expect(written(tagOf(field, wire))).toEqual(expected);
      const tag = new WireReader([expected]).varint(5);
      expect([Math.floor(tag / 8), tag % 8]).toEqual([field, wire]);
    }
  });
});

describe('stepping over fields', () => {
  // One field of each wire type, then a marker: skipValue leaves the cursor on the next tag.
  const w = Writer.create();
  w.uint32(tagOf(1, VARINT)).uint64(Long.fromString('18446744073709551615', true));
  w.uint32(tagOf(2, I64)).fixed64(Long.fromNumber(0x32323232));
  w.uint32(tagOf(3, LEN)).bytes(Buffer.alloc(300, 0x32));
  w.uint32(tagOf(4, I32)).fixed32(0x32323232);
  w.uint32(tagOf(5, VARINT)).uint32(7);
  const message = Buffer.from(w.finish());

  test.each(splits(message))('every wire type, %s', (_, chunks) => {
    const r = new WireReader(chunks);
    const seen: number[] = [];
    while (!r.done()) {
      const tag = r.varint(5);
      seen.push(tag);
      if (tag === tagOf(5, VARINT)) break;
      expect(r.skipValue(tag % 8)).toBe(true);
    }
    expect(seen).toEqual([tagOf(1, VARINT), tagOf(2, I64), tagOf(3, LEN), tagOf(4, I32), tagOf(5, VARINT)]);
    expect(r.varint()).toBe(7);
    expect(r.done()).toBe(true);
  });

  test('groups (3, 4) and wire types 6, 7 are not stepped over; a value past the chunks fails', () => {
    for (const wire of [3, 4, 6, 7]) expect(new WireReader([Buffer.alloc(16)]).skipValue(wire)).toBe(false);
    expect(new WireReader([Buffer.alloc(7)]).skipValue(I64)).toBe(false);
    expect(new WireReader([Buffer.alloc(3)]).skipValue(I32)).toBe(false);
    expect(new WireReader([Buffer.from([5, 1, 2]), Buffer.from([3, 4])]).skipValue(LEN)).toBe(false);
    expect(new WireReader([Buffer.from([5, 1, 2]), Buffer.from([3, 4, 5])]).skipValue(LEN)).toBe(true);
    expect(new WireReader([Buffer.from([0x80, 0x80])]).skipValue(VARINT)).toBe(false);
  });
});

describe('values as views of the chunks', () => {
  const a = Buffer.from([1, 2, 3]);
  const b = Buffer.from([4, 5]);
  const c = Buffer.from([6, 7, 8, 9]);

  test('views across chunk boundaries share memory with the chunks', () => {
    const r = new WireReader([a, Buffer.alloc(0), b, c]);
    r.skip(1);
    const out: Buffer[] = [];
    expect(r.views(6, out)).toBe(true);
    expect(out.map((v) => [...v])).toEqual([[2, 3], [4, 5], [6, 7]]);
    expect(out[0]!.buffer).toBe(a.buffer);
    expect(r.offset).toBe(7);
    expect(r.views(3, out)).toBe(false); // two bytes left
  });

  test('viewsSince: the bytes from a place to the cursor, whole chunks as themselves', () => {
    const r = new WireReader([a, b, c]);
    r.skip(2);
    const { chunk, at } = r;
    r.skip(5);
    const out: Buffer[] = [];
    r.viewsSince(chunk, at, out);
    expect(out.map((v) => [...v])).toEqual([[3], [4, 5], [6, 7]]);
    expect(out[1]).toBe(b);
    const none: Buffer[] = [];
    r.viewsSince(r.chunk, r.at, none);
    expect(none).toEqual([]);
  });
});
