// Trace and log settings bodies (POST /v2/trace/setting, /v2/models/{m}/trace/setting,
// /v2/logging): Triton's HTTP frontend types and checks the values itself (trace values are JSON
// strings parsed with std::stoi, log values typed, `null` clears or is ignored, file locations are
// 501); the same is done here, and gRPC carries the checked values.
import { GatewayError } from '../../errors';
import type { inference } from '../../../proto/services';
import { asBool, asString, asStringArray, asUInt, find, parseControlBody } from './control-json';

const invalid = (message: string): GatewayError => new GatewayError('GW_ERR_DECODE_INVALID', message);

/** A model trace setting for a model that is not ready: Triton's HTTP frontend checks this first. */
export const unknownModel = (model: string): GatewayError => invalid(`Request for unknown model : ${model}`);
const unsupported = (message: string): GatewayError => new GatewayError('GW_ERR_DECODE_UNSUPPORTED', message);

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
const UINT32_MAX = 2 ** 32 - 1;

/** std::stoi: leading blanks, a sign, digits, anything after ignored; int32 range. */
function stoi(key: string, text: string, rangeMin: number, rangeMax: number): number {
  const m = /^[\s]*([+-]?\d+)/.exec(text);
  if (m === null) throw invalid(`Unable to parse '${key}', got: ${text}`);
  const v = Number(m[1]);
  if (v < INT32_MIN || v > INT32_MAX) {
    throw invalid(`Unable to parse '${key}', value is out of range [ ${rangeMin}, ${rangeMax} ], got: ${text}`);
  }
  return v;
}

/** The settings a trace POST asks for, as the gRPC map Triton's gRPC server reads (clear = empty list). */
export function decodeTraceUpdate(bytes: Buffer): Record<string, inference.TraceSettingRequest.ISettingValue> {
  const body = parseControlBody(bytes, false);
  const out: Record<string, inference.TraceSettingRequest.ISettingValue> = {};
  if (find(body.root, 'trace_file') !== undefined) throw unsupported('trace file location can not be updated through network protocol');
  const level = find(body.root, 'trace_level');
  if (level !== undefined) {
    if (level.kind === 'null') out.trace_level = { value: [] };
    else {
      const levels = asStringArray(body.bytes, level);
      const known: string[] = [];
      for (const l of levels) {
        if (l === 'OFF') {
          if (levels.length !== 1) throw invalid("Expect only one trace level 'OFF' is specified");
          known.push(l);
        } else if ((l === 'TIMESTAMPS' || l === 'TENSORS') && !known.includes(l)) known.push(l);
      }
      // Triton ignores unknown level names; with none known the level stays as it was.
      if (known.length > 0) out.trace_level = { value: known };
    }
  }
  const numeric = (key: string, read: (text: string) => number): void => {
    const v = find(body.root, key);
    if (v === undefined) return;
    if (v.kind === 'null') out[key] = { value: [] };
    else out[key] = { value: [String(read(asString(v)))] };
  };
  numeric('trace_rate', (t) => stoi('trace_rate', t, 0, UINT32_MAX) >>> 0);
  numeric('trace_count', (t) => {
    const c = stoi('trace_count', t, -1, INT32_MAX);
    if (c < -1) throw invalid(`Unable to parse 'trace_count'. Expecting value >= -1, got:${t}`);
    return c;
  });
  numeric('log_frequency', (t) => stoi('log_frequency', t, 0, UINT32_MAX) >>> 0);
  return out;
}

/** The settings a log POST asks for, typed and checked as Triton's HTTP frontend does. */
export function decodeLogUpdate(bytes: Buffer): Record<string, inference.LogSettingsRequest.ISettingValue> {
  const body = parseControlBody(bytes, false);
  const out: Record<string, inference.LogSettingsRequest.ISettingValue> = {};
  const present = (key: string) => {
    const v = find(body.root, key);
    return v === undefined || v.kind === 'null' ? undefined : v;
  };
  if (present('log_file') !== undefined) throw unsupported('log file location can not be updated through network protocol');
  for (const key of ['log_info', 'log_warning', 'log_error']) {
    const v = present(key);
    if (v !== undefined) out[key] = { bool_param: asBool(v) };
  }
  const verbose = present('log_verbose_level');
  // Triton keeps the low 32 bits (static_cast<int32_t>).
  if (verbose !== undefined) out.log_verbose_level = { uint32_param: Number(BigInt.asUintN(32, asUInt(body.bytes, verbose))) };
  const format = present('log_format');
  if (format !== undefined) {
    const f = asString(format);
    if (f !== 'default' && f !== 'ISO8601') {
      throw new GatewayError('GW_ERR_DECODE_LOG_FORMAT_INVALID', `invalid argument for --log_format, got: ${f}`);
    }
    out.log_format = { string_param: f };
  }
  return out;
}
