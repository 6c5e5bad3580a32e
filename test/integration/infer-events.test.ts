// V2 infer as server-sent events (Accept: text/event-stream) through the gateway against the
// reference backend: decoupled models stream their responses, each event the V2 JSON answer; every
// request form; binary outputs as base64; the 400 without the header; errors before and after the
// first event; a client that goes away resets the upstream stream (RST_STREAM CANCEL on the wire);
// HTTP/2; auth and the body limit as on infer. Third-party clients against real Triton:
// test/conformance/infer-events.test.ts.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { constants } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import { FaultProxy, FRAME } from '../support/fault-proxy';
import { gatewayFor, gatewayForSuite } from '../support/gateway';
import { h2Connect, h2Open, h2Send } from '../support/h2';
import { binaryBody, send } from '../support/http';
import { RecordTap } from '../support/records';
import { nextEvent, waitUntil } from '../support/wait';
import { CURL, needs } from '../support/tools';
import { int32 } from '../support/int32';
import { curl } from '../support/curl';

const SSE = 'text/event-stream; charset=utf-8';
const EVENTS = { 'Content-Type': 'application/json', Accept: 'text/event-stream' };
const repeat = (n: number, extra = ''): string => `{${extra}"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[1],"data":[${n}]}]}`;
const event = (json: string): string => `data: ${json}\n\n`;
const repeatEvent = (i: number, id = ''): string =>
  event(`{${id === '' ? '' : `"id":"${id}",`}"model_name":"repeat_int32","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1],"data":[${i}]}]}`);
/** The backend's cancellation of the stream whose request carried parameter `tag` (not an earlier test's). */
const cancellationOf = (events: NodeJS.EventEmitter, tag: string): Promise<unknown[]> =>
  nextEvent(events, 'stream-cancelled', 5000, (parameters) => (parameters as ReadonlyMap<string, unknown>).get('tag') === tag);
const DECOUPLED = "HTTP end point doesn't support models with decoupled transaction policy unless the request accepts server-sent events: send 'Accept: text/event-stream' to get each response as an event";

