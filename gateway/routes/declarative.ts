// Declarative routes (README "Declarative routes"): POST <path> with a hand-rolled JSON body; each
// model input comes from the field its JSON Pointer names, decoded as base64 / data: URI / numbers /
// text. The fields become a KServe-V1 columnar body for the model (names, datatypes and shapes from
// Triton's metadata, the route's datatype/shape when given), so batching, shape fitting and the
// one-copy base64 decode are the /v1 predict path's. The answer is V2 JSON, V1 predictions, or the
// route's map of outputs to JSON Pointers.
import { type DeclarativeRoute, pointerTokens, resolvePointer, routeMetadataProblems } from '../config/routes';
import { decodeV1Object } from '../decode/v1-predict';
import { responseEncoding } from '../egress/compress';
import { writeParts } from '../egress/write';
import { encodeInferResponse } from '../encode/infer-response';
import { encodeV1Predict } from '../encode/v1-predict';
import { GatewayError, isGatewayError } from '../errors';
import type { ParamValue } from '../infer/request';
import { readBody, requestEncoding } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import { callModelInfer } from './infer';
import { Ledger } from '../telemetry/ledger';
import type { DataPlane } from '../upstream/data-plane';
import { frameInferRequest } from '../upstream/frame-request';
import { readInferResponse } from '../upstream/infer-response';
import type { ModelMetadata, ModelMetadatas } from '../upstream/model-metadata';

export interface DeclarativeDeps {
  readonly routes: readonly DeclarativeRoute[];
  readonly dataPlane: DataPlane;
  readonly metadata: ModelMetadatas;
  readonly timeoutMs: number;
  readonly maxInputSizeBytes: number;
  readonly maxBodyBytes: number;
}

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

export function declarativeRoutes(deps: DeclarativeDeps): Route[] {
  return deps.routes.map((route) => {
    // Checked once per metadata answer (a reloaded model brings new metadata, checked again).
    const checked = new WeakSet<ModelMetadata>();
    return {
      name: `declarative ${route.path}`,
      category: 'inference',
      pattern: new RegExp(`^${escapeRegExp(route.path)}$`),
      methods: { POST: (ctx) => handle(ctx, route, checked, deps) },
    } satisfies Route;
  });
}

const bad = (route: DeclarativeRoute, key: string, msg: string): GatewayError =>
  new GatewayError('GW_ERR_DECODE_ROUTE_INVALID', `route ${route.path}: ${key}: ${msg}`);

/** The V1 columnar value of one input from its body field. */
function column(route: DeclarativeRoute, name: string, v: unknown, modelRank: number): unknown {
  const spec = route.inputs.get(name)!;
  const key = `inputs.${name}`;
  if (v === undefined) throw bad(route, `${key}.from`, `the body has no ${spec.from || '(root)'}`);
  const strings = (what: string, ok: (s: string) => boolean): string[] => {
    const list = Array.isArray(v) ? v : [v];
    if (list.length === 0 || !list.every((s) => typeof s === 'string' && ok(s))) {
      throw bad(route, key, `${spec.from} must be ${what} or a non-empty list of them (a batch)`);
    }
    return list as string[];
  };
  switch (spec.decode) {
    case 'base64':
      return strings('a base64 string', () => true).map((b64) => ({ b64 }));
    case 'data-uri':
      return strings('a data: URI with base64 content', (s) => /^data:[^,]*;base64,/i.test(s)).map((b64) => ({ b64 }));
    case 'text':
      return strings('a string', () => true);
    case 'numbers': {
      let rank = 0;
      for (let x: unknown = v; Array.isArray(x); x = x[0] as unknown) rank++;
      const leafOk = (x: unknown): boolean => (Array.isArray(x) ? x.every(leafOk) : typeof x === 'number' || typeof x === 'boolean');
      if (!leafOk(v)) throw bad(route, key, `${spec.from} must be a number or nested arrays of numbers`);
      // One sample (rank one less than the model's, batch dim included) is one row.
      return rank < modelRank ? [v] : v;
    }
  }
}

function parameter(route: DeclarativeRoute, name: string, v: unknown): ParamValue {
  if (typeof v === 'string') return { type: 'string', value: v };
  if (typeof v === 'boolean') return { type: 'bool', value: v };
  if (typeof v === 'number' && Number.isSafeInteger(v)) return { type: 'int64', value: BigInt(v) };
  if (typeof v === 'number') return { type: 'double', value: v };
  throw bad(route, `parameters.${name}`, `${route.parameters.get(name)} must be a string, number or boolean`);
}

