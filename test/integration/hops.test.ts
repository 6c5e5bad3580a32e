// Every request form records its hops: one request per form through the gateway (cut-through on,
// the default) against the reference backend; each hop that happened has a positive duration, lies
// within the request, and together they cover at most the request's total (cut-through hops
// overlap on purpose — ingress_read with upstream_send — so "add up" is the time they cover, not
// the sum of their durations). Every form is an inference answer, so each carries Server-Timing
// (docs/telemetry.md) with exactly the ledger's durations of the hops that had ended, and its own
// request-form label. Then every path over both transports, as third-party clients see it (curl
// over HTTP/1.1, nghttp over h2c): the head names the hops that had ended, a trailer the rest where
// the answer streams (a binary answer from Triton's frames, server-sent events), the access line all.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { type Hop, HOPS } from '../../gateway/infer/ledger';
import { accessLine } from '../../gateway/telemetry/logger';
import type { RequestRecord } from '../../gateway/telemetry/record';
import { gatewayForSuite } from '../support/gateway';
import { binaryBody, send, sendInPieces } from '../support/http';
import { prometheusSamples } from '../support/prometheus';
import { RecordTap } from '../support/records';
import { curl } from '../support/curl';
import { int32 } from '../support/int32';
import { run } from '../support/run';
import { CURL, needs, NGHTTP } from '../support/tools';

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

const ms = (h: { startNs: number; endNs: number }): string => (Number(h.endNs - h.startNs) / 1e6).toFixed(3);

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
function covered(r: RequestRecord): number {
  const spans = HOPS.map((h) => r.ledger!.hops[h]).filter((h) => h.startNs !== 0 && h.endNs !== 0)
    .map((h) => [h.startNs, h.endNs] as const).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  let total = 0;
  let end = 0;
  for (const [s, e] of spans) {
    const from = s > end ? s : end;
    if (e > from) total += e - from;
    if (e > end) end = e;
  }
  return total;
}

describe('hops of every request form', () => {
  const tap = new RecordTap();
  const gw = gatewayForSuite(['--demo', '--routes', ROUTES], tap);

  test.each(FORMS)('%s', async (_name, url, request, hops, encoding, streamed) => {
    const mark = tap.mark();
    const r = await send(`${gw.url}${url}`, { method: 'POST', headers: request.headers, body: request.body });
    expect(r.status).toBe(200);
    const rec = await tap.after(mark);
    expect(rec.ledger).toBeDefined();
    for (const hop of hops) {
      const h = rec.ledger!.hops[hop];
      expect({ hop, started: h.startNs > 0, positive: h.endNs > h.startNs }).toEqual({ hop, started: true, positive: true });
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

/** How an answer goes out: whole; binary, streamed from Triton's frames; server-sent events. */
type Answer = 'whole' | 'streamed' | 'events';
const IN_HEAD: Record<Answer, readonly Hop[]> = {
  whole: ['ingress_read', 'decode', 'upstream_send', 'triton', 'upstream_receive', 'encode'],
  streamed: ['ingress_read', 'decode', 'upstream_send', 'triton', 'encode'],
  events: ['ingress_read', 'decode'],
};
/** The trailer's: the hops that end after a streamed head (a whole answer's egress_write: the access line alone). */
const IN_TRAILER: Record<Answer, readonly Hop[]> = {
  whole: [],
  streamed: ['upstream_receive', 'egress_write'],
  events: ['upstream_send', 'triton', 'upstream_receive', 'encode', 'egress_write'],
};

const BIG = 65536;
/** A binary-extension body: its Inference-Header-Content-Length header and its bytes. */
function binary(header: unknown, ...tensors: Buffer[]): [Record<string, string>, Buffer] {
  const b = binaryBody(header, ...tensors);
  return [{ 'inference-header-content-length': String(b.headers['Inference-Header-Content-Length']) }, b.body];
}
const json = (body: unknown): [Record<string, string>, Buffer] => [{}, Buffer.from(JSON.stringify(body))];

/** Name, path, request headers and body, how the answer goes out. */
const PATHS: readonly (readonly [string, string, Record<string, string>, Buffer, Answer])[] = [
  ['V2 JSON', '/v2/models/identity_int32/infer', ...json({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 4], data: [1, 2, 3, 4] }] }), 'whole'],
  ['base64', '/v2/models/identity_fp32/infer', ...json({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 2], data: 'AACAPwAAIEA=' }] }), 'whole'],
  ['binary, 64-byte tensors', '/v2/models/simple/infer', ...binary({ inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
  ] }, int32(16), int32(16)), 'whole'],
  ['binary, 256 KiB cut through', '/v2/models/identity_fp32/infer', ...binary({
    inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, BIG], parameters: { binary_data_size: BIG * 4 } }],
    outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
  }, Buffer.alloc(BIG * 4, 1)), 'streamed'],
  ['raw', '/v2/models/identity_uint8/infer', { 'inference-header-content-length': '0' }, Buffer.alloc(4096, 7), 'streamed'],
  ['V1 predict', '/v1/models/identity_fp32:predict', ...json({ instances: [[1, 2, 3]] }), 'whole'],
  ['generate', '/v2/models/identity_int32/generate', ...json({ INPUT0: [4, 5] }), 'whole'],
  ['generate_stream', '/v2/models/repeat_int32/generate_stream', ...json({ INPUT0: 2 }), 'events'],
];