describe('V2 infer as server-sent events', () => {
  const tap = new RecordTap();
  const gw = gatewayForSuite(['--demo'], tap);
  const post = (path: string, body: string | Buffer, headers: Record<string, string | number> = EVENTS) =>
    send(`${gw.url}/v2/models/${path}`, { body, headers });

  test('a decoupled model: each response one event in the V2 JSON shape, the stream ends after the last', async () => {
    const r = await post('repeat_int32/infer', repeat(3, '"id":"abc",'));
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe(SSE);
    expect(r.body.toString()).toBe([0, 1, 2].map((i) => repeatEvent(i, 'abc')).join(''));
    const v = await post('repeat_int32/versions/1/infer', repeat(1));
    expect(v.body.toString()).toBe(repeatEvent(0));
    const words = await post('echo_text/infer', '{"inputs":[{"name":"TEXT","datatype":"BYTES","shape":[1],"data":["hello  big\\nworld"]}]}');
    expect(words.body.toString()).toBe(['hello', 'big', 'world'].map((w) =>
      event(`{"model_name":"echo_text","model_version":"1","outputs":[{"name":"OUTPUT","datatype":"BYTES","shape":[1],"data":["${w}"]}]}`)).join(''));
  });

  test('no response: 200, an empty event stream', async () => {
    const r = await post('repeat_int32/infer', repeat(0));
    expect([r.status, r.headers['content-type'], r.body.length]).toEqual([200, SSE, 0]);
  });

  test('the other request forms decode as on infer; binary outputs become base64 marked content_type', async () => {
    const b = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 4 } }],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }] }, int32([2]));
    const bin = await post('repeat_int32/infer', b.body, { ...b.headers, Accept: 'text/event-stream' });
    const base64 = (i: number): string => event(
      `{"model_name":"repeat_int32","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"INT32","shape":[1],"parameters":{"content_type":"base64"},"data":"${int32([i]).toString('base64')}"}]}`);
    expect([bin.status, bin.body.toString()]).toEqual([200, base64(0) + base64(1)]);
    // Raw (Inference-Header-Content-Length: 0): every output is binary, so base64 here.
    const raw = await post('repeat_int32/infer', int32([2]), { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': 0, Accept: 'text/event-stream' });
    expect([raw.status, raw.body.toString()]).toEqual([200, base64(0) + base64(1)]);
    // binary_data_output, and a listed output that asks for JSON keeps JSON.
    const all = await post('repeat_int32/infer', repeat(1, '"parameters":{"binary_data_output":true},'));
    expect(all.body.toString()).toBe(base64(0));
    const listed = await post('repeat_int32/infer', `{"parameters":{"binary_data_output":true},"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":false}}],${repeat(1).slice(1)}`);
    expect(listed.body.toString()).toBe(repeatEvent(0));
  });

  test('a model that is not decoupled: one event, the JSON its infer answers', async () => {
    const body = '{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,2],"data":[1.5,0.1]}]}';
    const json = await post('identity_fp32/infer', body, { 'Content-Type': 'application/json' });
    const r = await post('identity_fp32/infer', body);
    expect([r.status, r.headers['content-type']]).toEqual([200, SSE]);
    expect(r.body.toString()).toBe(event(json.body.toString()));
  });

  test('a decoupled model without Accept: text/event-stream is 400 naming the header; nothing goes upstream', async () => {
    const calls = gw.demoBackend!.stats.streamCalls;
    for (const accept of [undefined, '*/*', 'text/*', 'application/json', 'text/event-stream;q=0']) {
      const r = await post('repeat_int32/infer', repeat(1), accept === undefined ? { 'Content-Type': 'application/json' } : { 'Content-Type': 'application/json', Accept: accept });
      expect([accept, r.status, r.headers['content-type'], r.headers['x-tensorgate-error']]).toEqual([accept, 400, 'application/json', 'GW_ERR_MODEL_DECOUPLED']);
      expect(JSON.parse(r.body.toString())).toEqual({ error: DECOUPLED });
    }
    for (const accept of ['TEXT/Event-Stream', 'application/json, text/event-stream;q=0.5', 'text/event-stream; charset=utf-8']) {
      const r = await post('repeat_int32/infer', repeat(1), { 'Content-Type': 'application/json', Accept: accept });
      expect([accept, r.status, r.body.toString()]).toEqual([accept, 200, repeatEvent(0)]);
    }
    expect(gw.demoBackend!.stats.streamCalls).toBe(calls + 3);
  });

  test('errors before the first event are JSON errors; after it, an error event ends the stream', async () => {
    const mid = await post('repeat_int32/infer', repeat(3, '"parameters":{"fail_after":2},'));
    expect([mid.status, mid.headers['content-type']]).toEqual([200, SSE]);
    expect(mid.body.toString()).toBe(repeatEvent(0) + repeatEvent(1) + event('{"error":"RuntimeError: repeat_int32 failed after 2 responses"}'));
    const first = await post('repeat_int32/infer', repeat(3, '"parameters":{"fail_after":0},'));
    expect([first.status, first.headers['content-type'], first.headers['x-tensorgate-error']]).toEqual([400, 'application/json', 'GW_ERR_UPSTREAM_STREAM_ERROR']);
    expect(JSON.parse(first.body.toString())).toEqual({ error: 'RuntimeError: repeat_int32 failed after 0 responses' });
    const cases: [string, string, number, string][] = [
      ['nope/infer', repeat(1), 404, "Request for unknown model: 'nope' is not found"],
      ['repeat_int32/infer', '{"inputs":[', 400, 'failed to parse the request JSON buffer: Invalid value. at 11'],
      ['repeat_int32/infer', '{"inputs":[{"name":"INPUT0","datatype":"INT32","shape":[2],"data":[1]}]}', 400,
        "Unable to parse 'data': Shape does not match true shape of 'data' field"],
    ];
    for (const [path, body, status, error] of cases) {
      const r = await post(path, body);
      expect([path, body, r.status]).toEqual([path, body, status]);
      expect(JSON.parse(r.body.toString())).toEqual({ error });
    }
    // An FP16 output asked for as JSON: the encoder's refusal before the first event, as infer answers it.
    const fp16 = await post('identity_fp16/infer', '{"inputs":[{"name":"INPUT0","datatype":"FP16","shape":[1,1],"data":"ADw="}]}');
    expect([fp16.status, fp16.headers['content-type']]).toEqual([400, 'text/plain']);
    expect(JSON.parse(fp16.body.toString())).toEqual({ error: 'sending FP16 data via JSON is not supported. Please use the binary data format for output' });
    const asBinary = await post('identity_fp16/infer', '{"inputs":[{"name":"INPUT0","datatype":"FP16","shape":[1,1],"data":"ADw="}],"outputs":[{"name":"OUTPUT0","parameters":{"binary_data":true}}]}');
    expect(JSON.parse(asBinary.body.toString().slice(6))).toMatchObject({ outputs: [{ name: 'OUTPUT0', datatype: 'FP16', data: Buffer.from([0, 0x3c]).toString('base64') }] });
  });

  test("the call's deadline passing mid-stream: an error event ends the stream", async () => {
    const r = await post('repeat_int32/infer', repeat(100, '"parameters":{"delay_ms":50},'), { ...EVENTS, 'grpc-timeout': '300m' });
    expect([r.status, r.headers['content-type']]).toEqual([200, SSE]);
    const events = r.body.toString().split('\n\n').filter((e) => e !== '');
    expect(events.length).toBeGreaterThanOrEqual(2);
    expect(events.length).toBeLessThan(100);
    expect(events.slice(0, -1)).toEqual(events.slice(0, -1).map((_e, i) => repeatEvent(i).slice(0, -2)));
    expect(events[events.length - 1]).toBe(`data: ${JSON.stringify({ error: 'Deadline Exceeded: no answer from upstream within upstream.timeoutMs or the shorter grpc-timeout the request asked for' })}`);
  });

  test('records the request form, sse out, and the stream call', async () => {
    const n = tap.mark();
    await post('repeat_int32/infer', repeat(2));
    await tap.until(n + 1);
    expect(tap.records[tap.records.length - 1]).toMatchObject({ route: 'infer', model: 'repeat_int32', encoding: 'json', encodingOut: 'sse', status: 200, upstreamStatus: 0 });
  });

  test('HTTP/2 (h2c): the same events', async () => {
    const session = await h2Connect(gw.url);
    try {
      const r = await h2Send(session, '/v2/models/repeat_int32/infer', { body: repeat(3), headers: EVENTS });
      expect([r.status, r.headers['content-type'], r.rstCode]).toEqual([200, SSE, 0]);
      expect(r.body.toString()).toBe([0, 1, 2].map((i) => repeatEvent(i)).join(''));
    } finally {
      session.close();
    }
  });

  test('HTTP/2: a client that resets its stream mid-stream cancels the model', async () => {
    const session = await h2Connect(gw.url);
    try {
      const cancelled = cancellationOf(gw.demoBackend!.events, 'h2-reset');
      const body = repeat(1000, '"parameters":{"delay_ms":20,"tag":"h2-reset"},');
      const { stream, answer } = h2Open(session, '/v2/models/repeat_int32/infer', { body, headers: EVENTS });
      stream.once('data', () => stream.close(constants.NGHTTP2_CANCEL));
      stream.end(Buffer.from(body));
      await cancelled;
      expect((await answer).rstCode).toBe(constants.NGHTTP2_CANCEL);
    } finally {
      session.close();
    }
  });

  needs(CURL()).test('HTTP/2: a client that closes its connection (curl --max-time, h2c) cancels the model', async () => {
    const cancelled = cancellationOf(gw.demoBackend!.events, 'curl');
    const r = await curl('-N', '--http2-prior-knowledge', '--max-time', '1', '--data-binary', repeat(1000, '"parameters":{"delay_ms":100,"tag":"curl"},'),
      '-H', 'Accept: text/event-stream', `${gw.url}/v2/models/repeat_int32/infer`);
    expect(r.exit).toBe(28); // timed out: curl hung up mid-stream
    await cancelled;
  });

  test('a client that goes away mid-stream cancels the model', async () => {
    const cancelled = cancellationOf(gw.demoBackend!.events, 'h1-away');
    const got: string[] = [];
    const req = request(`${gw.url}/v2/models/repeat_int32/infer`, { method: 'POST', headers: EVENTS }, (res) => {
      res.on('data', (c: Buffer) => {
        got.push(c.toString());
        req.destroy();
      });
      res.on('error', () => { /* closed by us */ });
    });
    req.on('error', () => { /* closed by us */ });
    req.end(repeat(1000, '"parameters":{"delay_ms":20,"tag":"h1-away"},'));
    await cancelled;
    expect(got[0]).toBe(repeatEvent(0));
  });
});

