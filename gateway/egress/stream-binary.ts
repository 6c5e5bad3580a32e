// Binary answers streamed from Triton's DATA frames (docs/cut-through.md): ModelInferResponse puts its
// header fields (1–5) before the outputs' bytes (field 6), so once the first field-6 entry starts,
// the JSON header can be written, and every later DATA view goes to the client by reference as it
// arrives, with back-pressure both ways. Only when nothing needs the whole answer: every output
// binary and of a fixed-size type (sizes known from the shapes), no response compression.
// Otherwise the receiver declines and the answer is encoded whole, as before. An answer that goes
// wrong after the header was sent can only end in a closed connection (docs/differences.md).
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { GatewayError } from '../errors';
import { elementCount, elementSize, isDatatype } from '../infer/datatype';
import type { InferRequest } from '../infer/request';
import type { CallTiming, Flow, Receiver } from '../upstream/infer/data-plane';
import { readResponseHeader } from '../upstream/infer/answer-reader';
import type { InferResponse } from '../infer/response';
import { encodeInferResponse, outputKind } from '../encode/infer-response';

const RAW_OUTPUT_CONTENTS_TAG = 0x32; // field 6, wire type 2

const uncork = (res: ServerResponse): void => res.uncork();

type OutputChoice = Pick<InferRequest, 'outputs' | 'binaryDataOutput' | 'base64Output'>;

export interface StreamStart {
  /** The JSON header's length and the binary bytes to follow. */
  readonly headerBytes: number;
  readonly binaryBytes: number;
  /** The call's timing as the stream starts (Flow.timing: endNs is 0n, the answer is still arriving). */
  readonly timing: CallTiming;
}

/**
 * Whether the answer to `choice` can be all binary: outputs binary by default, or every requested
 * output asking for binary (Triton answers only the requested ones). Otherwise no streamer is made
 * and Triton's header is decoded once, by the whole-answer encoder.
 */
export function mayStreamBinary(choice: OutputChoice): boolean {
  if (choice.outputs === undefined || choice.outputs.length === 0) return choice.binaryDataOutput;
  return choice.outputs.every((o) => outputKind(choice, o.name) === 'binary');
}

export class BinaryStreamer implements Receiver {
  #state: 'head' | 'streaming' | 'declined' = 'head';
  /** Head phase: every piece so far (views). */
  #seen: Buffer[] = [];
  #seenBytes = 0;
  /** Streaming: bytes the current entry still needs; then the next entry's tag and length. */
  #left = 0;
  #expected: number[] = [];
  #entry = 0;
  #varint: number[] = [];
  #flow: Flow | undefined;
  #error: GatewayError | undefined;
  /** Bytes written to the client after the header. */
  written = 0;
  /** When reading Triton's header began: encoding the answer (the encode hop) runs from here to `headers`. */
  encodeStartNs = 0n;

  /**
   * `headers(start)`: the response headers (Content-Length is set here), asked for when the
   * stream starts — late, so they can carry what is known then (Server-Timing).
   */
  constructor(private readonly res: ServerResponse, private readonly choice: OutputChoice,
    private readonly headers: (start: StreamStart) => OutgoingHttpHeaders) {}

