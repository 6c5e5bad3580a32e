// The gRPC pass-through in front of two real Triton replicas, with one gRPC client connection
// (grpc-js: one HTTP/2 connection per client): its calls at c=8 spread over both replicas (each
// Triton's own statistics count them), and killing one replica (SIGKILL of its tritonserver) with
// calls in flight loses only the calls that were in flight on it: every other call, and every
// call after the kill, is answered by the other replica.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import type { ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import { Client, credentials, Metadata, type MethodDefinition, type StatusObject } from '@grpc/grpc-js';
import type { RunningGateway } from '../../gateway/gateway';
import { type inference, inferenceService } from '../../proto/services';
import { gatewayFor, HTTP2_CLIENT } from '../support/gateway';
import { watchOwnStreams } from '../support/h2-streams';
import { killTritonServer, type RunningTriton, startTriton } from '../support/triton';
import { waitUntil } from '../support/wait';
import { needsFile, PYTHON } from '../support/tools';

needsFile(PYTHON()); // real Triton (test/support/triton.ts)

const MODEL_INFER = inferenceService.ModelInfer.path;

let tritons: RunningTriton[] = [];
let gw: RunningGateway;
let client: Client;
/** A client of the gRPC port (server.grpc.enabled: our own HTTP/2 server). */
let portClient: Client;

beforeAll(async () => {
  tritons = await Promise.all([startTriton(), startTriton()]);
  gw = await gatewayFor(['--backend', `127.0.0.1:${tritons[0]!.grpc}`, '--backend', `127.0.0.1:${tritons[1]!.grpc}`, '--upstream-timeout-ms', '20000',
    '--grpc-port-enabled', '--grpc-port', '0']);
  // The gateway's one port: the listener hands application/grpc streams to the pass-through.
  client = new Client(`127.0.0.1:${gw.port}`, credentials.createInsecure());
  portClient = new Client(`127.0.0.1:${gw.grpcPort!}`, credentials.createInsecure());
}, 400_000);

afterAll(async () => {
  client?.close();
  portClient?.close();
  await gw?.close(1000);
  await Promise.all(tritons.map((t) => t.stop()));
}, 90_000);

function unary<Req, Res>(target: Client, m: MethodDefinition<Req, Res>, req: Req): Promise<{ code: number; details: string; res?: Res }> {
  return new Promise((resolve) => {
    let res: Res | undefined;
    const call = target.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, req, new Metadata(), { deadline: Date.now() + 60_000 },
      (_e, r) => { res = r; });
    call.on('status', (s: StatusObject) => setImmediate(() => resolve({ code: s.code, details: s.details, res })));
  });
}

const simple: inference.IModelInferRequest = {
  model_name: 'simple',
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
  raw_input_contents: [Buffer.alloc(64, 1), Buffer.alloc(64, 2)],
};
const slow = (ms: number): inference.IModelInferRequest => ({
  model_name: 'slow', inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1] }], raw_input_contents: [Buffer.alloc(4)],
  parameters: { delay_ms: { int64_param: ms } },
});

/** Successful inferences of `model` Triton `t` has counted (its own ModelStatistics). */
async function successes(t: RunningTriton, model: string): Promise<number> {
  const direct = new Client(`127.0.0.1:${t.grpc}`, credentials.createInsecure());
  try {
    const o = await unary(direct, inferenceService.ModelStatistics, { name: model });
    return Number(o.res!.model_stats![0]!.inference_stats!.success!.count);
  } finally {
    direct.close();
  }
}

/** ModelInfer streams the gateway has open to each backend port (node:http2's diagnostics channels). */
function watchUpstream(): { open: Map<number, number>; dispose(): void } {
  return HTTP2_CLIENT === 'own' ? watchOwn() : watchNode();
}

/** The same count on the gateway's own HTTP/2 client (test/support/h2-streams.ts). */
function watchOwn(): { open: Map<number, number>; dispose(): void } {
  const open = new Map<number, number>();
  const dispose = watchOwnStreams({
    start: (p) => open.set(p, (open.get(p) ?? 0) + 1),
    close: (p) => open.set(p, open.get(p)! - 1),
  });
  return { open, dispose };
}

