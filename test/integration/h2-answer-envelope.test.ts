// The h2 data plane reads Triton's ModelInfer answer through the one envelope decoder
// (grpc/envelope.ts): its 5-byte prefix split over DATA frames at every byte, the message kept as
// views of the frames, the bytes after the one message not read, and an answer cut short, a
// compressed one or one over the size bound refused with the errors docs/errors.md lists. A peer
// on node:http2 writes the answer frame by frame, as no well-behaved server would.
import type { ServerHttp2Stream } from 'node:http2';
import type { CallOptions } from '../../gateway/upstream/infer/data-plane';
import { H2DataPlane } from '../../gateway/upstream/infer/h2-plane';
import { inference } from '../../proto/services';
import { GrpcPeer, grpcMessage } from '../support/grpc-peer';
import { callError, fixedBackends } from '../support/upstream';
import { HTTP2_CLIENT } from '../support/gateway';

const request = grpcMessage(inference.ModelInferRequest.encode({ model_name: 'm', raw_input_contents: [Buffer.alloc(8)] }).finish());
const answer = Buffer.from(inference.ModelInferResponse.encode({ model_name: 'm', raw_output_contents: [Buffer.alloc(300, 9)] }).finish());

/** Writes `bytes` as DATA frames of `size` bytes each (each waits for the last to be written), then the trailers. */
async function writeInPieces(stream: ServerHttp2Stream, bytes: Buffer, size: number, status = '0'): Promise<void> {
  stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': status }));
  for (let at = 0; at < bytes.length; at += size) {
    await new Promise<void>((resolve) => stream.write(bytes.subarray(at, at + size), () => resolve()));
  }
  stream.end();
}

describe('h2 data plane: the answer\'s envelope', () => {
  let peer: GrpcPeer;
  let plane: H2DataPlane;
  let send: (stream: ServerHttp2Stream) => void = () => undefined;
  const options = (): CallOptions => ({ deadline: Date.now() + 10_000, signal: new AbortController().signal, metadata: {} });

  beforeAll(async () => {
    peer = await new GrpcPeer({}).start();
    peer.onInfer = (call) => call.stream.on('end', () => send(call.stream));
    plane = new H2DataPlane(fixedBackends([peer.address]), undefined, undefined, undefined, HTTP2_CLIENT);
  });
  afterAll(async () => {
    plane.close();
    await peer.close();
  });

  test.each([1, 2, 3, 7, 4096])('an answer in %i-byte DATA frames arrives whole', async (size) => {
    send = (s) => void writeInPieces(s, grpcMessage(answer), size);
    const got = await plane.modelInfer(request, options());
    expect(got.byteLength).toBe(answer.length);
    expect(Buffer.concat(got.chunks).equals(answer)).toBe(true);
  });

  test('bytes after the one message are not read', async () => {
    send = (s) => void writeInPieces(s, Buffer.concat([grpcMessage(answer), grpcMessage(Buffer.from('more'))]), 3);
    const got = await plane.modelInfer(request, options());
    expect(Buffer.concat(got.chunks).equals(answer)).toBe(true);
  });

  test.each([[0, 0], [3, 0], [5, 0], [5 + 100, 100]])('an answer cut after %i bytes is GW_ERR_UPSTREAM_PROTOCOL', async (cut, had) => {
    send = (s) => void writeInPieces(s, grpcMessage(answer).subarray(0, cut), 2);
    expect(await callError(plane.modelInfer(request, options()))).toEqual({
      code: 'GW_ERR_UPSTREAM_PROTOCOL', status: 502, message: `upstream response ended after ${had} of ${cut >= 5 ? answer.length : 0} message bytes`,
    });
  });

  test('a compressed answer is GW_ERR_UPSTREAM_PROTOCOL, its flag read from a split prefix', async () => {
    send = (s) => void writeInPieces(s, grpcMessage(answer, true), 1);
    expect(await callError(plane.modelInfer(request, options()))).toEqual({
      code: 'GW_ERR_UPSTREAM_PROTOCOL', status: 502, message: 'upstream sent a compressed message; tensorgate does not negotiate gRPC compression',
    });
  });

  test('a declared length over the bound is refused from the prefix, before any of the message', async () => {
    send = (s) => void writeInPieces(s, Buffer.from([0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3]), 2);
    expect(await callError(plane.modelInfer(request, options()))).toEqual({
      code: 'GW_ERR_UPSTREAM_STATUS', status: 400, message: `Received message larger than max (${2 ** 32 - 1} vs. ${2 ** 31 - 1})`,
    });
  });
});
