// The steps of the routes whose bodies are read with JSON.parse into the V1 decoder's request —
// V1 predict (docs/dialects.md "TF-Serving / KServe-V1") and declarative routes (docs/dialects.md
// "Declarative routes"): the body decoded and framed, each base64 payload byte written once into
// its slot, and the answer encoded; and V1 predict's steps in that order. Each step records its
// hop (decode, encode).
import type { DeclarativeRoute } from '../config/routes';
import type { Config } from '../config/schema';
import type { StagedBody } from '../decode/base64/base64-staging';
import { CUT_OUT_MIN_BYTES } from '../decode/v2-body';
import type { Cut } from '../infer/framed-message';
import { decodeDeclarative } from '../decode/dialects/declarative';
import { decodeV1Predict, type V1Decoded } from '../decode/dialects/v1-predict';
import { encodeDeclarative } from '../encode/declarative';
import { encodeV1Predict } from '../encode/v1-predict';
import type { Ledger } from '../infer/ledger';
import type { InferRequest } from '../infer/request';
import type { ModelMetadata } from '../infer/model-metadata';
import { type Body, requestEncoding } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { RequestRecord } from '../telemetry/record';
import type { DataPlane, ResponseMessage } from '../upstream/infer/data-plane';
import type { ModelMetadatas } from '../upstream/control/model-metadata';
import { readInferResponse } from '../infer/answer-reader';
import { jsonAnswerHead, type JsonAnswerHead } from '../encode/json-answer-head';
import type { OutgoingHttpHeaders } from 'node:http';
import type { Base64Staging } from '../decode/base64/base64-staging';
import { callCutOut, callModelInfer, evictOnNotFound, framer, readWholeBody, releaseStaged, stagingFor, startLedger, writeAnswer } from './steps';

/** What V1 predict runs on: the data plane, and the configuration the steps read. */
export interface V1Plan extends Readonly<Pick<Config, 'upstream' | 'limits' | 'telemetry'>> {
  readonly dataPlane: DataPlane;
  readonly metadata: ModelMetadatas;
}

/** POST …:predict: metadata → read body → decodeV1Predict → ModelInfer → encodeV1Predict. */
export async function v1Predict(ctx: RequestContext, deps: V1Plan): Promise<void> {
  const name = ctx.params[0]!;
  const version = ctx.params[1] ?? '';
  const ledger = startLedger(ctx, version);
  ctx.record.encoding = 'v1'; // v1_base64 once decoding finds base64 rows
  const md = await deps.metadata.get(name, version, ctx.signal);
  const encoding = requestEncoding(ctx.req);
  const staging = stagingFor(ctx, deps.limits, encoding);
  const body = await readWholeBody(ctx, ledger, deps.limits, encoding, staging);

  const decoded = decodeV1Body(ctx.record, ledger, body, staging, { name, version, inputs: md.inputs }, deps.limits.maxInputSizeBytes);
  const cutOut = deps.upstream.cutThrough && deps.dataPlane.startModelInfer !== undefined;
  const framed = frameV1(ctx, ledger, decoded, body.length, cutOut ? CUT_OUT_MIN_BYTES : Infinity);

  const answer = await (framed.cuts.length === 0
    ? callModelInfer(ctx, deps.dataPlane, framed.message, deps.upstream.timeoutMs, ledger)
    : callCutOut(ctx, deps.dataPlane, framed, deps.upstream.timeoutMs, ledger))
    .catch((err: unknown) => {
      throw evictOnNotFound(err, () => deps.metadata.evict(name));
    });

  const out = encodeV1Answer(ledger, answer, decoded.row);
  ctx.record.encodingOut = 'json';
  await writeAnswer(ctx, ledger, { 'Content-Type': 'application/json' }, [out], deps.telemetry.serverTiming);
}

type V1Model = Parameters<typeof decodeV1Predict>[1];

/**
 * A V1 predict body, decoded (framed by frameAndFill); `staging` (steps.ts stagingFor) saw it
 * arrive. Its staged reading is used when it reads; otherwise the whole body is (the whole-body
 * reading alone gives the answers for bad bodies). Starts decode; records the request form.
 */
export function decodeV1Body(record: RequestRecord, ledger: Ledger, body: Body, staging: Base64Staging | undefined, model: V1Model,
  maxInputSizeBytes: number): V1Decoded & { readonly text?: StagedBody } {
  ledger.start('decode');
  const staged = staging?.end((nonce, i) => `\\u0000tg-${nonce}-${i}`);
  let decoded = staged === undefined ? undefined : decodeStaged(staged, model, maxInputSizeBytes);
  let gathered = staged === undefined ? 0 : staged.allocated;
  // The staging (its text left and the decoded payloads) and, when its reading fails, the gathered
  // body; then each base64 payload byte once into its slot: a copy each.
  if (staged !== undefined) ledger.copied('decode', staged.copied);
  if (decoded === undefined) {
    const text = Buffer.concat(body.chunks, body.length).toString('utf8');
    decoded = decodeV1Predict(text, model, maxInputSizeBytes);
    gathered++;
    ledger.copied('decode', body.length);
  }
  record.encoding = decoded.base64 ? 'v1_base64' : 'v1';
  ledger.allocated('decode', gathered);
  return staged === undefined ? decoded : releasingStaged(decoded, staged);
}

