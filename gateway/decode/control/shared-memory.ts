// Shared-memory register bodies, checked as Triton's HTTP frontend checks them (field presence and
// types, a region name, a 64-byte CUDA IPC handle in base64); whether client shared memory is
// allowed at all is Triton's to say over gRPC.
//
// With upstream.sharedMemory on, the gateway's own system regions (`<prefix>-<pid>-<n>`, files
// /dev/shm/<name>) hold other requests' tensors while Triton reads them, and Triton lets any
// client name any registered region: an input naming one reads another request's tensor (an
// identity model echoes it back), an output naming one overwrites it, an unregister takes it from
// the gateway, a register of the same key maps the same file under a name of the client's. So
// every name and key under the prefix is the gateway's alone (reservedRegion).
import type { InferRequest } from '../../infer/request';
import { GatewayError } from '../../errors';
import { asString, asUInt, find, parseControlBody } from './control-json';

const invalid = (message: string): GatewayError => new GatewayError('GW_ERR_DECODE_INVALID', message);
const CUDA_IPC_HANDLE_BYTES = 64; // sizeof(cudaIpcMemHandle_t)

/** A register names its region in the path; Triton checks this before reading the body. */
export function requireRegion(region: string, kind: 'system' | 'cuda'): void {
  if (region === '') throw invalid(`'region name' is necessary to register ${kind} shared memory region`);
}

export function decodeSystemRegister(bytes: Buffer): { key: string; offset: bigint; byteSize: bigint } {
  const body = parseControlBody(bytes, false);
  const keyNode = find(body.root, 'key');
  if (keyNode === undefined) throw invalid("Shared memory register request has no 'key' field");
  const key = asString(keyNode);
  const offsetNode = find(body.root, 'offset');
  const offset = offsetNode === undefined ? 0n : asUInt(body.bytes, offsetNode);
  const sizeNode = find(body.root, 'byte_size');
  if (sizeNode === undefined) throw invalid("Shared memory register request has no 'byte_size' field");
  const byteSize = asUInt(body.bytes, sizeNode);
  return { key, offset, byteSize };
}

export function decodeCudaRegister(bytes: Buffer): { rawHandle: Buffer; deviceId: bigint; byteSize: bigint } {
  const body = parseControlBody(bytes, false);
  const handleNode = find(body.root, 'raw_handle');
  if (handleNode === undefined) throw invalid("Shared memory register request has no 'raw_handle' field");
  const b64 = asMember(handleNode, 'b64', asString);
  const byteSize = asMember(body.root, 'byte_size', (v) => asUInt(body.bytes, v));
  const deviceId = asMember(body.root, 'device_id', (v) => asUInt(body.bytes, v));
  const rawHandle = Buffer.from(b64, 'base64');
  if (rawHandle.length !== CUDA_IPC_HANDLE_BYTES) throw invalid("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t");
  return { rawHandle, deviceId, byteSize };
}

/** TritonJson's MemberAsX: a missing member is its own error. */
function asMember<T>(node: Parameters<typeof find>[0], key: string, as: (v: ReturnType<typeof find>) => T): T {
  const v = find(node, key);
  if (v === undefined) throw new GatewayError('GW_ERR_DECODE_MALFORMED', `attempt to access non-existing object member '${key}'`);
  return as(v);
}

/**
 * Whether `name` (a region name, or a register's key: shm_open ignores leading slashes) is under
 * the gateway's prefix. `prefix` undefined: the mode is off, nothing is reserved.
 */
export function isReservedRegion(name: string, prefix: string | undefined): boolean {
  return prefix !== undefined && name.replace(/^\/+/, '').startsWith(`${prefix}-`);
}

/** Refuses a region name or key under the gateway's prefix (`what` says which it was). */
export function refuseReservedRegion(name: string, prefix: string | undefined, what = 'system shared memory region'): void {
  if (isReservedRegion(name, prefix)) {
    throw new GatewayError('GW_ERR_DECODE_SHM_REGION_RESERVED',
      `${what} '${name}' is reserved: names starting with '${prefix}-' are the gateway's own regions (upstream.sharedMemory.prefix)`);
  }
}

/** Refuses an inference whose inputs or outputs name one of the gateway's regions. */
export function refuseReservedRegions(request: InferRequest, prefix: string | undefined): void {
  if (prefix === undefined) return;
  const check = (kind: string, t: { readonly name: string; readonly parameters: InferRequest['parameters'] }): void => {
    const region = t.parameters.get('shared_memory_region');
    if (region?.type === 'string') refuseReservedRegion(region.value, prefix, `${kind} '${t.name}': shared_memory_region`);
  };
  for (const t of request.inputs) check('input', t);
  for (const t of request.outputs ?? []) check('output', t);
}
