// upstream/h2/stream-table.ts: the table answers as a Map keyed by id would, whatever the order
// streams open and close in (ids odd and rising, as ours are), across growth and the back-shifts
// of removals, including runs of entries that wrap around the end of the slots.
import fc from 'fast-check';
import { StreamTable } from '../../../../gateway/upstream/h2/stream-table';

interface S { readonly id: number }

/** Ops: open the next stream (true), or close the open one at this index (a number). */
const ops = fc.array(fc.oneof(fc.constant(true), fc.nat(1000)), { maxLength: 400 });

test('the same answers as a Map, streams opened in id order and closed in any order', () => {
  fc.assert(fc.property(ops, fc.nat(2000), (list, start) => {
    const table = new StreamTable<S>();
    const model = new Map<number, S>();
    let next = 2 * start + 1;
    for (const op of list) {
      if (op === true) {
        const s = { id: next };
        next += 2;
        table.add(s);
        model.set(s.id, s);
      } else if (model.size > 0) {
        const open = [...model.values()];
        const s = open[op % open.length]!;
        expect(table.delete(s)).toBe(true);
        expect(table.delete(s)).toBe(false);
        model.delete(s.id);
      }
      expect(table.size).toBe(model.size);
    }
    for (const [id, s] of model) expect(table.get(id)).toBe(s);
    for (let id = 1; id < next + 4; id += 2) if (!model.has(id)) expect(table.get(id)).toBeUndefined();
    expect(table.values().map((s) => s.id).sort((a, b) => a - b)).toEqual([...model.keys()].sort((a, b) => a - b));
  }), { numRuns: 300 });
});

test('an entry that is not the table\'s own for its id is not removed', () => {
  const table = new StreamTable<S>();
  const s = { id: 7 };
  table.add(s);
  expect(table.delete({ id: 7 })).toBe(false);
  expect(table.get(7)).toBe(s);
  table.clear();
  expect(table.size).toBe(0);
  expect(table.get(7)).toBeUndefined();
});
