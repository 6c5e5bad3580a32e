// Model statistics as Triton's HTTP frontend renders the core's statistics message: its key order
// (response_stats before batch_stats, unlike the proto), 64-bit counters as bare JSON numbers.
import type { inference } from '../../proto/services';

type Num = number | { toString(): string } | null | undefined;
const n = (x: Num): string => (x === null || x === undefined ? '0' : String(x));
const str = (s: string | null | undefined): string => JSON.stringify(s ?? '');

interface Duration { count?: Num; ns?: Num }
const duration = (d: Duration | null | undefined): string => `{"count":${n(d?.count)},"ns":${n(d?.ns)}}`;

function inferStats(s: inference.IInferStatistics | null | undefined): string {
  const keys = ['success', 'fail', 'queue', 'compute_input', 'compute_infer', 'compute_output', 'cache_hit', 'cache_miss'] as const;
  return `{${keys.map((k) => `"${k}":${duration(s?.[k])}`).join(',')}}`;
}

function responseStats(m: Record<string, inference.IInferResponseStatistics> | null | undefined): string {
  const keys = ['compute_infer', 'compute_output', 'success', 'fail', 'empty_response', 'cancel'] as const;
  const items = Object.entries(m ?? {}).map(([k, s]) => `${JSON.stringify(k)}:{${keys.map((x) => `"${x}":${duration(s[x])}`).join(',')}}`);
  return `{${items.join(',')}}`;
}

function batchStats(b: readonly inference.IInferBatchStatistics[] | null | undefined): string {
  return `[${(b ?? []).map((s) => `{"batch_size":${n(s.batch_size)},"compute_input":${duration(s.compute_input)},`
    + `"compute_infer":${duration(s.compute_infer)},"compute_output":${duration(s.compute_output)}}`).join(',')}]`;
}

function memoryUsage(m: readonly inference.IMemoryUsage[] | null | undefined): string {
  return `[${(m ?? []).map((u) => `{"type":${str(u.type)},"id":${n(u.id)},"byte_size":${n(u.byte_size)}}`).join(',')}]`;
}

export function encodeModelStatistics(r: inference.IModelStatisticsResponse): string {
  const items = (r.model_stats ?? []).map((s) => `{"name":${str(s.name)},"version":${str(s.version)},`
    + `"last_inference":${n(s.last_inference)},"inference_count":${n(s.inference_count)},"execution_count":${n(s.execution_count)},`
    + `"inference_stats":${inferStats(s.inference_stats)},"response_stats":${responseStats(s.response_stats)},`
    + `"batch_stats":${batchStats(s.batch_stats)},"memory_usage":${memoryUsage(s.memory_usage)}}`);
  return `{"model_stats":[${items.join(',')}]}`;
}