describe('on the wire to the backend', () => {
  let backend: ReferenceBackend;
  let proxy: FaultProxy;
  let gw: RunningGateway;
  beforeAll(async () => {
    backend = await startReferenceBackend({ host: '127.0.0.1' });
    proxy = await FaultProxy.start({ port: Number(backend.address.split(':')[1]) });
    // No health check in the tests' time: the only calls after the config is cached are the streams.
    gw = await gatewayFor(['--backend', proxy.address, '--health-check-interval-ms', '600000']);
  });
  afterAll(async () => {
    await gw.close();
    await proxy.close();
    await backend.close(0);
  });

  /** The ModelStreamInfer streams the gateway opened (HEADERS up) after frame `from`, and how each ended. */
  const streams = (from: number): { id: number; rst?: number; endedDown: boolean }[] => {
    const out = new Map<string, { id: number; rst?: number; endedDown: boolean }>();
    for (const f of proxy.frames.slice(from)) {
      const key = `${f.conn}:${f.streamId}`;
      if (f.type === FRAME.HEADERS && f.direction === 'up' && !out.has(key)) out.set(key, { id: f.streamId, endedDown: false });
      const s = out.get(key);
      if (s === undefined) continue;
      if (f.type === FRAME.RST_STREAM && f.direction === 'up' && f.errorCode !== undefined) s.rst = f.errorCode;
      if (f.type === FRAME.HEADERS && f.direction === 'down' && (f.flags & 1) === 1) s.endedDown = true;
    }
    return [...out.values()];
  };

  test('a client that goes away: RST_STREAM CANCEL on the upstream stream, the model stops', async () => {
    // The model's config is cached by a first request: the only call after `from` is the stream.
    expect((await send(`${gw.url}/v2/models/repeat_int32/infer`, { body: repeat(1), headers: EVENTS })).status).toBe(200);
    const from = proxy.frames.length;
    const cancelled = cancellationOf(backend.events, 'h1-away');
    let first = '';
    const req = request(`${gw.url}/v2/models/repeat_int32/infer`, { method: 'POST', headers: EVENTS }, (res) => {
      res.once('data', (c: Buffer) => {
        first = c.toString();
        req.destroy();
      });
      res.on('error', () => { /* closed by us */ });
    });
    req.on('error', () => { /* closed by us */ });
    req.end(repeat(1000, '"parameters":{"delay_ms":20,"tag":"h1-away"},'));
    await cancelled;
    await waitUntil(() => streams(from)[0]?.rst !== undefined, 'the upstream stream reset');
    expect(first).toBe(repeatEvent(0));
    // One stream, reset by the gateway with CANCEL (RFC 9113 §7: 0x8) before Triton ended it.
    expect(streams(from)).toEqual([{ id: expect.any(Number) as number, rst: 0x8, endedDown: false }]);
  });

  test('the connection to the backend breaking mid-stream: an error event ends the stream', async () => {
    const got = new Promise<{ status: number; body: string }>((resolve) => {
      const req = request(`${gw.url}/v2/models/repeat_int32/infer`, { method: 'POST', headers: EVENTS }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          if (body === '') proxy.reset(); // after the first event
          body += c.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.end(repeat(1000, '"parameters":{"delay_ms":20},'));
    });
    const r = await got;
    const events = r.body.split('\n\n').filter((e) => e !== '');
    expect([r.status, events[0]]).toEqual([200, repeatEvent(0).slice(0, -2)]);
    expect(events[events.length - 1]).toMatch(/^data: \{"error":"upstream unavailable: /);
    await waitUntil(() => backend.stats.streamCancellations === 2, 'the model stopped');
  });

  test('a stream that completes is not cancelled before its end', async () => {
    const from = proxy.frames.length;
    const r = await send(`${gw.url}/v2/models/repeat_int32/infer`, { body: repeat(3), headers: EVENTS });
    expect(r.body.toString()).toBe([0, 1, 2].map((i) => repeatEvent(i)).join(''));
    // Triton's trailers end it (END_STREAM down); the gateway resets nothing.
    expect(streams(from)).toEqual([{ id: expect.any(Number) as number, endedDown: true }]);
    expect(backend.stats.streamCancellations).toBe(2);
  });
});

describe('auth and limits apply as on infer', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tg-events-'));
  const token = 'simple_only_0123456789abcdef';
  const sha = (t: string): string => `sha256:${createHash('sha256').update(t).digest('hex')}`;
  let gw: RunningGateway;
  beforeAll(async () => {
    const keys = join(dir, 'keys.yaml');
    writeFileSync(keys, `keys:\n  - { id: one, token: "${sha(token)}", groups: [inference], models: [repeat_int32] }\n`);
    gw = await gatewayFor(['--demo', '--auth', '--auth-keys-file', keys, '--auth-key-header', 'X-API-Key', '--max-input-size', '4096']);
  });
  afterAll(async () => {
    await gw.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('401 without a credential, 403 for a model the key lacks, 200 with it; the body limit', async () => {
    const go = (model: string, headers: Record<string, string>, body = repeat(2)) =>
      send(`${gw.url}/v2/models/${model}/infer`, { body, headers: { ...EVENTS, ...headers } });
    expect((await go('repeat_int32', {})).status).toBe(401);
    expect((await go('echo_text', { 'X-API-Key': token })).status).toBe(403);
    const ok = await go('repeat_int32', { 'X-API-Key': token });
    expect([ok.status, ok.body.toString()]).toEqual([200, repeatEvent(0) + repeatEvent(1)]);
    const big = await go('repeat_int32', { 'X-API-Key': token }, `{"id":"${'x'.repeat(5000)}",${repeat(1).slice(1)}`);
    expect([big.status, big.headers['content-type']]).toEqual([400, 'application/json']);
  });
});
