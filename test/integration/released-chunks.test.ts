// Body chunks handed to a cut-through call's release() (upstream/infer/data-plane.ts) are freed
// only once nothing can read them: one written to an open stream once its own writes left for the
// socket, one kept for a replay once every attempt that may read it is done. Against the reference
// backend's identity_uint8, which echoes its input: an answer equal to what was sent proves no
// chunk was freed while it was still queued or kept for a replay.
import { freePort } from '../support/observed';
import { type ReferenceBackend, startReferenceBackend } from '../../gateway/reference-backend/server';
import type { CallOptions, Flow, Receiver, ResponseMessage, StreamingCall } from '../../gateway/upstream/infer/data-plane';
import { H2DataPlane } from '../../gateway/upstream/infer/h2-plane';
import { inference } from '../../proto/services';
import { framedModelInfer } from '../support/model-infer';
import { fixedBackends } from '../support/upstream';
import { HTTP2_CLIENT } from '../support/gateway';

const CHUNK = 64 * 1024;

/** identity_uint8 with n bytes: the framed head (all before the payload), the payload in chunks of their own. */
function request(n: number): { head: Buffer; chunks: Buffer[]; payload: Buffer } {
  const payload = Buffer.alloc(n);
  for (let i = 0; i < n; i++) payload[i] = (i * 31 + 7) & 0xff;
  const { message } = framedModelInfer('identity_uint8', payload);
  const head = Buffer.from(message.subarray(0, message.length - n));
  const chunks: Buffer[] = [];
  // Each chunk its own ArrayBuffer, as node:http hands a body over.
  for (let at = 0; at < n; at += CHUNK) chunks.push(Buffer.from(payload.subarray(at, Math.min(at + CHUNK, n))));
  return { head, chunks, payload };
}

const detached = (b: Buffer): boolean => (b.buffer as ArrayBuffer & { detached: boolean }).detached;

/** The echoed payload: identity_uint8's one output, in raw_output_contents. */
function echoed(answer: ResponseMessage): Buffer {
  const r = inference.ModelInferResponse.decode(Buffer.concat(answer.chunks));
  return Buffer.from(r.raw_output_contents[0]!);
}

/** Writes the head and every chunk (waiting for drain as cut-through does), releasing each; ends empty. */
async function send(call: StreamingCall, head: Buffer, chunks: readonly Buffer[]): Promise<void> {
  call.write(head);
  for (const c of chunks) {
    const more = call.write(c);
    call.release(c);
    if (!more) await new Promise<void>((r) => call.onDrain(r));
  }
  call.end(Buffer.alloc(0));
}

