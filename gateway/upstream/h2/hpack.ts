// HPACK (RFC 7541) for the gateway's own HTTP/2 client: a decoder with its dynamic table, and the
// encoding of header blocks that never index — every field an indexed static entry or a literal
// without indexing (§6.2.2), strings sent as they are (no Huffman), so the peer's table is never
// touched and a block may be built once and reused.
import { huffmanDecode } from './huffman';

/** The static table, RFC 7541 Appendix A: entry i + 1 is STATIC[i]. */
const STATIC: readonly (readonly [string, string])[] = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''], ['etag', ''],
  ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''], ['if-modified-since', ''],
  ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''], ['last-modified', ''], ['link', ''],
  ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''], ['proxy-authorization', ''], ['range', ''],
  ['referer', ''], ['refresh', ''], ['retry-after', ''], ['server', ''], ['set-cookie', ''],
  ['strict-transport-security', ''], ['transfer-encoding', ''], ['user-agent', ''], ['vary', ''], ['via', ''],
  ['www-authenticate', ''],
];

/** A table entry's size: its name's and value's octets and 32 (RFC 7541 §4.1). */
const entrySize = (name: string, value: string): number => name.length + value.length + 32;

/** Where the decoded fields of a header block go, one call per field. */
export interface FieldSink {
  field(name: string, value: string): void;
}

/** An integer with an N-bit prefix (RFC 7541 §5.1); `value` is -1 when the block is malformed. */
interface Int { value: number; at: number }

/**
 * The decoding side of one connection: its dynamic table lives as long as the connection, so every
 * header block the peer sends must go through decode(), in order, whatever becomes of its stream.
 */
export class HpackDecoder {
  /** The dynamic table, oldest first from #first; the newest is index 62 (§2.3.3). */
  #names: string[] = [];
  #values: string[] = [];
  #first = 0;
  #size = 0;
  #max: number;
  readonly #int: Int = { value: 0, at: 0 };
  #scratch = Buffer.allocUnsafe(256);
  /** Counts the changes to the dynamic table: a block decoded twice under one count reads the same fields. */
  #generation = 0;

  /** `limit`: the SETTINGS_HEADER_TABLE_SIZE we sent, which bounds the peer's table size updates. */
  constructor(readonly limit = 4096) {
    this.#max = limit;
  }

  /** The dynamic table's size (§4.1), for tests. */
  get size(): number {
    return this.#size;
  }

  /**
   * Changes to the dynamic table so far (an entry added, a size update). Where a block left it
   * unchanged, the same bytes decoded again under the same count give the same fields.
   */
  get generation(): number {
    return this.#generation;
  }

