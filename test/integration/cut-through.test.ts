// Cut-through on the h2 data plane (docs/cut-through.md), watched from the upstream's side of the wire:
// Triton (here a gRPC peer that records what arrives) gets the request's bytes while the client
// is still uploading; they are exactly the bytes buffered mode sends; our code copies none of the
// payload; a client that goes away resets the call; an upstream that fails mid-upload gets the
// client a proper error at once; a peer that stops reading stops the client (back-pressure).
import { request } from 'node:http';
import type { RunningGateway } from '../../gateway/gateway';
import { inference } from '../../proto/services';
import { gatewayFor } from '../support/gateway';
import { CANCEL, GrpcPeer } from '../support/grpc-peer';
import { binaryBody, type RawResponse, send } from '../support/http';
import { RecordTap } from '../support/records';
import { waitForStall, waitUntil } from '../support/wait';

const { TYPE_UINT8, TYPE_INT32 } = inference.DataType;
const CONFIGS: Record<string, inference.IModelConfig> = {
  blob: { name: 'blob', input: [{ name: 'INPUT0', data_type: TYPE_UINT8, dims: [-1] }], output: [{ name: 'OUTPUT0', data_type: TYPE_UINT8, dims: [-1] }] },
  mixed: {
    name: 'mixed',
    input: [{ name: 'A', data_type: TYPE_UINT8, dims: [-1] }, { name: 'B', data_type: TYPE_INT32, dims: [2] }, { name: 'C', data_type: TYPE_UINT8, dims: [-1] }],
    output: [{ name: 'OUTPUT0', data_type: TYPE_UINT8, dims: [-1] }],
  },
};
const RAW = { 'Inference-Header-Content-Length': 0 };

/** An upload the test drives piece by piece; `response` settles whenever the gateway answers. */
function upload(url: string, length: number, headers: Record<string, string | number>) {
  let flushed = 0;
  const req = request(url, { method: 'POST', headers: { 'Content-Length': length, ...headers } });
  const response = new Promise<RawResponse>((resolve, reject) => {
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
  });
  response.catch(() => undefined);
  return {
    req,
    response,
    flushed: () => flushed,
    /** Writes a piece; resolves once the socket took it (back-pressure shows as a pending write). */
    write: (piece: Buffer) => new Promise<void>((resolve) => {
      req.write(piece, () => {
        flushed += piece.length;
        resolve();
      });
    }),
  };
}

const pattern = (n: number): Buffer => {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + 7) & 0xff;
  return b;
};

jest.setTimeout(60_000); // 16–48 MiB uploads on a busy machine

