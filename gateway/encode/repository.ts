// The model repository index as Triton's HTTP frontend answers it.
import type { inference } from '../../proto/services';

/** Triton's HTTP answer to index: a JSON array, empty fields left out. */
export function encodeRepositoryIndex(r: inference.IRepositoryIndexResponse): string {
  return JSON.stringify((r.models ?? []).map((m) => ({
    name: m.name ?? '',
    ...(m.version ? { version: m.version } : {}),
    ...(m.state ? { state: m.state } : {}),
    ...(m.reason ? { reason: m.reason } : {}),
  })));
}
