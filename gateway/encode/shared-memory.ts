// Shared-memory status as Triton's HTTP frontend answers it: a JSON array of regions, 64-bit
// numbers bare.
import type { inference } from '../../proto/services';

type Num = number | { toString(): string } | null | undefined;
const n = (x: Num): string => (x === null || x === undefined ? '0' : String(x));

export function encodeSystemRegions(r: inference.ISystemSharedMemoryStatusResponse): string {
  const items = Object.values(r.regions ?? {}).map((s) =>
    `{"name":${JSON.stringify(s.name ?? '')},"key":${JSON.stringify(s.key ?? '')},"offset":${n(s.offset)},"byte_size":${n(s.byte_size)}}`);
  return `[${items.join(',')}]`;
}

export function encodeCudaRegions(r: inference.ICudaSharedMemoryStatusResponse): string {
  const items = Object.values(r.regions ?? {}).map((s) =>
    `{"name":${JSON.stringify(s.name ?? '')},"device_id":${n(s.device_id)},"byte_size":${n(s.byte_size)}}`);
  return `[${items.join(',')}]`;
}
