// The V2 header decoder and the slot fillers, with bodies split into 1-, 2- and 7-byte chunks.
import { fillBinarySlots } from '../../../gateway/decode/binary-extension';
import { fillJsonSlots, writeJsonData } from '../../../gateway/decode/json-data';
import { decodeV2Header } from '../../../gateway/decode/v2-header';
import { frameInferRequest } from '../../../gateway/infer/frame-request';
import { inference } from '../../../proto/services';
import { int32 } from '../../support/int32';

const ctx = { modelName: 'm', modelVersion: '', binaryBytes: 0, maxInputSizeBytes: 64 << 20 };

function split(b: Buffer, n: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += n) out.push(b.subarray(i, i + n));
  return out;
}

/** The route's decode steps on a complete body: header, framing, JSON data, binary section. */
function decode(json: unknown, binary: Buffer, chunk: number) {
  const header = Buffer.from(typeof json === 'string' ? json : JSON.stringify(json));
  const chunks = split(Buffer.concat([header, binary]), chunk);
  const d = decodeV2Header(header, 0, header.length, { ...ctx, binaryBytes: binary.length });
  const framed = frameInferRequest(d.request);
  const decoded = fillJsonSlots(header, d.plans, d.request, framed.slots, framed.message);
  const copied = fillBinarySlots(chunks, header.length, d.plans, framed.slots, framed.message);
  return { ...d, message: inference.ModelInferRequest.decode(framed.message.subarray(5)), copied, decoded };
}

function error(fn: () => unknown): { code: string; status: number; message: string } {
  try {
    fn();
  } catch (e) {
    const g = e as { code: string; status: number; message: string };
    return { code: g.code, status: g.status, message: g.message };
  }
  throw new Error('no error');
}

describe.each([1, 2, 7, 1 << 20])('decode in %i-byte chunks', (chunk) => {
  test('mixed JSON and binary inputs, in input order', () => {
    const r = decode({
      id: 'x',
      parameters: { sequence_id: 'SEQ', binary_data_output: true, note: 'n', big: 1.5 },
      inputs: [
        { name: 'A', datatype: 'INT8', shape: [3], data: [[-1], [127, 128]] },
        { name: 'B', datatype: 'UINT8', shape: [2], parameters: { binary_data_size: 2 } },
        { name: 'C', datatype: 'BYTES', shape: [2], data: ['é', 'a\u0000"'] },
        { name: 'D', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 0 } },
        { name: 'E', datatype: 'BOOL', shape: [2], data: [true, false] },
      ],
    }, Buffer.from([9, 8]), chunk);
    expect(r.message.parameters.sequence_id!.string_param).toBe('SEQ');
    expect(r.copied).toBe(2);
    expect(r.request.binaryDataOutput).toBe(true);
    expect(r.request.parameters.has('binary_data_output')).toBe(false);
    const raw = r.message.raw_input_contents.map((b) => Buffer.from(b).toString('hex'));
    expect(raw).toEqual(['ff7f80', '0908', '02000000c3a9' + '0300000061' + '0022', '', '0100']);
    expect(r.message.parameters.big!.double_param).toBe(1.5);
  });
});

