// The generate endpoints (over ModelStreamInfer) through the gateway against the reference backend.
import { request } from 'node:http';
import { gatewayForSuite } from '../support/gateway';
import { RecordTap } from '../support/records';
import { send } from '../support/http';
import { nextEvent } from '../support/wait';

describe('generate and generate_stream', () => {
  const tap = new RecordTap();
  const records = tap.records;
  const gw = gatewayForSuite(['--demo'], tap);
  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    send(`${gw.url}/v2/models/${path}`, { body, headers: { 'Content-Type': 'application/json', ...headers } });

  test('/generate: one response, outputs first, single elements unwrapped', async () => {
    const r = await post('identity_fp32/generate', '{"INPUT0":[1.5,2],"id":"x7","temperature":0.5,"parameters":{"top_k":3}}');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.body.toString()).toBe('{"OUTPUT0":[1.5,2.0],"id":"x7","model_name":"identity_fp32","model_version":"1"}');
    const one = await post('repeat_int32/generate', '{"INPUT0":1}');
    expect(one.body.toString()).toBe('{"OUTPUT0":0,"model_name":"repeat_int32","model_version":"1"}');
    const s = await post('simple_string/generate', `{"INPUT0":${JSON.stringify(Array(16).fill('2'))},"INPUT1":${JSON.stringify(Array(16).fill('1'))}}`);
    expect(JSON.parse(s.body.toString())).toEqual({ OUTPUT0: Array(16).fill('3'), OUTPUT1: Array(16).fill('1'), model_name: 'simple_string', model_version: '1' });
  });

  test('/generate: records the request for telemetry', async () => {
    const n = records.length;
    await post('identity_int32/generate', '{"INPUT0":[4]}');
    await tap.until(n + 1);
    const rec = records[records.length - 1]!;
    expect(rec).toMatchObject({ route: 'generate', model: 'identity_int32', encoding: 'generate', status: 200, upstreamStatus: 0 });
  });

  test('/generate: other than one response is a 200 error, as Triton answers', async () => {
    for (const n of [0, 3]) {
      const r = await post('repeat_int32/generate', `{"INPUT0":${n}}`);
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body.toString()).error).toMatch(/^generate expects model to produce exactly 1 response/);
    }
  });

  test('/generate_stream: SSE events, ids, the empty final response not emitted', async () => {
    const r = await post('repeat_int32/generate_stream', '{"INPUT0":3,"id":"abc"}');
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(r.body.toString()).toBe([0, 1, 2].map((i) => `data: {"OUTPUT0":${i},"id":"abc","model_name":"repeat_int32","model_version":"1"}\n\n`).join(''));
    const none = await post('repeat_int32/generate_stream', '{"INPUT0":0}');
    expect(none.status).toBe(200);
    expect(none.body.length).toBe(0);
    const words = await post('echo_text/generate_stream', '{"TEXT":"hello  big\\nworld"}');
    expect(words.body.toString()).toBe(['hello', 'big', 'world'].map((w) => `data: {"OUTPUT":"${w}","model_name":"echo_text","model_version":"1"}\n\n`).join(''));
    const single = await post('identity_fp32/generate_stream', '{"INPUT0":0.1}');
    expect(single.body.toString()).toBe('data: {"OUTPUT0":0.10000000149011612,"model_name":"identity_fp32","model_version":"1"}\n\n');
  });

  test('/generate_stream: a mid-stream error is an event; a first error sets 400', async () => {
    const r = await post('repeat_int32/generate_stream', '{"INPUT0":3,"fail_after":2}');
    expect(r.status).toBe(200);
    const events = r.body.toString().split('\n\n').filter((e) => e !== '');
    expect(events).toHaveLength(3);
    expect(JSON.parse(events[2]!.slice(6))).toEqual({ error: 'RuntimeError: repeat_int32 failed after 2 responses' });
    const first = await post('repeat_int32/generate_stream', '{"INPUT0":3,"fail_after":0}');
    expect(first.status).toBe(400);
    expect(first.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(first.body.toString()).toBe('data: {"error":"RuntimeError: repeat_int32 failed after 0 responses"}\n\n');
    const g = await post('repeat_int32/generate', '{"INPUT0":3,"fail_after":0}');
    expect(g.status).toBe(400);
    expect(g.body.toString()).toBe('{"error":"RuntimeError: repeat_int32 failed after 0 responses"}');
  });

  test('errors before inference are normal JSON errors', async () => {
    const cases: [string, string, Record<string, string>, number, string][] = [
      ['nope/generate_stream', '{"INPUT0":1}', {}, 404, "Request for unknown model: 'nope' is not found"],
      ['repeat_int32/generate_stream', '{"INPUT0":1}', { 'Content-Encoding': 'gzip' }, 400, "Unsupported content-encoding, only 'identity' is supported."],
      ['repeat_int32/generate', '{"INPUT0":[1,2]}', {}, 400, "The schema can not convert input 'INPUT0' to tensor with proper shape"],
      ['repeat_int32/generate', '{"INPUT0":1,"x":[1]}', {}, 400, "parameter 'x' has invalid type. It should be either 'int', 'bool', or 'string'."],
      ['repeat_int32/generate', '{"INPUT0":1,"id":5}', {}, 400, "Unable to parse 'id': attempt to access JSON non-string as string"],
      ['repeat_int32/generate', '{"INPUT0":[1', {}, 400, "failed to parse the request JSON buffer: Missing a comma or ']' after an array element. at 12"],
      ['identity_fp32/generate_stream', '{"x":1}', {}, 400, "[request id: <id_unknown>] expected 1 inputs but got 0 inputs for model 'identity_fp32'. Got input(s) [], but missing required input(s) ['INPUT0']. Please provide all required input(s)."],
    ];
    for (const [path, body, headers, status, error] of cases) {
      const r = await post(path, body, headers);
      expect([path, body, r.status, r.headers['content-type']]).toEqual([path, body, status, 'application/json']);
      expect(JSON.parse(r.body.toString())).toEqual({ error });
    }
  });

  test('a client that goes away mid-stream cancels the gRPC stream', async () => {
    const stats = gw.demoBackend!.stats;
    const before = stats.streamCancellations;
    const cancelled = nextEvent(gw.demoBackend!.events, 'stream-cancelled');
    const got: string[] = [];
    const req = request(`${gw.url}/v2/models/repeat_int32/generate_stream`, { method: 'POST' }, (res) => {
      res.on('data', (c: Buffer) => {
        got.push(c.toString());
        req.destroy();
      });
      res.on('error', () => { /* closed by us */ });
    });
    req.on('error', () => { /* closed by us */ });
    req.end('{"INPUT0":1000,"delay_ms":20}');
    await cancelled;
    expect(stats.streamCancellations).toBe(before + 1);
    expect(got[0]).toMatch(/^data: \{"OUTPUT0":0,/);
  });
});
