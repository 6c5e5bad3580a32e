// Every request form records its hops: one request per form through the gateway (cut-through on,
// the default) against the reference backend; each hop that happened has a positive duration, lies
// within the request, and together they cover at most the request's total (cut-through hops
// overlap on purpose — ingress_read with upstream_send — so "add up" is the time they cover, not
// the sum of their durations). Every form is an inference answer, so each carries Server-Timing
// (docs/telemetry.md) with exactly the ledger's durations of the hops that had ended, and its own
// request-form label; a streamed binary answer's head leaves out the still-running
// upstream_receive, and over HTTP/2 its trailer has the whole one — the access line's value.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { RunningGateway } from '../../gateway/gateway';
import { type Hop, HOPS } from '../../gateway/infer/ledger';
import { accessLine } from '../../gateway/telemetry/logger';
import type { RequestRecord } from '../../gateway/telemetry/record';
import { gatewayFor } from '../support/gateway';
import { binaryBody, send, sendInPieces } from '../support/http';
import { prometheusSamples } from '../support/prometheus';
import { RecordTap } from '../support/records';
import { needs, NGHTTP } from '../support/tools';
import { int32 } from '../support/int32';

const ROUTES = JSON.stringify([{ path: '/api/stats', model: 'image_stats', inputs: { IMAGE: { from: '/image', decode: 'base64' } }, response: 'v2' }]);
const ALL: readonly Hop[] = HOPS;

/** Name, path, request, hops it must record, request-form label, whether the answer streams from Triton's frames. */
const FORMS: readonly (readonly [string, string, { headers?: Record<string, string | number>; body: Buffer | string }, readonly Hop[], string, boolean])[] = [
  ['V2 JSON', '/v2/models/simple/infer', {
    body: JSON.stringify({ inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(2) },
    ] }),
  }, ALL, 'json', false],
  ['binary extension', '/v2/models/simple/infer', binaryBody({ inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
  ] }, int32(16), int32(16)), ALL, 'binary', false],
  ['raw', '/v2/models/identity_uint8/infer', { headers: { 'Inference-Header-Content-Length': 0 }, body: Buffer.alloc(4096, 7) }, ALL, 'raw', true],
  ['base64', '/v2/models/identity_uint8/infer', {
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, 6], data: { b64: Buffer.from('abcdef').toString('base64') } }] }),
  }, ALL, 'json_base64', false],
  ['base64 string', '/v2/models/identity_fp32/infer', {
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: 'AACAPwAAIEA=' }] }),
  }, ALL, 'json_base64', false],
  ['V1 predict', '/v1/models/identity_fp32:predict', { body: JSON.stringify({ instances: [[1, 2, 3]] }) }, ALL, 'v1', false],
  ['V1 predict b64', '/v1/models/identity_fp32:predict', { body: JSON.stringify({ instances: [{ b64: 'AACAPwAAIEA=' }] }) }, ALL, 'v1_base64', false],
  ['generate', '/v2/models/identity_int32/generate', { body: '{"INPUT0":[4,5]}' }, ALL, 'generate', false],
  ['declarative', '/api/stats', { body: JSON.stringify({ image: Buffer.alloc(300, 3).toString('base64') }) }, ALL, 'declarative_base64', false],
];

const ms = (h: { startNs: bigint; endNs: bigint }): string => (Number(h.endNs - h.startNs) / 1e6).toFixed(3);

/** Server-Timing's entries, name → dur as sent. */
function timings(header: string | string[] | undefined): Map<string, string> {
  expect(typeof header).toBe('string');
  return new Map((header as string).split(', ').map((e) => {
    const m = /^(\w+);dur=(\d+\.\d{3})$/.exec(e);
    expect([e, m !== null]).toEqual([e, true]);
    return [m![1]!, m![2]!] as const;
  }));
}

/** The access line the gateway logs for `r` (telemetry/logger.ts), as an object. */
function accessLineOf(r: RequestRecord): Record<string, unknown> {
  let line: Record<string, unknown> = {};
  accessLine({ isLevelEnabled: () => true, info: (l: Record<string, unknown>) => { line = l; } } as unknown as Logger, r);
  return line;
}

/** Nanoseconds covered by the union of the hops' intervals. */
function covered(r: RequestRecord): bigint {
  const spans = HOPS.map((h) => r.ledger!.hops[h]).filter((h) => h.startNs !== 0n && h.endNs !== 0n)
    .map((h) => [h.startNs, h.endNs] as const).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  let total = 0n;
  let end = 0n;
  for (const [s, e] of spans) {
    const from = s > end ? s : end;
    if (e > from) total += e - from;
    if (e > end) end = e;
  }
  return total;
}

