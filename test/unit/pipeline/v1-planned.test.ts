// V1 predict's planned requests (gateway/pipeline/v1-planned.ts) on a fake data plane and metadata
// cache: what they ask for (cut-through and whole calls), and metadata forgotten between the
// request's head (takes()) and its whole body (serve()) — another request's NOT_FOUND evicts it —
// read again as the handler reads it, its failure answered as the handler's would be.
import { plannedV1 } from '../../../gateway/pipeline/v1-planned';
import type { V1Plan } from '../../../gateway/pipeline/v1-body';
import type { ModelMetadata } from '../../../gateway/infer/model-metadata';
import type { PlannedRequest } from '../../../gateway/ingress/router';
import type { RequestRecord } from '../../../gateway/telemetry/record';
import { GatewayError } from '../../../gateway/errors';
import { inference } from '../../../proto/services';

const MD: ModelMetadata = { name: 'm', inputs: [{ name: 'IN', datatype: 'UINT8', shape: [-1, 4] }], outputs: [] };
const BODY = Buffer.from(JSON.stringify({ instances: [[1, 2, 3, 4]] }));

/** A plan whose metadata cache holds `cached` and reads `read()` on a miss; its whole calls are recorded. */
function plan(cached: ModelMetadata | undefined, read: () => Promise<ModelMetadata>, cutThrough = true) {
  const calls: Buffer[][] = [];
  const reads: string[] = [];
  const p = {
    dataPlane: {
      startModelInfer: () => undefined,
      callWhole: (pieces: readonly Buffer[]) => {
        calls.push([...pieces]);
        return { cancel: () => undefined };
      },
    },
    metadata: {
      peek: () => cached,
      get: (name: string, version: string) => {
        reads.push(`${name}:${version}`);
        return read();
      },
      evict: () => undefined,
    },
    upstream: { cutThrough, timeoutMs: 10_000 },
    limits: { maxBodyBytes: 1 << 20, maxInputSizeBytes: 1 << 20 },
    telemetry: { serverTiming: false },
  } as unknown as V1Plan;
  return { p, calls, reads };
}

function request(): PlannedRequest & { failed: unknown[] } {
  const failed: unknown[] = [];
  return {
    params: ['m'], req: { headers: {} }, upstreamHeaders: {}, call: undefined, askedDeadline: undefined, outcome: undefined, kept: () => undefined, keeping: false,
    record: { declaredBytes: BODY.length, startNs: 0 } as unknown as RequestRecord,
    answer: () => undefined, fail: (err: unknown) => failed.push(err), failed,
  };
}

/** A call's pieces as its protobuf message (past the gRPC envelope's 5 bytes). */
const message = (pieces: readonly Buffer[]): Buffer => Buffer.concat(pieces).subarray(5);

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('V1 predict planned', () => {
  test('a body over 1 MiB only for a model whose outputs are all of types the compiled lane prints (its repeats are C\'s)', () => {
    const outputs = (...datatypes: string[]): ModelMetadata => ({ ...MD, outputs: datatypes.map((datatype, i) => ({ name: `O${i}`, datatype, shape: [-1, 1] })) });
    expect(plannedV1(plan(outputs('INT64', 'UINT64'), async () => MD).p)!.largeBodies(['m'])).toBe(true);
    expect(plannedV1(plan(outputs('FP32'), async () => MD).p)!.largeBodies(['m'])).toBe(true);
    for (const other of ['FP64', 'FP16', 'BF16', 'BOOL', 'BYTES']) expect(plannedV1(plan(outputs('FP32', other), async () => MD).p)!.largeBodies(['m'])).toBe(false);
    expect(plannedV1(plan(undefined, async () => MD).p)!.largeBodies(['m'])).toBe(false);
  });

  test('only with cut-through on and a data plane of whole calls', () => {
    expect(plannedV1(plan(MD, async () => MD).p)).toBeDefined();
    expect(plannedV1(plan(MD, async () => MD, false).p)).toBeUndefined();
  });

  test('taken only once the model\'s metadata is cached', () => {
    expect(plannedV1(plan(MD, async () => MD).p)!.takes(['m'], {}, BODY.length)).toBe(true);
    expect(plannedV1(plan(undefined, async () => MD).p)!.takes(['m'], {}, BODY.length)).toBe(false);
  });

  test('metadata cached: decoded and called at once', () => {
    const { p, calls, reads } = plan(MD, async () => MD);
    const x = request();
    plannedV1(p)!.serve(x, [BODY]);
    expect([calls.length, reads, x.failed]).toEqual([1, [], []]);
    const sent = inference.ModelInferRequest.decode(message(calls[0]!));
    expect([sent.model_name, sent.inputs[0]!.name, (sent.inputs[0]!.shape ?? []).map(Number), [...sent.raw_input_contents[0]!]])
      .toEqual(['m', 'IN', [1, 4], [1, 2, 3, 4]]);
  });

  test('metadata forgotten while the body arrived: read again, then called', async () => {
    const { p, calls, reads } = plan(undefined, async () => MD);
    const x = request();
    plannedV1(p)!.serve(x, [BODY]);
    await settle();
    expect([calls.length, reads, x.failed]).toEqual([1, ['m:'], []]);
    expect([...inference.ModelInferRequest.decode(message(calls[0]!)).raw_input_contents[0]!]).toEqual([1, 2, 3, 4]);
  });

  test('metadata forgotten and the model gone: Triton\'s error answered, nothing called', async () => {
    const gone = new GatewayError('GW_ERR_UPSTREAM_STATUS', 'Request for unknown model: \'m\' is not found');
    const { p, calls } = plan(undefined, () => Promise.reject(gone));
    const x = request();
    plannedV1(p)!.serve(x, [BODY]);
    await settle();
    expect([calls.length, x.failed]).toEqual([0, [gone]]);
  });
});
