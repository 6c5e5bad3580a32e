// Compression: compressed request bodies (JSON, binary, raw), unsupported Content-Encoding
// values (501 + Accept-Encoding header), and response compression negotiated by Accept-Encoding.
// Compressed responses are compared after decompression (see the test file).
import { type Body, type CaseGroup, type Case, binInput, binaryRequest, compressed, get, infer, input, jsonRequest, output, range, tensorBytes } from './types';

const A = range(16);
const B = range(16).map((i) => 100 - i);
const json = (extra: { [k: string]: import('./types').JsonLike } = {}): Body =>
  jsonRequest({ ...extra, inputs: [input('INPUT0', 'INT32', [1, 16], A), input('INPUT1', 'INT32', [1, 16], B)] });
const bin = (): Body =>
  binaryRequest({ inputs: [binInput('INPUT0', 'INT32', [1, 16], 64), binInput('INPUT1', 'INT32', [1, 16], 64)], outputs: [output('OUTPUT0', { binary_data: true }), output('OUTPUT1')] }, [
    tensorBytes('INT32', A),
    tensorBytes('INT32', B),
  ]);
const simple = (name: string, b: Body, extra: Partial<Case> = {}) => infer(name, 'simple', b, extra);
const withCE = (b: Body, ce: string): Body => ({ body: b.body, headers: { ...b.headers, 'Content-Encoding': ce } });
const ae = (value: string) => ({ headers: { 'Accept-Encoding': value } });
const CE_501 = { alsoCompareHeaders: ['accept-encoding'] };

export const compressionCases: CaseGroup = {
  group: 'compression',
  cases: [
    // ---- request bodies
    simple('gzip JSON body', compressed(json(), 'gzip')),
    simple('deflate (zlib) JSON body', compressed(json(), 'deflate')),
    simple('gzip-wrapped body labelled deflate (auto-detect)', compressed(json(), 'gzip-as-deflate')),
    simple('zlib-wrapped body labelled gzip (auto-detect)', compressed(json(), 'deflate-as-gzip')),
    simple('raw RFC1951 deflate body (not inflatable)', compressed(json(), 'deflate-raw')),
    simple('gzip binary body (header length = uncompressed JSON)', compressed(bin(), 'gzip')),
    simple('deflate binary body', compressed(bin(), 'deflate')),
    simple('gzip body, chunked transfer', compressed(json(), 'gzip'), { chunked: 16 }),
    simple('gzip label on an uncompressed body', withCE(json(), 'gzip')),
    simple('truncated gzip stream', (() => { const c = compressed(json(), 'gzip'); return { body: c.body.subarray(0, c.body.length - 12), headers: c.headers }; })()),
    simple('Content-Encoding identity', withCE(json(), 'identity')),
    simple('Content-Encoding br → 501', withCE(json(), 'br'), CE_501),
    simple('Content-Encoding GZIP (case-sensitive) → 501', withCE(compressed(json(), 'gzip'), 'GZIP'), CE_501),
    simple('Content-Encoding "gzip, identity" → 501', withCE(compressed(json(), 'gzip'), 'gzip, identity'), CE_501),
    simple('Content-Encoding compress → 501', withCE(json(), 'compress'), CE_501),
    infer('Content-Encoding br on an unknown model (model lookup comes first)', 'nonexistent', withCE(json(), 'br'), CE_501),
    // ---- response compression
    simple('Accept-Encoding gzip (JSON response)', json(), ae('gzip')),
    simple('Accept-Encoding deflate (JSON response)', json(), ae('deflate')),
    simple('Accept-Encoding gzip (binary response)', bin(), ae('gzip')),
    simple('Accept-Encoding deflate (binary response)', bin(), ae('deflate')),
    simple('Accept-Encoding identity', json(), ae('identity')),
    simple('Accept-Encoding "gzip, deflate" (tie → first)', json(), ae('gzip, deflate')),
    simple('Accept-Encoding "deflate, gzip" (tie → first)', json(), ae('deflate, gzip')),
    simple('Accept-Encoding q-values prefer deflate', json(), ae('gzip;q=0.5, deflate;q=0.9')),
    simple('Accept-Encoding q-values prefer identity', bin(), ae('gzip;q=0.2, identity;q=0.8')),
    simple('Accept-Encoding gzip;q=0 only', json(), ae('gzip;q=0')),
    simple('Accept-Encoding with a space before ;q=', json(), ae('deflate ;q=0.9, gzip;q=0.1')),
    simple('Accept-Encoding *', json(), ae('*')),
    simple('Accept-Encoding br', json(), ae('br')),
    simple('Accept-Encoding GZIP (exact token match)', json(), ae('GZIP')),
    simple('Accept-Encoding on an error response', jsonRequest({ inputs: [] }), ae('gzip')),
    simple('gzip request and gzip response', compressed(bin(), 'gzip'), ae('gzip')),
    simple('deflate request and gzip response, binary_data_output', compressed(json({ parameters: { binary_data_output: true } }), 'deflate'), ae('gzip')),
    infer('big_output: 5 MiB binary, gzip response', 'big_output', binaryRequest({ inputs: [binInput('N', 'INT64', [1], 8)], parameters: { binary_data_output: true } }, [tensorBytes('INT64', [5 * 1024 * 1024])]), { ...ae('gzip'), timeoutMs: 60_000 }),
    get('GET /v2 with Accept-Encoding gzip (never compressed)', '/v2', ae('gzip')),
    get('GET /v2/models/simple/config with Accept-Encoding deflate', '/v2/models/simple/config', ae('deflate')),
    { name: 'GET /v2 with Content-Encoding br (ignored outside infer)', method: 'GET', path: '/v2', headers: { 'Content-Encoding': 'br' } },
  ],
};
