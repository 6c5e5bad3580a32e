// System and CUDA shared memory (PROTOCOL.md §1): status → a JSON array of regions, register /
// unregister → empty 200. The body of a register is checked as Triton's HTTP frontend checks it
// (field presence and types, a region name, a 64-byte CUDA IPC handle in base64); whether client
// shared memory is allowed at all is Triton's to say over gRPC.
import { limitedRefusal } from '../auth/guard';
import type { Config } from '../config/schema';
import { decodeCudaRegister, decodeSystemRegister, requireRegion } from '../decode/shared-memory';
import { writeJson } from '../egress/write';
import { encodeCudaRegions, encodeSystemRegions } from '../encode/shared-memory';
import { readControlBody } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control-plane';

export interface SharedMemoryDeps {
  readonly control: ControlPlane;
  readonly limits: Config['limits'];
}

/** No region name unregisters every region: not for credentials limited to some models (auth/guard.ts). */
function refuseEveryRegion(ctx: RequestContext, region: string): void {
  const refusal = region === '' ? limitedRefusal(ctx.grant, 'unregister every shared-memory region') : undefined;
  if (refusal === undefined) return;
  if (ctx.record.auth !== undefined) ctx.record.auth = { ...ctx.record.auth, outcome: 'forbidden' };
  throw refusal;
}

export function sharedMemoryRoutes(deps: SharedMemoryDeps): Route[] {
  const { control } = deps;

  const system = {
    status: async (ctx: RequestContext, region: string): Promise<void> => {
      const r = await control.call('SystemSharedMemoryStatus', { name: region }, ctx.signal);
      writeJson(ctx.res, 200, encodeSystemRegions(r));
    },
    register: async (ctx: RequestContext, region: string): Promise<void> => {
      requireRegion(region, 'system');
      const { key, offset, byteSize } = decodeSystemRegister(await readControlBody(ctx.req, deps.limits));
      await control.call('SystemSharedMemoryRegister', { name: region, key, offset: offset.toString() as unknown as number, byte_size: byteSize.toString() as unknown as number }, ctx.signal);
      writeJson(ctx.res, 200, '');
    },
    unregister: async (ctx: RequestContext, region: string): Promise<void> => {
      refuseEveryRegion(ctx, region);
      await control.call('SystemSharedMemoryUnregister', { name: region }, ctx.signal);
      writeJson(ctx.res, 200, '');
    },
  };

  const cuda = {
    status: async (ctx: RequestContext, region: string): Promise<void> => {
      const r = await control.call('CudaSharedMemoryStatus', { name: region }, ctx.signal);
      writeJson(ctx.res, 200, encodeCudaRegions(r));
    },
    register: async (ctx: RequestContext, region: string): Promise<void> => {
      requireRegion(region, 'cuda');
      const { rawHandle, deviceId, byteSize } = decodeCudaRegister(await readControlBody(ctx.req, deps.limits));
      await control.call('CudaSharedMemoryRegister', {
        name: region, raw_handle: rawHandle, device_id: deviceId.toString() as unknown as number, byte_size: byteSize.toString() as unknown as number,
      }, ctx.signal);
      writeJson(ctx.res, 200, '');
    },
    unregister: async (ctx: RequestContext, region: string): Promise<void> => {
      refuseEveryRegion(ctx, region);
      await control.call('CudaSharedMemoryUnregister', { name: region }, ctx.signal);
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
