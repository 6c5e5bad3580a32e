// writeJsonData has two numeric paths: the values the reader pooled (JsonArray.numbers) and the
// byte loop over the array (writeNumbers, for arrays that are not runs). Both must write exactly
// what Triton stores — here, readNumber's value cast as C casts it, element by element — and fail
// with the same error at the same element.
import { writeJsonData } from '../../../gateway/decode/json-data';
import { type NumberValue, readNumber } from '../../../gateway/json/number-parse';
import { type JsonArray, parseJson } from '../../../gateway/json/reader';
import type { Datatype } from '../../../gateway/infer/datatype';
import { seeded as random } from '../../support/random';

const NUMERIC: Datatype[] = ['FP32', 'FP64', 'INT8', 'UINT8', 'INT16', 'UINT16', 'INT32', 'UINT32', 'INT64', 'UINT64'];
const WIDTH: Record<string, number> = { FP32: 4, FP64: 8, INT8: 1, UINT8: 1, INT16: 2, UINT16: 2, INT32: 4, UINT32: 4, INT64: 8, UINT64: 8 };

const out: NumberValue = { integer: false, value: 0, big: undefined, negative: false };

/** Triton's bytes for `tokens` (number texts) as `datatype`, or its error message. */
function reference(tokens: string[], datatype: Datatype, expected: number): Buffer | string {
  const w = WIDTH[datatype]!;
  const slot = Buffer.alloc(expected * w);
  const unsigned = datatype.startsWith('U');
  for (let i = 0; i < tokens.length; i++) {
    if (i >= expected) return "Unable to parse 'data': Shape does not match true shape of 'data' field";
    const t = Buffer.from(tokens[i]!);
    const n = readNumber(t, 0, t.length, out);
    if (datatype === 'FP32' || datatype === 'FP64') {
      if (Number.isNaN(n.value)) {
        if (datatype === 'FP32') slot.writeUInt32LE(n.negative ? 0xffc00000 : 0x7fc00000, i * 4);
        else slot.writeBigUInt64LE(n.negative ? 0xfff8000000000000n : 0x7ff8000000000000n, i * 8);
      } else if (datatype === 'FP32') slot.writeFloatLE(n.value, i * 4);
      else slot.writeDoubleLE(n.value, i * 8);
      continue;
    }
    const big = n.big ?? (n.integer ? BigInt(n.value) : undefined);
    if (big === undefined || (unsigned ? big < 0n : big > 2n ** 63n - 1n)) {
      return `Unable to parse 'data': attempt to access JSON non-${unsigned ? 'unsigned-integer as unsigned-integer' : 'signed-integer as signed-integer'}`;
    }
    const bits = BigInt.asUintN(w * 8, big); // C's cast to the element width
    for (let k = 0; k < w; k++) slot[i * w + k] = Number((bits >> BigInt(8 * k)) & 0xffn);
  }
  if (tokens.length !== expected) return "Unable to parse 'data': Shape does not match true shape of 'data' field";
  return slot;
}

function write(data: JsonArray, body: Buffer, datatype: Datatype, expected: number): Buffer | string {
  const slot = Buffer.alloc(3 + expected * WIDTH[datatype]!); // at an offset, as in a framed message
  try {
    writeJsonData(body, data, datatype, slot, 3, expected);
  } catch (err) {
    return (err as Error).message;
  }
  return slot.subarray(3);
}

function token(rnd: () => number): string {
  const r = rnd();
  if (r < 0.35) return String(Math.floor((rnd() - 0.3) * 10 ** Math.floor(rnd() * 6)));
  if (r < 0.4) return ['-0', '0', '255', '256', '-129', '65536', '4294967296', '-2147483649'][Math.floor(rnd() * 8)]!;
  if (r < 0.45) return ['9223372036854775807', '9223372036854775808', '18446744073709551615', '-9223372036854775808', '123456789012345678'][Math.floor(rnd() * 5)]!;
  if (r < 0.48) return ['NaN', '-NaN', 'Infinity', '-Infinity', '1e300', '-1e-400'][Math.floor(rnd() * 6)]!;
  if (r < 0.8) return JSON.stringify(Math.fround((rnd() * 2 - 1) * 10 ** Math.floor(rnd() * 8 - 4)));
  return (rnd() * 2 - 1).toExponential(Math.floor(rnd() * 18)).replace('e+', 'e');
}

describe('writeJsonData: pooled values, the byte loop and readNumber agree', () => {
  test('3,000 random arrays in every numeric datatype, flat and nested, short and long', () => {
    const rnd = random(77);
    let runs = 0;
    let errors = 0;
    for (let i = 0; i < 3000; i++) {
      const count = 1 + Math.floor(rnd() * 12);
      // Mostly integers for the integer types, so that most arrays get past the first element.
      const intsOnly = rnd() < 0.5;
      const tokens = Array.from({ length: count }, () => (intsOnly ? String(Math.floor((rnd() - 0.3) * 10 ** Math.floor(rnd() * 10))) : token(rnd)));
      const nested = rnd() < 0.3 && count > 1;
      const text = nested
        ? `[[${tokens.slice(0, count >> 1).join(', ')}],\n [${tokens.slice(count >> 1).join(',')}]]`
        : `[${tokens.join(rnd() < 0.5 ? ',' : ' , ')}]`;
      const body = Buffer.from(`{"data":${text}}`);
      const root = parseJson(body);
      if (root.kind !== 'object') throw new Error('object');
      const data = root.members[0]!.value as JsonArray;
      const expected = rnd() < 0.9 ? count : count + (rnd() < 0.5 ? 1 : -1);
      for (const datatype of NUMERIC) {
        const want = reference(tokens, datatype, expected);
        const pooled = write(data, body, datatype, expected);
        const bytes = write({ ...data, numbers: undefined }, body, datatype, expected);
        const show = (x: Buffer | string): string => (typeof x === 'string' ? x : x.toString('hex'));
        if (show(pooled) !== show(want) || show(bytes) !== show(want)) {
          throw new Error(`${datatype} ${text} (expected ${expected}): reference ${show(want)}, pooled ${show(pooled)}, bytes ${show(bytes)}`);
        }
        if (typeof want === 'string') errors++;
      }
      if (data.numbers !== undefined) runs++;
    }
    expect(runs).toBeGreaterThan(2000);
    expect(errors).toBeGreaterThan(3000); // shape and type errors are covered too
  });

  test('a wrong type after a shape overflow: the shape error comes first, as element by element', () => {
    const body = Buffer.from('{"data":[1,2,3.5]}');
    const root = parseJson(body);
    if (root.kind !== 'object') throw new Error('object');
    const data = root.members[0]!.value as JsonArray;
    expect(write(data, body, 'INT32', 2)).toBe("Unable to parse 'data': Shape does not match true shape of 'data' field");
    expect(write(data, body, 'INT32', 3)).toBe("Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer");
  });

  test('regression: an integer beyond 2^53 cast to 8-32 bits keeps its exact low bits (not the rounded double\'s)', () => {
    const body = Buffer.from('{"data":[123456789012345678,-9223372036854775807]}');
    const root = parseJson(body);
    if (root.kind !== 'object') throw new Error('object');
    const data = root.members[0]!.value as JsonArray;
    expect(write(data, body, 'INT8', 2)).toEqual(Buffer.from([0x4e, 0x01])); // 0x…4e, 0x…01
    expect(write(data, body, 'INT32', 2)).toEqual(Buffer.from('4ef330a601000000', 'hex'));
  });
});
