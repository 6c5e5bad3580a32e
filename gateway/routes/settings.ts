// Trace and log settings (PROTOCOL.md §1): GET/POST /v2/trace/setting, /v2/models/{m}/trace/setting
// → TraceSetting, GET/POST /v2/logging → LogSettings. Triton's HTTP frontend types and checks the
// values itself (trace values are JSON strings parsed with std::stoi, log values typed, `null`
// clears or is ignored, file locations are 501) and renders the answer in a fixed key order; the
// same is done here, and gRPC carries the checked values.
import { writeJson } from '../egress/write';
import { GatewayError } from '../errors';
import { asBool, asString, asStringArray, asUInt, find, readControlBody } from '../decode/control-json';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control-plane';
import type { inference } from '../../proto/services';

export interface SettingsDeps {
  readonly upstream: ControlPlane;
  readonly maxBodyBytes: number;
}

const invalid = (message: string): GatewayError => new GatewayError('GW_ERR_DECODE_INVALID', message);
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
async function traceUpdate(ctx: RequestContext, maxBodyBytes: number): Promise<Record<string, inference.TraceSettingRequest.ISettingValue>> {
  const body = await readControlBody(ctx.req, maxBodyBytes, false);
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

async function trace(ctx: RequestContext, deps: SettingsDeps, model: string, update: boolean): Promise<void> {
  if (model !== '') {
    const r = await deps.upstream.call('ModelReady', { name: model, version: '' }, ctx.signal);
    if (!r.ready) throw invalid(`Request for unknown model : ${model}`);
  }
  const settings = update ? await traceUpdate(ctx, deps.maxBodyBytes) : {};
  const r = await deps.upstream.call('TraceSetting', { settings, model_name: model }, ctx.signal);
  writeJson(ctx.res, 200, encodeTraceSettings(r.settings));
}

async function logUpdate(ctx: RequestContext, maxBodyBytes: number): Promise<Record<string, inference.LogSettingsRequest.ISettingValue>> {
  const body = await readControlBody(ctx.req, maxBodyBytes, false);
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

async function logging(ctx: RequestContext, deps: SettingsDeps, update: boolean): Promise<void> {
  const settings = update ? await logUpdate(ctx, deps.maxBodyBytes) : {};
  const r = await deps.upstream.call('LogSettings', { settings }, ctx.signal);
  writeJson(ctx.res, 200, encodeLogSettings(r.settings));
}

export function settingsRoutes(deps: SettingsDeps): Route[] {
  return [
    {
      name: 'trace_setting',
      pattern: /^\/v2\/trace\/setting$/,
      category: 'trace',
      methodNotAllowedJson: true,
      methods: { GET: (ctx) => trace(ctx, deps, '', false), POST: (ctx) => trace(ctx, deps, '', true) },
    },
    {
      name: 'trace_setting_model',
      pattern: /^\/v2\/models\/([^/]+)\/trace\/setting$/,
      category: 'trace',
      methodNotAllowedJson: true,
      methods: { GET: (ctx) => trace(ctx, deps, ctx.params[0]!, false), POST: (ctx) => trace(ctx, deps, ctx.params[0]!, true) },
    },
    {
      name: 'logging',
      pattern: /^\/v2\/logging$/,
      category: 'logging',
      methodNotAllowedJson: true,
      methods: { GET: (ctx) => logging(ctx, deps, false), POST: (ctx) => logging(ctx, deps, true) },
    },
  ];
}
