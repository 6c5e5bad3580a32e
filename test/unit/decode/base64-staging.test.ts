// Base64 decoded while a JSON body arrives: every body fed whole and in 1-, 2-, 3-, 7-byte and
// 64 KiB chunks; what is staged decodes to exactly the payload and the document left parses as
// the original; what is not clean base64 is left in the document; and the staged V2 reading
// answers exactly as the whole-body reading, or steps aside for it.
import { releaseWhole } from '../../../gateway/buffers/release';
import { Base64Staging, STAGE_MIN_CHARS, type StagedBody } from '../../../gateway/decode/base64/base64-staging';
import { decodeStagedBody, decodeWholeBody, type WholeBodyOptions } from '../../../gateway/decode/v2-body';
import { Ledger } from '../../../gateway/infer/ledger';
import { frameInferHead } from '../../../gateway/infer/frame-request';
import type { inference } from '../../../proto/services';
import { CHUNK_SIZES, splitEvery } from '../../support/chunks';

const payload = (n: number, seed = 7): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 131 + seed * 17 + (i >> 7)) & 0xff));

const SIZES = [...CHUNK_SIZES, 64 * 1024];

function stage(body: Buffer, chunk: number, placeholder?: (nonce: string, i: number) => string, maxInputSizeBytes = 64 << 20): StagedBody | undefined {
  const s = new Base64Staging({ bodyBytes: body.length, maxInputSizeBytes, allocate: (n) => Buffer.allocUnsafe(n) });
  for (const c of splitEvery(body, chunk)) s.push(c);
  return s.end(placeholder);
}

const v2Body = (data: string, extra = ''): Buffer => Buffer.from(
  `{"id":"r1","inputs":[{"name":"INPUT0","datatype":"UINT8","shape":[1,${Buffer.from(data.replace(/[^A-Za-z0-9+/]/g, ''), 'base64').length}],`
  + `"data":${JSON.stringify(data)}}]${extra}}`, 'latin1');