describe('Triton\'s rules for JSON data', () => {
  const one = (datatype: string, data: unknown, shape = [Array.isArray(data) ? data.length : 1]) =>
    decode({ inputs: [{ name: 'I', datatype, shape, data }] }, Buffer.alloc(0), 1 << 20).message.raw_input_contents[0]!;

  test('integers wrap to the element width; 64-bit values are exact', () => {
    expect(Buffer.from(one('INT16', [65537, -32769])).toString('hex')).toBe('0100ff7f');
    const body = '{"inputs":[{"name":"I","datatype":"INT64","shape":[2],"data":[-9223372036854775808,9007199254740993]}]}';
    const h = Buffer.from(body);
    const d = decodeV2Header(h, 0, h.length, ctx);
    const f = frameInferRequest(d.request);
    const plan = d.plans[0]!;
    if (plan.kind !== 'json') throw new Error('plan');
    writeJsonData(h, plan.data, 'INT64', f.message, f.slots[0]!.offset, 2);
    const v = f.message.subarray(f.slots[0]!.offset);
    expect([v.readBigInt64LE(0), v.readBigInt64LE(8)]).toEqual([-9223372036854775808n, 9007199254740993n]);
  });

  test('FP32 is the double rounded to float; NaN and Infinity tokens are accepted', () => {
    const body = Buffer.from('{"inputs":[{"name":"I","datatype":"FP32","shape":[4],"data":[0.1,NaN,-Infinity,-0.0]}]}');
    const d = decodeV2Header(body, 0, body.length, ctx);
    const f = frameInferRequest(d.request);
    const plan = d.plans[0]!;
    if (plan.kind !== 'json') throw new Error('plan');
    writeJsonData(body, plan.data, 'FP32', f.message, f.slots[0]!.offset, 4);
    expect(f.message.subarray(f.slots[0]!.offset).toString('hex')).toBe('cdcccc3d' + '0000c07f' + '000080ff' + '00000080');
  });

  test.each([
    ['1.0 as an integer', () => decode('{"inputs":[{"name":"I","datatype":"INT32","shape":[1],"data":[1.0]}]}', Buffer.alloc(0), 64), "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer"],
    ['-1 as unsigned', () => one('UINT8', [-1]), "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer"],
    ['a string as bool', () => one('BOOL', ['true']), "Unable to parse 'data': attempt to access JSON non-boolean as boolean"],
    ['a number as BYTES', () => one('BYTES', [1]), 'Unable to parse JSON bytes array: attempt to access JSON non-string as string'],
    ['too few values', () => one('INT32', [1, 2], [3]), "Unable to parse 'data': Shape does not match true shape of 'data' field"],
  ])('%s', (_n, fn, message) => {
    expect(error(fn).message).toBe(message);
  });

  test('no nesting limit, as in Triton 2.51', () => {
    const body = `{"inputs":[{"name":"I","datatype":"INT32","shape":[1],"data":${'['.repeat(5000)}1${']'.repeat(5000)}}]}`;
    expect(Buffer.from(decode(body, Buffer.alloc(0), 64).message.raw_input_contents[0]!).toString('hex')).toBe('01000000');
  });

  test('a uint64 sequence_id travels as the same 64 bits in int64_param', () => {
    const r = decode('{"parameters":{"sequence_id":18446744073709551615},"inputs":[]}', Buffer.alloc(0), 64);
    expect(r.message.parameters.sequence_id!.int64_param!.toString()).toBe('-1');
  });

  test('negative shape dims and datatypes Triton does not know', () => {
    expect(error(() => one('INT32', [1], [-1])).message).toBe("Unable to parse 'shape': attempt to access JSON non-unsigned-integer as unsigned-integer");
    expect(error(() => one('INT33', [1])).message).toBe('invalid datatype for input I');
  });
});