describe('cut-through (h2 data plane)', () => {
  let peer: GrpcPeer;
  let gw: RunningGateway;
  let buffered: RunningGateway;
  const tap = new RecordTap();
  beforeAll(async () => {
    peer = await new GrpcPeer(CONFIGS).start();
    gw = await gatewayFor(['--backend', peer.address]);
    buffered = await gatewayFor(['--backend', peer.address, '--cut-through=false']);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await gw?.close();
    await buffered?.close();
    await peer?.close();
  });
  afterEach(() => {
    peer.onInfer = GrpcPeer.echoWhenRead;
  });

  test('a 16 MiB raw upload reaches the upstream before it ends, with no payload byte copied by our code', async () => {
    const payload = pattern(16 << 20);
    const piece = 1 << 20;
    const mark = tap.mark();
    const up = upload(`${gw.url}/v2/models/blob/infer`, payload.length, RAW);
    const before = peer.calls.length;
    await up.write(payload.subarray(0, piece));
    // The upstream sees the request's bytes while 15 MiB are still to come.
    await waitUntil(() => peer.calls.length > before && peer.calls[before]!.received > 0, 'the upstream to receive the first bytes');
    const call = peer.calls[before]!;
    expect(call.ended).toBe(false);
    for (let at = piece; at < payload.length; at += piece) await up.write(payload.subarray(at, at + piece));
    up.req.end();
    const r = await up.response;
    expect(r.status).toBe(200);
    const h = Number(r.headers['inference-header-content-length']);
    expect(r.body.subarray(h).equals(payload)).toBe(true);

    const sent = inference.ModelInferRequest.decode(GrpcPeer.message(call));
    expect(sent.inputs.map((i) => [i.name, i.datatype, i.shape!.map(Number)])).toEqual([['INPUT0', 'UINT8', [payload.length]]]);
    expect(Buffer.from(sent.raw_input_contents[0]!).equals(payload)).toBe(true);

    const hops = (await tap.after(mark)).ledger!.hops;
    expect(hops.upstream_send.startNs).toBeLessThan(hops.ingress_read.endNs); // sending began mid-upload
    expect(hops.decode.bytesCopied).toBe(0);
    expect(hops.decode.allocations).toBe(1); // the head: prefix and header fields, no payload room
    expect(hops.upstream_send.bytesOut).toBe(call.received);
  });

  test('binary extension with inputs from the body and from JSON: the same bytes upstream as buffered mode', async () => {
    const a = pattern(100_000);
    const c = pattern(3333).reverse();
    const { body, headers } = binaryBody({
      id: 'mixed-1',
      inputs: [
        { name: 'A', datatype: 'UINT8', shape: [a.length], parameters: { binary_data_size: a.length } },
        { name: 'B', datatype: 'INT32', shape: [2], data: [7, -7] },
        { name: 'C', datatype: 'UINT8', shape: [c.length], parameters: { binary_data_size: c.length } },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    }, a, c);
    const wire: Buffer[] = [];
    for (const g of [gw, buffered]) {
      const mark = tap.mark();
      const n = peer.calls.length;
      const r = await send(`${g.url}/v2/models/mixed/infer`, { body, headers });
      expect(r.status).toBe(200);
      wire.push(Buffer.concat(peer.calls[n]!.chunks));
      const copied = (await tap.after(mark)).ledger!.hops.decode.bytesCopied;
      // B's JSON values are decoded into the head either way (not a copy); the body's payload is
      // copied only when buffered.
      expect(copied).toBe(g === gw ? 0 : a.length + c.length);
    }
    expect(wire[0]!.equals(wire[1]!)).toBe(true);
    const sent = inference.ModelInferRequest.decode(wire[0]!.subarray(5));
    expect(sent.raw_input_contents.map((x) => x.length)).toEqual([a.length, 8, c.length]);
  });

  test('a client that goes away mid-upload resets the upstream call (RST_STREAM CANCEL); the gateway keeps serving', async () => {
    const before = peer.calls.length;
    const up = upload(`${gw.url}/v2/models/blob/infer`, 4 << 20, RAW);
    await up.write(pattern(1 << 20));
    await waitUntil(() => peer.calls.length > before && peer.calls[before]!.received > 0, 'the upstream to receive the first bytes');
    up.req.destroy();
    const call = peer.calls[before]!;
    await waitUntil(() => call.rstCode !== undefined, 'the upstream call to be reset');
    expect(call.rstCode).toBe(CANCEL);
    expect(call.ended).toBe(false);
    const ok = await send(`${gw.url}/v2/models/blob/infer`, { body: Buffer.from('ok'), headers: RAW });
    expect(ok.status).toBe(200);
  });

  test('an upstream that fails mid-upload: the client gets the error at once, before its upload ends', async () => {
    peer.onInfer = (call) => call.stream.once('data', () => GrpcPeer.fail(call.stream, 3, "unexpected shape for input 'INPUT0'"));
    const up = upload(`${gw.url}/v2/models/blob/infer`, 8 << 20, RAW);
    await up.write(pattern(1 << 20));
    const r = await up.response; // 7 MiB never sent
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body.toString())).toEqual({ error: "unexpected shape for input 'raw_input'" });
    expect(up.flushed()).toBe(1 << 20);
    up.req.destroy();
    peer.onInfer = GrpcPeer.echoWhenRead;
    const ok = await send(`${gw.url}/v2/models/blob/infer`, { body: Buffer.from('ok'), headers: RAW });
    expect(ok.status).toBe(200);
  });

  test('back-pressure: while the upstream does not read, the client is held back instead of the gateway buffering', async () => {
    const total = 48 << 20;
    let held: SeenCallRef | undefined;
    peer.onInfer = (call) => {
      call.stream.pause(); // read nothing until released: flow control stops the gateway's writes
      held = { resume: () => { GrpcPeer.echoWhenRead(call); call.stream.resume(); } };
    };
    const up = upload(`${gw.url}/v2/models/blob/infer`, total, RAW);
    const payload = pattern(1 << 20);
    let written = 0;
    const writer = (async () => {
      while (written < total) {
        await up.write(payload);
        written += payload.length;
      }
      up.req.end();
    })();
    await waitUntil(() => held !== undefined, 'the upstream to take the call');
    await waitForStall(() => up.flushed(), 'the client\'s upload');
    // What left the client is bounded by socket buffers and the windows, far below the body.
    expect(up.flushed()).toBeLessThan(total / 2);
    held!.resume();
    await writer;
    const r = await up.response;
    expect(r.status).toBe(200);
    expect(Number(r.headers['content-length'])).toBeGreaterThan(total);
  });
});

