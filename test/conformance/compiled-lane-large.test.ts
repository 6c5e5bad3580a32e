// Bodies of 4 MiB through the compiled lane (gateway/native/lane.c) against real Triton, many at
// once: Triton's flow-control windows let one turn of the lane's loop frame several such calls, a
// thousand and more pieces gathered for one writev, and every message must reach Triton whole.
// Each answer is checked against the request's own tensor (image_stats: its length and the sum of
// its bytes); one of each form is compared with Triton's own HTTP answer (byte for byte; V1: its numbers).
import { Agent } from 'node:http';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { binaryBody, type RawResponse, send } from '../support/http';

jest.setTimeout(120_000);

let gw: RunningGateway;
beforeAll(async () => {
  gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!]);
});
afterAll(async () => {
  await gw?.close();
});

const N = 4 * 1024 * 1024;
const CONNECTIONS = 16;
const EACH = 8;

const BASE = Buffer.allocUnsafe(N);
for (let j = 0; j < N; j++) BASE[j] = (j * 31 + 7) & 0xff;

/** Request `i`'s tensor: BASE but for eight bytes that depend on `i` (so each answer's SUM is its own). */
function tensor(i: number): Buffer {
  const b = Buffer.from(BASE);
  b.writeUInt32LE(Math.imul(i, 2654435761) >>> 0, 4096);
  b.writeUInt32LE(i, N - 4);
  return b;
}

function sum(b: Buffer): bigint {
  let s = 0;
  for (let j = 0; j < b.length; j++) s += b[j]!;
  return BigInt(s);
}

type Form = 'binary' | 'base64' | 'v1';

/**
 * An image_stats request of `form`: body and headers (binary: outputs asked as binary; base64:
 * answered as JSON). `reference`: what Triton's HTTP frontend gets for the same answer (it reads no
 * base64: the binary extension, outputs as JSON).
 */
function requestOf(form: Form, t: Buffer, reference = false): { body: Buffer; headers: Record<string, string | number> } {
  const input = { name: 'IMAGE', datatype: 'UINT8', shape: [1, t.length] };
  if (form === 'v1' && !reference) {
    return { body: Buffer.from(JSON.stringify({ instances: [{ b64: t.toString('base64') }] })), headers: { 'Content-Type': 'application/json' } };
  }
  if (form === 'base64' && !reference) {
    return { body: Buffer.from(JSON.stringify({ inputs: [{ ...input, data: t.toString('base64') }] })), headers: { 'Content-Type': 'application/json' } };
  }
  const r = binaryBody({
    inputs: [{ ...input, parameters: { binary_data_size: t.length } }],
    ...(form === 'binary' ? { outputs: [{ name: 'LEN', parameters: { binary_data: true } }, { name: 'SUM', parameters: { binary_data: true } }] } : {}),
  }, t);
  return { body: r.body, headers: { ...r.headers, 'Content-Type': 'application/octet-stream' } };
}

/** LEN and SUM of an answer of `form`. */
function statsOf(form: Form, body: Buffer, headerLength: number): [bigint, bigint] {
  if (form === 'binary') return [body.readBigInt64LE(headerLength), body.readBigUInt64LE(headerLength + 8)];
  if (form === 'v1') {
    // {"predictions":[{"LEN":[n],"SUM":[s]}]}, read as text: a sum past 2^53 stays exact.
    const m = /^\{"predictions":\[\{"LEN":\[(\d+)\],"SUM":\[(\d+)\]\}\]\}$/.exec(body.toString());
    return m === null ? [-1n, -1n] : [BigInt(m[1]!), BigInt(m[2]!)];
  }
  const outputs = (JSON.parse(body.toString()) as { outputs: { name: string; data: number[] }[] }).outputs;
  const value = (name: string): bigint => BigInt(outputs.find((o) => o.name === name)!.data[0]!);
  return [value('LEN'), value('SUM')];
}

function post(agent: Agent, body: Buffer, headers: Record<string, string | number>, v1 = false): Promise<RawResponse> {
  return send(`${gw.url}${v1 ? '/v1/models/image_stats:predict' : '/v2/models/image_stats/infer'}`, { body, headers, agent });
}

test.each(['binary', 'base64', 'v1'] as Form[])('%s, 4 MiB: 16 connections × 8 requests at once, every message whole at Triton, most served in C', async (form) => {
  // Triton's own HTTP answer to the first request, and the gateway's, byte for byte.
  const first = requestOf(form, tensor(0)), reference = requestOf(form, tensor(0), true);
  const expected = await send(`http://${process.env.TRITON_HTTP!}/v2/models/image_stats/infer`,
    { body: reference.body, headers: { ...reference.headers, 'Accept-Encoding': 'identity' } });
  expect(expected.status).toBe(200);
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const served = gw.laneCounts()?.served ?? 0;
  try {
    const got = await post(agent, first.body, first.headers, form === 'v1');
    expect(got.status).toBe(200);
    // V1's answer is its own form: its numbers are Triton's.
    if (form !== 'v1') expect(got.body.equals(expected.body)).toBe(true);
    else expect(statsOf('v1', got.body, 0)).toEqual(statsOf('base64', expected.body, 0));
    const sums = new Map<number, bigint>();
    const failures: string[] = [];
    await Promise.all(Array.from({ length: CONNECTIONS }, async (_, c) => {
      for (let k = 0; k < EACH; k++) {
        const i = 1 + c * EACH + k;
        const t = tensor(i);
        sums.set(i, sum(t));
        const r = requestOf(form, t);
        const a = await post(agent, r.body, r.headers, form === 'v1');
        if (a.status !== 200) {
          failures.push(`request ${i}: ${a.status} ${a.body.toString().slice(0, 200)}`);
          continue;
        }
        const [len, total] = statsOf(form, a.body, Number(a.headers['inference-header-content-length'] ?? 0));
        if (len !== BigInt(N) || total !== sums.get(i)) failures.push(`request ${i}: LEN ${len}, SUM ${total}, expected ${N}, ${sums.get(i)}`);
      }
    }));
    expect(failures).toEqual([]);
    // Each connection's first request is JavaScript's (the connection is lent to C after it), most of the rest C's.
    const lane = gw.laneCounts();
    if (lane !== undefined) expect(lane.served - served).toBeGreaterThanOrEqual((CONNECTIONS * EACH * 3) / 4);
  } finally {
    agent.destroy();
  }
});
