// System and CUDA shared memory (PROTOCOL.md §1): status → a JSON array of regions, register /
// unregister → empty 200. The body of a register is checked as Triton's HTTP frontend checks it
// (field presence and types, a region name, a 64-byte CUDA IPC handle in base64); whether client
// shared memory is allowed at all is Triton's to say over gRPC.
import { writeJson } from '../egress/write';
import { GatewayError } from '../errors';
import { asString, asUInt, find, readControlBody } from '../decode/control-json';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control-plane';

type Num = number | { toString(): string } | null | undefined;
const n = (x: Num): string => (x === null || x === undefined ? '0' : String(x));

const invalid = (message: string): GatewayError => new GatewayError('GW_ERR_DECODE_INVALID', message);
const CUDA_IPC_HANDLE_BYTES = 64; // sizeof(cudaIpcMemHandle_t)

export interface SharedMemoryDeps {
  readonly upstream: ControlPlane;
  readonly maxBodyBytes: number;
}

export function sharedMemoryRoutes(deps: SharedMemoryDeps): Route[] {
  const { upstream } = deps;

  const system = {
    status: async (ctx: RequestContext, region: string): Promise<void> => {
      const r = await upstream.call('SystemSharedMemoryStatus', { name: region }, ctx.signal);
      const items = Object.values(r.regions ?? {}).map((s) =>
        `{"name":${JSON.stringify(s.name ?? '')},"key":${JSON.stringify(s.key ?? '')},"offset":${n(s.offset)},"byte_size":${n(s.byte_size)}}`);
      writeJson(ctx.res, 200, `[${items.join(',')}]`);
    },
    register: async (ctx: RequestContext, region: string): Promise<void> => {
      if (region === '') throw invalid("'region name' is necessary to register system shared memory region");
      const body = await readControlBody(ctx.req, deps.maxBodyBytes, false);
      const keyNode = find(body.root, 'key');
      if (keyNode === undefined) throw invalid("Shared memory register request has no 'key' field");
      const key = asString(keyNode);
      const offsetNode = find(body.root, 'offset');
      const offset = offsetNode === undefined ? 0n : asUInt(body.bytes, offsetNode);
      const sizeNode = find(body.root, 'byte_size');
      if (sizeNode === undefined) throw invalid("Shared memory register request has no 'byte_size' field");
      const byteSize = asUInt(body.bytes, sizeNode);
      await upstream.call('SystemSharedMemoryRegister', { name: region, key, offset: offset.toString() as unknown as number, byte_size: byteSize.toString() as unknown as number }, ctx.signal);
      writeJson(ctx.res, 200, '');
    },
    unregister: async (ctx: RequestContext, region: string): Promise<void> => {
      await upstream.call('SystemSharedMemoryUnregister', { name: region }, ctx.signal);
      writeJson(ctx.res, 200, '');
    },
  };

  const cuda = {
    status: async (ctx: RequestContext, region: string): Promise<void> => {
      const r = await upstream.call('CudaSharedMemoryStatus', { name: region }, ctx.signal);
      const items = Object.values(r.regions ?? {}).map((s) =>
        `{"name":${JSON.stringify(s.name ?? '')},"device_id":${n(s.device_id)},"byte_size":${n(s.byte_size)}}`);
      writeJson(ctx.res, 200, `[${items.join(',')}]`);
    },
    register: async (ctx: RequestContext, region: string): Promise<void> => {
      if (region === '') throw invalid("'region name' is necessary to register cuda shared memory region");
      const body = await readControlBody(ctx.req, deps.maxBodyBytes, false);
      const handleNode = find(body.root, 'raw_handle');
      if (handleNode === undefined) throw invalid("Shared memory register request has no 'raw_handle' field");
      const b64 = asMember(handleNode, 'b64', asString);
      const byteSize = asMember(body.root, 'byte_size', (v) => asUInt(body.bytes, v));
      const deviceId = asMember(body.root, 'device_id', (v) => asUInt(body.bytes, v));
      const rawHandle = Buffer.from(b64, 'base64');
      if (rawHandle.length !== CUDA_IPC_HANDLE_BYTES) throw invalid("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t");
      await upstream.call('CudaSharedMemoryRegister', {
        name: region, raw_handle: rawHandle, device_id: deviceId.toString() as unknown as number, byte_size: byteSize.toString() as unknown as number,
      }, ctx.signal);
      writeJson(ctx.res, 200, '');
    },
    unregister: async (ctx: RequestContext, region: string): Promise<void> => {
      await upstream.call('CudaSharedMemoryUnregister', { name: region }, ctx.signal);
      writeJson(ctx.res, 200, '');
    },
  };

  const routes = (kind: 'systemsharedmemory' | 'cudasharedmemory', h: typeof system): Route[] => [
    {
      name: `${kind}_status`,
      pattern: new RegExp(`^\\/v2\\/${kind}(?:\\/region\\/([^/]+))?\\/status$`),
      category: 'shared-memory',
      methodNotAllowedJson: true,
      methods: { GET: (ctx) => h.status(ctx, ctx.params[0] ?? '') },
    },
    {
      name: `${kind}_register`,
      pattern: new RegExp(`^\\/v2\\/${kind}(?:\\/region\\/([^/]+))?\\/register$`),
      category: 'shared-memory',
      methodNotAllowedJson: true,
      methods: { POST: (ctx) => h.register(ctx, ctx.params[0] ?? '') },
    },
    {
      name: `${kind}_unregister`,
      pattern: new RegExp(`^\\/v2\\/${kind}(?:\\/region\\/([^/]+))?\\/unregister$`),
      category: 'shared-memory',
      methodNotAllowedJson: true,
      methods: { POST: (ctx) => h.unregister(ctx, ctx.params[0] ?? '') },
    },
  ];
  return [...routes('systemsharedmemory', system), ...routes('cudasharedmemory', cuda)];
}

/** TritonJson's MemberAsX: a missing member is its own error. */
function asMember<T>(node: Parameters<typeof find>[0], key: string, as: (v: ReturnType<typeof find>) => T): T {
  const v = find(node, key);
  if (v === undefined) throw new GatewayError('GW_ERR_DECODE_MALFORMED', `attempt to access non-existing object member '${key}'`);
  return as(v);
}