describe('base64 tensor data', () => {
  const ab = Buffer.from([0x00, 0xff, 0xfe, 0x41]);
  const raw = (json: unknown, i = 0) => Buffer.from(decode(json, Buffer.alloc(0), 1 << 20).message.raw_input_contents[i]!).toString('hex');
  const bytesEl = (...xs: Buffer[]): string => xs.map((x) => Buffer.from([x.length, 0, 0, 0]).toString('hex') + x.toString('hex')).join('');

  test('BYTES elements as {"b64": …}, mixed with text, nested', () => {
    const r = decode({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [1, 3], data: [[{ b64: ab.toString('base64') }, 'hi', { b64: 'data:image/png;base64,' + ab.toString('base64url') }]] }] }, Buffer.alloc(0), 1 << 20);
    expect(Buffer.from(r.message.raw_input_contents[0]!).toString('hex')).toBe(bytesEl(ab, Buffer.from('hi'), ab));
    expect(r.decoded).toBe(8); // the base64 payload bytes, each decoded once into the slot
  });

  test('content_type "base64" on a BYTES input: every string element is base64', () => {
    expect(raw({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [2], parameters: { content_type: 'base64' }, data: ['AP/+QQ==', 'aGk'] }] }))
      .toBe(bytesEl(ab, Buffer.from('hi')));
  });

  test('request-level content_type "base64" applies to every BYTES input and is not forwarded', () => {
    const r = decode({ parameters: { content_type: 'base64', other: 'x' }, inputs: [{ name: 'S', datatype: 'BYTES', shape: [1], data: ['aGk='] }] }, Buffer.alloc(0), 64);
    expect(Buffer.from(r.message.raw_input_contents[0]!).toString('hex')).toBe(bytesEl(Buffer.from('hi')));
    expect(Object.keys(r.message.parameters)).toEqual(['other']);
  });

  test('another content_type is forwarded as Triton would', () => {
    const r = decode({ parameters: { content_type: 'str' }, inputs: [{ name: 'S', datatype: 'BYTES', shape: [1], data: ['aGk='] }] }, Buffer.alloc(0), 64);
    expect(r.message.parameters.content_type!.string_param).toBe('str');
    expect(Buffer.from(r.message.raw_input_contents[0]!).toString()).toContain('aGk=');
  });

  test('a numeric tensor as one base64 string or {"b64"}: its little-endian bytes', () => {
    const f32 = Buffer.alloc(8);
    f32.writeFloatLE(1.5, 0);
    f32.writeFloatLE(-2, 4);
    expect(raw({ inputs: [{ name: 'F', datatype: 'FP32', shape: [1, 2], data: f32.toString('base64') }] })).toBe(f32.toString('hex'));
    expect(raw({ inputs: [{ name: 'F', datatype: 'FP32', shape: [2], data: { b64: f32.toString('base64url') } }] })).toBe(f32.toString('hex'));
  });

  test('FP16 and BF16 become possible in JSON', () => {
    const h = Buffer.from([0x00, 0x3c, 0x00, 0xc0]); // 1.0, -2.0
    expect(raw({ inputs: [{ name: 'H', datatype: 'FP16', shape: [2], data: h.toString('base64') }] })).toBe('003c00c0');
    expect(raw({ inputs: [{ name: 'B', datatype: 'BF16', shape: [2], data: { b64: h.toString('base64') } }] })).toBe('003c00c0');
  });

  test('sizes are checked against shape × datatype before decoding', () => {
    expect(error(() => raw({ inputs: [{ name: 'F', datatype: 'FP32', shape: [3], data: Buffer.alloc(8).toString('base64') }] }))).toEqual({
      code: 'GW_ERR_DECODE_BASE64_SIZE', status: 400,
      message: "Unable to parse 'data': base64 for input 'F' decodes to 8 bytes, expected 12 bytes from shape and datatype",
    });
  });

  test('the byte budget is checked from the shape before the text is read', () => {
    const body = Buffer.from(JSON.stringify({ inputs: [{ name: 'F', datatype: 'FP32', shape: [64], data: Buffer.alloc(256).toString('base64') }] }));
    expect(error(() => decodeV2Header(body, 0, body.length, { ...ctx, maxInputSizeBytes: 100 })).code).toBe('GW_ERR_DECODE_TOO_LARGE');
    // BYTES: the sum of the elements' decoded sizes, also before decoding
    const bytes = Buffer.from(JSON.stringify({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [1], data: [{ b64: Buffer.alloc(120).toString('base64') }] }] }));
    expect(error(() => decodeV2Header(bytes, 0, bytes.length, { ...ctx, maxInputSizeBytes: 100 }))).toEqual({
      code: 'GW_ERR_DECODE_TOO_LARGE', status: 400,
      message: "JSON input 'S' has a byte_size (124 bytes) that exceeds the maximum allowed value of 100 bytes. Use --http-max-input-size to increase the limit.",
    });
  });

  test('invalid characters are refused, naming the input and element', () => {
    expect(error(() => raw({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [2], data: ['x', { b64: 'aG!k' }] }] }))).toEqual({
      code: 'GW_ERR_DECODE_BASE64_INVALID', status: 400,
      message: 'Unable to parse \'data\': invalid base64 for input \'S\' element 1: character "!" at offset 2',
    });
    expect(error(() => raw({ inputs: [{ name: 'F', datatype: 'INT32', shape: [1], data: 'AAA*AAA=' }] })).code).toBe('GW_ERR_DECODE_BASE64_INVALID');
  });

  test('an object without a string "b64" is Triton\'s non-string error; BYTES data as a string stays non-array', () => {
    expect(error(() => raw({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [1], data: [{ b64: 1 }] }] })).message)
      .toBe('Unable to parse JSON bytes array: attempt to access JSON non-string as string');
    expect(error(() => raw({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [1], data: 'aGk=' }] })).message)
      .toBe("Unable to parse 'data': attempt to access JSON non-array as array");
  });

  test.each([1, 2, 3, 5, 7])('a whole body split into %i-byte chunks and gathered decodes the same', (n) => {
    const json = JSON.stringify({ inputs: [{ name: 'F', datatype: 'UINT8', shape: [4], data: 'data:application/octet-stream;base64,AP/+QQ==' }] }).replace(/\//g, '\\/');
    const gathered = Buffer.concat(split(Buffer.from(json), n));
    expect(raw(gathered.toString())).toBe('00fffe41');
  });
});

