// Binary answers streamed from Triton's DATA frames (docs/cut-through.md): ModelInferResponse puts its
// header fields (1–5) before the outputs' bytes (field 6), so once the first field-6 entry starts,
// the JSON header can be written, and every later DATA view goes to the client by reference as it
// arrives (egress/stream-binary.ts). Only when nothing needs the whole answer: every output
// binary and of a fixed-size type (sizes known from the shapes), no response compression.
// Otherwise the receiver declines and the answer is encoded whole, as before. The answer is split
// by infer/answer-reader.ts.
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { startStreamedAnswer, writeStreamed } from '../egress/stream-binary';
import { encodeInferResponse, outputKind } from '../encode/infer-response';
import { GatewayError } from '../errors';
import { WireReader } from '../grpc/wire';
import { MALFORMED, nextOutput, OutputEntries, readResponseHeader } from '../infer/answer-reader';
import { elementCount, elementSize, isDatatype } from '../infer/datatype';
import type { InferRequest } from '../infer/request';
import type { InferResponse } from '../infer/response';
import type { CallTiming, Flow, Receiver } from '../upstream/infer/data-plane';
import { nowNs } from '../infer/clock';

type OutputChoice = Pick<InferRequest, 'outputs' | 'binaryDataOutput' | 'base64Output'>;

export interface StreamStart {
  /** The JSON header's length and the binary bytes to follow. */
  readonly headerBytes: number;
  readonly binaryBytes: number;
  /** The call's timing as the stream starts (Flow.timing: endNs is 0, the answer is still arriving). */
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

/** Who gives a streamed answer its headers. */
export interface StreamHead {
  /**
   * The response headers (Content-Length among them, unless the answer is chunked), asked for when
   * the stream starts — late, so they can carry what is known then (Server-Timing).
   */
  headers(start: StreamStart): OutgoingHttpHeaders;
}

export class BinaryStreamer implements Receiver {
  #state: 'head' | 'streaming' | 'declined' = 'head';
  /** Head phase: every piece so far (views). */
  #seen: Buffer[] = [];
  #seenBytes = 0;
  /** Streaming: the outputs' entries after the head. */
  #entries: OutputEntries | undefined;
  #flow: Flow | undefined;
  #error: GatewayError | undefined;
  /** Bytes written to the client after the header. */
  written = 0;
  /** When reading Triton's header began: encoding the answer (the encode hop) runs from here to `headers`. */
  encodeStartNs = 0;

  /** `head.headers(start)`: the response headers, asked for when the stream starts (StreamHead). */
  constructor(private readonly res: ServerResponse, private readonly choice: OutputChoice,
    private readonly head: StreamHead) {}

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
    if (this.#error === undefined && this.#entries?.complete !== true) {
      this.#error = new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'upstream answer ended inside an output');
    }
    if (this.#error !== undefined) {
      this.res.destroy(this.#error);
      return Promise.reject(this.#error);
    }
    return new Promise((resolve) => this.res.end(resolve));
  }

  /** Reads the head once it holds the first field-6 tag and length; false while it does not. */
  #head(): boolean {
    const r = new WireReader(this.#seen);
    const header: Buffer[] = [];
    const length = nextOutput(r, header);
    if (length === MALFORMED) return this.#decline();
    if (length < 0) return false; // the head is still arriving
    return this.#start(header, length, r);
  }

  #decline(): false {
    this.#state = 'declined';
    this.#seen = [];
    return false;
  }

  /** The header fields are `header` (views); the first entry has `length` bytes, from where `r` stands in the head. */
  #start(header: Buffer[], length: number, r: WireReader): boolean {
    this.encodeStartNs = nowNs();
    let response: InferResponse;
    try {
      response = readResponseHeader(header);
    } catch {
      return this.#decline(); // the whole answer will say what is wrong
    }
    const expected: number[] = [];
    let binaryBytes = 0;
    // The response is ours (decoded above): each output's byteLength is set to its size in place.
    const outputs = response.outputs as { -readonly [K in keyof InferResponse['outputs'][number]]: InferResponse['outputs'][number][K] }[];
    for (let i = 0; i < outputs.length; i++) {
      const o = outputs[i]!;
      if (outputKind(this.choice, o.name) !== 'binary' || !isDatatype(o.datatype) || o.datatype === 'BYTES') return this.#decline();
      o.byteLength = elementCount(o.shape) * elementSize(o.datatype);
      expected.push(o.byteLength);
      binaryBytes += o.byteLength;
    }
    // Nothing to stream, or no binary bytes at all (Triton answers that as plain JSON).
    if (expected.length === 0 || expected[0] !== length || binaryBytes === 0) return this.#decline();
    const encoded = encodeInferResponse(response, this.choice);
    const headers = this.head.headers({ headerBytes: encoded.header.length, binaryBytes: encoded.binaryLength, timing: this.#flow!.timing() });
    // Header and whatever payload already arrived leave in one write.
    startStreamedAnswer(this.res, headers, encoded.header);
    this.#state = 'streaming';
    this.#entries = new OutputEntries(expected, length);
    // What the head holds past the entry's length: its first bytes (views of the pieces).
    const seen = this.#seen;
    this.#seen = [];
    for (let k = r.chunk; k < seen.length; k++) this.#stream(seen[k]!, k === r.chunk ? r.at : 0);
    return true;
  }

  /** Forwards piece[from..]: entry bytes by reference, entry tags and lengths checked in between. */
  #stream(piece: Buffer, from: number): void {
    if (this.#error !== undefined) return;
    const wrong = this.#entries!.push(piece, from, this.#write);
    if (wrong !== undefined) this.#fail(wrong);
  }

  readonly #write = (view: Buffer): void => {
    this.written += view.length;
    writeStreamed(this.res, view, this.#flow!);
  };

  /** The answer does not fit its header: the call is reset and the client's connection closed. */
  #fail(message: string): void {
    this.#error = new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', message);
    this.res.destroy(this.#error);
    this.#flow?.cancel();
  }
}
