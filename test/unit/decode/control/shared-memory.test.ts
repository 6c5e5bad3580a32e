// The gateway's own shared-memory regions (upstream.sharedMemory) out of clients' reach: which
// names and keys are reserved, and the inference check over every input and output. End to end
// against Triton: test/conformance/shared-memory.test.ts.
import { isGatewayError } from '../../../../gateway/errors';
import { isReservedRegion, refuseReservedRegion, refuseReservedRegions } from '../../../../gateway/decode/control/shared-memory';
import { decodeV2Header } from '../../../../gateway/decode/v2-header';

const refusal = (f: () => void): unknown => {
  try {
    f();
    return undefined;
  } catch (err) {
    return isGatewayError(err) ? [err.code, err.status, err.message] : err;
  }
};

test('names and keys under `<prefix>-` are reserved (leading slashes ignored, as shm_open does); nothing is with the mode off', () => {
  expect(['tg-1-0', '/tg-1-0', '//tg-1-0', 'tg-x', 'tg-'].map((n) => isReservedRegion(n, 'tg'))).toEqual([true, true, true, true, true]);
  expect(['tg', 'tg1-0', 'xtg-1-0', 'TG-1-0', '/x/tg-1-0', ''].map((n) => isReservedRegion(n, 'tg'))).toEqual([false, false, false, false, false, false]);
  expect(isReservedRegion('tg-1-0', undefined)).toBe(false);
  expect(refusal(() => refuseReservedRegion('/tg-1-0', 'tg', 'system shared memory key'))).toEqual(['GW_ERR_DECODE_SHM_REGION_RESERVED', 403,
    "system shared memory key '/tg-1-0' is reserved: names starting with 'tg-' are the gateway's own regions (upstream.sharedMemory.prefix)"]);
});

test('an inference naming a reserved region on an input or an output is refused; other regions pass', () => {
  const header = (inputs: unknown[], outputs?: unknown[]): Parameters<typeof refuseReservedRegions>[0] => {
    const b = Buffer.from(JSON.stringify({ inputs, outputs }));
    return decodeV2Header(b, 0, b.length, { modelName: 'm', modelVersion: '', binaryBytes: 0, maxInputSizeBytes: 1 << 20 }).request;
  };
  const shmIn = (region: string) => ({ name: 'A', datatype: 'UINT8', shape: [4], parameters: { shared_memory_region: region, shared_memory_byte_size: 4 } });
  const dataIn = { name: 'B', datatype: 'UINT8', shape: [1], data: [1] };
  expect(refusal(() => refuseReservedRegions(header([dataIn, shmIn('tg-7-0')]), 'tg'))).toEqual(['GW_ERR_DECODE_SHM_REGION_RESERVED', 403,
    "input 'A': shared_memory_region 'tg-7-0' is reserved: names starting with 'tg-' are the gateway's own regions (upstream.sharedMemory.prefix)"]);
  expect(refusal(() => refuseReservedRegions(header([dataIn], [{ name: 'OUT', parameters: { shared_memory_region: 'tg-7-1' } }]), 'tg')))
    .toEqual(['GW_ERR_DECODE_SHM_REGION_RESERVED', 403, expect.stringMatching(/^output 'OUT': shared_memory_region 'tg-7-1' is reserved/)]);
  expect(refusal(() => refuseReservedRegions(header([shmIn('mine')], [{ name: 'OUT', parameters: { shared_memory_region: 'mine2' } }]), 'tg'))).toBeUndefined();
  expect(refusal(() => refuseReservedRegions(header([shmIn('tg-7-0')]), undefined))).toBeUndefined();
});