function watchNode(): { open: Map<number, number>; dispose(): void } {
  const open = new Map<number, number>();
  const port = new WeakMap<ClientHttp2Stream, number>();
  const onStart = (m: unknown): void => {
    const { stream, headers } = m as { stream: ClientHttp2Stream; headers: IncomingHttpHeaders };
    if (headers[':path'] !== MODEL_INFER) return;
    const p = Number(new URL(`http://${String(headers[':authority'])}`).port);
    port.set(stream, p);
    open.set(p, (open.get(p) ?? 0) + 1);
  };
  const onClose = (m: unknown): void => {
    const p = port.get((m as { stream: ClientHttp2Stream }).stream);
    if (p !== undefined) open.set(p, open.get(p)! - 1);
  };
  subscribe('http2.client.stream.start', onStart);
  subscribe('http2.client.stream.close', onClose);
  return { open, dispose: () => { unsubscribe('http2.client.stream.start', onStart); unsubscribe('http2.client.stream.close', onClose); } };
}

test('one connection at c=8: its calls spread over both replicas (each Triton\'s statistics)', async () => {
  const before = await Promise.all(tritons.map((t) => successes(t, 'simple')));
  let left = 64;
  const worker = async (): Promise<number[]> => {
    const codes: number[] = [];
    while (left > 0) {
      left--;
      codes.push((await unary(client, inferenceService.ModelInfer, simple)).code);
    }
    return codes;
  };
  const codes = (await Promise.all(Array.from({ length: 8 }, worker))).flat();
  expect(codes).toEqual(Array(64).fill(0));
  const after = await Promise.all(tritons.map((t) => successes(t, 'simple')));
  const counts = after.map((n, i) => n - before[i]!);
  process.stdout.write(`[faults] grpc pass-through, 64 calls at c=8 on one connection: replica counts ${counts.join(' + ')}\n`);
  expect(counts[0]! + counts[1]!).toBe(64);
  expect(Math.min(...counts)).toBeGreaterThanOrEqual(16); // round robin: 32 each when nothing fails
}, 120_000);

// Through the gRPC port: the replica dies under our own HTTP/2 server's calls.
test('killing one replica with calls in flight loses only its in-flight calls; the rest and every later call go to the other (the gRPC port)', async () => {
  const watch = watchUpstream();
  const [keep, kill] = tritons as [RunningTriton, RunningTriton];
  try {
    let stop = false;
    let killed = false;
    const outcomes: { code: number; details: string; afterKill: boolean }[] = [];
    const worker = async (): Promise<void> => {
      while (!stop) {
        const startedAfterKill = killed;
        const o = await unary(portClient, inferenceService.ModelInfer, slow(400));
        outcomes.push({ ...o, afterKill: startedAfterKill });
      }
    };
    const workers = Array.from({ length: 8 }, worker);
    await waitUntil(() => (watch.open.get(kill.grpc) ?? 0) >= 2 && (watch.open.get(keep.grpc) ?? 0) >= 2, 'calls in flight on both replicas', 30_000);
    const inFlightOnKilled = watch.open.get(kill.grpc)!; // the kill is sent synchronously next
    await killTritonServer(kill);
    killed = true;
    // Each worker makes at least two more calls after the kill.
    const mark = outcomes.length;
    await waitUntil(() => outcomes.slice(mark).filter((o) => o.afterKill).length >= 16, '16 calls after the kill', 60_000);
    stop = true;
    await Promise.all(workers);
    const failed = outcomes.filter((o) => o.code !== 0);
    process.stdout.write(`[faults] grpc pass-through on the gRPC port, replica killed with ${inFlightOnKilled} calls in flight on it: ${failed.length} failed `
      + `(${[...new Set(failed.map((o) => `${o.code} ${o.details}`))].join('; ')}), ${outcomes.filter((o) => o.afterKill).length} later calls all OK\n`);
    expect(failed.length).toBeLessThanOrEqual(inFlightOnKilled);
    expect(failed.length).toBeGreaterThan(0);
    for (const f of failed) expect(f.code).toBe(14); // UNAVAILABLE: the stream broke off
    expect(outcomes.filter((o) => o.afterKill && o.code !== 0)).toEqual([]);
  } finally {
    watch.dispose();
  }
}, 180_000);
