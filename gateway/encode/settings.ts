// Trace and log settings as Triton's HTTP frontend renders them, in its fixed key order.
import type { inference } from '../../proto/services';

/** Triton's HTTP rendering of the trace settings: fixed order, trace_level an array, the rest strings. */
export function encodeTraceSettings(settings: Record<string, inference.TraceSettingResponse.ISettingValue> | null | undefined): string {
  const s = settings ?? {};
  const first = (k: string): string => s[k]?.value?.[0] ?? '';
  const out: Record<string, unknown> = { trace_level: s.trace_level?.value ?? [] };
  out.trace_rate = first('trace_rate');
  out.trace_count = first('trace_count');
  const mode = first('trace_mode');
  if (mode === 'triton') {
    out.log_frequency = first('log_frequency');
    out.trace_file = first('trace_file');
  }
  out.trace_mode = mode;
  for (const k of Object.keys(s)) if (!(k in out) && k !== 'log_frequency' && k !== 'trace_file') out[k] = first(k);
  return JSON.stringify(out);
}

/** Triton's HTTP rendering of the log settings. */
export function encodeLogSettings(settings: Record<string, inference.LogSettingsResponse.ISettingValue> | null | undefined): string {
  const s = settings ?? {};
  return JSON.stringify({
    log_file: s.log_file?.string_param ?? '',
    log_info: s.log_info?.bool_param ?? false,
    log_warning: s.log_warning?.bool_param ?? false,
    log_error: s.log_error?.bool_param ?? false,
    log_verbose_level: s.log_verbose_level?.uint32_param ?? 0,
    log_format: s.log_format?.string_param ?? '',
  });
}
