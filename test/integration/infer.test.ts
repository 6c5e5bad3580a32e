// V2 inference through the gateway against the reference backend, on both data planes.
import { gunzipSync, gzipSync, inflateSync } from 'node:zlib';
import type { RequestRecord } from '../../gateway/telemetry/record';
import { gatewayForSuite } from '../support/gateway';
import { RecordTap } from '../support/records';
import { request } from 'node:http';
import { binaryBody, send, sendInPieces } from '../support/http';
import { requestStarted } from '../support/wait';
import { int32 } from '../support/int32';

const range = (n: number, f: (i: number) => number): number[] => Array.from({ length: n }, (_, i) => f(i));
const X = range(16, (i) => i);
const ONES = range(16, () => 1);

// h2 cuts binary and raw bodies of known length through (payload bytes go upstream by reference,
// never copied); buffered h2 and grpc-js copy each payload byte once, into its slot.
describe.each([
  ['h2', ['--transport', 'h2']],
  ['h2 buffered', ['--transport', 'h2', '--cut-through=false']],
  ['grpc-js', ['--transport', 'grpc-js']],
])('infer over %s', (mode, args) => {
  const cutThrough = mode === 'h2';
  const slotCopy = (n: number): number => (cutThrough ? 0 : n);
  const tap = new RecordTap();
  const gw = gatewayForSuite(['--demo', ...args], tap);
  const url = (path: string): string => `${gw.url}${path}`;
  const mark = (): number => tap.mark();
  const recordAfter = (n: number): Promise<RequestRecord> => tap.after(n);

  test('JSON in, JSON out, exact bytes', async () => {
    const n = mark();
    const r = await send(url('/v2/models/simple/infer'), {
      body: JSON.stringify({
        id: 'r1',
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: X },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: [ONES] },
        ],
      }),
    });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['inference-header-content-length']).toBeUndefined();
    expect(r.body.toString()).toBe(
      '{"id":"r1","model_name":"simple","model_version":"1","outputs":['
      + `{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"data":[${X.map((x) => x + 1).join(',')}]},`
      + `{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[${X.map((x) => x - 1).join(',')}]}]}`);
    expect((await recordAfter(n)).encoding).toBe('json');
  });

  test('binary extension in and out: payload copied once in (none cut through), none out', async () => {
    const { body, headers } = binaryBody({
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1' }],
    }, int32(X), int32(ONES));
    const n = mark();
    const r = await send(url('/v2/models/simple/infer'), { body, headers });
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/octet-stream');
    const h = Number(r.headers['inference-header-content-length']);
    const json = JSON.parse(r.body.subarray(0, h).toString());
    expect(json.outputs[0]).toEqual({ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } });
    expect(json.outputs[1].data).toEqual(X.map((x) => x - 1));
    expect(r.body.subarray(h)).toEqual(int32(X.map((x) => x + 1)));
    const rec = await recordAfter(n);
    expect(rec.encoding).toBe('binary');
    expect(rec.ledger!.hops.decode.bytesCopied).toBe(slotCopy(128)); // each payload byte once, into its slot
    expect(rec.ledger!.hops.encode.bytesCopied).toBe(0);
  });

  test('4 MiB through the binary path: exactly one copy in (none cut through), none out', async () => {
    const payload = Buffer.alloc(4 << 20);
    for (let i = 0; i < payload.length; i += 4096) payload[i] = i & 0xff;
    const { body, headers } = binaryBody({
      inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, payload.length], parameters: { binary_data_size: payload.length } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    }, payload);
    const n = mark();
    const r = await send(url('/v2/models/identity_uint8/infer'), { body, headers });
    expect(r.status).toBe(200);
    const h = Number(r.headers['inference-header-content-length']);
    expect(r.body.subarray(h).equals(payload)).toBe(true);
    const hops = (await recordAfter(n)).ledger!.hops;
    expect(hops.decode.bytesCopied).toBe(slotCopy(payload.length));
    expect(hops.encode.bytesCopied).toBe(0);
    expect(hops.ingress_read.bytesIn).toBe(body.length);
    expect(hops.egress_write.bytesOut).toBe(r.body.length);
  });

  test('JSON body spread over several chunks: the text is gathered once', async () => {
    const data = Array.from({ length: 40_000 }, (_, i) => i % 100);
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, data.length], data }] });
    const n = mark();
    const r = await send(url('/v2/models/identity_int32/infer'), { body, headers: { 'Accept-Encoding': 'identity' } });
    expect(r.status).toBe(200);
    expect((await recordAfter(n)).ledger!.hops.decode.bytesCopied).toBe(body.length);
  });

  test.each([1, 2, 7])('binary extension and raw bodies arriving in %i-byte pieces are decoded as they arrive', async (piece) => {
    const { body, headers } = binaryBody({
      id: 'pieces',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: ONES },
      ],
    }, int32(X));
    const n = mark();
    const r = await sendInPieces(url('/v2/models/simple/infer'), body, headers, piece);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body.toString()).outputs[0].data).toEqual(X.map((x) => x + 1));
    // The header, gathered from several pieces, is copied once; the binary payload once, into its slot.
    expect((await recordAfter(n)).ledger!.hops.decode.bytesCopied).toBe(headers['Inference-Header-Content-Length']! + slotCopy(64));
    const n2 = mark();
    const raw = await sendInPieces(url('/v2/models/identity_uint8/infer'), Buffer.from('hello world'), { 'Inference-Header-Content-Length': 0 }, piece);
    expect(raw.body.subarray(Number(raw.headers['inference-header-content-length'])).toString()).toBe('hello world');
    expect((await recordAfter(n2)).ledger!.hops.decode.bytesCopied).toBe(slotCopy(11));
  });

  test('an upload cut short never reaches the model (cut through: the call is reset) and the gateway keeps serving', async () => {
    const stats = gw.demoBackend!.stats;
    const before = stats.inferCalls;
    const n = mark();
    const started = requestStarted('/v2/models/identity_uint8/infer');
    const req = request(url('/v2/models/identity_uint8/infer'), { method: 'POST', headers: { 'Content-Length': 1000, 'Inference-Header-Content-Length': 0 } });
    req.on('error', () => { /* we close it ourselves */ });
    req.write(Buffer.alloc(100));
    await started;
    req.destroy();
    // Its record is published when the gateway has seen the connection go (and reset the call).
    expect(await recordAfter(n)).toMatchObject({ route: 'infer', model: 'identity_uint8' });
    const ok = await send(url('/v2/models/identity_uint8/infer'), { body: Buffer.from([1]), headers: { 'Inference-Header-Content-Length': 0 } });
    expect(ok.status).toBe(200);
    expect(stats.inferCalls).toBe(before + 1); // the answered one only
  });

  test('raw binary: input deduced from the config, all outputs binary', async () => {
    const data = Buffer.from(range(12, (i) => i));
    const n = mark();
    const r = await send(url('/v2/models/identity_uint8/infer'), { body: data, headers: { 'Inference-Header-Content-Length': 0 } });
    expect(r.status).toBe(200);
    const h = Number(r.headers['inference-header-content-length']);
    expect(JSON.parse(r.body.subarray(0, h).toString())).toEqual({
      model_name: 'identity_uint8', model_version: '1',
      outputs: [{ name: 'OUTPUT0', datatype: 'UINT8', shape: [1, 12], parameters: { binary_data_size: 12 } }],
    });
    expect(r.body.subarray(h)).toEqual(data);
    expect((await recordAfter(n)).ledger!.hops.decode.bytesCopied).toBe(slotCopy(12));
  });

  test('raw BYTES gets its length prefix', async () => {
    const r = await send(url('/v2/models/blob_len/infer'), { body: 'hello', headers: { 'Inference-Header-Content-Length': 0 } });
    expect(r.status).toBe(200);
    const h = Number(r.headers['inference-header-content-length']);
    expect(r.body.subarray(h).readBigInt64LE(0)).toBe(5n);
  });

  test('gzip request and deflate response', async () => {
    const body = gzipSync(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP64', shape: [1, 2], data: [0.1, -2] }] }));
    const r = await send(url('/v2/models/identity_fp64/infer'), { body, headers: { 'Content-Encoding': 'gzip', 'Accept-Encoding': 'gzip;q=0.5, deflate' } });
    expect(r.status).toBe(200);
    expect(r.headers['content-encoding']).toBe('deflate');
    expect(inflateSync(r.body).toString()).toBe('{"model_name":"identity_fp64","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"FP64","shape":[1,2],"data":[0.1,-2.0]}]}');
    const g = await send(url('/v2/models/identity_fp64/infer'), { body, headers: { 'Content-Encoding': 'gzip', 'Accept-Encoding': 'gzip' } });
    expect(gunzipSync(g.body).toString()).toContain('"data":[0.1,-2.0]');
  });

  test('64-bit integers stay exact', async () => {
    // eslint-disable-next-line no-loss-of-precision -- rounded here, the exact digits put back into the text below
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT64', shape: [1, 2], data: [18446744073709551615, 9007199254740993] }] })
      .replace('18446744073709552000', '18446744073709551615').replace('9007199254740992', '9007199254740993');
    const r = await send(url('/v2/models/identity_uint64/infer'), { body });
    expect(r.body.toString()).toContain('"data":[18446744073709551615,9007199254740993]');
  });

  describe('errors, nothing sent upstream, gateway keeps serving', () => {
    test.each([
      ['malformed JSON', '{not json', 400, 'failed to parse the request JSON buffer: Missing a name for object member. at 1'],
      ['no inputs', '{}', 400, "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'"],
      ['too few values', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: range(15, () => 0) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: ONES }] }),
        400, "Unable to parse 'data': Shape does not match true shape of 'data' field"],
      ['too many values', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: range(17, () => 0) }] }),
        400, "Unable to parse 'data': Shape does not match true shape of 'data' field"],
      ['FP16 in JSON', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP16', shape: [1, 1], data: [1] }] }),
        400, 'receiving FP16 data via JSON is not supported. Please use the binary data format for input INPUT0'],
      ['triton_ parameter', JSON.stringify({ parameters: { triton_x: 1 }, inputs: [] }),
        400, "parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified."],
      ['both data and binary', JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], data: [1], parameters: { binary_data_size: 4 } }] }),
        400, "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But set 'data' 'binary_data_size'"],
    ])('%s', async (_name, body, status, message) => {
      const r = await send(url('/v2/models/simple/infer'), { body });
      expect([r.status, JSON.parse(r.body.toString()).error]).toEqual([status, message]);
    });

    test('unknown model: 404 text/plain before the body is read', async () => {
      const r = await send(url('/v2/models/nope/infer'), { body: '{not json' });
      expect([r.status, r.headers['content-type'], r.body.toString()]).toEqual([404, 'text/plain', '{"error":"Request for unknown model: \'nope\' is not found"}']);
    });

    test('binary sizes', async () => {
      const short = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 8], parameters: { binary_data_size: 8 } }] }, Buffer.alloc(5));
      const r = await send(url('/v2/models/identity_uint8/infer'), short);
      expect([r.status, JSON.parse(r.body.toString()).error]).toEqual([400, "unexpected size for input 'INPUT0', expecting 3 additional bytes for model 'identity_uint8'"]);
      const extra = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 2], parameters: { binary_data_size: 2 } }] }, Buffer.alloc(5));
      const e = await send(url('/v2/models/identity_uint8/infer'), extra);
      expect([e.status, JSON.parse(e.body.toString()).error]).toEqual([400, "unexpected additional input data for model 'identity_uint8'"]);
    });

    test('classification of a BYTES output is refused before it reaches Triton (it crashes 2.51)', async () => {
      const r = await send(url('/v2/models/identity_bytes/infer'), {
        body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], data: ['a'] }], outputs: [{ name: 'OUTPUT0', parameters: { classification: 1 } }] }),
      });
      expect([r.status, r.headers['content-type'], r.body.toString()]).toEqual([400, 'text/plain', '{"error":"class result not available for output due to unsupported type \'BYTES\'"}']);
    });

    test('unsupported Content-Encoding: 415 with Accept-Encoding (Triton: 501)', async () => {
      const r = await send(url('/v2/models/simple/infer'), { body: '{}', headers: { 'Content-Encoding': 'br' } });
      expect([r.status, r.headers['accept-encoding'], r.body.toString()]).toEqual([415, 'gzip, deflate', '{"error":"Unsupported compression type"}']);
    });

    test('Triton\'s own validation comes back with its status', async () => {
      const r = await send(url('/v2/models/simple/infer'), { body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: X }] }) });
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body.toString()).error).toMatch(/^\[request id: <id_unknown>\] expected 2 inputs but got 1 inputs for model 'simple'/);
    });
  });
});
