// linked-list.ts: members in the order they were added, removed from anywhere (again: nothing),
// visited while the one visited is removed; a removed member keeps no links.
import { type Linked, LinkedList } from '../../gateway/linked-list';

class M implements Linked<M> {
  linkPrev: M | undefined;
  linkNext: M | undefined;
  linked = false;
  constructor(readonly n: number) {}
}

test('added in order, removed from anywhere, its links cleared', () => {
  const list = new LinkedList<M>();
  const ms = [1, 2, 3, 4].map((n) => new M(n));
  for (const m of ms) list.add(m);
  expect([...list].map((m) => m.n)).toEqual([1, 2, 3, 4]);
  list.delete(ms[1]!);
  list.delete(ms[1]!);
  expect(ms[1]).toMatchObject({ linkPrev: undefined, linkNext: undefined, linked: false });
  list.delete(ms[0]!);
  list.delete(ms[3]!);
  expect([...list].map((m) => m.n)).toEqual([3]);
  expect([list.first?.n, list.last?.n, list.size]).toEqual([3, 3, 1]);
  list.add(ms[0]!);
  expect([...list].map((m) => m.n)).toEqual([3, 1]);
});

test('each member visited once while the visited one is removed', () => {
  const list = new LinkedList<M>();
  for (let n = 0; n < 5; n++) list.add(new M(n));
  const seen: number[] = [];
  for (const m of list) {
    seen.push(m.n);
    list.delete(m);
  }
  expect(seen).toEqual([0, 1, 2, 3, 4]);
  expect([list.size, list.first, list.last]).toEqual([0, undefined, undefined]);
});