describe('binary answers streamed from the DATA frames (h2 data plane)', () => {
  let peer: GrpcPeer;
  let gw: RunningGateway;
  const tap = new RecordTap();
  beforeAll(async () => {
    peer = await new GrpcPeer(CONFIGS).start();
    gw = await gatewayFor(['--backend', peer.address]);
    tap.start();
  });
  afterAll(async () => {
    tap.stop();
    await gw?.close();
    await peer?.close();
  });

  /** Reads an answer, noting when its first body byte came and whether it ended whole. */
  function receive(url: string, body: Buffer, headers: Record<string, string | number>) {
    return new Promise<RawResponse & { firstByteNs: bigint; complete: boolean }>((resolve) => {
      const req = request(url, { method: 'POST', headers: { 'Content-Length': body.length, ...headers } }, (res) => {
        const chunks: Buffer[] = [];
        let firstByteNs = 0n;
        res.on('data', (c: Buffer) => {
          if (firstByteNs === 0n) firstByteNs = process.hrtime.bigint();
          chunks.push(c);
        });
        const done = (): void => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks), firstByteNs, complete: res.complete });
        res.on('end', done);
        res.on('error', done);
        res.on('aborted', done);
      });
      // A connection closed before any answer: status 0.
      req.on('error', () => resolve({ status: 0, headers: {}, body: Buffer.alloc(0), firstByteNs: 0n, complete: false }));
      req.end(body);
    });
  }

  test('a 16 MiB answer reaches the client while Triton is still sending it; the same bytes as buffered', async () => {
    const payload = pattern(16 << 20);
    let lastPieceNs: Promise<bigint> | undefined;
    peer.onInfer = (call) => call.stream.on('end', () => {
      const req = inference.ModelInferRequest.decode(GrpcPeer.message(call));
      lastPieceNs = GrpcPeer.answerSlowly(call.stream, inference.ModelInferResponse.encode({
        model_name: req.model_name, model_version: '1', id: 'slow',
        outputs: [{ name: 'OUTPUT0', datatype: 'UINT8', shape: [req.raw_input_contents[0]!.length] }],
        raw_output_contents: [req.raw_input_contents[0]!],
      }).finish(), 8, 40);
    });
    const mark = tap.mark();
    const r = await receive(`${gw.url}/v2/models/blob/infer`, payload, RAW);
    expect(r.status).toBe(200);
    expect(r.firstByteNs).toBeLessThan(await lastPieceNs!);
    const h = Number(r.headers['inference-header-content-length']);
    expect(Number(r.headers['content-length'])).toBe(r.body.length);
    expect(JSON.parse(r.body.subarray(0, h).toString())).toEqual({
      id: 'slow', model_name: 'blob', model_version: '1',
      outputs: [{ name: 'OUTPUT0', datatype: 'UINT8', shape: [payload.length], parameters: { binary_data_size: payload.length } }],
    });
    expect(r.body.subarray(h).equals(payload)).toBe(true);
    const hops = (await tap.after(mark)).ledger!.hops;
    expect(hops.encode.bytesCopied).toBe(0);
    expect(hops.egress_write.bytesOut).toBe(r.body.length);

    // Buffered mode answers the same bytes and headers.
    const buffered = await gatewayFor(['--backend', peer.address, '--cut-through=false']);
    try {
      const b = await receive(`${buffered.url}/v2/models/blob/infer`, payload, RAW);
      expect(b.body.equals(r.body)).toBe(true);
      for (const k of ['content-type', 'content-length', 'inference-header-content-length']) expect(b.headers[k]).toBe(r.headers[k]);
    } finally {
      await buffered.close();
    }
  });

  test('an answer that breaks after its header went out ends in a closed connection; the gateway keeps serving', async () => {
    peer.onInfer = (call) => call.stream.on('end', () => {
      const req = inference.ModelInferRequest.decode(GrpcPeer.message(call));
      void GrpcPeer.answerSlowly(call.stream, inference.ModelInferResponse.encode({
        model_name: req.model_name, model_version: '1',
        outputs: [{ name: 'OUTPUT0', datatype: 'UINT8', shape: [req.raw_input_contents[0]!.length] }],
        raw_output_contents: [req.raw_input_contents[0]!],
      }).finish(), 4, 20, false);
    });
    const r = await receive(`${gw.url}/v2/models/blob/infer`, pattern(1 << 20), RAW);
    expect(r.status).toBe(200); // the header was already sent
    expect(r.complete).toBe(false);
    expect(r.body.length).toBeLessThan(Number(r.headers['content-length']));
    peer.onInfer = GrpcPeer.echoWhenRead;
    expect((await send(`${gw.url}/v2/models/blob/infer`, { body: Buffer.from('ok'), headers: RAW })).status).toBe(200);
  });

  test('an output longer than its shape says, after the header went out: closed connection', async () => {
    const CONFIG2 = 'mixed';
    peer.onInfer = (call) => call.stream.on('end', () => {
      GrpcPeer.answer(call.stream, inference.ModelInferResponse.encode({
        model_name: CONFIG2, model_version: '1',
        outputs: [{ name: 'A', datatype: 'UINT8', shape: [4] }, { name: 'B', datatype: 'INT32', shape: [2] }],
        raw_output_contents: [Buffer.alloc(4), Buffer.alloc(12)],
      }).finish());
    });
    const { body, headers } = binaryBody({
      inputs: [{ name: 'A', datatype: 'UINT8', shape: [1], parameters: { binary_data_size: 1 } }],
      outputs: [{ name: 'A', parameters: { binary_data: true } }, { name: 'B', parameters: { binary_data: true } }],
    }, Buffer.from([1]));
    const r = await receive(`${gw.url}/v2/models/${CONFIG2}/infer`, body, headers);
    expect(r.complete).toBe(false);
    peer.onInfer = GrpcPeer.echoWhenRead;
  });

  test('answers with a JSON output are not streamed: encoded whole, as before', async () => {
    peer.onInfer = (call) => call.stream.on('end', () => {
      GrpcPeer.answer(call.stream, inference.ModelInferResponse.encode({
        model_name: 'blob', model_version: '1',
        outputs: [{ name: 'OUTPUT0', datatype: 'UINT8', shape: [3] }],
        raw_output_contents: [Buffer.from([1, 2, 3])],
      }).finish());
    });
    const { body, headers } = binaryBody({ inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1], parameters: { binary_data_size: 1 } }] }, Buffer.from([1]));
    const r = await send(`${gw.url}/v2/models/blob/infer`, { body, headers });
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe('{"model_name":"blob","model_version":"1","outputs":[{"name":"OUTPUT0","datatype":"UINT8","shape":[3],"data":[1,2,3]}]}');
    peer.onInfer = GrpcPeer.echoWhenRead;
  });
});

interface SeenCallRef { resume(): void }
