// Cut-through (docs/cut-through.md): the framed head goes upstream at once, and each body chunk that
// belongs to a cut (an input's bytes left out of the head) is written to the call by reference —
// a view of the chunk node:http handed over, never copied — with the head's pieces between them.
import type { StreamingCall } from './data-plane';
import type { Cut } from '../../infer/framed-message';

export class Forwarder {
  #cut = 0;
  /** Bytes the current cut still needs. */
  #left: number;
  /** How far the head has been written. */
  #headAt = 0;
  /** Body bytes written by reference. */
  forwarded = 0;

  /** Writes the head up to its first cut; with no cuts, the whole message and the end of it. */
  constructor(private readonly call: Pick<StreamingCall, 'write' | 'end'>, private readonly head: Buffer, private readonly cuts: readonly Cut[]) {
    this.#left = 0;
    this.#next();
  }

  /**
   * Writes chunk[from..] to the call, up to what the cuts still need; returns false when the
   * call asks the caller to wait (onDrain) before pushing more.
   */
  push(chunk: Buffer, from = 0): boolean {
    let ok = true;
    let at = from;
    while (at < chunk.length && this.#cut < this.cuts.length) {
      const n = Math.min(chunk.length - at, this.#left);
      // A refusal stands for the whole push: a later write that is accepted does not undo it.
      ok = this.call.write(n === chunk.length ? chunk : chunk.subarray(at, at + n)) && ok;
      at += n;
      this.#left -= n;
      this.forwarded += n;
      if (this.#left === 0) {
        this.#cut++;
        ok = this.#next() && ok;
      }
    }
    return ok;
  }

  /** True once every cut is filled and the call's request has ended. */
  get done(): boolean {
    return this.#cut >= this.cuts.length;
  }

  /** Writes the head up to the current cut (the rest of it, and the end, after the last). */
  #next(): boolean {
    const cut = this.cuts[this.#cut];
    const to = cut === undefined ? this.head.length : cut.at;
    const piece = this.head.subarray(this.#headAt, to);
    this.#headAt = to;
    if (cut === undefined) {
      this.call.end(piece);
      return true;
    }
    this.#left = cut.length;
    return piece.length === 0 || this.call.write(piece);
  }
}

/** A message's pieces in wire order, as a Forwarder writes them. */
export class Pieces {
  readonly list: Buffer[] = [];
  messageBytes = 0;

  write(piece: Buffer): boolean {
    if (piece.length === 0) return true;
    this.list.push(piece);
    this.messageBytes += piece.length;
    return true;
  }

  end(piece: Buffer): void {
    this.write(piece);
  }
}

/**
 * Where the payload of a message that is all in hand goes (a planned request's whole body): its
 * head's pieces and views of the body between them, gathered in wire order and sent whole
 * afterwards (whole-call.ts).
 */
export class Gathered extends Forwarder {
  constructor(readonly message: Pieces, head: Buffer, cuts: readonly Cut[]) {
    super(message, head, cuts);
  }

  /** PayloadSink: chunk[from..] is payload, in body order. */
  write(chunk: Buffer, from = 0): void {
    this.push(chunk, from);
  }
}