/** Server-Timing's hop names, `total` left out. */
const named = (header: string | undefined): string[] => [...timings(header).keys()].filter((n) => n !== 'total');

describe('every path reports every hop: Server-Timing (head and trailer) and the access line, over HTTP/1.1 and h2c', () => {
  const tap = new RecordTap();
  const gw = gatewayForSuite(['--demo'], tap);
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'tensorgate-hops-'));
    PATHS.forEach(([, , , body], i) => writeFileSync(path.join(dir, `${i}.body`), body));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** The access line's hops of the request after `mark`, and the answer's form. */
  async function logged(mark: number, answer: Answer): Promise<void> {
    const rec = await tap.after(mark);
    expect(rec.encodingOut === 'binary').toBe(answer === 'streamed');
    expect(Object.keys(accessLineOf(rec).hops_ms as object)).toEqual(HOPS);
  }

  // curl over HTTP/1.1, saying it takes trailers (TE: trailers): a streamed answer is chunked to carry one.
  needs(CURL()).test.each(PATHS.map((p, i) => [...p, i] as const))('HTTP/1.1 (curl): %s', async (_name, url, headers, _body, answer, i) => {
    const mark = tap.mark();
    const r = await curl('--http1.1', '-H', 'TE: trailers', ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]),
      '--data-binary', `@${path.join(dir, `${i}.body`)}`, `${gw.url}${url}`);
    expect([r.exit, r.status]).toEqual([0, 200]);
    expect(named(r.headers['server-timing'])).toEqual(IN_HEAD[answer]);
    expect(r.trailers['server-timing'] === undefined ? [] : named(r.trailers['server-timing'])).toEqual(IN_TRAILER[answer]);
    await logged(mark, answer);
  });

  // nghttp (nghttp2's client) prints every header field it receives, the trailer's too.
  needs(NGHTTP()).test.each(PATHS.map((p, i) => [...p, i] as const))('h2c (nghttp): %s', async (_name, url, headers, _body, answer, i) => {
    const mark = tap.mark();
    const r = await run('nghttp', ['-v', '-n', '-H', ':method: POST', '-H', 'accept-encoding: identity', ...Object.entries(headers).flatMap(([k, v]) => ['-H', `${k}: ${v}`]),
      '-d', path.join(dir, `${i}.body`), `${gw.url}${url}`], { timeoutMs: 20_000 });
    expect([r.code, /recv \(stream_id=\d+\) :status: (\d+)/.exec(r.stdout)?.[1]]).toEqual([0, '200']);
    const [head, trailer] = [...r.stdout.matchAll(/recv \(stream_id=\d+\) server-timing: (.*)/g)].map((m) => named(m[1]!.trim()));
    expect(head).toEqual(IN_HEAD[answer]);
    expect(trailer ?? []).toEqual(IN_TRAILER[answer]);
    await logged(mark, answer);
  });

  needs(CURL()).test('HTTP/1.1 without TE: trailers: a streamed answer keeps its Content-Length, and the access line alone has the later hops', async () => {
    const i = PATHS.findIndex((p) => p[0] === 'raw');
    const mark = tap.mark();
    const r = await curl('--http1.1', '-H', 'inference-header-content-length: 0', '--data-binary', `@${path.join(dir, `${i}.body`)}`, `${gw.url}${PATHS[i]![1]}`);
    expect([r.status, r.headers['content-length'], r.headers['transfer-encoding'], r.trailers]).toEqual([200, String(r.body.length), undefined, {}]);
    expect(named(r.headers['server-timing'])).toEqual(IN_HEAD.streamed);
    await logged(mark, 'streamed');
  });
});
