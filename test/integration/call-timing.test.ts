// The h2 data plane's CallTiming (upstream/infer/data-plane.ts) against the reference backend: a whole
// message and a cut-through one, several MB each way, come back with all four marks set and in
// order — also when the last piece is empty (what cut-through writes after a raw body; Node then
// reported the request sent only after the answer) and when a receiver holds the
// answer back (endNs is the trailers, not when the receiver let go). And the stream plane's
// StreamTiming (upstream/infer/stream-plane.ts): first message and end, around what the handler saw.
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import type { CallOptions, CallTiming, Flow, Receiver, TimedResponseMessage } from '../../gateway/upstream/infer/data-plane';
import { H2DataPlane } from '../../gateway/upstream/infer/h2-plane';
import { StreamInferPlane } from '../../gateway/upstream/infer/stream-plane';
import { inference } from '../../proto/services';
import { framedModelInfer } from '../support/model-infer';
import { fixedBackends } from '../support/upstream';
import { HTTP2_CLIENT } from '../support/gateway';
import { nowNs } from '../../gateway/infer/clock';

const MB = 1 << 20;

/** A framed ModelInferRequest for identity_uint8 with n bytes: the answer carries them back. */
function framed(n: number): { message: Buffer; payloadAt: number } {
  return framedModelInfer('identity_uint8', Buffer.alloc(n, 7));
}

/**
 * All four set and in order. Triton (here in the same process) cannot answer before the last
 * request byte is out: sentNs is strictly before firstByteNs — it would equal it had the call
 * only learnt of the write after the answer began.
 */
function expectOrdered(t: CallTiming | undefined, before: number, after: number): void {
  expect(t).toBeDefined();
  const { firstSentNs, sentNs, firstByteNs, endNs } = t!;
  expect(firstSentNs).toBeGreaterThanOrEqual(before);
  expect(sentNs).toBeGreaterThan(firstSentNs);
  expect(firstByteNs).toBeGreaterThan(sentNs);
  expect(endNs).toBeGreaterThanOrEqual(firstByteNs);
  expect(after).toBeGreaterThanOrEqual(endNs);
}

