// The reference backend's trace and log settings, kept and answered as Triton's gRPC frontend
// does (triton-inference-server/server src/grpc/grpc_server.cc, TraceSetting and LogSettings):
// trace settings global and per model (a model's setting falls back to the global one once
// cleared with an empty list), the file locations read-only over the network, the same
// validation messages. Nothing is traced or logged by them: the demo has no trace output.
import type { inference } from '../../proto/services';

const INVALID_ARGUMENT = 3;
const UNIMPLEMENTED = 12;

export class SettingError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

type TraceKey = 'trace_level' | 'trace_rate' | 'trace_count' | 'log_frequency';
type Trace = Record<TraceKey, string[]>;

/** Triton's defaults without --trace-config: tracing off. */
const TRACE_DEFAULTS: Trace = { trace_level: ['OFF'], trace_rate: ['1000'], trace_count: ['-1'], log_frequency: ['0'] };
const U32_MAX = 4294967295;
const I32_MAX = 2147483647;

export class TraceSettings {
  readonly #global: Trace = structuredClone(TRACE_DEFAULTS);
  /** Per model: only the keys set for it. */
  readonly #models = new Map<string, Partial<Trace>>();

  /** Applies `settings` (to `model`, or globally when ''), then answers the settings in effect there. */
  update(model: string, settings: Readonly<Record<string, inference.TraceSettingRequest.ISettingValue>>): Record<string, { value: string[] }> {
    const changes: Partial<Record<TraceKey, string[] | null>> = {};
    for (const [key, v] of Object.entries(settings)) {
      const values = v.value ?? [];
      if (key === 'trace_file') throw new SettingError(UNIMPLEMENTED, 'trace file location can not be updated through network protocol');
      if (key === 'trace_level') changes.trace_level = values.length === 0 ? null : level(values);
      else if (key === 'trace_rate') changes.trace_rate = values.length === 0 ? null : [String(integer(key, values, 0, U32_MAX))];
      else if (key === 'trace_count') changes.trace_count = values.length === 0 ? null : [String(integer(key, values, -1, I32_MAX))];
      else if (key === 'log_frequency') changes.log_frequency = values.length === 0 ? null : [String(integer(key, values, 0, U32_MAX))];
      // Triton ignores any other name.
    }
    const target: Partial<Trace> = model === '' ? this.#global : this.#models.get(model) ?? {};
    for (const [k, v] of Object.entries(changes) as [TraceKey, string[] | null][]) {
      if (v !== null) target[k] = v;
      else if (model === '') target[k] = TRACE_DEFAULTS[k];
      else delete target[k];
    }
    if (model !== '') this.#models.set(model, target);
    const effective = { ...this.#global, ...(model === '' ? {} : this.#models.get(model)) };
    return {
      ...Object.fromEntries(Object.entries(effective).map(([k, v]) => [k, { value: [...v] }])),
      trace_file: { value: [''] },
      trace_mode: { value: ['triton'] },
    };
  }
}

/** trace_level: OFF alone, or any of TIMESTAMPS and TENSORS (others are ignored, as Triton does). */
function level(values: readonly string[]): string[] {
  if (values.includes('OFF')) {
    if (values.length > 1) throw new SettingError(INVALID_ARGUMENT, "Expect only one trace level 'OFF' is specified");
    return ['OFF'];
  }
  const out = ['TIMESTAMPS', 'TENSORS'].filter((l) => values.includes(l));
  return out.length === 0 ? ['OFF'] : out;
}

/** One value parsed like std::stoi: leading digits count, nothing parsable is an error. */
function integer(key: string, values: readonly string[], min: number, max: number): number {
  if (values.length !== 1) throw new SettingError(INVALID_ARGUMENT, `expect only 1 value for '${key}'`);
  const text = values[0]!;
  const m = /^\s*[+-]?\d+/.exec(text);
  if (m === null) throw new SettingError(INVALID_ARGUMENT, `Unable to parse '${key}', got: ${text}`);
  const n = Number(m[0]);
  if (key === 'trace_count' && n < min) throw new SettingError(INVALID_ARGUMENT, `Unable to parse '${key}'. Expecting value >= ${min}, got: ${text}`);
  if (n < min || n > max) throw new SettingError(INVALID_ARGUMENT, `Unable to parse '${key}', value is out of range [ ${min}, ${max} ], got: ${text}`);
  return n;
}

type LogValue = inference.LogSettingsRequest.ISettingValue;

/** Triton's log settings: levels on (verbose 0), default format, no file. */
export class LogSettings {
  readonly #bools = { log_info: true, log_warning: true, log_error: true };
  #verbose = 0;
  #format = 'default';

  update(settings: Readonly<Record<string, LogValue>>): Record<string, inference.LogSettingsResponse.ISettingValue> {
    // Checked first, applied after: a bad value changes nothing.
    const next = { bools: { ...this.#bools }, verbose: this.#verbose, format: this.#format };
    for (const [key, v] of Object.entries(settings)) {
      if (key === 'log_file') throw new SettingError(UNIMPLEMENTED, 'log file location can not be updated through network protocol');
      if (key === 'log_info' || key === 'log_warning' || key === 'log_error') {
        if (v.parameter_choice !== 'bool_param') throw new SettingError(INVALID_ARGUMENT, `expect boolean for '${key}'`);
        next.bools[key] = v.bool_param === true;
      } else if (key === 'log_verbose_level') {
        if (v.parameter_choice !== 'uint32_param') throw new SettingError(INVALID_ARGUMENT, `expect int32 for '${key}'`);
        next.verbose = v.uint32_param ?? 0;
      } else if (key === 'log_format') {
        if (v.parameter_choice !== 'string_param') throw new SettingError(INVALID_ARGUMENT, `expect string for '${key}'`);
        if (v.string_param !== 'default' && v.string_param !== 'ISO8601') throw new SettingError(INVALID_ARGUMENT, `invalid argument for log_format, got: ${v.string_param}`);
        next.format = v.string_param;
      }
    }
    Object.assign(this.#bools, next.bools);
    this.#verbose = next.verbose;
    this.#format = next.format;
    return {
      log_file: { string_param: '' },
      log_info: { bool_param: this.#bools.log_info },
      log_warning: { bool_param: this.#bools.log_warning },
      log_error: { bool_param: this.#bools.log_error },
      log_verbose_level: { uint32_param: this.#verbose },
      log_format: { string_param: this.#format },
    };
  }
}
