// A tiny gRPC server on node:http2 that shows the wire: it answers ModelConfig from a table and
// hands each ModelInfer stream to the test, recording when request bytes arrived, what they were
// and how the stream ended (RST_STREAM code). For what the reference backend cannot show: bytes
// arriving before the client's upload ends, resets, answers given mid-upload, back-pressure.
import { constants, createServer, type Http2Server, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { grpcHealth, inference } from '../../proto/services';

export interface SeenCall {
  readonly stream: ServerHttp2Stream;
  readonly chunks: Buffer[];
  firstDataNs: bigint;
  received: number;
  ended: boolean;
  /** RST_STREAM code from the client, once the stream closed (0: closed normally). */
  rstCode: number | undefined;
}

type InferHandler = (call: SeenCall) => void;

const frame = (message: Uint8Array): Buffer => {
  const b = Buffer.allocUnsafe(5 + message.length);
  b[0] = 0;
  b.writeUInt32BE(message.length, 1);
  b.set(message, 5);
  return b;
};

export class GrpcPeer {
  readonly calls: SeenCall[] = [];
  /** Default: read the whole request, answer OUTPUT0 = the first raw input (echo). */
  onInfer: InferHandler = GrpcPeer.echoWhenRead;
  /**
   * Other methods by name ('ModelMetadata', 'ModelStreamInfer', …), handed the request message once
   * the client's side ended; ModelConfig is answered from the table, Health/Check with SERVING,
   * anything else is UNIMPLEMENTED.
   */
  onCall: Record<string, (stream: ServerHttp2Stream, message: Buffer) => void> = {};
  #server: Http2Server;
  readonly #sessions = new Set<Http2Session>();
  address = '';

  constructor(private readonly configs: Record<string, inference.IModelConfig>) {
    this.#server = createServer();
    this.#server.on('session', (session) => {
      this.#sessions.add(session);
      session.once('close', () => this.#sessions.delete(session));
    });
    this.#server.on('stream', (stream, headers) => {
      const path = String(headers[':path']);
      if (path.endsWith('/ModelInfer')) {
        const call: SeenCall = { stream, chunks: [], firstDataNs: 0n, received: 0, ended: false, rstCode: undefined };
        this.calls.push(call);
        stream.on('data', (c: Buffer) => {
          if (call.firstDataNs === 0n) call.firstDataNs = process.hrtime.bigint();
          call.chunks.push(c);
          call.received += c.length;
        });
        stream.on('end', () => {
          // A reset stream ends too: only a whole message counts.
          call.ended = call.received >= 5 && call.received === 5 + Buffer.concat(call.chunks).readUInt32BE(1);
        });
        stream.on('close', () => {
          call.rstCode = stream.rstCode ?? 0;
        });
        stream.on('error', () => undefined);
        this.onInfer(call);
        return;
      }
      const body: Buffer[] = [];
      stream.on('data', (c: Buffer) => body.push(c));
      stream.on('end', () => {
        const handler = this.onCall[path.slice(path.lastIndexOf('/') + 1)];
        if (handler !== undefined) {
          handler(stream, Buffer.concat(body).subarray(5));
          return;
        }
        if (path === '/grpc.health.v1.Health/Check') {
          // As Triton: SERVING while ready (the gateway's backend set checks it).
          const { HealthCheckResponse } = grpcHealth.health.v1;
          GrpcPeer.answer(stream, HealthCheckResponse.encode({ status: HealthCheckResponse.ServingStatus.SERVING }).finish());
          return;
        }
        if (!path.endsWith('/ModelConfig')) {
          GrpcPeer.fail(stream, 12, 'not in this peer');
          return;
        }
        const req = inference.ModelConfigRequest.decode(Buffer.concat(body).subarray(5));
        const config = this.configs[req.name];
        if (config === undefined) GrpcPeer.fail(stream, 5, `Request for unknown model: '${req.name}' is not found`);
        else GrpcPeer.answer(stream, inference.ModelConfigResponse.encode({ config }).finish());
      });
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.address = `127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
    return this;
  }

  /** Stops at once: sessions still open (a call a test left hanging) are destroyed, not waited for. */
  close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const s of this.#sessions) s.destroy();
    return closed;
  }

  /** The request message of a call as received (gRPC prefix removed). */
  static message(call: SeenCall): Buffer {
    return Buffer.concat(call.chunks).subarray(5);
  }

  /**
   * Answers in `pieces` DATA writes `gapMs` apart; `trailers` false ends with a reset instead
   * of a status. Resolves with the time the last piece was written.
   */
  static async answerSlowly(stream: ServerHttp2Stream, message: Uint8Array, pieces: number, gapMs: number, trailers = true): Promise<bigint> {
    const framed = frame(message);
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    const size = Math.ceil(framed.length / pieces);
    for (let at = 0; at < framed.length; at += size) {
      const last = at + size >= framed.length;
      if (last && !trailers) {
        stream.close(constants.NGHTTP2_INTERNAL_ERROR);
        return process.hrtime.bigint();
      }
      await new Promise<void>((resolve) => stream.write(framed.subarray(at, at + size), () => resolve()));
      if (!last) await new Promise((r) => setTimeout(r, gapMs));
    }
    const t = process.hrtime.bigint();
    stream.end();
    return t;
  }

  static answer(stream: ServerHttp2Stream, message: Uint8Array): void {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.end(frame(message));
  }

  /** A trailers-only error answer. */
  static fail(stream: ServerHttp2Stream, code: number, message: string): void {
    if (stream.closed) return;
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': encodeURIComponent(message) }, { endStream: true });
  }

  static echoWhenRead(this: void, call: SeenCall): void {
    call.stream.on('end', () => {
      if (call.ended) GrpcPeer.echo(call);
    });
  }

  static echo(call: SeenCall): void {
    const req = inference.ModelInferRequest.decode(GrpcPeer.message(call));
    const input = req.inputs[0]!;
    GrpcPeer.answer(call.stream, inference.ModelInferResponse.encode({
      model_name: req.model_name, model_version: '1',
      outputs: [{ name: 'OUTPUT0', datatype: input.datatype, shape: input.shape }],
      raw_output_contents: [req.raw_input_contents[0]!],
    }).finish());
  }
}

export const CANCEL = constants.NGHTTP2_CANCEL;

/** A gRPC length-prefixed message (PROTOCOL-HTTP2.md: flag byte, 4-byte big-endian length, bytes). */
export function grpcMessage(message: Uint8Array, compressed = false): Buffer {
  const b = Buffer.alloc(5 + message.length);
  b[0] = compressed ? 1 : 0;
  b.writeUInt32BE(message.length, 1);
  b.set(message, 5);
  return b;
}
