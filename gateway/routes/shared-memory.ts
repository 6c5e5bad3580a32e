// System and CUDA shared memory: status → a JSON array of regions, register /
// unregister → empty 200. The body of a register is checked as Triton's HTTP frontend checks it
// (field presence and types, a region name, a 64-byte CUDA IPC handle in base64); whether client
// shared memory is allowed at all is Triton's to say over gRPC. With upstream.sharedMemory on, the
// gateway's own regions are out of clients' reach (decode/control/shared-memory.ts): named, they are
// refused; the list and unregister-all leave them out, as if Triton had only the clients' regions.
import { limitedRefusal } from '../auth/guard';
import type { Config } from '../config/schema';
import { decodeCudaRegister, decodeSystemRegister, isReservedRegion, refuseReservedRegion, requireRegion } from '../decode/control/shared-memory';
import { writeJson } from '../egress/write';
import { encodeCudaRegions, encodeSystemRegions } from '../encode/shared-memory';
import { readControlBody } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';
import type { inference } from '../../proto/services';

export interface SharedMemoryDeps {
  readonly control: ControlPlane;
  readonly limits: Config['limits'];
  /** upstream.sharedMemory.prefix when the mode is on: the gateway's own region names. */
  readonly reservedPrefix?: string | undefined;
}

/** No region name unregisters every region: not for credentials limited to some models (auth/guard.ts). */
function refuseEveryRegion(ctx: RequestContext, region: string): void {
  const refusal = region === '' ? limitedRefusal(ctx.grant, 'unregister every shared-memory region') : undefined;
  if (refusal === undefined) return;
  if (ctx.record.auth !== undefined) ctx.record.auth = { ...ctx.record.auth, outcome: 'forbidden' };
  throw refusal;
}

export function sharedMemoryRoutes(deps: SharedMemoryDeps): Route[] {
  const { control, reservedPrefix: prefix } = deps;
  /** Triton's status of every system region, the gateway's own left out. */
  const clientRegions = async (signal: AbortSignal): Promise<inference.ISystemSharedMemoryStatusResponse> => {
    const r = await control.call('SystemSharedMemoryStatus', { name: '' }, signal);
    if (prefix === undefined) return r;
    return { regions: Object.fromEntries(Object.entries(r.regions ?? {}).filter(([name]) => !isReservedRegion(name, prefix))) };
  };

  const system = {
    status: async (ctx: RequestContext, region: string): Promise<void> => {
      refuseReservedRegion(region, prefix);
      const r = region === '' ? await clientRegions(ctx.signal) : await control.call('SystemSharedMemoryStatus', { name: region }, ctx.signal);
      writeJson(ctx.res, 200, encodeSystemRegions(r));
    },
    register: async (ctx: RequestContext, region: string): Promise<void> => {
      requireRegion(region, 'system');
      refuseReservedRegion(region, prefix);
      const { key, offset, byteSize } = decodeSystemRegister(await readControlBody(ctx.req, deps.limits));
      // The same file under a name of the client's would give it the gateway's tensors too.
      refuseReservedRegion(key, prefix, 'system shared memory key');
      await control.call('SystemSharedMemoryRegister', { name: region, key, offset: offset.toString() as unknown as number, byte_size: byteSize.toString() as unknown as number }, ctx.signal);
      writeJson(ctx.res, 200, '');
    },
    unregister: async (ctx: RequestContext, region: string): Promise<void> => {
      refuseEveryRegion(ctx, region);
      refuseReservedRegion(region, prefix);
      if (region === '' && prefix !== undefined) {
        // Unregister-all (tritonclient's unregister_system_shared_memory() with no name, run by
        // many clients at start and end) takes the clients' regions only, one call each.
        for (const name of Object.keys((await clientRegions(ctx.signal)).regions ?? {})) {
          await control.call('SystemSharedMemoryUnregister', { name }, ctx.signal);
        }
      } else {
        await control.call('SystemSharedMemoryUnregister', { name: region }, ctx.signal);
      }
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
      // Triton keeps system and CUDA regions in one table: the name would collide with the gateway's.
      refuseReservedRegion(region, prefix, 'CUDA shared memory region');
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
