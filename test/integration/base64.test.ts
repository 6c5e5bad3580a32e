// Base64 tensors in V2 JSON, both directions, through the gateway against the reference backend.
import type { RequestRecord } from '../../gateway/telemetry/record';
import { gatewayForSuite } from '../support/gateway';
import { RecordTap } from '../support/records';
import { send } from '../support/http';
import { int32 } from '../support/int32';

const X = Array.from({ length: 16 }, (_, i) => i);

describe('base64 through the gateway', () => {
  const tap = new RecordTap();
  const records = tap.records;
  const gw = gatewayForSuite(['--demo'], tap);
  // Each request waits for its own record before returning.
  const infer = async (model: string, body: unknown) => {
    const before = tap.mark();
    const r = await send(`${gw.url}/v2/models/${model}/infer`, {
      body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'Accept-Encoding': 'identity' },
    });
    await tap.after(before);
    return r;
  };
  const lastRecord = (): RequestRecord => records[records.length - 1]!;

  test('4 MiB as one base64 string: each payload byte decoded once into its slot', async () => {
    const payload = Buffer.alloc(4 << 20);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 31) & 0xff;
    const body = JSON.stringify({
      inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, payload.length], data: payload.toString('base64') }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    });
    const r = await infer('identity_uint8', body);
    expect(r.status).toBe(200);
    const h = Number(r.headers['inference-header-content-length']);
    expect(r.body.subarray(h).equals(payload)).toBe(true);
    const decode = lastRecord().ledger!.hops.decode;
    // The payload is decoded as the body arrives, into a staging page (decode/base64/base64-staging.ts),
    // and the JSON text left (the body without the base64 text) is gathered once. The payload is
    // no longer copied into the framed message: at 4 MiB it is cut out of it and written upstream
    // from the staging page by reference (pipeline/steps.ts sendCutOut), so one copy per payload
    // byte instead of two. Three allocations: the text, the staging page, the small head.
    const text = payload.toString('base64').length;
    expect(decode.bytesCopied).toBe(Buffer.byteLength(body) - text + payload.length);
    expect(decode.allocations).toBe(3);
  });

  test('V1 predict, two 1.5 MiB {"b64"} rows: staged, sent from staging (one copy per payload byte)', async () => {
    const rowBytes = 1536 * 1024;
    const rows = [0, 1].map((r) => {
      const b = Buffer.alloc(rowBytes);
      for (let i = 0; i < b.length; i++) b[i] = (i * 7 + r * 13 + (i >> 11)) & 0xff;
      return b;
    });
    const body = JSON.stringify({ instances: rows.map((b) => ({ b64: b.toString('base64') })) });
    const before = tap.mark();
    const r = await send(`${gw.url}/v1/models/identity_uint8:predict`, { body, headers: { 'Accept-Encoding': 'identity' } });
    await tap.after(before);
    expect(r.status).toBe(200);
    const predictions = (JSON.parse(r.body.toString()) as { predictions: number[][] }).predictions;
    expect(predictions.map((p, i) => Buffer.from(p).equals(rows[i]!))).toEqual([true, true]);
    const decode = lastRecord().ledger!.hops.decode;
    // Staging keeps the JSON text around the strings, each string's content replaced by a
    // placeholder (`\u0000tg-<16 hex>-<i>`, 27 characters), and decodes each row into its own
    // staging page. Both rows (3 MiB) are the input's staged tail: cut out of the message and
    // written upstream from those pages by reference, never copied again. Four allocations: the
    // two pages, the kept text, the small head.
    const text = rows[0]!.toString('base64').length;
    expect(decode.bytesCopied).toBe(Buffer.byteLength(body) - 2 * text + 2 * 27 + 2 * rowBytes);
    expect(decode.allocations).toBe(4);
    expect(decode.bytesOut).toBeGreaterThan(2 * rowBytes); // the message's size counts the rows it left out
  });

  test('an upstream error on a payload sent from staging: the error, then the next uploads are whole', async () => {
    const floats = Buffer.alloc(2 << 20, 7);
    const failing = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, floats.length / 4], data: floats.toString('base64') }] });
    const r = await infer('failing', failing);
    expect(r.status).toBe(500);
    expect(lastRecord().ledger!.hops.decode.bytesCopied).toBeLessThan(2 * floats.length); // it was cut out
    for (const seed of [3, 5]) {
      const payload = Buffer.from(Array.from({ length: 2 << 20 }, (_, i) => (i * seed + (i >> 9)) & 0xff));
      const ok = await infer('identity_uint8', JSON.stringify({
        inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, payload.length], data: payload.toString('base64') }],
        outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
      }));
      expect(ok.status).toBe(200);
      expect(ok.body.subarray(Number(ok.headers['inference-header-content-length'])).equals(payload)).toBe(true);
    }
  });

  test('numeric input as {"b64"}, output as base64 (output parameter)', async () => {
    const r = await infer('simple', {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: { b64: int32(X).toString('base64') } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { content_type: 'base64' } }, { name: 'OUTPUT1' }],
    });
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe('{"model_name":"simple","model_version":"1","outputs":['
      + `{"name":"OUTPUT0","datatype":"INT32","shape":[1,16],"parameters":{"content_type":"base64"},"data":"${int32(X.map((x) => x + 1)).toString('base64')}"},`
      + `{"name":"OUTPUT1","datatype":"INT32","shape":[1,16],"data":[${X.map((x) => x - 1).join(',')}]}]}`);
    expect(lastRecord().ledger!.hops.decode.bytesCopied).toBe(64);
  });

  test('request-level output_content_type: every JSON output in base64; binary_data still wins', async () => {
    const r = await infer('simple', {
      parameters: { output_content_type: 'base64' },
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: int32(X).toString('base64') },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: int32(X).toString('base64url') },
      ],
      outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT1', parameters: { binary_data: true } }],
    });
    expect(r.status).toBe(200);
    const h = Number(r.headers['inference-header-content-length']);
    const json = JSON.parse(r.body.subarray(0, h).toString());
    expect(json.outputs[0].data).toBe(int32(X.map((x) => 2 * x)).toString('base64'));
    expect(json.outputs[1].parameters).toEqual({ binary_data_size: 64 });
    expect(r.body.subarray(h)).toEqual(Buffer.alloc(64));
  });

  test('BYTES: {"b64"} elements and content_type base64 in, base64 elements out', async () => {
    const strs = X.map((x) => Buffer.from(String(x)));
    const r = await infer('simple_string', {
      parameters: { output_content_type: 'base64' },
      inputs: [
        { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16], data: strs.map((s) => ({ b64: s.toString('base64') })) },
        { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], parameters: { content_type: 'base64' }, data: strs.map(() => 'MQ==') },
      ],
    });
    expect(r.status).toBe(200);
    const json = JSON.parse(r.body.toString());
    expect(json.outputs[0]).toEqual({
      name: 'OUTPUT0', datatype: 'BYTES', shape: [1, 16], parameters: { content_type: 'base64' },
      data: X.map((x) => Buffer.from(String(x + 1)).toString('base64')),
    });
    // The response is itself a valid input: send OUTPUT0 back as INPUT0.
    const back = await infer('simple_string', {
      inputs: [{ ...json.outputs[0], name: 'INPUT0' }, { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], data: X.map(() => '1') }],
    });
    expect(JSON.parse(back.body.toString()).outputs[0].data).toEqual(X.map((x) => String(x + 2)));
  });

  test('errors: 400 {"error"} with the gateway code, nothing sent upstream', async () => {
    const r = await infer('simple', {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: 'not base64!' },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) },
      ],
    });
    expect(r.status).toBe(400);
    expect(r.headers['x-tensorgate-error']).toBe('GW_ERR_DECODE_BASE64_INVALID');
    expect(JSON.parse(r.body.toString())).toEqual({ error: 'Unable to parse \'data\': invalid base64 for input \'INPUT0\': character "!" at offset 10' });
    const s = await infer('simple', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: 'AAAA' }] });
    expect(s.status).toBe(400);
    expect(s.headers['x-tensorgate-error']).toBe('GW_ERR_DECODE_BASE64_SIZE');
    expect(lastRecord().ledger!.hops.upstream_send.bytesOut).toBe(0);
  });
});