describe('hops of every request form', () => {
  let gw: RunningGateway;
  const tap = new RecordTap();
  beforeAll(async () => {
    gw = await gatewayFor(['--demo', '--routes', ROUTES]);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await gw.close();
  });

  test.each(FORMS)('%s', async (_name, url, request, hops, encoding, streamed) => {
    const mark = tap.mark();
    const r = await send(`${gw.url}${url}`, { method: 'POST', headers: request.headers, body: request.body });
    expect(r.status).toBe(200);
    const rec = await tap.after(mark);
    expect(rec.ledger).toBeDefined();
    for (const hop of hops) {
      const h = rec.ledger!.hops[hop];
      expect({ hop, started: h.startNs > 0n, positive: h.endNs > h.startNs }).toEqual({ hop, started: true, positive: true });
      expect(h.startNs >= rec.startNs && h.endNs <= rec.endNs).toBe(true);
    }
    expect(covered(rec) <= rec.endNs - rec.startNs).toBe(true);
    expect(rec.encoding).toBe(encoding);
    expect(accessLineOf(rec).encoding_in).toBe(encoding);
    // Server-Timing: every hop that had ended when the head was sent, each with the ledger's
    // duration (the access line's); a streamed answer's upstream_receive was still running.
    const timing = timings(r.headers['server-timing']);
    const named = [...timing.keys()];
    expect(named).toEqual(['ingress_read', 'decode', 'upstream_send', 'triton', ...(streamed ? [] : ['upstream_receive']), 'encode', 'total']);
    for (const hop of named.filter((n) => n !== 'total')) expect([hop, timing.get(hop)]).toEqual([hop, ms(rec.ledger!.hops[hop as Hop])]);
    expect(Number(timing.get('total'))).toBeLessThanOrEqual(Number(rec.endNs - rec.startNs) / 1e6);
  });

  test('V1, declarative and generate requests are counted under their model and request form (after the forms above)', async () => {
    const m = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
    const count = (route: string, model: string, encoding: string): number | undefined => m.get(`http_server_request_duration_count{http_route="${route}",`
      + `http_request_method="POST",http_response_status_code="200",network_protocol_version="1.1",model="${model}",encoding="${encoding}"}`);
    expect([count('v1_predict', 'identity_fp32', 'v1'), count('v1_predict', 'identity_fp32', 'v1_base64'), count('declarative /api/stats', 'image_stats', 'declarative_base64'),
      count('generate', 'identity_int32', 'generate'), count('infer', 'identity_fp32', 'json_base64')]).toEqual([1, 1, 1, 1, 1]);
    expect(m.get('tensorgate_hop_copies_total{hop="decode",model="identity_fp32",encoding="v1_base64"}')).toBeGreaterThan(0);
  });

  test('generate_stream: the SSE head, sent with the first event, carries the hops that had ended', async () => {
    const mark = tap.mark();
    const r = await send(`${gw.url}/v2/models/repeat_int32/generate_stream`, { method: 'POST', body: '{"INPUT0":2}' });
    expect([r.status, r.body.toString().split('data: ').length - 1]).toEqual([200, 2]);
    const rec = await tap.after(mark);
    const timing = timings(r.headers['server-timing']);
    expect([...timing.keys()]).toEqual(['ingress_read', 'decode', 'total']);
    for (const hop of ['ingress_read', 'decode'] as const) expect([hop, timing.get(hop)]).toEqual([hop, ms(rec.ledger!.hops[hop])]);
  });

  needs(NGHTTP()).test('a streamed binary answer over HTTP/2 (nghttp, h2c): the head without upstream_receive, the trailer with the access line\'s', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'tensorgate-hops-'));
    const file = path.join(dir, 'body.bin');
    writeFileSync(file, Buffer.alloc(256 * 1024, 5));
    const mark = tap.mark();
    // nghttp (nghttp2's client, Debian's nghttp2-client) prints every header field it receives,
    // trailers included; it sends the file with its Content-Length, and identity so that the
    // answer may stream (a compressed one is encoded whole).
    const out = await new Promise<string>((resolve, reject) => {
      const p = spawn('nghttp', ['-v', '-H', ':method: POST', '-H', 'inference-header-content-length: 0', '-H', 'accept-encoding: identity',
        '-d', file, `${gw.url}/v2/models/identity_uint8/infer`], { stdio: ['ignore', 'pipe', 'inherit'] });
      let text = '';
      p.stdout.setEncoding('latin1').on('data', (c: string) => { text += c; });
      p.on('error', reject);
      p.on('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`nghttp exited ${code}: ${text.slice(-500)}`))));
    }).finally(() => rmSync(dir, { recursive: true, force: true }));
    const rec = await tap.after(mark);
    expect(rec.encodingOut).toBe('binary');
    const fields = [...out.matchAll(/recv \(stream_id=\d+\) server-timing: (.*)/g)].map((m) => m[1]!.trim());
    expect(fields).toHaveLength(2);
    const [head, trailer] = fields.map(timings);
    expect([...head!.keys()]).toEqual(['ingress_read', 'decode', 'upstream_send', 'triton', 'encode', 'total']);
    expect([...trailer!.keys()]).toEqual(['upstream_receive', 'egress_write', 'total']);
    const logged = accessLineOf(rec).hops_ms as Record<string, number>;
    expect(trailer!.get('upstream_receive')).toBe(logged.upstream_receive!.toFixed(3));
    expect(trailer!.get('egress_write')).toBe(logged.egress_write!.toFixed(3));
  }, 20_000);

  test('copies are counted exactly: ledger, access line and metrics agree', async () => {
    const before = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
    const series = 'tensorgate_hop_copies_total{hop="decode",model="identity_fp32",encoding="json_base64"}';
    // A V2 JSON body arriving in 7-byte pieces: its JSON header is gathered into one buffer (a
    // copy of the whole body), then the base64 string decoded into its slot (a copy of 8 bytes).
    const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: 'AACAPwAAIEA=' }] });
    const mark = tap.mark();
    const r = await sendInPieces(`${gw.url}/v2/models/identity_fp32/infer`, Buffer.from(body), {}, 7);
    expect(r.status).toBe(200);
    const rec = await tap.after(mark);
    const { decode, encode } = rec.ledger!.hops;
    expect({ bytes: decode.bytesCopied, copies: decode.copies }).toEqual({ bytes: body.length + 8, copies: 2 });
    expect({ bytes: encode.bytesCopied, copies: encode.copies }).toEqual({ bytes: 0, copies: 0 });
    expect(accessLineOf(rec)).toMatchObject({ bytes_copied: body.length + 8, copies: 2, encoding_in: 'json_base64' });
    const after = prometheusSamples(await (await fetch(gw.metricsUrl!)).text());
    expect((after.get(series) ?? 0) - (before.get(series) ?? 0)).toBe(2);
  });
});
