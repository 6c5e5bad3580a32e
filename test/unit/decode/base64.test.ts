// The base64 decoder: every accepted form, fed whole and split into 1-, 2-, 3- and 7-byte chunks
// (so splits fall inside 4-character groups, inside JSON escapes and across the data: prefix),
// and every refusal with its exact code and message.
import { Base64Decoder, base64Size, writeBase64 } from '../../../gateway/decode/base64/base64';

const payload = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 37 + 11) & 0xff));

/** The content of a JSON string token holding `text` as JSON.stringify writes it, plus `\/` escapes. */
const token = (text: string, escapeSlash = false): Buffer => {
  const j = JSON.stringify(text).slice(1, -1);
  return Buffer.from(escapeSlash ? j.replace(/\//g, '\\/') : j, 'latin1');
};

function streamed(src: Buffer, chunk: number, expected: number): Buffer {
  const out = Buffer.alloc(expected + 8, 0xee);
  const d = new Base64Decoder(out, 4, expected, "input 'X'");
  for (let i = 0; i < src.length; i += chunk) d.push(src, i, Math.min(src.length, i + chunk));
  expect(d.end()).toBe(expected);
  expect(out.subarray(0, 4)).toEqual(Buffer.alloc(4, 0xee)); // nothing outside the slot
  expect(out.subarray(4 + expected)).toEqual(Buffer.alloc(4, 0xee));
  return out.subarray(4, 4 + expected);
}

function refusal(src: Buffer, expected: number): { code: string; message: string } {
  const grab = (fn: () => unknown): { code: string; message: string } => {
    try {
      fn();
    } catch (e) {
      const g = e as { code: string; message: string };
      return { code: g.code, message: g.message };
    }
    throw new Error('no error');
  };
  const whole = grab(() => writeBase64(src, 0, src.length, Buffer.alloc(expected + 4), 0, expected, "input 'X'"));
  // Streamed in 1-byte chunks the answer is the same.
  const bytewise = grab(() => {
    const d = new Base64Decoder(Buffer.alloc(expected + 4), 0, expected, "input 'X'");
    for (let i = 0; i < src.length; i++) d.push(src, i, i + 1);
    d.end();
  });
  expect(bytewise).toEqual(whole);
  return whole;
}

const std = payload.toString('base64');
const url = payload.toString('base64url'); // no padding, - and _
const forms: [string, Buffer][] = [
  ['standard, padded', token(std)],
  ['URL-safe, unpadded', token(url)],
  ['standard with \\/ escapes', token(std, true)],
  ['line breaks every 76 characters (MIME), as JSON \\n escapes', token(std.replace(/.{76}/g, '$&\n'))],
  ['CRLF and blanks', token(std.replace(/.{10}/g, '$& \r\n\t'))],
  ['data: URI prefix', token(`data:image/png;base64,${std}`)],
  ['data: URI prefix with \\/ in the mime type', token(`data:image/png;base64,${std}`, true)],
  ['data: URI with parameters, unpadded URL-safe', token(`data:application/octet-stream;name=x.bin;base64,${url}`)],
  ['\\u escapes for alphabet characters', Buffer.from(JSON.stringify(std).slice(1, -1).replace(/A/g, '\\u0041'), 'latin1')],
];

describe.each(forms)('%s', (_, src) => {
  test('size from the text', () => {
    expect(base64Size(src, 0, src.length, "input 'X'")).toBe(payload.length);
  });
  test('written whole into the slot', () => {
    const out = Buffer.alloc(payload.length);
    expect(writeBase64(src, 0, src.length, out, 0, payload.length, "input 'X'")).toBe(payload.length);
    expect(out).toEqual(payload);
  });
  test.each([1, 2, 3, 7])('streamed in %i-byte chunks', (n) => {
    expect(streamed(src, n, payload.length)).toEqual(payload);
  });
});

test('every tail length: 1, 2 and 3 bytes past a group, padded and not', () => {
  for (let n = 0; n < 10; n++) {
    const b = payload.subarray(0, n);
    for (const text of [b.toString('base64'), b.toString('base64url')]) {
      const src = Buffer.from(text);
      expect(base64Size(src, 0, src.length, 'x')).toBe(n);
      expect(streamed(src, 1, n)).toEqual(b);
    }
  }
});

test('payloads longer than one 64 KiB run of the slow path', () => {
  const big = Buffer.alloc(200_000);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7) & 0xff;
  const src = Buffer.from(big.toString('base64').replace(/.{76}/g, '$&\\n'));
  expect(base64Size(src, 0, src.length, 'x')).toBe(big.length);
  const out = Buffer.alloc(big.length);
  writeBase64(src, 0, src.length, out, 0, big.length, 'x');
  expect(out).toEqual(big);
  expect(streamed(src, 4099, big.length)).toEqual(big);
});

describe('refusals', () => {
  test('a character outside both alphabets (Node would skip it)', () => {
    expect(refusal(Buffer.from('QUJD!RUZH'), 6)).toEqual({
      code: 'GW_ERR_DECODE_BASE64_INVALID',
      message: 'Unable to parse \'data\': invalid base64 for input \'X\': character "!" at offset 4',
    });
  });
  test('an invalid character where padding belongs (clean length, fast path)', () => {
    expect(refusal(Buffer.from('QUI!'), 3).message).toBe('Unable to parse \'data\': invalid base64 for input \'X\': character "!" at offset 3');
  });
  test('non-ASCII bytes', () => {
    expect(refusal(Buffer.from('QUJDé', 'utf8'), 3).code).toBe('GW_ERR_DECODE_BASE64_INVALID');
  });
  test('padding in the middle', () => {
    expect(refusal(Buffer.from('QUI=QUJD'), 5)).toEqual({
      code: 'GW_ERR_DECODE_BASE64_INVALID',
      message: 'Unable to parse \'data\': invalid base64 for input \'X\': padding \'=\' before the end (offset 4)',
    });
  });
  test('a length of 4k+1', () => {
    expect(refusal(Buffer.from('QUJDR'), 3).message).toBe('Unable to parse \'data\': invalid base64 for input \'X\': 5 characters (a length of 4k+1 cannot be base64)');
  });
  test('padding that does not complete the group', () => {
    expect(refusal(Buffer.from('QU='), 1).message).toBe('Unable to parse \'data\': invalid base64 for input \'X\': 1 padding characters after 2 characters');
  });
  test('too much padding', () => {
    expect(refusal(Buffer.from('QU==='), 1).message).toBe('Unable to parse \'data\': invalid base64 for input \'X\': too much padding at offset 4');
  });
  test('a data: URI that is not base64', () => {
    expect(refusal(Buffer.from('data:text/plain,hello'), 5).message).toBe('Unable to parse \'data\': invalid base64 for input \'X\': data: URI is not base64 ("data:text/plain")');
  });
  test('an escape that stands for a control character (\\b)', () => {
    expect(refusal(Buffer.from('QU\\bJD'), 3).code).toBe('GW_ERR_DECODE_BASE64_INVALID');
  });
  test('too few bytes for the shape', () => {
    expect(refusal(Buffer.from('QUJD'), 4)).toEqual({
      code: 'GW_ERR_DECODE_BASE64_SIZE',
      message: "Unable to parse 'data': base64 for input 'X' decodes to 3 bytes, expected 4 bytes from shape and datatype",
    });
  });
  test('too many bytes: refused before the slot overflows', () => {
    const src = Buffer.from(Buffer.alloc(300_000).toString('base64').replace(/.{76}/g, '$& '));
    const out = Buffer.alloc(100_008, 0xee);
    expect(() => writeBase64(src, 0, src.length, out, 0, 100_000, 'x')).toThrow(/decodes to more than 100000 bytes/);
    expect(out.subarray(100_000)).toEqual(Buffer.alloc(8, 0xee));
  });
});