describe('cut-through chunks released once sent for good', () => {
  let backend: ReferenceBackend;
  const options = (signal = new AbortController().signal): CallOptions => ({ deadline: Date.now() + 30_000, signal, metadata: {} });
  beforeAll(async () => {
    backend = await startReferenceBackend({ host: '127.0.0.1' });
  });
  afterAll(async () => {
    await backend.close();
  });

  test('a call that succeeds: the answer is what was sent, and every chunk is freed by then', async () => {
    const plane = new H2DataPlane(fixedBackends([backend.address]), undefined, undefined, undefined, HTTP2_CLIENT);
    try {
      const { head, chunks, payload } = request(4 * 1024 * 1024 + 123);
      const call = plane.startModelInfer(options());
      await send(call, head, chunks);
      const answer = await call.response;
      expect(echoed(answer).equals(payload)).toBe(true);
      // The last attempt's end() callback may come a turn after the answer.
      await new Promise((r) => setImmediate(r));
      // All but the last: 123 bytes, on Node's shared slab of small Buffers, which is never freed.
      expect(chunks.slice(0, -1).filter(detached)).toHaveLength(chunks.length - 1);
      expect(chunks.at(-1)!.length).toBe(123);
      expect(detached(chunks.at(-1)!)).toBe(false);
      // A chunk released after the call settled is freed at once.
      const late = Buffer.alloc(CHUNK);
      call.release(late);
      expect(detached(late)).toBe(true);
    } finally {
      plane.close();
    }
  });

  test('freed once the last byte is on the socket, before a large answer is in', async () => {
    const plane = new H2DataPlane(fixedBackends([backend.address]), undefined, undefined, undefined, HTTP2_CLIENT);
    try {
      const { head, chunks, payload } = request(4 * 1024 * 1024);
      let freedBeforeAnswer: boolean | undefined;
      // The answer's first piece is held back until the chunks are freed (or 2 s have passed).
      const receiver: Receiver = {
        data(_piece: Buffer, flow: Flow): boolean {
          if (freedBeforeAnswer !== undefined) return false;
          flow.pause();
          const until = Date.now() + 2000;
          const poll = (): void => {
            if (chunks.every(detached) || Date.now() > until) {
              freedBeforeAnswer = chunks.every(detached);
              flow.resume();
              return;
            }
            setTimeout(poll, 2);
          };
          poll();
          return false;
        },
      };
      const call = plane.startModelInfer({ ...options(), receiver });
      await send(call, head, chunks);
      const answer = await call.response;
      expect(freedBeforeAnswer).toBe(true);
      expect(answer.byteLength).toBeGreaterThan(payload.length);
    } finally {
      plane.close();
    }
  });

  test('an upload holds only what is still queued: a chunk goes once its own write left, not at the last byte', async () => {
    const plane = new H2DataPlane(fixedBackends([backend.address]), undefined, undefined, undefined, HTTP2_CLIENT);
    try {
      const { head, chunks, payload } = request(4 * 1024 * 1024);
      const call = plane.startModelInfer(options());
      // The stream opens (nothing kept for a replay any more), then the chunks go with their drains.
      call.write(head);
      await new Promise((r) => setTimeout(r, 50));
      let freedMidUpload = 0;
      for (const [i, c] of chunks.entries()) {
        const more = call.write(c);
        call.release(c);
        if (!more) await new Promise<void>((r) => call.onDrain(r));
        if (i === chunks.length - 1) freedMidUpload = chunks.slice(0, -1).filter(detached).length;
      }
      call.end(Buffer.alloc(0));
      const answer = await call.response;
      expect(echoed(answer).equals(payload)).toBe(true);
      // Before the last chunk was even written, most earlier ones were free already.
      expect(freedMidUpload).toBeGreaterThan(chunks.length / 2);
    } finally {
      plane.close();
    }
  });

  test('a call cancelled mid-upload frees nothing: slices may still be queued on the socket', async () => {
    const plane = new H2DataPlane(fixedBackends([backend.address]), undefined, undefined, undefined, HTTP2_CLIENT);
    try {
      const { head, chunks } = request(2 * 1024 * 1024);
      const ac = new AbortController();
      const call = plane.startModelInfer(options(ac.signal));
      call.write(head);
      for (const c of chunks.slice(0, 8)) {
        call.write(c);
        call.release(c);
      }
      call.cancel();
      await expect(call.response).rejects.toMatchObject({ code: 'GW_ERR_UPSTREAM_CANCELLED' });
      await new Promise((r) => setTimeout(r, 20));
      expect(chunks.filter(detached)).toHaveLength(0);
      const late = Buffer.alloc(CHUNK);
      call.release(late);
      expect(detached(late)).toBe(false);
    } finally {
      plane.close();
    }
  });

  test('a call replayed on another backend sends the kept chunks whole, and frees them only after', async () => {
    // The first backend refuses the connection before any piece left: the pieces written so far
    // are kept and replayed on the second (upstream/backends/retry.ts).
    const refused = `127.0.0.1:${await freePort()}`;
    const plane = new H2DataPlane(fixedBackends([refused, backend.address]), undefined, undefined, undefined, HTTP2_CLIENT);
    try {
      const { head, chunks, payload } = request(256 * 1024);
      const call = plane.startModelInfer(options());
      await send(call, head, chunks);
      const answer = await call.response;
      expect(echoed(answer).equals(payload)).toBe(true);
      await new Promise((r) => setImmediate(r));
      // The refused attempt never wrote its last byte: its report is false, so the chunks it was
      // given (kept for the replay: the first at least, written before any stream could open) are
      // left to the collector. Chunks written only to the second attempt's open stream may go.
      expect(detached(chunks[0]!)).toBe(false);
      const firstFreed = chunks.findIndex(detached);
      if (firstFreed >= 0) expect(chunks.slice(firstFreed).every(detached)).toBe(true);
    } finally {
      plane.close();
    }
  });
});