describe('Base64Staging', () => {
  const p = payload(STAGE_MIN_CHARS + 1000); // 3k+2 bytes: one '='
  const text = p.toString('base64');

  test.each(SIZES)('stages a long member value in %i-byte chunks and leaves an empty string in its place', (size) => {
    const body = v2Body(text);
    const r = stage(body, size)!;
    expect(r).toBeDefined();
    expect(r.header.toString('latin1')).toBe(body.toString('latin1').replace(JSON.stringify(text), '""'));
    expect([...r.staged.values()]).toEqual([p]);
    const quote = r.header.indexOf('""');
    expect([...r.staged.keys()]).toEqual([quote]);
    expect(r.copied).toBe(r.header.length + p.length);
  });

  test.each(SIZES)('unpadded and URL-safe text, two strings, in %i-byte chunks', (size) => {
    const a = payload(STAGE_MIN_CHARS + 1, 1); // 3k+2 bytes, URL-safe: no '='
    const b = payload(STAGE_MIN_CHARS * 2, 2);
    const c = payload(STAGE_MIN_CHARS + 3, 3); // 3k+1 bytes: '=='
    const body = Buffer.from(`{"x": ${JSON.stringify(a.toString('base64url'))} , "y" :\n${JSON.stringify(b.toString('base64'))},"z":"${c.toString('base64')}"}`, 'latin1');
    const r = stage(body, size)!;
    expect(r.header.toString()).toBe('{"x": "" , "y" :\n"","z":""}');
    expect([...r.staged.values()]).toEqual([a, b, c]);
  });

  test.each(SIZES)('leaves alone what is not clean base64 (%i-byte chunks)', (size) => {
    const cases = [
      text.replace(/\//g, '\\/'), // an escape
      `${text.slice(0, 5000)} ${text.slice(5000)}`, // a blank
      `${text.slice(0, 5000)}!${text.slice(5001)}`, // an invalid character
      `${text.slice(0, 5000)}=${text.slice(5001)}`, // inner padding
      `data:application/octet-stream;base64,${text}`, // a data: prefix
      `${text}A`, // 4k+1 characters
      `${text.slice(0, 5000)}\u00e9${text.slice(5001)}`, // a non-ASCII byte
    ];
    for (const t of cases) {
      const body = Buffer.from(`{"data":"${t.replace(/"/g, '\\"')}"}`, 'latin1');
      expect(stage(body, size)).toBeUndefined();
    }
  });

  // Past STAGE_MIN_CHARS the text is decoded ahead (to the 64 characters that hold its end), and its end or a
  // defect is found where the decoder refuses a run: every defect, at any distance from a run's
  // start and from a chunk's end, must leave the string as it was.
  const LONG = payload(200_000, 5).toString('base64');
  const LONG_SIZES = [4093, 64 * 1024, 100_003, 1 << 20];
  test.each(LONG_SIZES)('decodes a long string ahead in %i-byte chunks, and leaves it alone at a late defect', (size) => {
    const body = v2Body(LONG, ',"outputs":[{"name":"OUT"}]');
    const r = stage(body, size)!;
    expect(r.header.toString()).toBe(body.toString('latin1').replace(JSON.stringify(LONG), '""'));
    expect([...r.staged.values()]).toEqual([payload(200_000, 5)]);
    for (const at of [STAGE_MIN_CHARS + 1, STAGE_MIN_CHARS + 64 * 1024 + 17, 150_000, LONG.length - 70, LONG.length - 5, LONG.length - 3]) {
      for (const defect of ['\\/', ' ', '!', '=', '\u00e9']) {
        const t = `${LONG.slice(0, at)}${defect === '\\/' ? '\\/' : defect}${LONG.slice(at + 1)}`;
        const bad = Buffer.from(`{"data":"${t}"}`, 'latin1');
        expect([at, defect, stage(bad, size)]).toEqual([at, defect, undefined]);
        const s = new Base64Staging({ bodyBytes: bad.length, maxInputSizeBytes: 64 << 20, allocate: (n) => Buffer.allocUnsafe(n) });
        for (const c of splitEvery(bad, size)) s.push(c);
        expect(Buffer.concat(s.original()).equals(bad)).toBe(true);
      }
    }
  });

  test.each(LONG_SIZES)('URL-safe characters late in a long string (%i-byte chunks) are kept as sent', (size) => {
    const t = `${LONG.slice(0, 90_000)}-_${LONG.slice(90_002)}`;
    const body = Buffer.from(`{"a":1,"data":"${t}"}`, 'latin1');
    const s = new Base64Staging({ bodyBytes: body.length, maxInputSizeBytes: 64 << 20, allocate: (n) => Buffer.allocUnsafe(n) });
    for (const c of splitEvery(body, size)) s.push(c);
    const r = s.end()!;
    expect(r.header.toString()).toBe('{"a":1,"data":""}');
    expect([...r.staged.values()]).toEqual([Buffer.from(t, 'base64')]);
    expect(Buffer.concat(s.original()).equals(body)).toBe(true);
  });

  test('never stages keys, array elements or short strings', () => {
    const long = text;
    const body = Buffer.from(`{${JSON.stringify(long)}:1,"a":[${JSON.stringify(long)}],"b":"QUJD"}`, 'latin1');
    for (const size of SIZES) expect(stage(body, size)).toBeUndefined();
  });

  test('a string that never ends, or a body longer or shorter than declared, stages nothing', () => {
    const body = Buffer.from(`{"data":"${text}`, 'latin1');
    expect(stage(body, 7)).toBeUndefined();
    const s = new Base64Staging({ bodyBytes: 10, maxInputSizeBytes: 1 << 20, allocate: (n) => Buffer.allocUnsafe(n) });
    s.push(v2Body(text));
    expect(s.end()).toBeUndefined();
  });

  test('no staged payload is larger than maxInputSizeBytes', () => {
    expect(stage(v2Body(text), 64 * 1024, undefined, 1000)).toBeUndefined();
  });

  test('placeholders (V1): unique per body, refused when the client text holds one', () => {
    const body = Buffer.from(`{"instances":[{"b64":${JSON.stringify(text)}}]}`, 'latin1');
    const r = stage(body, 3, (nonce, i) => `tg-${nonce}-${i}`)!;
    expect(r.placeholders).toHaveLength(1);
    expect(JSON.parse(r.header.toString())).toEqual({ instances: [{ b64: r.placeholders[0] }] });
  });
});

describe('Base64Staging with dataUrls (the OpenAI API\'s images)', () => {
  const p = payload(STAGE_MIN_CHARS * 2 + 1);
  const text = p.toString('base64');
  const url = `data:image/png;base64,${text}`;
  const chat = (u: string, extra = ''): Buffer => Buffer.from(
    `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":${JSON.stringify(u)}}}${extra}]}]}`, 'latin1');

  function stageUrls(body: Buffer, size: number): { s: Base64Staging; r: StagedBody | undefined } {
    const s = new Base64Staging({ bodyBytes: body.length, maxInputSizeBytes: 64 << 20, allocate: (n) => Buffer.allocUnsafe(n), dataUrls: true });
    for (const c of splitEvery(body, size)) s.push(c);
    return { s, r: s.end((nonce, i) => `tg-${nonce}-${i}`) };
  }

  test.each(SIZES)('stages the data after a data: URL\'s prefix, which stays in the document (%i-byte chunks)', (size) => {
    const body = chat(url);
    const { s, r } = stageUrls(body, size);
    expect([...r!.staged.values()]).toEqual([p]);
    const doc = JSON.parse(r!.header.toString()) as { messages: { content: { image_url?: { url: string } }[] }[] };
    expect(doc.messages[0]!.content[1]!.image_url!.url).toBe(`data:image/png;base64,${r!.placeholders[0]}`);
    expect(Buffer.concat(s.original()).toString('latin1')).toBe(body.toString('latin1'));
  });

  test('media type parameters are part of the prefix; plain base64, and a data: URL that is not base64, are left alone', () => {
    expect([...stageUrls(chat(`data:image/jpeg;name=x.jpg;base64,${text}`), 4096).r!.staged.values()]).toEqual([p]);
    expect(stageUrls(chat(text), 4096).r).toBeUndefined();
    expect(stageUrls(chat(`data:text/plain,${text}`), 4096).r).toBeUndefined();
    const broken = stageUrls(chat(`data:image/png;base64,${text.slice(0, 20_000)}!${text.slice(20_001)}`), 7);
    expect(broken.r).toBeUndefined();
    expect(Buffer.concat(broken.s.original()).toString('latin1')).toBe(chat(`data:image/png;base64,${text.slice(0, 20_000)}!${text.slice(20_001)}`).toString('latin1'));
  });
});

describe('Base64Staging.original: the body as sent, while the staged text is not held', () => {
  const p = payload(STAGE_MIN_CHARS * 4 + 2);
  const text = p.toString('base64');

  function roundTrip(body: Buffer, size: number): Base64Staging {
    const s = new Base64Staging({ bodyBytes: body.length, maxInputSizeBytes: 64 << 20, allocate: (n) => Buffer.allocUnsafe(n) });
    for (const c of splitEvery(body, size)) s.push(c);
    s.end();
    expect(Buffer.concat(s.original()).toString('latin1')).toBe(body.toString('latin1'));
    return s;
  }

  test.each(SIZES)('staged, abandoned, URL-safe, mixed and unfinished strings come back as sent (%i-byte chunks)', (size) => {
    const cases = [
      text, // staged, '=' padded
      text.replace(/=+$/, ''), // unpadded
      p.toString('base64url'), // URL-safe: held as sent
      `${text.slice(0, 40_000)}-_${text.slice(40_002)}`, // mixed alphabets, late
      `-_${text.slice(2)}`, // mixed alphabets, early
      `${text.slice(0, 40_001)}-${text.slice(40_002)}`, // a '-' at each offset mod 4
      `${text.slice(0, 40_002)}_${text.slice(40_003)}`,
      `${text.slice(0, 40_003)}-${text.slice(40_004)}`,
      `${text.slice(0, -3)}-_=`, // in the final group
      `${text.slice(0, 40_000)}\\/${text.slice(40_001)}`, // an escape after a cut
      `${text.slice(0, 40_000)} ${text.slice(40_000)}`, // a blank after a cut
      `${text.slice(0, 40_001)}!${text.slice(40_002)}`, // an invalid character after a cut, at each offset mod 4
      `${text.slice(0, 40_002)}!${text.slice(40_003)}`,
      `${text.slice(0, 40_003)}!${text.slice(40_004)}`,
      `${text.slice(0, 40_004)}!${text.slice(40_005)}`,
      `${text.slice(0, 40_000)}=${text.slice(40_001)}`, // inner padding after a cut
      `${text}A`, // 4k+1 characters
    ];
    for (const t of cases) roundTrip(Buffer.from(`{"a":"${t}","b":${JSON.stringify(text)}}`, 'latin1'), size);
    roundTrip(Buffer.from(`{"data":"${text}`, 'latin1'), size); // the string never ends
  });

  test('a staged string\'s text is not held once decoded', () => {
    const big = payload(3 << 20).toString('base64');
    const body = Buffer.from(`{"inputs":[{"name":"I","data":"${big}"}]}`, 'latin1');
    const s = new Base64Staging({ bodyBytes: body.length, maxInputSizeBytes: 64 << 20, allocate: (n) => Buffer.allocUnsafe(n) });
    let most = 0;
    for (const c of splitEvery(body, 64 * 1024)) {
      s.push(c);
      most = Math.max(most, s.heldBytes);
    }
    expect(most).toBeLessThan(2 * 64 * 1024);
    const r = s.end()!;
    expect(r.header.toString()).toBe('{"inputs":[{"name":"I","data":""}]}');
    expect(Buffer.concat(s.original()).equals(body)).toBe(true);
  });

  test('freeChunk: a chunk whose text was all cut out is freed at once; one still held is not', () => {
    const big = payload(300_000).toString('base64');
    const body = Buffer.from(`{"inputs":[{"name":"I","data":"${big}"}]}`, 'latin1');
    const s = new Base64Staging({ bodyBytes: body.length, maxInputSizeBytes: 64 << 20, allocate: (n) => Buffer.allocUnsafe(n), freeChunk: releaseWhole });
    // Each chunk its own memory, as node:http hands them over.
    const chunks = splitEvery(body, 64 * 1024).map((c) => Buffer.from(c));
    for (const c of chunks) s.push(c);
    // The JSON before the string is a small part of the first, copied: it is freed with those
    // between. The last holds the text after the string.
    expect(chunks.map((c) => c.length === 0)).toEqual(chunks.map((_, i) => i < chunks.length - 1));
    const r = s.end()!;
    expect(r.header.toString()).toBe('{"inputs":[{"name":"I","data":""}]}');
    expect(Buffer.concat(s.original()).equals(body)).toBe(true);
  });
});

test('freeChunk: a read holding the document before the string (a large part of it) and after it is kept whole', () => {
  // One read: 20 KB of JSON before the string (more than an eighth of the read, so kept as a view),
  // the string, and a short tail (copied). The read is still a piece of the document: not freed.
  const before = `{"inputs":[{"name":"I","parameters":{"note":"${'a b '.repeat(5000)}"},"data":"`;
  const body = Buffer.from(`${before}${payload(60_000).toString('base64')}"}]}`, 'latin1');
  const own = Buffer.from(body);
  const s = new Base64Staging({ bodyBytes: own.length, maxInputSizeBytes: 64 << 20, allocate: (n) => Buffer.allocUnsafe(n), freeChunk: releaseWhole });
  s.push(own);
  expect(own.length).toBe(body.length);
  const r = s.end()!;
  expect(r.header.toString('latin1')).toBe(`${before}"}]}`);
  expect(Buffer.concat(s.original()).equals(body)).toBe(true);
});

describe('decodeStagedBody', () => {
  const config = { name: 'm', input: [], output: [] } as unknown as inference.ModelConfig;
  const options: WholeBodyOptions = { modelName: 'm', modelVersion: '', config, maxInputSizeBytes: 64 << 20, headerlessBinary: false };
  const frame = (request: Parameters<typeof frameInferHead>[0], external: readonly number[]): ReturnType<typeof frameInferHead> =>
    frameInferHead(request, external, (n) => Buffer.allocUnsafe(n));
  const whole = (body: Buffer): ReturnType<typeof decodeWholeBody> => decodeWholeBody([body], body.length, undefined, options, frame, new Ledger());

  test('frames the same message as the whole-body reading', () => {
    const p = payload(STAGE_MIN_CHARS * 3);
    const body = v2Body(p.toString('base64'), ',"outputs":[{"name":"OUT"}]');
    const staged = decodeStagedBody(stage(body, 1000)!, options, frame, new Ledger())!;
    expect(staged).toBeDefined();
    expect(staged.message.equals(whole(body).message)).toBe(true);
    expect([staged.encoding, whole(body).encoding]).toEqual(['json_base64', 'json_base64']);
  });

  test('steps aside for a size that does not match the shape, and for a staged string read as something else', () => {
    const p = payload(STAGE_MIN_CHARS * 3);
    const wrongShape = Buffer.from(`{"inputs":[{"name":"I","datatype":"FP32","shape":[1],"data":${JSON.stringify(p.toString('base64'))}}]}`);
    expect(decodeStagedBody(stage(wrongShape, 4096)!, options, frame, new Ledger())).toBeUndefined();
    expect(() => whole(wrongShape)).toThrow(expect.objectContaining({ code: 'GW_ERR_DECODE_BASE64_SIZE' }));
    const asId = Buffer.from(`{"id":${JSON.stringify(p.toString('base64'))},"inputs":[{"name":"I","datatype":"UINT8","shape":[1],"data":[1]}]}`);
    expect(decodeStagedBody(stage(asId, 4096)!, options, frame, new Ledger())).toBeUndefined();
    const syntax = Buffer.from(`{"inputs":[{"name":"I","datatype":"UINT8","shape":[${p.length}],"data":${JSON.stringify(p.toString('base64'))}}],}`);
    expect(decodeStagedBody(stage(syntax, 4096)!, options, frame, new Ledger())).toBeUndefined();
  });
});
