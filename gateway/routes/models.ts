// Server and model metadata, readiness and configuration (docs/architecture.md#endpoints): each a control
// plane call answered with Triton's exact JSON.
import { writeEmpty, writeJson } from '../egress/write';
import { encodeModelMetadata, encodeServerMetadata } from '../encode/metadata';
import { encodeModelConfig } from '../encode/model-config';
import { GatewayError } from '../errors';
import type { Route } from '../ingress/router';
import type { ControlPlane } from '../upstream/control/control-plane';

const MODEL = '\\/v2\\/models\\/([^/]+)(?:\\/versions\\/([0-9]+))?';

export function modelRoutes(upstream: ControlPlane): Route[] {
  return [
    {
      name: 'server_metadata',
      category: 'metadata',
      pattern: /^\/v2$/,
      methodNotAllowedJson: true,
      methods: {
        GET: async (ctx) => {
          const m = await upstream.call('ServerMetadata', {}, ctx.signal);
          writeJson(ctx.res, 200, encodeServerMetadata(m));
        },
      },
    },
    {
      name: 'model_ready',
      category: 'health',
      model: { param: 0 },
      pattern: new RegExp(`^${MODEL}\\/ready$`),
      methods: {
        GET: async (ctx) => {
          const r = await upstream.call('ModelReady', { name: ctx.params[0]!, version: ctx.params[1] ?? '' }, ctx.signal);
          if (!r.ready) throw new GatewayError('GW_ERR_MODEL_NOT_READY', 'Model version not ready');
          writeEmpty(ctx.res, 200);
        },
      },
    },
    {
      name: 'model_config',
      category: 'model-config',
      model: { param: 0 },
      pattern: new RegExp(`^${MODEL}\\/config$`),
      methodNotAllowedJson: true,
      methods: {
        GET: async (ctx) => {
          const { config } = await upstream.call('ModelConfig', { name: ctx.params[0]!, version: ctx.params[1] ?? '' }, ctx.signal);
          writeJson(ctx.res, 200, encodeModelConfig(config as unknown as Record<string, unknown>));
        },
      },
    },
    {
      name: 'model_metadata',
      category: 'metadata',
      model: { param: 0 },
      pattern: new RegExp(`^${MODEL}$`),
      methodNotAllowedJson: true,
      methods: {
        GET: async (ctx) => {
          const m = await upstream.call('ModelMetadata', { name: ctx.params[0]!, version: ctx.params[1] ?? '' }, ctx.signal);
          writeJson(ctx.res, 200, encodeModelMetadata(m));
        },
      },
    },
  ];
}
