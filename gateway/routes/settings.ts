// Trace and log settings: GET/POST /v2/trace/setting, /v2/models/{m}/trace/setting
// → TraceSetting, GET/POST /v2/logging → LogSettings:
//   read body → decode (decode/control/settings.ts) → control call → encode (encode/settings.ts)
import { EVERY_MODEL } from '../auth/guard';
import type { Config } from '../config/schema';
import { decodeLogUpdate, decodeTraceUpdate, unknownModel } from '../decode/control/settings';
import { writeJson } from '../egress/write';
import { encodeLogSettings, encodeTraceSettings } from '../encode/settings';
import { readControlBody } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';

export interface SettingsDeps {
  readonly control: ControlPlane;
  readonly limits: Config['limits'];
}

async function trace(ctx: RequestContext, deps: SettingsDeps, model: string, update: boolean): Promise<void> {
  if (model !== '') {
    const r = await deps.control.call('ModelReady', { name: model, version: '' }, ctx.signal);
    if (!r.ready) throw unknownModel(model);
  }
  const settings = update ? decodeTraceUpdate(await readControlBody(ctx.req, deps.limits)) : {};
  const r = await deps.control.call('TraceSetting', { settings, model_name: model }, ctx.signal);
  writeJson(ctx.res, 200, encodeTraceSettings(r.settings));
}

async function logging(ctx: RequestContext, deps: SettingsDeps, update: boolean): Promise<void> {
  const settings = update ? decodeLogUpdate(await readControlBody(ctx.req, deps.limits)) : {};
  const r = await deps.control.call('LogSettings', { settings }, ctx.signal);
  writeJson(ctx.res, 200, encodeLogSettings(r.settings));
}

export function settingsRoutes(deps: SettingsDeps): Route[] {
  return [
    {
      name: 'trace_setting',
      pattern: /^\/v2\/trace\/setting$/,
      category: 'trace',
      // The global settings apply to every model: not for credentials limited to some (auth/guard.ts).
      model: { name: EVERY_MODEL },
      methodNotAllowedJson: true,
      methods: { GET: (ctx) => trace(ctx, deps, '', false), POST: (ctx) => trace(ctx, deps, '', true) },
    },
    {
      name: 'trace_setting_model',
      pattern: /^\/v2\/models\/([^/]+)\/trace\/setting$/,
      category: 'trace',
      model: { param: 0 },
      methodNotAllowedJson: true,
      methods: { GET: (ctx) => trace(ctx, deps, ctx.params[0]!, false), POST: (ctx) => trace(ctx, deps, ctx.params[0]!, true) },
    },
    {
      name: 'logging',
      pattern: /^\/v2\/logging$/,
      category: 'logging',
      // The log settings are the whole server's: not for credentials limited to some models.
      model: { name: EVERY_MODEL },
      methodNotAllowedJson: true,
      methods: { GET: (ctx) => logging(ctx, deps, false), POST: (ctx) => logging(ctx, deps, true) },
    },
  ];
}
