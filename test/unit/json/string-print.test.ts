import * as fs from 'node:fs';
import * as path from 'node:path';
import { isUtf8 } from 'node:buffer';
import {
  jsonStringByteLength, jsonStringBytesOfBytes, jsonStringOfBytes, writeJsonStringOfBytes,
} from '../../../gateway/json/string-print';

// Fixture: Triton 2.51's own JSON string tokens for BYTES elements (see the file's header).
interface Case { input: Buffer; token: Buffer; category: string }

const cases: Case[] = fs.readFileSync(path.join(__dirname, 'fixtures', 'bytes.txt'), 'latin1').split('\n')
  .filter((line) => line !== '' && !line.startsWith('#'))
  .map((line) => {
    const [input, token, category] = line.split(' ');
    if (input === undefined || token === undefined || category === undefined) throw new Error(`bad fixture line: ${line}`);
    return { input: Buffer.from(input === '-' ? '' : input, 'hex'), token: Buffer.from(token, 'hex'), category };
  });

const token = (bytes: number[] | string): string =>
  jsonStringBytesOfBytes(typeof bytes === 'string' ? Buffer.from(bytes, 'utf8') : Buffer.from(bytes)).toString('latin1');

describe('BYTES JSON strings match Triton byte for byte', () => {
  test('fixture covers every single byte, invalid UTF-8 and random strings', () => {
    expect(cases.length).toBeGreaterThan(900);
    expect(cases.filter((c) => c.category === 'single')).toHaveLength(256);
    expect(cases.some((c) => c.category === 'invalid-utf8')).toBe(true);
  });

  test('every fixture entry, as bytes, from a sub-range of a larger buffer', () => {
    const bad: string[] = [];
    for (const c of cases) {
      const framed = Buffer.concat([Buffer.from([0x22, 0x00]), c.input, Buffer.from([0x5c])]);
      const start = 2, end = 2 + c.input.length;
      const got = jsonStringBytesOfBytes(framed, start, end);
      const len = jsonStringByteLength(framed, start, end);
      const target = Buffer.alloc(len + 1, 0xee);
      const at = writeJsonStringOfBytes(framed, start, end, target, 1);
      if (!got.equals(c.token) || len !== c.token.length || at !== len + 1 || !target.subarray(1).equals(c.token)) {
        bad.push(`${c.input.toString('hex')}: Triton ${c.token.toString('hex')}, got ${got.toString('hex')}`);
      }
    }
    expect(bad.slice(0, 10)).toEqual([]);
  });

  test('the string form is exact for valid UTF-8', () => {
    const valid = cases.filter((c) => isUtf8(c.input));
    expect(valid.length).toBeGreaterThan(300);
    for (const c of valid) expect(jsonStringOfBytes(c.input)).toBe(c.token.toString('utf8'));
  });
});

describe('rapidjson escaping, readable cases (all confirmed in the fixture)', () => {
  test('quote and backslash get short escapes; "/" is not escaped', () => {
    expect(token('a"b\\c/d')).toBe('"a\\"b\\\\c/d"');
  });

  test('\\b \\t \\n \\f \\r short forms; other control bytes \\u00XX in uppercase hex', () => {
    expect(token([8, 9, 10, 12, 13])).toBe('"\\b\\t\\n\\f\\r"');
    expect(token([0x0b, 0x1f, 0x1a])).toBe('"\\u000B\\u001F\\u001A"');
  });

  test('NUL is escaped, never a terminator, also leading and trailing', () => {
    expect(token([0, 0x61, 0])).toBe('"\\u0000a\\u0000"');
  });

  test('DEL (0x7f) and bytes >= 0x80 pass through unchanged, invalid UTF-8 included', () => {
    expect(jsonStringBytesOfBytes(Buffer.from([0x7f, 0x80, 0xff, 0xc0, 0xaf])).toString('hex')).toBe('227f80ffc0af22');
    expect(jsonStringBytesOfBytes(Buffer.from([0xed, 0xa0, 0x80])).toString('hex')).toBe('22eda08022'); // surrogate
  });

  test('multi-byte UTF-8 is copied, not \\u-escaped', () => {
    expect(jsonStringOfBytes(Buffer.from('é€😀', 'utf8'))).toBe('"é€😀"');
    expect(jsonStringOfBytes(Buffer.from('\u2028x\n', 'utf8'))).toBe('"\u2028x\\n"');
  });

  test('empty element and default range', () => {
    expect(jsonStringOfBytes(new Uint8Array(0))).toBe('""');
    expect(jsonStringOfBytes(Buffer.from('xyz'), 1)).toBe('"yz"');
  });
});