/**
 * `decoded` whose fill() gives the staging buffers (ours) back once their bytes are in the message
 * (steps.ts); those of a staged tail the message left out go back once the call is done with them
 * (steps.ts sendCutOut).
 */
function releasingStaged(decoded: V1Decoded, staged: StagedBody): V1Decoded & { readonly text: StagedBody } {
  const release = (slots: Parameters<V1Decoded['fill']>[1]): void => {
    const cut = new Set(decoded.request.inputs.flatMap((t, i) => ((slots[i]?.length ?? t.byteSize) !== t.byteSize ? decoded.stagedTails[i]! : [])));
    for (const b of staged.staged.values()) if (!cut.has(b)) releaseStaged(b);
  };
  return {
    request: decoded.request, row: decoded.row, base64: decoded.base64, stagedTails: decoded.stagedTails, text: staged,
    fill(message, slots) {
      try {
        return decoded.fill(message, slots);
      } finally {
        release(slots);
      }
    },
  };
}

/**
 * The body read from its staged text; undefined — read the whole body — when that fails for any
 * reason or leaves a staged payload unused (the whole-body reading alone gives the answers).
 */
function decodeStaged(staged: StagedBody, model: V1Model, maxInputSizeBytes: number): V1Decoded | undefined {
  const payloads = [...staged.staged.values()];
  const rows = { bytes: new Map(staged.placeholders.map((p, i) => [JSON.parse(`"${p}"`) as string, payloads[i]!])), used: new Set<string>() };
  try {
    const decoded = decodeV1Predict(staged.header.toString('utf8'), model, maxInputSizeBytes, rows);
    return rows.used.size === rows.bytes.size ? decoded : undefined;
  } catch {
    return undefined;
  }
}

/** A declarative route's body, decoded (framed by frameAndFill); starts decode, records the request form. */
export function decodeDeclarativeBody(ctx: RequestContext, ledger: Ledger, body: Body, route: DeclarativeRoute, md: ModelMetadata,
  maxInputSizeBytes: number): V1Decoded {
  ledger.start('decode');
  const text = Buffer.concat(body.chunks, body.length).toString('utf8');
  const decoded = decodeDeclarative(text, route, md, maxInputSizeBytes);
  ctx.record.encoding = decoded.base64 ? 'declarative_base64' : 'declarative';
  ledger.copied('decode', body.length); // gathered
  ledger.allocated('decode');
  return decoded;
}

/** A framed V1 request: the whole message, or (`cuts`) its head and the staged payloads left out of it. */
export interface V1Framed {
  readonly message: Buffer;
  readonly cuts: readonly Cut[];
  readonly payloads: readonly Buffer[];
}

/** Frames the decoded request into a pooled buffer and writes each payload into its slot; ends decode. */
export function frameAndFill(ctx: RequestContext, ledger: Ledger, decoded: V1Decoded, bodyBytes: number): Buffer {
  return frameV1(ctx, ledger, decoded, bodyBytes, Infinity).message;
}

/**
 * frameAndFill, and an input whose last rows were staged, `cutOutMinBytes` or more of them, leaves
 * them out (a data plane that writes a call piece by piece: CUT_OUT_MIN_BYTES, or any for a whole
 * call, v1-planned.ts): the head (not pooled, since the call may read it after the request
 * settled) goes with them (steps.ts sendCutOut, or gathered by reference).
 */
export function frameV1(ctx: Pick<RequestContext, 'buffers'>, ledger: Ledger, decoded: V1Decoded, bodyBytes: number, cutOutMinBytes: number): V1Framed {
  const external = decoded.stagedTails.map((t) => {
    const n = t.reduce((sum, b) => sum + b.length, 0);
    return n > 0 && n >= cutOutMinBytes ? n : 0;
  });
  const framed = framer(ctx, ledger, !external.some((n) => n > 0))(decoded.request, external);
  ledger.copied('decode', decoded.fill(framed.message, framed.slots));
  ledger.end('decode');
  const messageBytes = framed.message.length + framed.cuts.reduce((n, c) => n + c.length, 0);
  ledger.bytes('decode', bodyBytes, messageBytes);
  const payloads = decoded.stagedTails.flatMap((t, i) => (external[i]! > 0 ? t : []));
  return { message: framed.message, cuts: framed.cuts, payloads };
}

/**
 * Triton's answer as V1 `predictions` or `outputs`; records encode. `json`: given the answer's
 * head when the compiled lane can print it (encode/json-answer-head.ts jsonAnswerHead).
 */
export function encodeV1Answer(ledger: Ledger, answer: ResponseMessage, row: boolean, json?: { head?: JsonAnswerHead; headers: OutgoingHttpHeaders }): Buffer {
  ledger.start('encode');
  const response = readInferResponse(answer.chunks);
  const out = encodeV1Predict(response, row);
  if (json !== undefined) json.head = jsonAnswerHead(answer.chunks, response, out, json.headers, true);
  ledger.end('encode');
  ledger.bytes('encode', answer.byteLength, out.length);
  return out;
}

/** Triton's answer in the declarative route's response form; records encode. */
export function encodeDeclarativeAnswer(ledger: Ledger, answer: ResponseMessage, route: DeclarativeRoute, request: InferRequest): Buffer[] {
  ledger.start('encode');
  const parts = encodeDeclarative(readInferResponse(answer.chunks), route, request);
  ledger.end('encode');
  ledger.bytes('encode', answer.byteLength, parts.reduce((n, b) => n + b.length, 0));
  return parts;
}