  /**
   * Decodes a whole header block into `sink`. Returns undefined, 'compression' for a malformed block
   * (a connection error, RFC 9113 §4.3) or 'too large' when its fields exceed `maxListSize` (§4.1
   * sizes; the fields past the bound are not delivered, but the block is still read to its end so the
   * table stays in step with the peer's).
   */
  decode(block: Uint8Array, sink: FieldSink, maxListSize = Infinity): 'compression' | 'too large' | undefined {
    let at = 0;
    let listSize = 0;
    let fields = 0;
    while (at < block.length) {
      const b = block[at]!;
      let name: string | undefined;
      let value: string | undefined;
      if (b & 0x80) { // indexed field (§6.1)
        if (!this.#integer(block, at, 7)) return 'compression';
        at = this.#int.at;
        const i = this.#int.value;
        name = this.#name(i);
        if (name === undefined) return 'compression';
        value = i <= STATIC.length ? STATIC[i - 1]![1] : this.#values[this.#names.length - 1 - (i - STATIC.length - 1)]!;
      } else if ((b & 0xe0) === 0x20) { // dynamic table size update (§6.3): only before the first field
        if (fields > 0 || !this.#integer(block, at, 5) || this.#int.value > this.limit) return 'compression';
        at = this.#int.at;
        this.#max = this.#int.value;
        this.#generation++;
        this.#evict(0);
        continue;
      } else { // literal: with incremental indexing (6-bit prefix), without or never indexed (4-bit)
        const indexing = (b & 0xc0) === 0x40;
        if (!this.#integer(block, at, indexing ? 6 : 4)) return 'compression';
        at = this.#int.at;
        if (this.#int.value === 0) {
          name = this.#string(block, at);
          at = this.#int.at;
        } else {
          name = this.#name(this.#int.value);
        }
        if (name === undefined) return 'compression';
        value = this.#string(block, at);
        if (value === undefined) return 'compression';
        at = this.#int.at;
        if (indexing) this.#add(name, value);
      }
      fields++;
      listSize += entrySize(name, value);
      if (listSize <= maxListSize) sink.field(name, value);
    }
    return listSize > maxListSize ? 'too large' : undefined;
  }

  /** Reads an integer at `at` with an N-bit prefix into #int; false if it runs past the block or 2^31. */
  #integer(block: Uint8Array, at: number, bits: number): boolean {
    const mask = (1 << bits) - 1;
    let v = block[at++]! & mask;
    if (v === mask) {
      let shift = 0;
      let b: number;
      do {
        if (at >= block.length || shift > 28) return false;
        b = block[at++]!;
        v += (b & 0x7f) * 2 ** shift;
        shift += 7;
      } while (b & 0x80);
      if (v > 0x7fffffff) return false;
    }
    this.#int.value = v;
    this.#int.at = at;
    return true;
  }

  /** A string literal (§5.2) at `at`, raw or Huffman-coded; #int.at is set past it. */
  #string(block: Uint8Array, at: number): string | undefined {
    if (at >= block.length) return undefined;
    const huffman = (block[at]! & 0x80) !== 0;
    if (!this.#integer(block, at, 7)) return undefined;
    const from = this.#int.at;
    const to = from + this.#int.value;
    if (to > block.length) return undefined;
    this.#int.at = to;
    const buf = Buffer.isBuffer(block) ? block : Buffer.from(block.buffer, block.byteOffset, block.byteLength);
    if (!huffman) return buf.toString('latin1', from, to);
    // The shortest code is 5 bits: at most 8/5 symbols per octet.
    const need = Math.ceil(((to - from) * 8) / 5);
    if (this.#scratch.length < need) this.#scratch = Buffer.allocUnsafe(need);
    const n = huffmanDecode(block, from, to, this.#scratch);
    return n === undefined ? undefined : this.#scratch.toString('latin1', 0, n);
  }

  /** The name of entry `i` of the static or dynamic table, or undefined past their end (§2.3.3). */
  #name(i: number): string | undefined {
    if (i === 0) return undefined;
    if (i <= STATIC.length) return STATIC[i - 1]![0];
    const d = i - STATIC.length - 1;
    const count = this.#names.length - this.#first;
    return d < count ? this.#names[this.#names.length - 1 - d] : undefined;
  }

  /** Adds an entry, evicting the oldest first; one larger than the table empties it (§4.4). */
  #add(name: string, value: string): void {
    this.#generation++;
    const size = entrySize(name, value);
    this.#evict(size);
    if (size > this.#max) return;
    this.#names.push(name);
    this.#values.push(value);
    this.#size += size;
  }

  /** Evicts oldest entries until `room` more octets fit in the table's maximum size (§4.3). */
  #evict(room: number): void {
    while (this.#size + room > this.#max && this.#first < this.#names.length) {
      this.#size -= entrySize(this.#names[this.#first]!, this.#values[this.#first]!);
      this.#first++;
    }
    if (this.#first > 32 && this.#first * 2 > this.#names.length) {
      this.#names = this.#names.slice(this.#first);
      this.#values = this.#values.slice(this.#first);
      this.#first = 0;
    }
  }
}

/** Writes an integer with an N-bit prefix (RFC 7541 §5.1) whose first octet carries `flags`; returns the end. */
export function writeInteger(out: Uint8Array, at: number, value: number, bits: number, flags: number): number {
  const mask = (1 << bits) - 1;
  if (value < mask) {
    out[at++] = flags | value;
    return at;
  }
  out[at++] = flags | mask;
  value -= mask;
  while (value >= 0x80) {
    out[at++] = (value & 0x7f) | 0x80;
    value = Math.floor(value / 128);
  }
  out[at++] = value;
  return at;
}

/**
 * The static table's fields by name, then value (a full match is looked up without a key string
 * per field), and the first entry of each name; 1-based, RFC 7541 Appendix A.
 */
const STATIC_FULL = new Map<string, Map<string, number>>();
const STATIC_NAME = new Map<string, number>();
STATIC.forEach(([n, v], i) => {
  if (!STATIC_NAME.has(n)) STATIC_NAME.set(n, i + 1);
  let values = STATIC_FULL.get(n);
  if (values === undefined) STATIC_FULL.set(n, values = new Map<string, number>());
  if (!values.has(v)) values.set(v, i + 1);
});

/** Writes a string literal without Huffman (§5.2) at `at`; returns its end. */
function writeString(out: Buffer, at: number, s: string): number {
  at = writeInteger(out, at, s.length, 7, 0); // latin1: one octet a character
  return at + out.write(s, at, 'latin1');
}

/**
 * Header blocks that leave the peer's table alone: a field of the static table is indexed, any
 * other is a literal without indexing (§6.2.2), by the static name's index when there is one.
 * Written into one buffer of the writer's, reused: a block (end()) is a view valid until the next
 * begin(), so its reader must have copied it by then, as H2Connection.request does.
 */
export class BlockWriter {
  #out = Buffer.allocUnsafe(512);
  #at = 0;

  begin(): void {
    this.#at = 0;
  }

  field(name: string, value: string): void {
    this.#room(name.length + value.length + 16); // two 5-octet lengths, an index
    this.#at = writeField(this.#out, this.#at, name, value);
  }

  /** Fields already encoded (another writer's block). */
  bytes(block: Uint8Array): void {
    this.#room(block.length);
    this.#out.set(block, this.#at);
    this.#at += block.length;
  }

  #room(n: number): void {
    const need = this.#at + n;
    if (need > this.#out.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, 2 * this.#out.length));
      this.#out.copy(grown, 0, 0, this.#at);
      this.#out = grown;
    }
  }

  end(): Buffer {
    return this.#out.subarray(0, this.#at);
  }
}

/** A block of `fields` in a buffer of its own (tests, and blocks kept). */
export function headerBlock(fields: readonly (readonly [string, string])[]): Buffer {
  const w = new BlockWriter();
  for (const [name, value] of fields) w.field(name, value);
  return Buffer.from(w.end());
}

function writeField(out: Buffer, at: number, name: string, value: string): number {
  const full = STATIC_FULL.get(name)?.get(value);
  if (full !== undefined) return writeInteger(out, at, full, 7, 0x80);
  const named = STATIC_NAME.get(name);
  if (named !== undefined) return writeString(out, writeInteger(out, at, named, 4, 0), value);
  out[at++] = 0;
  return writeString(out, writeString(out, at, name), value);
}

/** One field as a literal without indexing (§6.2.2). */
export function literalField(name: string, value: string): Buffer {
  const out = Buffer.allocUnsafe(name.length + value.length + 16);
  const named = STATIC_NAME.get(name);
  if (named !== undefined) return out.subarray(0, writeString(out, writeInteger(out, 0, named, 4, 0), value));
  out[0] = 0;
  return out.subarray(0, writeString(out, writeString(out, 1, name), value));
}