/** Sets a value at a JSON Pointer, creating objects on the way. */
function setPointer(doc: Record<string, unknown>, p: string, value: unknown): void {
  const tokens = pointerTokens(p);
  let o = doc;
  tokens.slice(0, -1).forEach((t) => {
    const next = o[t];
    o = (typeof next === 'object' && next !== null ? next : (o[t] = {})) as Record<string, unknown>;
  });
  o[tokens[tokens.length - 1]!] = value;
}

async function handle(ctx: RequestContext, route: DeclarativeRoute, checked: WeakSet<ModelMetadata>, deps: DeclarativeDeps): Promise<void> {
  const { req, res, signal } = ctx;
  const ledger = new Ledger();
  ctx.record.ledger = ledger;
  ctx.record.model = route.model;
  ctx.record.version = route.version;
  ctx.record.encoding = 'declarative';

  const md = await deps.metadata.get(route.model, route.version, signal);
  if (!checked.has(md)) {
    const problems = routeMetadataProblems(route, md);
    if (problems.length > 0) throw new GatewayError('GW_ERR_ROUTE_CONFIG_INVALID', problems.join('; '));
    checked.add(md);
  }

  ledger.start('ingress_read');
  const body = await readBody(req, { maxBodyBytes: deps.maxBodyBytes, maxDecompressedBytes: deps.maxInputSizeBytes }, requestEncoding(req));
  ledger.end('ingress_read');
  ledger.bytes('ingress_read', body.length, body.length);

  ledger.start('decode');
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.concat(body.chunks, body.length).toString('utf8'));
  } catch (err) {
    throw bad(route, 'body', `invalid JSON: ${(err as Error).message}`);
  }
  const specs = md.inputs.map((m) => {
    const r = route.inputs.get(m.name)!;
    return { name: m.name, datatype: r.datatype ?? m.datatype, shape: r.shape ?? m.shape };
  });
  const columns: Record<string, unknown> = {};
  for (const s of specs) columns[s.name] = column(route, s.name, resolvePointer(doc, route.inputs.get(s.name)!.from), s.shape.length);
  const parameters = new Map<string, ParamValue>();
  for (const [name, p] of route.parameters) {
    const v = resolvePointer(doc, p);
    if (v !== undefined) parameters.set(name, parameter(route, name, v));
  }
  let decoded;
  try {
    decoded = decodeV1Object({ inputs: columns }, { name: route.model, version: route.version, inputs: specs }, deps.maxInputSizeBytes);
  } catch (err) {
    if (isGatewayError(err) && err.code === 'GW_ERR_DECODE_V1_INVALID') throw bad(route, 'inputs', err.message);
    throw err;
  }
  const request = { ...decoded.request, parameters, binaryDataOutput: route.response.form !== 'v2' };
  const framed = frameInferRequest(request, ctx.buffers.acquire);
  ledger.allocated('decode', ctx.buffers.reused(framed.message) ? 1 : 2);
  ledger.copied('decode', body.length + decoded.fill(framed.message, framed.slots));
  ledger.end('decode');

  let answer;
  try {
    answer = await callModelInfer(ctx, deps.dataPlane, framed.message, deps.timeoutMs, ledger);
  } catch (err) {
    if (isGatewayError(err) && err.status === 404) deps.metadata.evict(route.model);
    throw err;
  }

  ledger.start('encode');
  const response = readInferResponse(answer.chunks);
  let parts: Buffer[];
  if (route.response.form === 'v2') {
    const encoded = encodeInferResponse(response, request);
    parts = [encoded.header, ...encoded.binary];
  } else if (route.response.form === 'v1') {
    parts = [Buffer.from(encodeV1Predict(response, true))];
  } else {
    const outs = (JSON.parse(encodeV1Predict(response, false)) as { outputs: unknown }).outputs;
    const byName = response.outputs.length === 1 ? { [response.outputs[0]!.name]: outs } : (outs as Record<string, unknown>);
    const doc: Record<string, unknown> = {};
    for (const [output, p] of route.response.fields) setPointer(doc, p, byName[output]);
    parts = [Buffer.from(JSON.stringify(doc))];
  }
  ledger.end('encode');
  ctx.record.encodingOut = 'json';
  ledger.start('egress_write');
  const written = await writeParts(res, 200, { 'Content-Type': 'application/json' }, parts, responseEncoding(req));
  ledger.end('egress_write');
  ledger.bytes('egress_write', parts.reduce((a, b) => a + b.length, 0), written);
}
