// POST /v2/models/{m}[/versions/{v}]/generate and …/generate_stream: Triton's generate extension,
// emulated over the bidi ModelStreamInfer (PROTOCOL.md §6 "Generate endpoints"; Triton 2.51 is the
// judge, test/conformance/generate-differential.test.ts). The flat request object becomes a V2
// request: keys naming a model input are tensors (shape from the cached model metadata), the other
// keys and the members of "parameters" are request parameters, "id" is the id. The answer is one
// JSON object (/generate, exactly one response) or an SSE stream of them (/generate_stream).
import { decodeV2Header } from '../decode/v2-header';
import { fillJsonSlots } from '../decode/json-data';
import { type JsonNode, JsonSyntaxError, type JsonObject, NOT, parseJson } from '../decode/json-reader';
import { encodeGenerateResponse } from '../encode/infer-response';
import { GatewayError, isGatewayError } from '../errors';
import type { InferRequest, ParamValue } from '../infer/request';
import { readBody } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import { type Allocate, frameInferRequest } from '../upstream/frame-request';
import type { ModelMetadata, ModelMetadatas } from '../upstream/model-metadata';
import type { StreamInferPlane, StreamMessage } from '../upstream/stream-call';

export interface GenerateDeps {
  readonly streams: StreamInferPlane;
  readonly metadata: ModelMetadatas;
  readonly timeoutMs: number;
  readonly maxInputSizeBytes: number;
  readonly maxBodyBytes: number;
}

const ONE_RESPONSE = 'generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses';
const PARAM_TYPE = "has invalid type. It should be either 'int', 'bool', or 'string'.";

export function generateRoutes(deps: GenerateDeps): Route[] {
  const model = '^\\/v2\\/models\\/([^/]+)(?:\\/versions\\/([0-9]+))?';
  return [
    {
      name: 'generate',
      category: 'inference',
      pattern: new RegExp(`${model}\\/generate$`),
      methodNotAllowedJson: true,
      methods: { POST: (ctx) => generate(ctx, deps, false) },
    },
    {
      name: 'generate_stream',
      category: 'inference',
      pattern: new RegExp(`${model}\\/generate_stream$`),
      methodNotAllowedJson: true,
      methods: { POST: (ctx) => generate(ctx, deps, true) },
    },
  ];
}

async function generate(ctx: RequestContext, deps: GenerateDeps, stream: boolean): Promise<void> {
  const { req, res, signal } = ctx;
  const modelName = ctx.params[0]!;
  const modelVersion = ctx.params[1] ?? '';
  ctx.record.model = modelName;
  ctx.record.version = modelVersion;
  ctx.record.encoding = 'generate';
  ctx.record.encodingOut = stream ? 'sse' : 'json';

  // Triton looks the model up first: an unknown model is 404 whatever the body.
  const metadata = await deps.metadata.get(modelName, modelVersion, signal);
  const ce = req.headers['content-encoding'];
  if (ce !== undefined && ce !== 'identity') {
    throw new GatewayError('GW_ERR_DECODE_INVALID', "Unsupported content-encoding, only 'identity' is supported.");
  }
  const body = await readBody(req, { maxBodyBytes: deps.maxBodyBytes, maxDecompressedBytes: deps.maxInputSizeBytes }, undefined);
  const bytes = body.chunks.length === 1 ? body.chunks[0]! : Buffer.concat(body.chunks, body.length);
  const request = toInferRequest(bytes, metadata, modelName, modelVersion, deps.maxInputSizeBytes, ctx.buffers.acquire);

  const callStart = process.hrtime.bigint();
  let count = 0;
  let first: StreamMessage | undefined;
  let started = false;
  const pending: Buffer[] = [];
  let upstreamError: unknown;
  try {
    await deps.streams.streamInfer(request.message, { deadline: Date.now() + deps.timeoutMs, signal, metadata: ctx.upstreamHeaders }, {
      onMessage: (m) => {
        // The empty final response (asked for with triton_enable_empty_final_response) only
        // marks the end of the stream.
        if (m.kind === 'response' && m.final && m.response.outputs.length === 0) return;
        first ??= m;
        count++;
        if (!stream) {
          if (m.kind === 'response' && count === 1) pending.push(encodeGenerateResponse(m.response));
          else if (m.kind === 'error' && count === 1) pending.push(Buffer.from(JSON.stringify({ error: m.message })));
          return;
        }
        if (!started) {
          if (m.kind === 'error' && isRequestError(m.message)) {
            // Triton's core refused the request before running it: a normal JSON error.
            throw new GatewayError('GW_ERR_UPSTREAM_STATUS', m.message, { status: 400 });
          }
          started = true;
          res.writeHead(m.kind === 'error' ? 400 : 200, { 'Content-Type': 'text/event-stream; charset=utf-8' });
        }
        const event = m.kind === 'error' ? Buffer.from(JSON.stringify({ error: m.message })) : encodeGenerateResponse(m.response);
        const ok = res.write(Buffer.concat([Buffer.from('data: '), event, Buffer.from('\n\n')]));
        if (!ok) return new Promise<void>((resolve) => res.once('drain', resolve));
        return undefined;
      },
    });
  } catch (err) {
    upstreamError = err;
  }
  ctx.record.upstreamDurationNs = process.hrtime.bigint() - callStart;
  if (upstreamError !== undefined) {
    const e: unknown = upstreamError;
    ctx.record.upstreamStatus = isGatewayError(e) && isCoded(e.cause) ? e.cause.code : undefined;
    if (isGatewayError(e) && e.status === 404) deps.metadata.evict(modelName);
    if (started) {
      // Mid-stream: the status is sent; the error becomes an event.
      if (!res.destroyed) res.end(`data: ${JSON.stringify({ error: isGatewayError(e) ? e.message : String(e) })}\n\n`);
      return;
    }
    throw e;
  }
  ctx.record.upstreamStatus = 0;
  if (stream) {
    if (!started) res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8' });
    res.end();
    return;
  }
  if (count === 1 && first?.kind === 'error') {
    throw new GatewayError('GW_ERR_UPSTREAM_STATUS', first.message, { status: 400 });
  }
  // Triton answers a wrong number of responses with status 200 (observed with 2.51).
  const out = count === 1 ? pending[0]! : Buffer.from(JSON.stringify({ error: ONE_RESPONSE }));
  res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': out.length });
  res.end(out);
}

