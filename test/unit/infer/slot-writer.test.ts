// The SlotWriter copies a chunk stream into the slots of a framed message in order: every byte
// lands exactly in its slot (nothing outside them is touched), zero-length slots are passed over,
// and what it returns, `copied` and `done` agree whatever the chunking.
import { SlotWriter } from '../../../gateway/infer/slot-writer';
import type { Slot } from '../../../gateway/infer/framed-message';
import { splitEvery, splits } from '../../support/chunks';

const FILL = 0xee;
// Gaps between the slots stand for the message's tags and lengths, which must stay untouched.
const slots: Slot[] = [
  { offset: 2, length: 0 },
  { offset: 3, length: 5 },
  { offset: 10, length: 0 },
  { offset: 10, length: 1 },
  { offset: 12, length: 0 },
  { offset: 14, length: 9 },
  { offset: 25, length: 0 },
];
const needed = slots.reduce((n, s) => n + s.length, 0);
const payload = Buffer.from(Array.from({ length: needed }, (_, i) => i + 1));

/** The message as it must look: FILL everywhere but the slots, which hold the payload in order. */
function expectedMessage(size: number, data: Buffer): Buffer {
  const m = Buffer.alloc(size, FILL);
  let at = 0;
  for (const s of slots) {
    data.copy(m, s.offset, at, at + s.length);
    at += s.length;
  }
  return m;
}

describe('SlotWriter', () => {
  test.each(splits(payload))('payload %s fills every slot exactly', (_, chunks) => {
    const message = Buffer.alloc(30, FILL);
    const w = new SlotWriter(message, slots);
    const taken = chunks.map((c) => w.write(c));
    expect(taken).toEqual(chunks.map((c) => c.length));
    expect(w.copied).toBe(needed);
    expect(w.done).toBe(true);
    expect(message).toEqual(expectedMessage(30, payload));
  });

  test.each([1, 2, 3, 7])('done only once the last non-empty slot is full (%i-byte chunks)', (n) => {
    const w = new SlotWriter(Buffer.alloc(30, FILL), slots);
    let sent = 0;
    for (const c of splitEvery(payload, n)) {
      expect(w.done).toBe(false);
      w.write(c);
      sent += c.length;
      expect(w.copied).toBe(sent);
    }
    expect(w.done).toBe(true);
  });

  test.each([1, 2, 3, 7])('a chunk larger than what the slots need: the rest is not taken (%i-byte chunks, then one large)', (n) => {
    const message = Buffer.alloc(30, FILL);
    const w = new SlotWriter(message, slots);
    const head = payload.subarray(0, needed - 4);
    for (const c of splitEvery(head, n)) expect(w.write(c)).toBe(c.length);
    const tail = Buffer.concat([payload.subarray(needed - 4), Buffer.from('surplus')]);
    expect(w.write(tail)).toBe(4);
    expect(w.copied).toBe(needed);
    expect(w.done).toBe(true);
    expect(w.write(Buffer.from('more'))).toBe(0);
    expect(w.copied).toBe(needed);
    expect(message).toEqual(expectedMessage(30, payload));
  });

  test('write(chunk, from) starts at `from` and counts only the bytes after it', () => {
    const message = Buffer.alloc(30, FILL);
    const w = new SlotWriter(message, slots);
    const chunk = Buffer.concat([Buffer.from('JSONHEADER'), payload]);
    expect(w.write(chunk, 10)).toBe(needed);
    expect(w.copied).toBe(needed);
    expect(message).toEqual(expectedMessage(30, payload));
  });

  test('a chunk that ends exactly at a slot boundary, then one that starts the next slot', () => {
    const message = Buffer.alloc(30, FILL);
    const w = new SlotWriter(message, slots);
    expect(w.write(payload.subarray(0, 5))).toBe(5); // slot 1 full, slot 2 (empty) not yet passed
    expect(w.done).toBe(false);
    expect(w.write(payload.subarray(5, 6))).toBe(1); // passes the empty slot, fills slot 3
    expect(w.write(payload.subarray(6))).toBe(9);
    expect(message).toEqual(expectedMessage(30, payload));
  });

  test('only zero-length slots (or none): done at once, nothing taken', () => {
    const empty = new SlotWriter(Buffer.alloc(4), [{ offset: 1, length: 0 }, { offset: 1, length: 0 }]);
    expect(empty.done).toBe(true);
    expect(empty.write(Buffer.from([1, 2]))).toBe(0);
    expect(empty.copied).toBe(0);
    const none = new SlotWriter(Buffer.alloc(4), []);
    expect(none.done).toBe(true);
    expect(none.write(Buffer.from([1]))).toBe(0);
  });

  test('empty chunks change nothing', () => {
    const message = Buffer.alloc(30, FILL);
    const w = new SlotWriter(message, slots);
    expect(w.write(Buffer.alloc(0))).toBe(0);
    for (const c of splitEvery(payload, 4)) {
      expect(w.write(c)).toBe(c.length);
      expect(w.write(Buffer.alloc(0))).toBe(0);
    }
    expect(w.copied).toBe(needed);
    expect(message).toEqual(expectedMessage(30, payload));
  });
});
