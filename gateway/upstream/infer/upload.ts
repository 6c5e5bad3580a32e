// Where the payload bytes of a streamed request body go (docs/cut-through.md): copied into the
// framed message's slots as they arrive (the message goes upstream whole afterwards), or — when the
// framed head has cuts — written to a ModelInfer call opened at once, by reference, with the head's
// pieces between them (cut-through). One sink for both, so the push decoders do not know which.
import type { FramedHead, PayloadSink, Slot } from '../../infer/framed-message';
import { SlotWriter } from '../../infer/slot-writer';
import type { CallOptions, DataPlane, ResponseMessage } from './data-plane';
import { Forwarder } from './cut-through';
import { releaseWhole } from '../../buffers/release';
import { nowNs } from '../../infer/clock';

/** What a streamed body left for the call: the whole message, or the call that already carries it. */
export type Sent =
  | { readonly message: Buffer; readonly messageBytes: number }
  | { readonly response: Promise<ResponseMessage>; readonly startNs: number; readonly messageBytes: number };

/** The client's body: paused while the upstream call cannot take more (HTTP/2 flow control). */
export interface BodyFlow {
  pause(): void;
  resume(): void;
}

export class Upload implements PayloadSink {
  readonly messageBytes: number;
  readonly #message: Buffer;
  #writer: SlotWriter | undefined;
  #forwarder: Forwarder | undefined;
  #call: ReturnType<NonNullable<DataPlane['startModelInfer']>> | undefined;
  #startNs = 0;

  /**
   * Without cuts in `framed`, bytes go into `slots`. With cuts, the call starts here, and
   * `failed` runs as soon as it fails, even mid-upload (the caller reports the error when it
   * awaits the answer).
   */
  constructor(framed: FramedHead, slots: readonly Slot[], dataPlane: DataPlane, options: () => CallOptions,
    private readonly flow: BodyFlow, failed: () => void) {
    this.#message = framed.message;
    this.messageBytes = framed.message.length + framed.cuts.reduce((n, c) => n + c.length, 0);
    if (framed.cuts.length === 0) {
      this.#writer = new SlotWriter(framed.message, slots);
      return;
    }
    const call = dataPlane.startModelInfer!(options());
    this.#startNs = nowNs();
    call.response.catch(failed);
    this.#call = call;
    this.#forwarder = new Forwarder(call, framed.message, framed.cuts);
  }

  /**
   * `chunk[from..]` is payload. A chunk that is all payload (`from` 0) is read by nothing else
   * afterwards, so its memory is handed back as soon as it is copied, or once the call has sent it
   * (buffers/release.ts): otherwise only a collection frees it, and with a young generation large
   * enough for the requests in flight, uploads would pile up until a full collection.
   */
  write(chunk: Buffer, from = 0): void {
    const call = this.#call;
    if (call === undefined) {
      this.#writer!.write(chunk, from);
      if (from === 0) releaseWhole(chunk);
      return;
    }
    const more = this.#forwarder!.push(chunk, from);
    if (from === 0) call.release(chunk);
    if (!more) {
      this.flow.pause();
      call.onDrain(() => this.flow.resume());
    }
  }

  /** Bytes our code copied (0 when cut through). */
  get copied(): number {
    return this.#writer?.copied ?? 0;
  }

  /** True when the bytes go upstream as they arrive. */
  get cutThrough(): boolean {
    return this.#call !== undefined;
  }

  /** The body failed: an upload already under way is reset. */
  abort(): void {
    this.#call?.cancel();
  }

  finish(): Sent {
    const call = this.#call;
    return call === undefined
      ? { message: this.#message, messageBytes: this.messageBytes }
      : { response: call.response, startNs: this.#startNs, messageBytes: this.messageBytes };
  }
}