/** Triton core's checks of a request carry its "[request id: …]" prefix; a model's errors do not. */
function isRequestError(message: string): boolean {
  return message.startsWith('[request id: ');
}

function isCoded(x: unknown): x is { code: number } {
  return typeof x === 'object' && x !== null && typeof (x as { code?: unknown }).code === 'number';
}

const malformed = (msg: string): GatewayError => new GatewayError('GW_ERR_DECODE_MALFORMED', msg);
const invalid = (msg: string): GatewayError => new GatewayError('GW_ERR_DECODE_INVALID', msg);

/** The JSON text of a scalar or array node (objects are refused before this is called). */
function text(b: Buffer, n: JsonNode): string {
  switch (n.kind) {
    case 'bool': return n.value ? 'true' : 'false';
    case 'null': return 'null';
    case 'object': throw new Error('object node has no end offset');
    default: return b.toString('utf8', n.start, n.end);
  }
}

function checkParam(n: JsonNode, key: string, prefix: string): void {
  if (n.kind === 'object' || n.kind === 'array' || n.kind === 'null') throw invalid(`${prefix}parameter '${key}' ${PARAM_TYPE}`);
}

/**
 * The generate body as a V2 infer request, framed. Built as the V2 JSON header the same request
 * would be, so the tensor values follow the infer path's conversion rules exactly.
 */
function toInferRequest(
  b: Buffer, md: ModelMetadata, modelName: string, modelVersion: string, maxInputSizeBytes: number, allocate: Allocate,
): { request: InferRequest; message: Buffer } {
  let root: JsonNode;
  try {
    root = parseJson(b, 0, b.length);
  } catch (err) {
    if (err instanceof JsonSyntaxError) throw malformed(`failed to parse the request JSON buffer: ${err.message}`);
    throw err;
  }
  if (root.kind !== 'object') throw malformed('attempt to get members for non-object');
  const obj: JsonObject = root;
  const inputs: string[] = [];
  const params: string[] = [];
  let id: string | undefined;
  for (const { key, value } of obj.members) {
    const spec = md.inputs.find((t) => t.name === key);
    if (spec !== undefined) {
      if (value.kind === 'object') throw malformed("Unable to parse 'data': Shape does not match true shape of 'data' field");
      if (value.kind === 'array' && value.containers.length > 0) {
        throw malformed("Unable to parse 'data': Shape does not match true shape of 'data' field");
      }
      const count = value.kind === 'array' ? value.length : 1;
      const shape = deduceShape(spec.shape, count, key);
      const data = value.kind === 'array' ? text(b, value) : `[${text(b, value)}]`;
      inputs.push(`{"name":${JSON.stringify(key)},"datatype":${JSON.stringify(spec.datatype)},"shape":${JSON.stringify(shape)},"data":${data}}`);
    } else if (key === 'id') {
      if (value.kind !== 'string') throw malformed(`Unable to parse 'id': ${NOT.string}`);
      id = text(b, value);
    } else if (key === 'parameters') {
      if (value.kind !== 'object') throw malformed(`Expected JSON object for keyword: 'parameters': ${NOT.object}`);
      for (const m of value.members) {
        checkParam(m.value, m.key, "Converting keyword: 'parameters': ");
        if (!m.key.startsWith('triton_')) params.push(`${JSON.stringify(m.key)}:${text(b, m.value)}`);
      }
    } else {
      checkParam(value, key, '');
      // Triton's HTTP frontend passes triton_* keys to its core unchecked; its gRPC frontend
      // refuses them, so they are dropped here (docs/differences.md).
      if (!key.startsWith('triton_')) params.push(`${JSON.stringify(key)}:${text(b, value)}`);
    }
  }
  const header = Buffer.from(`{${id === undefined ? '' : `"id":${id},`}"parameters":{${params.join(',')}},"inputs":[${inputs.join(',')}]}`);
  const decoded = decodeV2Header(header, 0, header.length, { modelName, modelVersion, binaryBytes: 0, maxInputSizeBytes });
  const parameters = new Map<string, ParamValue>(decoded.request.parameters);
  parameters.set('triton_enable_empty_final_response', { type: 'bool', value: true });
  const request: InferRequest = { ...decoded.request, parameters };
  const framed = frameInferRequest(request, allocate);
  fillJsonSlots(header, decoded.plans, request, framed.slots, framed.message);
  return { request, message: framed.message };
}

/** Fixed dims divide the element count, the innermost -1 takes the rest, any other -1 is 1. */
function deduceShape(dims: readonly number[], count: number, name: string): number[] {
  const refuse = (): GatewayError => invalid(`The schema can not convert input '${name}' to tensor with proper shape`);
  let fixed = 1;
  for (const d of dims) if (d >= 0) fixed *= d;
  const innermost = dims.lastIndexOf(-1);
  if (innermost === -1) {
    if (fixed !== count) throw refuse();
    return [...dims];
  }
  if (fixed === 0 ? count !== 0 : count % fixed !== 0) throw refuse();
  return dims.map((d, i) => (d >= 0 ? d : i === innermost ? (fixed === 0 ? 0 : count / fixed) : 1));
}
