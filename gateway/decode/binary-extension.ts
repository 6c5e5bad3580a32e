// The body after the JSON header in binary-extension mode: each binary input's bytes, in input
// order, copied once from the received chunks into that input's slot of the framed message —
// the one user-space copy of the binary path (DESIGN.md §3).
import type { Slot } from '../upstream/frame-request';
import type { InputPlan } from './v2-header';

/** The slots of the inputs whose bytes come from the binary section, in input order. */
export function binarySlots(plans: readonly InputPlan[], slots: readonly (Slot | undefined)[]): Slot[] {
  const out: Slot[] = [];
  plans.forEach((p, i) => {
    if (p.kind === 'binary') out.push(slots[i]!);
  });
  return out;
}

/**
 * Copies the binary section (starting `offset` bytes into the body) into the slots of the inputs
 * planned as binary. Sizes were checked by the header decoder. Returns the bytes copied.
 */
export function fillBinarySlots(
  chunks: readonly Buffer[], offset: number, plans: readonly InputPlan[], slots: readonly (Slot | undefined)[], message: Buffer,
): number {
  let ci = 0;
  let at = offset;
  // Find the chunk holding `offset`.
  while (ci < chunks.length && at >= chunks[ci]!.length) {
    at -= chunks[ci]!.length;
    ci++;
  }
  let copied = 0;
  plans.forEach((plan, i) => {
    if (plan.kind !== 'binary') return;
    const slot = slots[i]!;
    let left = slot.length;
    let to = slot.offset;
    while (left > 0) {
      const c = chunks[ci]!;
      const n = Math.min(left, c.length - at);
      c.copy(message, to, at, at + n);
      to += n;
      left -= n;
      at += n;
      if (at === c.length) {
        ci++;
        at = 0;
      }
    }
    copied += slot.length;
  });
  return copied;
}