describe('binary extension without Inference-Header-Content-Length (headerless)', () => {
  const head = (sizes: number[], extra = ''): string => JSON.stringify({
    inputs: sizes.map((n, i) => ({ name: `I${i}`, datatype: 'INT32', shape: [1, n / 4], parameters: { binary_data_size: n } })),
  }) + extra;
  const hl = { ...ctx, headerless: true };
  const body = (json: string, ...parts: Buffer[]): Buffer => Buffer.concat([Buffer.from(json), ...parts]);

  test.each([
    ['non-NUL first byte', int32([7, 8, 9, 10]), int32([100, 101, 102, 103])],
    ['NUL first byte (rapidjson reads it as the end)', int32([0, 1, 2, 3]), int32([0, 1, 2, 3])],
    ['bytes that look like blanks', Buffer.alloc(16, 0x20), Buffer.alloc(16, 0x0a)],
  ])('the rest of the body is the binary section: %s', (_n, a, b) => {
    const json = head([16, 16]);
    const all = body(json, a, b);
    const d = decodeV2Header(all, 0, all.length, hl);
    expect(d.headerEnd).toBe(json.length);
    expect(d.plans.map((p) => p.kind)).toEqual(['binary', 'binary']);
    const framed = frameInferRequest(d.request);
    expect(fillBinarySlots(split(all, 3), d.headerEnd, d.plans, framed.slots, framed.message)).toBe(32);
    const m = inference.ModelInferRequest.decode(framed.message.subarray(5));
    expect(Buffer.from(m.raw_input_contents[0]!)).toEqual(a);
    expect(Buffer.from(m.raw_input_contents[1]!)).toEqual(b);
  });

  test('blanks between the JSON and the binary section are skipped when the sizes say so', () => {
    const json = head([16], '\r\n');
    const all = body(json, int32([1, 2, 3, 4]));
    const d = decodeV2Header(all, 0, all.length, hl);
    expect(d.headerEnd).toBe(json.length);
  });

  test('size mismatches are Triton\'s errors, counted from the end of the JSON', () => {
    const short = body(head([16, 16]), int32([1, 2, 3, 4, 5, 6]));
    expect(error(() => decodeV2Header(short, 0, short.length, hl)).message).toBe("unexpected size for input 'I1', expecting 8 additional bytes for model 'm'");
    const long = body(head([16]), int32([1, 2, 3, 4, 5]));
    expect(error(() => decodeV2Header(long, 0, long.length, hl)).message).toBe("unexpected additional input data for model 'm'");
  });

  test('without binary_data_size, trailing bytes keep Triton\'s answers', () => {
    const json = JSON.stringify({ inputs: [{ name: 'I', datatype: 'INT32', shape: [1], data: [1] }] });
    const junk = body(json, Buffer.from('xyz'));
    expect(error(() => decodeV2Header(junk, 0, junk.length, hl))).toEqual({
      code: 'GW_ERR_DECODE_MALFORMED', status: 400,
      message: `failed to parse the request JSON buffer: The document root must not be followed by other values. at ${json.length}`,
    });
    const nul = body(json, Buffer.from([0, 1, 2]));
    expect(decodeV2Header(nul, 0, nul.length, hl).headerEnd).toBe(nul.length);
  });

  test('only blanks or NULs after the JSON, fewer than declared: Triton\'s "expecting" error for the whole size', () => {
    const all = body(head([16]), Buffer.from([0, 0x20]));
    expect(error(() => decodeV2Header(all, 0, all.length, hl)).message).toBe("unexpected size for input 'I0', expecting 16 additional bytes for model 'm'");
  });

  test('off (headerless unset): Triton\'s reading', () => {
    const all = body(head([16]), int32([1, 2, 3, 4]));
    expect(error(() => decodeV2Header(all, 0, all.length, ctx)).message).toMatch(/^failed to parse the request JSON buffer: The document root must not be followed by other values\. at \d+$/);
  });
});
