// The gRPC message envelope as it passes (gRPC over HTTP/2: Length-Prefixed-Message = a 1-byte
// compressed flag, a 4-byte big-endian length, then the message), read without keeping or copying
// the message: the pass-through only needs each declared length (to refuse one past the byte
// budget before any of it is forwarded) and where each message's bytes begin (to read a model
// name). Like connect-es' envelope decoder, the declared length is checked before anything else;
// unlike it, nothing is allocated for the message: the chunks go on as they came.

/** What a chunk held. */
export interface EnvelopeStep {
  /** A message declared more bytes than the bound: its length (the chunk should not be forwarded). */
  readonly tooLarge?: number;
}

/**
 * Push scanner over one direction of a call. `onMessage(chunk, at, length, compressed)` is told of
 * each message whose prefix has passed, with where its bytes begin: `chunk[at]` (`at` is
 * chunk.length when the prefix ended the chunk).
 */
export class EnvelopeScanner {
  /** Bytes of the current message still to pass; -1 while reading a prefix. */
  #left = -1;
  /** The prefix read so far (a prefix may be split across chunks: 5 bytes kept at most). */
  readonly #prefix = Buffer.alloc(5);
  #prefixBytes = 0;
  /** Messages whose prefix has passed. */
  messages = 0;

  constructor(private readonly maxBytes: number, private readonly onMessage?: (chunk: Buffer, at: number, length: number, compressed: boolean) => void) {}

  push(chunk: Buffer): EnvelopeStep {
    let at = 0;
    while (at < chunk.length) {
      if (this.#left > 0) {
        const take = Math.min(this.#left, chunk.length - at);
        this.#left -= take;
        at += take;
        if (this.#left === 0) this.#left = -1;
        continue;
      }
      const take = Math.min(5 - this.#prefixBytes, chunk.length - at);
      for (let i = 0; i < take; i++) this.#prefix[this.#prefixBytes + i] = chunk[at + i]!;
      this.#prefixBytes += take;
      at += take;
      if (this.#prefixBytes < 5) break;
      this.#prefixBytes = 0;
      const length = this.#prefix.readUInt32BE(1);
      if (length > this.maxBytes) return { tooLarge: length };
      this.messages++;
      this.onMessage?.(chunk, at, length, this.#prefix[0] !== 0);
      this.#left = length === 0 ? -1 : length;
    }
    return {};
  }
}

/**
 * The string in field 1 of a protobuf message whose bytes begin at `chunk[at]` (`length` bytes in
 * all), when it is the message's first field and lies whole in this chunk; '' when the message
 * does not start with field 1 (proto3 omits an empty string); undefined when it cannot be told
 * from this chunk. Field 1 is the model's name in every request of Triton's that names one
 * (ModelInferRequest.model_name, ModelMetadata/Ready/Config/StatisticsRequest.name).
 */
export function firstStringField(chunk: Buffer, at: number, length: number): string | undefined {
  if (length === 0) return '';
  if (at >= chunk.length) return undefined;
  if (chunk[at] !== 0x0a) return ''; // tag 1, wire type 2 (length-delimited)
  const end = Math.min(chunk.length, at + length);
  const n = varint(chunk, at + 1, end);
  if (n === undefined || n.next + n.value > end) return undefined;
  return chunk.toString('utf8', n.next, n.next + n.value);
}

/**
 * A varint at chunk[i] read as a number (tags and lengths: exact up to 2^53; a longer value, up to
 * the 10 bytes of a negative int64, is only skipped), and where the next byte is; undefined when
 * it runs past `end` or past 10 bytes.
 */
function varint(chunk: Buffer, i: number, end: number): { value: number; next: number } | undefined {
  let v = 0;
  for (let shift = 0; i < end && shift < 70; shift += 7) {
    const b = chunk[i++]!;
    v += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) return { value: v, next: i };
  }
  return undefined;
}

/** A varint at chunk[i] as the 64 bits it carries (an int64 or uint64 field), and where the next byte is. */
function varint64(chunk: Buffer, i: number, end: number): { value: bigint; next: number } | undefined {
  let v = 0n;
  for (let shift = 0n; i < end && shift < 70n; shift += 7n) {
    const b = chunk[i++]!;
    v |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) return { value: v, next: i };
  }
  return undefined;
}

/**
 * The sequence key (routes/steps.ts sequenceKey's form: model, then `n:` and the number or `s:`
 * and the string) of a ModelInferRequest whose bytes begin at `chunk[at]`, from its model_name
 * (field 1) and its `sequence_id` parameter (field 4, map<string, InferParameter>: int64_param 2,
 * string_param 3, uint64_param 5). Encoders write fields in number order, so these come before the
 * inputs: all the chunk must hold. Undefined when the message has no sequence (or an id of 0 or
 * ""), or when that cannot be told from this chunk.
 */
export function sequenceKeyOf(chunk: Buffer, at: number, length: number): string | undefined {
  const end = Math.min(chunk.length, at + length);
  let model = '';
  for (let i = at; i < end;) {
    const f = field(chunk, i, end);
    if (f === undefined || f.number > 4) return undefined; // past the parameters: none names a sequence
    i = f.next;
    if (f.number === 1 && f.wire === 2) model = chunk.toString('utf8', f.from, f.next);
    if (f.number !== 4 || f.wire !== 2) continue;
    // A parameters entry: key (1), value (2).
    let key: string | undefined;
    let value: string | undefined;
    for (let j = f.from; j < f.next;) {
      const e = field(chunk, j, f.next);
      if (e === undefined || e.wire !== 2) return undefined;
      j = e.next;
      if (e.number === 1) key = chunk.toString('utf8', e.from, e.next);
      else if (e.number === 2) value = paramValue(chunk, e.from, e.next);
    }
    if (key === 'sequence_id') return value === undefined ? undefined : `${model}\u0000${value}`;
  }
  return undefined;
}

/**
 * The field at chunk[i]: its number, wire type, where its value begins and where the next field
 * does; undefined when it runs past `end` or has a wire type other than varint (0) or
 * length-delimited (2).
 */
function field(chunk: Buffer, i: number, end: number): { number: number; wire: number; from: number; next: number } | undefined {
  const tag = varint(chunk, i, end);
  if (tag === undefined) return undefined;
  const wire = tag.value % 8;
  const number = Math.floor(tag.value / 8);
  if (wire === 0) {
    const v = varint(chunk, tag.next, end);
    return v === undefined ? undefined : { number, wire, from: tag.next, next: v.next };
  }
  if (wire !== 2) return undefined;
  const len = varint(chunk, tag.next, end);
  if (len === undefined || len.next + len.value > end) return undefined;
  return { number, wire, from: len.next, next: len.next + len.value };
}

/** An InferParameter's sequence id in the key's form (`n:`/`s:`), or undefined for 0, "" or another kind. */
function paramValue(chunk: Buffer, from: number, end: number): string | undefined {
  let out: string | undefined;
  for (let j = from; j < end;) {
    const f = field(chunk, j, end);
    if (f === undefined) return undefined;
    j = f.next;
    if (f.wire === 0 && (f.number === 2 || f.number === 5)) {
      const v = varint64(chunk, f.from, f.next)!.value;
      out = v === 0n ? undefined : `n:${f.number === 2 ? BigInt.asIntN(64, v) : BigInt.asUintN(64, v)}`;
    } else if (f.wire === 2 && f.number === 3) {
      out = f.next === f.from ? undefined : `s:${chunk.toString('utf8', f.from, f.next)}`;
    }
  }
  return out;
}
