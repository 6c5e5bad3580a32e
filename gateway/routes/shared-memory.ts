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

/** A region kind's three handlers; `region` is the URL's, '' when it names none. */
interface RegionHandlers {
  status(ctx: RequestContext, deps: SharedMemoryDeps, region: string): Promise<void>;
  register(ctx: RequestContext, deps: SharedMemoryDeps, region: string): Promise<void>;
  unregister(ctx: RequestContext, deps: SharedMemoryDeps, region: string): Promise<void>;
}

export function sharedMemoryRoutes(deps: SharedMemoryDeps): Route[] {
  return [...regionRoutes('systemsharedmemory', SYSTEM, deps), ...regionRoutes('cudasharedmemory', CUDA, deps)];
}

function regionRoutes(kind: 'systemsharedmemory' | 'cudasharedmemory', h: RegionHandlers, deps: SharedMemoryDeps): Route[] {
  return [
    {
      name: `${kind}_status`,
      pattern: new RegExp(`^\\/v2\\/${kind}(?:\\/region\\/([^/]+))?\\/status$`),
      category: 'shared-memory',
      methodNotAllowedJson: true,
      methods: { GET: (ctx) => h.status(ctx, deps, ctx.params[0] ?? '') },
    },
    {
      name: `${kind}_register`,
      pattern: new RegExp(`^\\/v2\\/${kind}(?:\\/region\\/([^/]+))?\\/register$`),
      category: 'shared-memory',
      methodNotAllowedJson: true,
      methods: { POST: (ctx) => h.register(ctx, deps, ctx.params[0] ?? '') },
    },
    {
      name: `${kind}_unregister`,
      pattern: new RegExp(`^\\/v2\\/${kind}(?:\\/region\\/([^/]+))?\\/unregister$`),
      category: 'shared-memory',
      methodNotAllowedJson: true,
      methods: { POST: (ctx) => h.unregister(ctx, deps, ctx.params[0] ?? '') },
    },
  ];
}

/** Triton's status of every system region, the gateway's own left out. */
async function clientRegions(deps: SharedMemoryDeps, signal: AbortSignal): Promise<inference.ISystemSharedMemoryStatusResponse> {
  const prefix = deps.reservedPrefix;
  const r = await deps.control.call('SystemSharedMemoryStatus', { name: '' }, signal);
  if (prefix === undefined) return r;
  return { regions: Object.fromEntries(Object.entries(r.regions ?? {}).filter(([name]) => !isReservedRegion(name, prefix))) };
}

const SYSTEM: RegionHandlers = {
  async status(ctx, deps, region) {
    refuseReservedRegion(region, deps.reservedPrefix);
    const r = region === '' ? await clientRegions(deps, ctx.signal) : await deps.control.call('SystemSharedMemoryStatus', { name: region }, ctx.signal);
    writeJson(ctx.res, 200, encodeSystemRegions(r));
  },
  async register(ctx, deps, region) {
    const prefix = deps.reservedPrefix;
    requireRegion(region, 'system');
    refuseReservedRegion(region, prefix);
    const { key, offset, byteSize } = decodeSystemRegister(await readControlBody(ctx.req, deps.limits));
    // The same file under a name of the client's would give it the gateway's tensors too.
    refuseReservedRegion(key, prefix, 'system shared memory key');
    await deps.control.call('SystemSharedMemoryRegister',
      { name: region, key, offset: offset.toString() as unknown as number, byte_size: byteSize.toString() as unknown as number }, ctx.signal);
    writeJson(ctx.res, 200, '');
  },
  async unregister(ctx, deps, region) {
    refuseEveryRegion(ctx, region);
    refuseReservedRegion(region, deps.reservedPrefix);
    if (region === '' && deps.reservedPrefix !== undefined) {
      // Unregister-all (tritonclient's unregister_system_shared_memory() with no name, run by
      // many clients at start and end) takes the clients' regions only, one call each.
      for (const name of Object.keys((await clientRegions(deps, ctx.signal)).regions ?? {})) {
        await deps.control.call('SystemSharedMemoryUnregister', { name }, ctx.signal);
      }
    } else {
      await deps.control.call('SystemSharedMemoryUnregister', { name: region }, ctx.signal);
    }
    writeJson(ctx.res, 200, '');
  },
};

const CUDA: RegionHandlers = {
  async status(ctx, deps, region) {
    const r = await deps.control.call('CudaSharedMemoryStatus', { name: region }, ctx.signal);
    writeJson(ctx.res, 200, encodeCudaRegions(r));
  },
  async register(ctx, deps, region) {
    requireRegion(region, 'cuda');
    // Triton keeps system and CUDA regions in one table: the name would collide with the gateway's.
    refuseReservedRegion(region, deps.reservedPrefix, 'CUDA shared memory region');
    const { rawHandle, deviceId, byteSize } = decodeCudaRegister(await readControlBody(ctx.req, deps.limits));
    await deps.control.call('CudaSharedMemoryRegister', {
      name: region, raw_handle: rawHandle, device_id: deviceId.toString() as unknown as number, byte_size: byteSize.toString() as unknown as number,
    }, ctx.signal);
    writeJson(ctx.res, 200, '');
  },
  async unregister(ctx, deps, region) {
    refuseEveryRegion(ctx, region);
    await deps.control.call('CudaSharedMemoryUnregister', { name: region }, ctx.signal);
    writeJson(ctx.res, 200, '');
  },
};
