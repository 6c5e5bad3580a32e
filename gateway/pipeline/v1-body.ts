// The steps of the routes whose bodies are read with JSON.parse into the V1 decoder's request —
// V1 predict (docs/dialects.md "TF-Serving / KServe-V1") and declarative routes (docs/dialects.md
// "Declarative routes"): the body decoded and framed, each base64 payload byte written once into
// its slot, and the answer encoded. Each step records its hop (decode, encode).
import type { DeclarativeRoute } from '../config/routes';
import type { StagedBody } from '../decode/base64-staging';
import { decodeDeclarative } from '../decode/declarative';
import { decodeV1Predict, type V1Decoded } from '../decode/v1-predict';
import { encodeDeclarative } from '../encode/declarative';
import { encodeV1Predict } from '../encode/v1-predict';
import type { Ledger } from '../infer/ledger';
import type { ModelMetadata } from '../infer/model-metadata';
import type { Body } from '../ingress/body';
import type { RequestContext } from '../ingress/context';
import type { ResponseMessage } from '../upstream/infer/data-plane';
import { readInferResponse } from '../upstream/infer/answer-reader';
import type { Base64Staging } from '../decode/base64-staging';
import { framer, releaseStaged } from './steps';

type V1Model = Parameters<typeof decodeV1Predict>[1];

/**
 * A V1 predict body, decoded (framed by frameAndFill); `staging` (steps.ts stagingFor) saw it
 * arrive. Its staged reading is used when it reads; otherwise the whole body is (the whole-body
 * reading alone gives the answers for bad bodies). Starts decode; records the request form.
 */
export function decodeV1Body(ctx: RequestContext, ledger: Ledger, body: Body, staging: Base64Staging | undefined, model: V1Model,
  maxInputSizeBytes: number): V1Decoded {
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
  ctx.record.encoding = decoded.base64 ? 'v1_base64' : 'v1';
  ledger.allocated('decode', gathered);
  return staged === undefined ? decoded : releasingStaged(decoded, staged);
}

/** `decoded` whose fill() gives the staging buffers (ours) back once their bytes are in the message (steps.ts). */
function releasingStaged(decoded: V1Decoded, staged: StagedBody): V1Decoded {
  const release = (): void => { for (const b of staged.staged.values()) releaseStaged(b); };
  return {
    request: decoded.request, row: decoded.row, base64: decoded.base64,
    fill(message, slots) {
      try {
        return decoded.fill(message, slots);
      } finally {
        release();
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

/** Frames the decoded request into a pooled buffer and writes each payload into its slot; ends decode. */
export function frameAndFill(ctx: RequestContext, ledger: Ledger, decoded: V1Decoded, bodyBytes: number): Buffer {
  const framed = framer(ctx, ledger, true)(decoded.request, []);
  ledger.copied('decode', decoded.fill(framed.message, framed.slots));
  ledger.end('decode');
  ledger.bytes('decode', bodyBytes, framed.message.length);
  return framed.message;
}

/** Triton's answer as V1 `predictions` or `outputs`; records encode. */
export function encodeV1Answer(ledger: Ledger, answer: ResponseMessage, row: boolean): Buffer {
  ledger.start('encode');
  const out = Buffer.from(encodeV1Predict(readInferResponse(answer.chunks), row));
  ledger.end('encode');
  ledger.bytes('encode', answer.byteLength, out.length);
  return out;
}

/** Triton's answer in the declarative route's response form; records encode. */
export function encodeDeclarativeAnswer(ledger: Ledger, answer: ResponseMessage, route: DeclarativeRoute, decoded: V1Decoded): Buffer[] {
  ledger.start('encode');
  const parts = encodeDeclarative(readInferResponse(answer.chunks), route, decoded.request);
  ledger.end('encode');
  ledger.bytes('encode', answer.byteLength, parts.reduce((n, b) => n + b.length, 0));
  return parts;
}
