// ModelInferResponse read straight from the received DATA chunks, the one place that splits an
// answer into its header fields and its outputs' bytes: whole (readInferResponse), or as it arrives
// (nextOutput for the head, OutputEntries after it: a binary answer streamed, docs/cut-through.md).
// The header fields (model_name, model_version, id, parameters, outputs — small) are read by hand
// as protobufjs would decode them (answer-fields.ts), each where it lies in its chunk; every
// raw_output_contents entry (field 6, the payload) stays a list of views of the received chunks, so
// a binary answer reaches the client without a user-space copy (docs/architecture.md#answers-as-views).
import { GatewayError, isGatewayError } from '../errors';
import { I32, I64, LEN, PushVarint, tagOf, VARINT, WireReader } from '../grpc/wire';
import { NO_DATA, newResponse, type OutputDraft, readHeaderFields, type ResponseDraft } from './answer-fields';
import { gather } from './gather';
import type { InferResponse } from './response';

/** raw_output_contents: field 6, length-delimited. */
const RAW_OUTPUT_CONTENTS_TAG = tagOf(6, LEN);

/** nextOutput's answers other than an entry's length. */
export const END = -1;
export const TRUNCATED = -2;
export const MALFORMED = -3;

/**
 * Reads fields from the cursor up to the next raw_output_contents entry: every other field goes to
 * `header` (views, tag included), or is read into the response `header` (throwing what protobufjs
 * throws). Returns the entry's length, the cursor at its first byte; END
 * when the chunks end between fields; TRUNCATED when they end inside one (or a varint is longer
 * than ten bytes); MALFORMED for a wire type that is not read here (a group; 6, 7).
 */
export function nextOutput(r: WireReader, header: Buffer[] | ResponseDraft): number {
  while (!r.done()) {
    const { chunk, at } = r;
    const tag = r.varint();
    if (tag < 0) return TRUNCATED;
    if (tag === RAW_OUTPUT_CONTENTS_TAG) {
      const length = r.varint();
      return length < 0 ? TRUNCATED : length;
    }
    const wire = tag % 8;
    if (wire !== VARINT && wire !== I64 && wire !== LEN && wire !== I32) return MALFORMED;
    if (!r.skipValue(wire)) return TRUNCATED;
    if (Array.isArray(header)) r.viewsSince(chunk, at, header);
    else readField(r, chunk, at, header);
  }
  return END;
}

/** The field from chunk `chunk`, offset `at`, to the cursor: read in place in its chunk, or gathered (a copy). */
function readField(r: WireReader, chunk: number, at: number, res: ResponseDraft): void {
  if (r.chunk === chunk) {
    readHeaderFields(r.chunks[chunk]!, at, r.at, res);
    return;
  }
  const views: Buffer[] = [];
  r.viewsSince(chunk, at, views);
  const field = Buffer.concat(views);
  readHeaderFields(field, 0, field.length, res);
}

function truncated(): GatewayError {
  return new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream sent a truncated ModelInferResponse');
}

function notDecoded(err: unknown): GatewayError {
  // What protobufjs would have thrown ("index out of range", "invalid wire type"): Triton's answer
  // is at fault, not a bug of ours.
  return new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', `upstream sent a ModelInferResponse that does not decode: ${(err as Error).message}`, { cause: err });
}

export function readInferResponse(chunks: readonly Buffer[]): InferResponse {
  const r = new WireReader(chunks);
  const res = newResponse();
  // Entries whose output is not read yet (Triton writes the outputs first: none).
  let early: Buffer[][] | undefined;
  try {
    for (let entry = 0; ; entry++) {
      const length = nextOutput(r, res);
      if (length === END) break;
      if (length < 0) throw truncated();
      const views = entryViews(r, length);
      if (entry < res.outputs.length) withBytes(res.outputs[entry]!, views);
      else (early ??= [])[entry] = views;
    }
  } catch (err) {
    throw isGatewayError(err) ? err : notDecoded(err);
  }
  return withOutputBytes(res, early);
}

/** The entry's `length` bytes as views: one when they lie in the cursor's chunk (as r.views gives them). */
function entryViews(r: WireReader, length: number): Buffer[] {
  if (length > 0 && !r.done()) {
    const chunk = r.chunks[r.chunk]!;
    if (chunk.length - r.at >= length) {
      const view = chunk.subarray(r.at, r.at + length);
      r.at += length;
      return [view];
    }
  }
  const views: Buffer[] = [];
  if (!r.views(length, views)) throw truncated();
  return views;
}

function withBytes(o: OutputDraft, views: Buffer[]): void {
  o.data = views;
  let n = 0;
  for (let v = 0; v < views.length; v++) n += views[v]!.length;
  o.byteLength = n;
}

/**
 * The header fields alone (nextOutput's `header`: everything before the first output's bytes),
 * for an answer streamed as it arrives; outputs have no data. Throws when they do not decode.
 */
export function readResponseHeader(header: readonly Buffer[]): InferResponse {
  const res = newResponse();
  const fields = gather(header);
  readHeaderFields(fields, 0, fields.length, res);
  return withOutputBytes(res, undefined);
}

/** Outputs read after their raw_output_contents entry (`early`) given it; outputs without one, no bytes. */
function withOutputBytes(res: ResponseDraft, early: readonly Buffer[][] | undefined): InferResponse {
  const { outputs } = res;
  for (let i = 0; i < outputs.length; i++) {
    const o = outputs[i]!;
    if (o.data !== NO_DATA) continue;
    const views = early?.[i];
    if (views === undefined) o.data = [];
    else withBytes(o, views);
  }
  return res;
}

/**
 * The raw_output_contents entries after the head of a streamed answer (nextOutput found the first
 * one): each entry's bytes handed on as views as they arrive, the tag and length between entries
 * read a byte at a time (split anywhere), each length checked against the size its output's
 * shape gives.
 */
export class OutputEntries {
  /** Bytes the current entry still has. */
  #left: number;
  #entry = 0;
  /** Between entries: the tag seen, its length being read. */
  #tagSeen = false;
  readonly #length = new PushVarint();

  /** `expected`: each output's size; `first`: the first entry's length (its tag and length read). */
  constructor(private readonly expected: readonly number[], first: number) {
    this.#left = first;
  }

  /**
   * Hands the entry bytes of piece[from..] to `write` (the whole piece when it is all entry
   * bytes); returns what is wrong when the answer does not fit its header, and reads no further.
   */
  push(piece: Buffer, from: number, write: (view: Buffer) => void): string | undefined {
    let at = from;
    while (at < piece.length) {
      if (this.#left > 0) {
        const n = Math.min(this.#left, piece.length - at);
        write(n === piece.length ? piece : piece.subarray(at, at + n));
        at += n;
        this.#left -= n;
        continue;
      }
      const b = piece[at++]!;
      if (!this.#tagSeen) {
        if (b !== RAW_OUTPUT_CONTENTS_TAG || this.#entry + 1 >= this.expected.length) return 'upstream answer has more than its outputs after the header';
        this.#tagSeen = true;
        continue;
      }
      if (!this.#length.add(b)) continue;
      const length = this.#length.value;
      this.#length.reset();
      this.#tagSeen = false;
      this.#entry++;
      if (length !== this.expected[this.#entry]) return `upstream output ${this.#entry} has ${length} bytes where its shape says ${this.expected[this.#entry]}`;
      this.#left = length;
    }
    return undefined;
  }

  /** Every entry arrived whole. */
  get complete(): boolean {
    return this.#left === 0 && !this.#tagSeen && this.#entry === this.expected.length - 1;
  }
}
