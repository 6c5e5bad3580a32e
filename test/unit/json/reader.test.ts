// The reader's grammar, errors and offsets are rapidjson's; its number arrays are read once, while
// validating, into JsonArray.numbers. The corpus test compares every document's outcome with the
// reader as it was before that fast path (fixtures/json-reader.txt.gz, see its header).
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { type NumberValue, readNumber } from '../../../gateway/json/number-parse';
import { giveBackNumbers, type JsonArray, type JsonNode, member, parseJson, SPARE_MAX_VALUES } from '../../../gateway/json/reader';
import { dumpTree, readerCorpus } from '../../support/json-corpus';

const expected = zlib.gunzipSync(fs.readFileSync(path.join(__dirname, 'fixtures', 'json-reader.txt.gz')))
  .toString('utf8').split('\n').filter((l) => l !== '' && !l.startsWith('#'));

function outcome(b: Buffer, end: number): { line: string; root?: JsonNode } {
  try {
    const root = parseJson(b, 0, end);
    return { line: `ok ${crypto.createHash('sha1').update(dumpTree(root)).digest('hex').slice(0, 12)}`, root };
  } catch (err) {
    return { line: `err ${(err as Error).message}` };
  }
}

const out: NumberValue = { integer: false, value: 0, big: undefined, negative: false };

