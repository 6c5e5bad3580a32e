// Copies a stream of body chunks, in order, into a sequence of regions (slots) of the framed
// gRPC message: the one copy of a binary payload byte, made as the byte arrives.
import type { Slot } from './framed-message';

export class SlotWriter {
  #i = 0;
  #filled = 0;
  /** Bytes copied so far. */
  copied = 0;

  constructor(private readonly message: Buffer, private readonly slots: readonly Slot[]) {}

  /** Copies chunk[from..] into the slots; returns how many bytes of the chunk were taken. */
  write(chunk: Buffer, from = 0): number {
    let at = from;
    while (at < chunk.length && this.#i < this.slots.length) {
      const slot = this.slots[this.#i]!;
      const n = Math.min(chunk.length - at, slot.length - this.#filled);
      chunk.copy(this.message, slot.offset + this.#filled, at, at + n);
      at += n;
      this.#filled += n;
      if (this.#filled === slot.length) {
        this.#i++;
        this.#filled = 0;
      }
    }
    this.copied += at - from;
    return at - from;
  }

  /** True when every slot is full. */
  get done(): boolean {
    let i = this.#i;
    while (i < this.slots.length && this.slots[i]!.length === 0) i++;
    return i >= this.slots.length;
  }
}