  /** Bytes of the answer held and not written to the client yet: the head so far, then what the call has buffered. */
  held(): number {
    return (this.#state === 'head' ? this.#seenBytes : 0) + (this.#flow?.buffered() ?? 0);
  }

  /** True once the header went out: the answer is being streamed. */
  get streaming(): boolean {
    return this.#state === 'streaming';
  }

  data(piece: Buffer, flow: Flow): boolean {
    this.#flow = flow;
    if (this.#state === 'declined') return false;
    if (this.#state === 'streaming') {
      this.#stream(piece, 0);
      return true;
    }
    this.#seen.push(piece);
    this.#seenBytes += piece.length;
    return this.#head();
  }

  /**
   * After the call succeeded: checks that every entry was whole and ends the response.
   * Resolves when the response is handed to the socket.
   */
  finish(): Promise<void> {
    if (this.#error === undefined && (this.#left !== 0 || this.#entry !== this.#expected.length - 1 || this.#varint.length > 0)) {
      this.#error = new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream answer ended inside an output');
    }
    if (this.#error !== undefined) {
      this.res.destroy(this.#error);
      return Promise.reject(this.#error);
    }
    return new Promise((resolve) => this.res.end(resolve));
  }

  /** Parses the head once it holds the first field-6 tag and length; false while it does not. */
  #head(): boolean {
    const bytes = this.#seen.length === 1 ? this.#seen[0]! : Buffer.concat(this.#seen, this.#seenBytes);
    let at = 0;
    for (;;) {
      const tag = varint(bytes, at);
      if (tag === undefined) return false;
      const field = Math.floor(tag.value / 8);
      const wire = tag.value & 7;
      if (field === 6 && wire === 2) {
        const len = varint(bytes, tag.end);
        if (len === undefined) return false;
        return this.#start(bytes.subarray(0, at), len.value, len.end);
      }
      let end: number;
      if (wire === 2) {
        const len = varint(bytes, tag.end);
        if (len === undefined) return false;
        end = len.end + len.value;
      } else if (wire === 0) {
        const v = varint(bytes, tag.end);
        if (v === undefined) return false;
        end = v.end;
      } else if (wire === 1 || wire === 5) {
        end = tag.end + (wire === 1 ? 8 : 4);
      } else {
        return this.#decline();
      }
      if (end > bytes.length) return false;
      at = end;
    }
  }

  #decline(): false {
    this.#state = 'declined';
    this.#seen = [];
    return false;
  }

  /** The header fields are `header`; the first entry has `length` bytes, starting at `from` of the head so far. */
  #start(header: Buffer, length: number, from: number): boolean {
    this.encodeStartNs = process.hrtime.bigint();
    let response: InferResponse;
    try {
      response = readResponseHeader(header);
    } catch {
      return this.#decline(); // the whole answer will say what is wrong
    }
    const expected: number[] = [];
    for (const o of response.outputs) {
      if (outputKind(this.choice, o.name) !== 'binary' || !isDatatype(o.datatype) || o.datatype === 'BYTES') return this.#decline();
      expected.push(elementCount(o.shape) * elementSize(o.datatype));
    }
    // Nothing to stream, or no binary bytes at all (Triton answers that as plain JSON).
    if (expected.length === 0 || expected[0] !== length || expected.every((n) => n === 0)) return this.#decline();
    const encoded = encodeInferResponse({ ...response, outputs: response.outputs.map((o, i) => ({ ...o, byteLength: expected[i]! })) }, this.choice);
    const headers = this.headers({ headerBytes: encoded.header.length, binaryBytes: encoded.binaryLength, timing: this.#flow!.timing() });
    headers['Content-Length'] = encoded.header.length + encoded.binaryLength;
    // Header and whatever payload already arrived leave in one write.
    this.res.cork();
    process.nextTick(uncork, this.res);
    this.res.writeHead(200, headers);
    this.res.write(encoded.header);
    this.#state = 'streaming';
    this.#expected = expected;
    this.#left = length;
    // What the head holds past the entry's length: its first bytes (views of the pieces).
    let skip = from;
    for (const p of this.#seen) {
      if (skip >= p.length) {
        skip -= p.length;
        continue;
      }
      this.#stream(p, skip);
      skip = 0;
    }
    this.#seen = [];
    return true;
  }

  /** Forwards piece[from..]: entry bytes by reference, entry tags and lengths checked in between. */
  #stream(piece: Buffer, from: number): void {
    let at = from;
    while (at < piece.length && this.#error === undefined) {
      if (this.#left > 0) {
        const n = Math.min(this.#left, piece.length - at);
        this.#write(n === piece.length ? piece : piece.subarray(at, at + n));
        at += n;
        this.#left -= n;
        continue;
      }
      // Between entries: tag 0x32, then the length varint.
      const b = piece[at++]!;
      this.#varint.push(b);
      if (this.#varint.length === 1) {
        if (b !== RAW_OUTPUT_CONTENTS_TAG || this.#entry + 1 >= this.#expected.length) this.#fail('upstream answer has more than its outputs after the header');
        continue;
      }
      if (b < 0x80) {
        let len = 0;
        for (let k = this.#varint.length - 1; k >= 1; k--) len = len * 128 + (this.#varint[k]! & 0x7f);
        this.#varint = [];
        this.#entry++;
        if (len !== this.#expected[this.#entry]) this.#fail(`upstream output ${this.#entry} has ${len} bytes where its shape says ${this.#expected[this.#entry]}`);
        this.#left = len;
      }
    }
  }

  #write(view: Buffer): void {
    this.written += view.length;
    if (!this.res.write(view)) {
      const flow = this.#flow!;
      flow.pause();
      this.res.once('drain', () => flow.resume());
    }
  }

  /** The answer does not fit its header: the call is reset and the client's connection closed. */
  #fail(message: string): void {
    this.#error = new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', message);
    this.res.destroy(this.#error);
    this.#flow?.cancel();
  }
}

function varint(b: Buffer, at: number): { value: number; end: number } | undefined {
  let value = 0;
  let mul = 1;
  for (let k = 0; k < 10; k++) {
    if (at + k >= b.length) return undefined;
    const c = b[at + k]!;
    value += (c & 0x7f) * mul;
    if (c < 0x80) return { value, end: at + k + 1 };
    mul *= 128;
  }
  return undefined;
}
