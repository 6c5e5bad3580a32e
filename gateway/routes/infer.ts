// POST /v2/models/{m}[/versions/{v}]/infer: the request's whole path through the gateway, in
// Triton's order (PROTOCOL.md §3–§8): model check (unknown → 404, decoupled → 501) → request
// Content-Encoding → body (limits) → mode from Inference-Header-Content-Length → decode straight
// into the pre-framed ModelInferRequest → Triton over gRPC → encode → one corked write.
import type { OutgoingHttpHeaders } from 'node:http';
import { decodeV2Header } from '../decode/v2-header';
import { fillBinarySlots } from '../decode/binary-extension';
import { fillJsonSlots } from '../decode/json-data';
import { deduceRawRequest, rawInputMessage } from '../decode/raw-binary';
import { responseEncoding } from '../egress/compress';
import { writeParts } from '../egress/write';
import { encodeInferResponse } from '../encode/infer-response';
import { GatewayError, isGatewayError } from '../errors';
import type { InferRequest } from '../infer/request';
import { declaredLength, readBody, requestEncoding } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { Route } from '../ingress/router';
import { Ledger, publishRequest } from '../telemetry/ledger';
import type { DataPlane } from '../upstream/data-plane';
import { frameInferRequest } from '../upstream/frame-request';
import { readInferResponse } from '../upstream/infer-response';
import type { ModelConfigs } from '../upstream/model-configs';
import { inference } from '../../proto/services';

export interface InferDeps {
  readonly dataPlane: DataPlane;
  readonly configs: ModelConfigs;
  readonly timeoutMs: number;
  readonly maxInputSizeBytes: number;
  readonly maxBodyBytes: number;
}

/**
 * Inference-Header-Content-Length as Triton 2.51 reads it (observed, test/conformance/cases):
 * the leading integer (blanks and a sign allowed, trailing junk ignored); no digits at all reads
 * as 0 — a raw request; negative or past the body is the range error.
 */
function headerLength(raw: string | string[] | undefined, bodyLength: number): number | undefined {
  if (raw === undefined) return undefined;
  const v = Array.isArray(raw) ? raw[0]! : raw;
  const m = /^\s*([+-]?\d+)/.exec(v);
  const n = m === null ? 0 : Number(m[1]);
  if (n < 0 || n > bodyLength) {
    throw new GatewayError('GW_ERR_REQUEST_HEADER_INVALID', `inference header size should be in range (0, ${bodyLength}), got: ${v}`);
  }
  return n;
}

function jsonTooLarge(n: number, max: number): GatewayError {
  return new GatewayError('GW_ERR_DECODE_TOO_LARGE',
    `request JSON size of ${n} bytes exceeds the maximum allowed input size of ${max} bytes. Use --http-max-input-size to increase the limit.`);
}

/** The first n bytes of the body as one buffer: a view when the first chunk holds them. */
function prefixBytes(chunks: readonly Buffer[], n: number, ledger: Ledger): Buffer {
  const first = chunks[0];
  if (first !== undefined && first.length >= n) return first.subarray(0, n);
  ledger.copied('decode', n);
  ledger.allocated('decode');
  return Buffer.concat(chunks as Buffer[], n);
}

export function inferRoutes(deps: InferDeps): Route[] {
  return [{
    name: 'infer',
    pattern: /^\/v2\/models\/([^/]+)(?:\/versions\/([0-9]+))?\/infer$/,
    methods: { POST: (ctx) => infer(ctx, deps) },
  }];
}