/** The number tokens of an array's source range, in order (strings, literals and objects skipped). */
function numberTokens(b: Buffer, a: JsonArray): [number, number][] | undefined {
  const tokens: [number, number][] = [];
  let p = a.start + 1;
  while (p < a.end - 1) {
    const c = b[p]!;
    if (c === 0x2c || c === 0x5b || c === 0x5d || c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) { p++; continue; }
    if (!((c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x4e || c === 0x49)) return undefined;
    const s = p;
    while (p < a.end - 1 && !',] \n\r\t'.includes(String.fromCharCode(b[p]!))) p++;
    tokens.push([s, p]);
  }
  return tokens;
}

/** Checks every array's `numbers` against readNumber on its tokens; returns how many runs it saw. */
function checkRuns(b: Buffer, node: JsonNode): number {
  if (node.kind === 'object') return node.members.reduce((n, m) => n + checkRuns(b, m.value), 0);
  if (node.kind !== 'array') return 0;
  let runs = node.containers.reduce((n, c) => n + checkRuns(b, c), 0);
  const tokens = numberTokens(b, node);
  const run = node.numbers;
  if (run === undefined) {
    // Only a non-number element, an object, or a NaN keeps an array from being a run.
    const hasNaN = tokens?.some(([s, e]) => Number.isNaN(readNumber(b, s, e, out).value));
    const hasObject = tokens !== undefined && node.containers.some((c) => c.kind === 'object' || c.numbers === undefined);
    expect(tokens === undefined || hasNaN === true || hasObject).toBe(true);
    return runs;
  }
  runs++;
  expect(tokens).toBeDefined();
  const values = Array.from(run.pool.values.subarray(run.start, run.end));
  const want = tokens!.map(([s, e]) => readNumber(b, s, e, out).value);
  if (values.length !== want.length || values.some((v, i) => !Object.is(v, want[i]))) {
    throw new Error(`run of ${b.toString('latin1', node.start, node.end)}: ${values.join(',')} vs ${want.join(',')}`);
  }
  const integers = tokens!.every(([s, e]) => {
    const r = readNumber(b, s, e, out);
    return r.integer && r.big === undefined;
  });
  expect(run.integers).toBe(integers);
  return runs;
}

describe('parseJson on a corpus of broken and well-formed documents', () => {
  const corpus = readerCorpus();

  test('the fixture matches the corpus', () => {
    expect(expected).toHaveLength(corpus.length);
  });

  test('every outcome (tree or rapidjson error and offset) is the one before the fast path', () => {
    const bad: string[] = [];
    corpus.forEach((d, i) => {
      const got = outcome(d.bytes, d.end).line;
      if (got !== expected[i] && bad.length < 10) bad.push(`#${i} ${JSON.stringify(d.bytes.toString('latin1', 0, d.end))}: want ${expected[i]}, got ${got}`);
    });
    expect(bad).toEqual([]);
  });

  test('every array of numbers carries exactly the values readNumber reads from its tokens', () => {
    let runs = 0;
    for (const d of corpus) {
      const r = outcome(d.bytes, d.end);
      if (r.root !== undefined) runs += checkRuns(d.bytes.subarray(0, d.end), r.root);
    }
    expect(runs).toBeGreaterThan(1000);
  });
});

describe('number runs', () => {
  const parse = (text: string): JsonNode => parseJson(Buffer.from(text));
  const values = (a: JsonNode | undefined): number[] | undefined => {
    if (a?.kind !== 'array' || a.numbers === undefined) return undefined;
    return Array.from(a.numbers.pool.values.subarray(a.numbers.start, a.numbers.end));
  };

  test('nested arrays flatten in document order; shape and data both are runs', () => {
    const doc = parse('{"shape":[2,2],"data":[[1.5, -2],\n [3e2 ,4]],"empty":[[],[]]}');
    if (doc.kind !== 'object') throw new Error('object');
    expect(values(member(doc, 'shape'))).toEqual([2, 2]);
    expect(values(member(doc, 'data'))).toEqual([1.5, -2, 300, 4]);
    expect(values(member(doc, 'empty'))).toEqual([]);
    const data = member(doc, 'data') as JsonArray;
    expect(data.numbers!.integers).toBe(false);
    expect((member(doc, 'shape') as JsonArray).numbers!.integers).toBe(true);
  });

  test('a number off the fast path stays in the run, with readNumber\'s value', () => {
    const a = parse('[1, 123456789012345678, 1e-400, -Infinity, 0.000123456789012345678, 9007199254740993]');
    // eslint-disable-next-line no-loss-of-precision -- the doubles the text rounds to, as JavaScript prints them
    expect(values(a)).toEqual([1, 123456789012345680, 0, -Infinity, 0.00012345678901234568, 9007199254740992]);
    expect((a as JsonArray).numbers!.integers).toBe(false); // 2^53 + 1 is not exact as a double
  });

  test('NaN, strings, literals and objects end the run (the writer re-reads those arrays)', () => {
    for (const t of ['[1,NaN]', '[1,"2"]', '[1,true]', '[1,null]', '[1,{"a":1}]', '[[1],[2,"x"]]']) {
      expect([t, values(parse(t))]).toEqual([t, undefined]);
    }
  });

  test('a long run grows its pool', () => {
    const n = 100_000;
    const a = parse(`[${Array.from({ length: n }, (_, i) => i / 8).join(',')}]`);
    const v = values(a)!;
    expect(v).toHaveLength(n);
    expect(v[n - 1]).toBe((n - 1) / 8);
  });

  test('the pool holds at most a quarter as many values as the document has bytes', () => {
    // "0," is 2 bytes a number: 16 bytes of pool each would be 4x the body; such arrays are re-read.
    const dense = parse(`[${'0,'.repeat(50_000)}0]`);
    expect(values(dense)).toBeUndefined();
    const sparse = parse(`[${'0.25,'.repeat(50_000)}0]`); // 5 bytes a number
    expect(values(sparse)).toHaveLength(50_001);
  });

  test('a JSON header ending inside a number: the bytes after `end` are not read', () => {
    const b = Buffer.from('[1,2,34567');
    expect(() => parseJson(b, 0, 6)).toThrow("Missing a comma or ']' after an array element. at 6");
    expect(() => parseJson(Buffer.from('[1,2.5e'), 0, 7)).toThrow('Miss exponent in number. at 7');
  });
});

describe('a document\'s number array given back', () => {
  const runOf = (text: string): JsonArray => {
    const root = parseJson(Buffer.from(text));
    const data = root.kind === 'object' ? member(root, 'data') : undefined;
    if (data?.kind !== 'array' || data.numbers === undefined) throw new Error(`no run in ${text}`);
    return data;
  };
  const valuesOf = (a: JsonArray): number[] => Array.from(a.numbers!.pool.values.subarray(a.numbers!.start, a.numbers!.end));

  test('serves the next document, which reads its own values into it', () => {
    const first = runOf(`{"data":[${Array.from({ length: 5000 }, (_, i) => i + 0.5).join(',')}]}`);
    const memory = first.numbers!.pool.values;
    giveBackNumbers(first.numbers!.pool);
    expect(first.numbers!.pool.values.length).toBe(0); // the given-back document reads nothing any more
    const second = runOf('{"data":[1,2.5,-3]}');
    expect(second.numbers!.pool.values).toBe(memory);
    expect(valuesOf(second)).toEqual([1, 2.5, -3]);
  });

  test('is never shared while a document that was not given back still holds it', () => {
    const first = runOf(`{"data":[${Array.from({ length: 3000 }, (_, i) => i).join(',')}]}`);
    const second = runOf('{"data":[7,8,9]}');
    expect(second.numbers!.pool.values).not.toBe(first.numbers!.pool.values);
    expect(valuesOf(first).slice(0, 3)).toEqual([0, 1, 2]);
    expect(valuesOf(second)).toEqual([7, 8, 9]);
  });

  test('above SPARE_MAX_VALUES is not kept', () => {
    const big = runOf(`{"data":[${new Array(SPARE_MAX_VALUES + 10).fill(1.25).join(',')}]}`);
    const memory = big.numbers!.pool.values;
    expect(memory.length).toBeGreaterThan(SPARE_MAX_VALUES);
    giveBackNumbers(big.numbers!.pool);
    expect(runOf('{"data":[1]}').numbers!.pool.values).not.toBe(memory);
  });
});
