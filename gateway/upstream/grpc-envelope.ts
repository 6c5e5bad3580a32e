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
  let n = 0;
  let shift = 0;
  let i = at + 1;
  for (;;) {
    if (i >= chunk.length || shift > 28) return undefined;
    const b = chunk[i++]!;
    n += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) break;
    shift += 7;
  }
  if (i + n > chunk.length || i + n > at + length) return undefined;
  return chunk.toString('utf8', i, i + n);
}

/** A varint at chunk[i]: its value and where the next byte is; undefined past `end`. */
function varint(chunk: Buffer, i: number, end: number): { value: bigint; next: number } | undefined {
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
  let i = at;
  while (i < end) {
    const tag = varint(chunk, i, end);
    if (tag === undefined) return undefined;
    const field = Number(tag.value >> 3n);
    const wire = Number(tag.value & 7n);
    if (field > 4) return undefined; // past the parameters: none names a sequence
    if (wire === 0) {
      const v = varint(chunk, tag.next, end);
      if (v === undefined) return undefined;
      i = v.next;
      continue;
    }
    if (wire !== 2) return undefined;
    const len = varint(chunk, tag.next, end);
    if (len === undefined || len.next + Number(len.value) > end) return undefined;
    const from = len.next;
    i = from + Number(len.value);
    if (field === 1) model = chunk.toString('utf8', from, i);
    if (field !== 4) continue;
    // A parameters entry: key (1), value (2).
    let key: string | undefined;
    let value: string | undefined;
    for (let j = from; j < i;) {
      const t = varint(chunk, j, i);
      if (t === undefined || (t.value & 7n) !== 2n) return undefined;
      const l = varint(chunk, t.next, i);
      if (l === undefined) return undefined;
      const s = l.next;
      j = s + Number(l.value);
      if (t.value >> 3n === 1n) key = chunk.toString('utf8', s, j);
      else if (t.value >> 3n === 2n) value = paramValue(chunk, s, j);
    }
    if (key === 'sequence_id') return value === undefined ? undefined : `${model}\u0000${value}`;
  }
  return undefined;
}

/** An InferParameter's sequence id in the key's form (`n:`/`s:`), or undefined for 0, "" or another kind. */
function paramValue(chunk: Buffer, from: number, end: number): string | undefined {
  let out: string | undefined;
  for (let j = from; j < end;) {
    const t = varint(chunk, j, end);
    if (t === undefined) return undefined;
    const field = t.value >> 3n;
    if ((t.value & 7n) === 0n) {
      const v = varint(chunk, t.next, end);
      if (v === undefined) return undefined;
      j = v.next;
      if (field === 2n) out = v.value === 0n ? undefined : `n:${BigInt.asIntN(64, v.value)}`;
      else if (field === 5n) out = v.value === 0n ? undefined : `n:${BigInt.asUintN(64, v.value)}`;
    } else if ((t.value & 7n) === 2n) {
      const l = varint(chunk, t.next, end);
      if (l === undefined) return undefined;
      j = l.next + Number(l.value);
      if (field === 3n) out = j === l.next ? undefined : `s:${chunk.toString('utf8', l.next, j)}`;
    } else {
      return undefined;
    }
  }
  return out;
}