describe('h2 call timing', () => {
  let backend: ReferenceBackend;
  let plane: H2DataPlane;
  const options = (receiver?: Receiver): CallOptions => ({
    deadline: Date.now() + 30_000, signal: new AbortController().signal, metadata: {}, receiver,
  });
  beforeAll(async () => {
    backend = await startReferenceBackend({ host: '127.0.0.1' });
    plane = new H2DataPlane(fixedBackends([backend.address]), undefined, undefined, undefined, HTTP2_CLIENT);
  });
  afterAll(async () => {
    plane.close();
    await backend.close();
  });

  test('a whole message, on a new session and on the open one', async () => {
    const { message } = framed(4 * MB);
    for (let i = 0; i < 2; i++) {
      const before = nowNs();
      const answer = await plane.modelInfer(message, options());
      expect(answer.byteLength).toBeGreaterThan(4 * MB);
      expectOrdered(answer.timing, before, nowNs());
    }
  });

  /**
   * A whole call (upstream/infer/whole-call.ts): its answer, or its error. Its one attempt's
   * message is out when it is answered: the callee may reuse the pieces' buffers.
   */
  const whole = (pieces: readonly Buffer[]): Promise<TimedResponseMessage> => new Promise((resolve, reject) => {
    plane.callWhole(pieces, {
      deadline: Date.now() + 30_000, metadata: {}, affinity: undefined, modelName: 'identity_uint8', modelVersion: '',
      header: () => undefined, routed: () => undefined, retried: () => undefined, failed: reject,
      answered: (m, out) => (out ? resolve(m) : reject(new Error('answered with the message not reported out'))),
    });
  });

  test.each([['64 B (with its HEADERS, in one buffer)', 64], ['4 MB (by reference, past the windows)', 4 * MB]])(
    'a whole call of %s: its last byte reported sent before the answer began', async (_, n) => {
      const { message, payloadAt } = framed(n);
      for (let i = 0; i < 3; i++) {
        const before = nowNs();
        const answer = await whole([message.subarray(0, payloadAt), message.subarray(payloadAt)]);
        expect(answer.byteLength).toBeGreaterThan(n);
        expectOrdered(answer.timing, before, nowNs());
      }
    });

  test.each([['a last piece', 1], ['an empty last piece', 0]])('a message written piece by piece, ending with %s', async (_, lastBytes) => {
    const { message, payloadAt } = framed(4 * MB);
    const before = nowNs();
    const call = plane.startModelInfer(options());
    const end = message.length - lastBytes;
    call.write(message.subarray(0, payloadAt)); // the head
    const piece = Math.ceil((end - payloadAt) / 5);
    for (let at = payloadAt; at < end; at += piece) {
      // The last pieces go while the earlier ones are in flight, as cut-through writes a body's
      // chunks; waiting for drain before each one hid the empty last piece's late report.
      if (!call.write(message.subarray(at, Math.min(at + piece, end))) && at + 2 * piece < end) await new Promise<void>((r) => call.onDrain(r));
    }
    call.end(message.subarray(end));
    const answer = await call.response;
    expect(answer.byteLength).toBeGreaterThan(4 * MB);
    expectOrdered(answer.timing, before, nowNs());
  });

  test('a receiver that takes the answer and holds it back: timing as it arrives, endNs at the trailers', async () => {
    // Smaller than an upstream stream's window (1 MiB, upstream/connections/h2-sessions.ts), so
    // the whole answer arrives while the receiver holds it back; a larger one would wait, paused.
    const { message } = framed(MB / 2);
    let atFirstPiece: CallTiming | undefined;
    let trailersSeen: CallTiming | undefined;
    let taken = 0;
    const receiver: Receiver = {
      data(piece: Buffer, flow: Flow): boolean {
        taken += piece.length;
        if (atFirstPiece === undefined) {
          atFirstPiece = flow.timing();
          flow.pause();
          // Resumed only once the trailers are in: the answer has fully arrived meanwhile.
          const poll = (): void => {
            const t = flow.timing();
            if (t.endNs === 0) {
              setTimeout(poll, 2);
              return;
            }
            trailersSeen = t;
            flow.resume();
          };
          poll();
        }
        return true;
      },
    };
    const before = nowNs();
    const answer = await plane.modelInfer(message, options(receiver));
    expect(answer.byteLength).toBeGreaterThan(MB / 2);
    expect([answer.chunks.length, taken]).toEqual([0, answer.byteLength]);
    expectOrdered(answer.timing, before, nowNs());
    expect(atFirstPiece!.endNs).toBe(0);
    expect(atFirstPiece).toEqual({ ...answer.timing, endNs: 0 });
    expect(trailersSeen!.endNs).toBe(answer.timing.endNs);
  });
});

test('stream plane: first message and end of a ModelStreamInfer exchange', async () => {
  const backend = await startReferenceBackend({ host: '127.0.0.1' });
  const plane = new StreamInferPlane(fixedBackends([backend.address]));
  try {
    const m = inference.ModelInferRequest.encode({
      model_name: 'repeat_int32', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1] }], raw_input_contents: [Buffer.from([3, 0, 0, 0])],
      parameters: { delay_ms: { int64_param: 5 } },
    }).finish();
    const message = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), m]);
    message.writeUInt32BE(m.length, 1);
    const seen: number[] = [];
    const before = nowNs();
    const t = await plane.streamInfer(message, { deadline: Date.now() + 30_000, signal: new AbortController().signal, metadata: {} }, {
      onMessage: () => {
        seen.push(nowNs());
      },
    });
    expect(seen).toHaveLength(3);
    expect(t.firstMessageNs).toBeGreaterThan(before);
    expect(t.firstMessageNs).toBeLessThanOrEqual(seen[0]!);
    expect(t.endNs).toBeGreaterThan(seen[1]!); // the responses came 5 ms apart
    expect(t.endNs).toBeLessThanOrEqual(nowNs());
  } finally {
    plane.close();
    await backend.close();
  }
});
