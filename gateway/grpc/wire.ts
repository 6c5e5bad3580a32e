// The protobuf wire format (the protobuf encoding guide, "Base 128 Varints" and "Message
// Structure"), written once for every part of the gateway that reads or writes protobuf by hand:
// the ModelInferRequest framer and the ModelInferResponse reader (infer/), the pass-through's
// request reader (grpc/fields.ts). A field is a tag — its number times 8 plus its wire type — as a
// varint, then its value: a varint, 8 or 4 bytes, or a varint length and that many bytes.
//
// Numbers are JavaScript numbers: exact up to 2^53, which every length, tag and size here is
// (a gRPC message is at most 2^31 - 1 bytes). A varint may take ten bytes (a 64-bit value);
// `varint64` reads one whole as the bigint it carries.

/** Wire types (the protobuf encoding guide): groups (3, 4) are not read here. */
export const VARINT = 0;
export const I64 = 1;
export const LEN = 2;
export const I32 = 5;

/** The tag of field `field` with wire type `wire`. */
export const tagOf = (field: number, wire: number): number => field * 8 + wire;

/** The longest varint: ten bytes carry 64 bits. */
const MAX_VARINT_BYTES = 10;

/** Bytes the varint of n takes (n an integer, 0 ≤ n ≤ 2^53). */
export function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** Writes n (an integer, 0 ≤ n ≤ 2^53) as a varint at buf[at]; returns where it ends. */
export function writeVarint(buf: Uint8Array, at: number, n: number): number {
  while (n >= 0x80) {
    buf[at++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[at++] = n;
  return at;
}

/** A varint at b[i, end) as the 64 bits it carries (an int64 or uint64 field); bytes past ten are not read. */
export function varint64(b: Uint8Array, i: number, end: number): bigint {
  let v = 0n;
  for (let shift = 0n; i < end && shift < 70n; shift += 7n) {
    const byte = b[i++]!;
    v |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) break;
  }
  return BigInt.asUintN(64, v);
}

/**
 * A varint pushed a byte at a time, for readers that see a message as it passes (a tag or a length
 * may be split between two pieces): `add` each byte until it says the varint ended, read `value`,
 * then `reset`.
 */
export class PushVarint {
  value = 0;
  /** Bytes added since the last reset. */
  length = 0;
  #scale = 1;

  /** True when `byte` was the varint's last. */
  add(byte: number): boolean {
    this.value += (byte & 0x7f) * this.#scale;
    this.#scale *= 128;
    this.length++;
    return byte < 0x80;
  }

  reset(): void {
    this.value = 0;
    this.length = 0;
    this.#scale = 1;
  }
}

/**
 * A cursor over a message held in a list of chunks (as the DATA frames brought it, or one
 * buffer): varints read across chunk boundaries, values taken as views of the chunks (no copy) or
 * skipped. What runs past the last chunk fails (-1, false) and leaves the cursor where it stopped.
 */
export class WireReader {
  /** The chunk the cursor is in, and its offset there. */
  chunk = 0;
  at = 0;
  /** Bytes of the chunks before `chunk`. */
  #before = 0;
  constructor(readonly chunks: readonly Buffer[]) {}

  /** Bytes read so far. */
  get offset(): number {
    return this.#before + this.at;
  }

  /** True when every byte was read (the cursor then stands past the last chunk). */
  done(): boolean {
    const { chunks } = this;
    while (this.chunk < chunks.length && this.at >= chunks[this.chunk]!.length) {
      this.#before += chunks[this.chunk]!.length;
      this.chunk++;
      this.at = 0;
    }
    return this.chunk >= chunks.length;
  }

  /** The next varint (at most `max` bytes); -1 when the chunks end inside it or it is longer. */
  varint(max = MAX_VARINT_BYTES): number {
    let value = 0;
    let scale = 1;
    for (let n = 0; n < max; n++) {
      if (this.done()) return -1;
      const byte = this.chunks[this.chunk]![this.at++]!;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
      scale *= 128;
    }
    return -1;
  }

  /** Appends the next n bytes to `out` as views of the chunks; false when the chunks end first. */
  views(n: number, out: Buffer[]): boolean {
    return this.#advance(n, out);
  }

  /** Steps over the next n bytes; false when the chunks end first. */
  skip(n: number): boolean {
    return this.#advance(n, undefined);
  }

  /**
   * Steps over a field's value of wire type `wire` (its tag read): a varint (at most ten bytes),
   * fixed 8 or 4 bytes, or a length (at most `maxLength` bytes) and its bytes. False when the
   * chunks end first, the value is malformed, or the wire type is a group's or none.
   */
  skipValue(wire: number, maxLength = MAX_VARINT_BYTES): boolean {
    switch (wire) {
      case VARINT: return this.varint() >= 0;
      case I64: return this.skip(8);
      case I32: return this.skip(4);
      case LEN: {
        const n = this.varint(maxLength);
        return n >= 0 && this.skip(n);
      }
      default: return false;
    }
  }

  /** Appends the bytes from chunk `chunk`, offset `at`, up to the cursor to `out`, as views. */
  viewsSince(chunk: number, at: number, out: Buffer[]): void {
    for (let k = chunk; k <= this.chunk && k < this.chunks.length; k++) {
      const c = this.chunks[k]!;
      const from = k === chunk ? at : 0;
      const to = k === this.chunk ? this.at : c.length;
      if (to > from) out.push(from === 0 && to === c.length ? c : c.subarray(from, to));
    }
  }

  #advance(n: number, out: Buffer[] | undefined): boolean {
    let left = n;
    while (left > 0) {
      if (this.done()) return false;
      const c = this.chunks[this.chunk]!;
      const take = Math.min(left, c.length - this.at);
      out?.push(c.subarray(this.at, this.at + take));
      this.at += take;
      left -= take;
    }
    return true;
  }
}