async function infer(ctx: RequestContext, deps: InferDeps): Promise<void> {
  const { req, res, signal } = ctx;
  const modelName = ctx.params[0]!;
  const modelVersion = ctx.params[1] ?? '';
  const ledger = new Ledger();
  let encoding = 'json';
  let status = 200;
  try {
    // Triton looks the model up before it reads the body: an unknown model is 404 whatever follows.
    let config;
    try {
      config = await deps.configs.get(modelName, modelVersion, signal);
    } catch (err) {
      throw inferError(err);
    }
    if (config.model_transaction_policy?.decoupled === true) {
      throw new GatewayError('GW_ERR_MODEL_DECOUPLED', "HTTP end point doesn't support models with decoupled transaction policy");
    }
    const reqEncoding = requestEncoding(req);
    const limits = { maxBodyBytes: deps.maxBodyBytes, maxDecompressedBytes: deps.maxInputSizeBytes };

    // With an uncompressed body of known length, the size errors Triton gives after reading can
    // be given before reading (same status and message, nothing buffered).
    const declared = declaredLength(req, limits);
    if (reqEncoding === undefined && declared !== undefined) {
      const h = headerLength(req.headers['inference-header-content-length'], declared);
      if (h === undefined && declared > deps.maxInputSizeBytes) throw jsonTooLarge(declared, deps.maxInputSizeBytes);
      if (h !== undefined && h > deps.maxInputSizeBytes) throw jsonTooLarge(h, deps.maxInputSizeBytes);
    }

    ledger.start('ingress_read');
    const body = await readBody(req, limits, reqEncoding);
    ledger.end('ingress_read');
    ledger.bytes('ingress_read', body.length, body.length);

    ledger.start('decode');
    const h = headerLength(req.headers['inference-header-content-length'], body.length) ?? body.length;
    let request: InferRequest;
    let message: Buffer;
    if (h === 0) {
      encoding = 'raw';
      request = deduceRawRequest(config, modelName, modelVersion, body.length, deps.maxInputSizeBytes);
      const framed = frameInferRequest(request);
      ledger.allocated('decode');
      const slot = framed.slots[0]!;
      let at = slot.offset;
      if (request.inputs[0]!.datatype === 'BYTES') {
        framed.message.writeUInt32LE(body.length, at); // Triton prepends the element length
        at += 4;
      }
      for (const c of body.chunks) {
        c.copy(framed.message, at);
        at += c.length;
      }
      ledger.copied('decode', body.length);
      message = framed.message;
    } else {
      encoding = h === body.length ? 'json' : 'binary';
      if (h > deps.maxInputSizeBytes) throw jsonTooLarge(h, deps.maxInputSizeBytes);
      const headerBytes = prefixBytes(body.chunks, h, ledger);
      const decoded = decodeV2Header(headerBytes, 0, h, {
        modelName, modelVersion, binaryBytes: body.length - h, maxInputSizeBytes: deps.maxInputSizeBytes,
      });
      request = decoded.request;
      refuseBytesClassification(request, config);
      const framed = frameInferRequest(request);
      ledger.allocated('decode');
      ledger.copied('decode', fillJsonSlots(headerBytes, decoded.plans, request, framed.slots, framed.message));
      ledger.copied('decode', fillBinarySlots(body.chunks, h, decoded.plans, framed.slots, framed.message));
      message = framed.message;
    }
    ledger.end('decode');
    ledger.bytes('decode', body.length, message.length);

    ledger.start('upstream_send');
    let answer;
    try {
      answer = await deps.dataPlane.modelInfer({ message, slots: [] }, { deadline: Date.now() + deps.timeoutMs, signal });
    } catch (err) {
      if (isGatewayError(err) && err.status === 404) deps.configs.evict(modelName);
      if (encoding === 'raw' && isGatewayError(err) && err.code === 'GW_ERR_UPSTREAM_STATUS') {
        throw inferError(new GatewayError(err.code, rawInputMessage(err.message, request.inputs[0]!.name), { status: err.status, cause: err }));
      }
      throw inferError(err);
    }
    ledger.end('upstream_receive');
    ledger.bytes('upstream_send', message.length, message.length);
    ledger.bytes('upstream_receive', answer.byteLength, answer.byteLength);

    ledger.start('encode');
    const response = readInferResponse(answer.chunks);
    const encoded = encodeInferResponse(response, request);
    ledger.end('encode');
    ledger.allocated('encode');
    ledger.copied('encode', encoded.copied);
    ledger.bytes('encode', answer.byteLength, encoded.header.length + encoded.binaryLength);

    ledger.start('egress_write');
    const headers: OutgoingHttpHeaders = encoded.binaryLength > 0
      ? { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': encoded.header.length }
      : { 'Content-Type': 'application/json' };
    const written = await writeParts(res, 200, headers, [encoded.header, ...encoded.binary], responseEncoding(req));
    ledger.end('egress_write');
    ledger.bytes('egress_write', encoded.header.length + encoded.binaryLength, written);
  } catch (err) {
    status = isGatewayError(err) ? err.status : 500;
    throw err;
  } finally {
    publishRequest({ route: 'infer', model: modelName, encoding, status, ledger });
  }
}

/**
 * Triton's HTTP frontend answers some infer failures with its default text/plain type: the model
 * lookup (NOT_FOUND) and errors raised once the request runs — the model's own (INTERNAL), input
 * collection ("incomplete string data") and classification — while checks of the request are
 * application/json (PROTOCOL.md §8; observed by the differential suite). gRPC does not say which
 * stage failed, so this is judged from the status and the message.
 */
const EXECUTION_TIME = /^(incomplete string |class result not available )/;

function inferError(err: unknown): unknown {
  if (!isGatewayError(err) || err.code !== 'GW_ERR_UPSTREAM_STATUS') return err;
  if (err.status === 404 || err.status === 500 || EXECUTION_TIME.test(err.message)) {
    return new GatewayError(err.code, err.message, { status: err.status, plain: true, cause: err.cause });
  }
  return err;
}

/**
 * Classification of a BYTES output takes tritonserver 2.51 down (observed: the process exits), so
 * it is refused here with the message Triton gives for other unsupported types.
 */
function refuseBytesClassification(request: InferRequest, config: inference.ModelConfig): void {
  for (const o of request.outputs ?? []) {
    if (!o.parameters.has('classification')) continue;
    const spec = config.output.find((x) => x.name === o.name);
    if (spec?.data_type === inference.DataType.TYPE_STRING) {
      throw new GatewayError('GW_ERR_DECODE_INVALID', "class result not available for output due to unsupported type 'BYTES'", { plain: true });
    }
  }
}
