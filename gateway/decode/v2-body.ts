// A V2 infer body read whole — JSON, compressed or chunked bodies, or any body when cut-through
// and push decoding do not apply — decoded in one go: the framing from its length
// (decode/framing.ts), then raw (docs/architecture.md#raw-requests) or the JSON header with its JSON data and binary
// section, each payload byte copied once into the framed message.
import type { Cut, Frame, FramedRequest } from '../infer/framed-message';
import type { Ledger } from '../infer/ledger';
import { SlotWriter } from '../infer/slot-writer';
import type { InferRequest } from '../infer/request';
import type { inference } from '../../proto/services';
import type { StagedBody } from './base64/base64-staging';
import { fillBinarySlots, prefixBytes } from './binary-extension';
import { headerLength, jsonTooLarge } from './framing';
import { fillJsonSlots, type InputPlan } from './json-data';
import { frameRawRequest } from './raw-binary';
import { decodeV2Header, refuseBytesClassification } from './v2-header';

export interface WholeBodyOptions {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly config: inference.ModelConfig;
  readonly maxInputSizeBytes: number;
  /** binary.headerless: a JSON object followed by binary_data_size bytes needs no Inference-Header-Content-Length. */
  readonly headerlessBinary: boolean;
}

/**
 * The request form, as metrics and the access log label it (docs/telemetry.md): a JSON body is
 * `json_base64` when any tensor's bytes came from base64 (a numeric tensor as one string, a
 * `{"b64": …}` element, a BYTES input of content_type base64), else `json`.
 */
export type BodyEncoding = 'json' | 'json_base64' | 'binary' | 'raw' | 'multipart';

export interface DecodedBody extends Pick<FramedRequest, 'message'> {
  readonly request: InferRequest;
  readonly encoding: BodyEncoding;
}

/**
 * A staged body, decoded: `message` is the head, without the staged payloads cut out of it
 * (`cuts`, in wire order, as in cut-through: docs/cut-through.md); `payloads` are those bytes,
 * one per cut, still in their staging buffers.
 */
export interface StagedDecodedBody extends DecodedBody {
  readonly cuts: readonly Cut[];
  readonly payloads: readonly Buffer[];
  /** The staged reading it was decoded from. */
  readonly text: StagedBody;
}

/**
 * Staged payloads this large are cut out of the message when asked (a multi-MB staging buffer is
 * then sent as it is, instead of held beside a pooled copy of itself until the answer); smaller
 * ones are copied into the message, whose pooled page is warm (buffers/pool.ts).
 */
export const CUT_OUT_MIN_BYTES = 1024 * 1024;

const NO_EXTERNAL: readonly number[] = [];

/** `base64Bytes`: what fillJsonSlots decoded (an empty `{"b64": ""}` decodes none, but is base64 by its plan). */
function jsonEncoding(plans: readonly InputPlan[], base64Bytes: number): 'json' | 'json_base64' {
  if (base64Bytes > 0) return 'json_base64';
  for (let i = 0; i < plans.length; i++) {
    const p = plans[i]!;
    if (p.kind === 'base64' || p.kind === 'staged' || (p.kind === 'json' && p.base64Strings)) return 'json_base64';
  }
  return 'json';
}

export function decodeWholeBody(chunks: readonly Buffer[], length: number, ihcl: string | string[] | undefined, o: WholeBodyOptions,
  frame: Frame, ledger: Ledger): DecodedBody {
  const given = headerLength(ihcl, length);
  const h = given ?? length;
  if (h === 0) {
    const { request, framed, body } = frameRawRequest({
      config: o.config, modelName: o.modelName, modelVersion: o.modelVersion, bodyBytes: length, maxInputSizeBytes: o.maxInputSizeBytes, external: false,
    }, frame);
    const writer = new SlotWriter(framed.message, [body]);
    for (const c of chunks) writer.write(c);
    ledger.copied('decode', writer.copied);
    return { request, message: framed.message, encoding: 'raw' };
  }
  if (h > o.maxInputSizeBytes) throw jsonTooLarge(h, o.maxInputSizeBytes);
  const header = prefixBytes(chunks, h, ledger);
  const decoded = decodeV2Header(header, 0, h, {
    modelName: o.modelName, modelVersion: o.modelVersion, binaryBytes: length - h, maxInputSizeBytes: o.maxInputSizeBytes,
    headerless: given === undefined && o.headerlessBinary,
  });
  refuseBytesClassification(decoded.request, o.config);
  const framed = frame(decoded.request, NO_EXTERNAL);
  const base64Bytes = fillJsonSlots(header, decoded.plans, decoded.request, framed.slots, framed.message);
  ledger.copied('decode', base64Bytes);
  ledger.copied('decode', fillBinarySlots(chunks, decoded.headerEnd, decoded.plans, framed.slots, framed.message));
  return { request: decoded.request, message: framed.message, encoding: decoded.headerEnd === length ? jsonEncoding(decoded.plans, base64Bytes) : 'binary' };
}

/**
 * A JSON body whose long base64 strings were decoded while it arrived (decode/base64/base64-staging.ts):
 * the short document left is decoded, and each staged tensor copied into its slot (those of
 * `cutOutMinBytes` or more are cut out of the message instead: CUT_OUT_MIN_BYTES where the call is
 * written as the body arrives, every one where it is sent whole, Infinity for none). Undefined —
 * read the whole body instead, with decodeWholeBody — when that reading fails for any reason or
 * leaves a staged string unused: the whole-body path alone gives Triton's answers for bad bodies
 * (rapidjson's offsets count the original text), and it also reads what staging cannot place (a
 * long BYTES element, an id). Nothing is framed before the reading succeeded.
 */
export function decodeStagedBody(staged: StagedBody, o: WholeBodyOptions, frame: Frame, ledger: Ledger,
  cutOutMinBytes = Infinity): StagedDecodedBody | undefined {
  let decoded;
  try {
    decoded = decodeV2Header(staged.header, 0, staged.header.length, {
      modelName: o.modelName, modelVersion: o.modelVersion, binaryBytes: 0, maxInputSizeBytes: o.maxInputSizeBytes, staged: staged.staged,
    });
    refuseBytesClassification(decoded.request, o.config);
  } catch {
    return undefined;
  }
  if (decoded.plans.filter((p) => p.kind === 'staged').length !== staged.staged.size) return undefined;
  const external = cutOutMinBytes === Infinity ? NO_EXTERNAL
    : decoded.plans.map((p) => (p.kind === 'staged' && p.bytes.length >= cutOutMinBytes ? p.bytes.length : 0));
  const framed = frame(decoded.request, external);
  // Staging copied the kept text and decoded the strings; the staged bytes left in the head are
  // copied into their slots, those cut out go upstream from where they were decoded.
  ledger.copied('decode', staged.copied);
  const base64Bytes = fillJsonSlots(staged.header, decoded.plans, decoded.request, framed.slots, framed.message);
  ledger.copied('decode', base64Bytes);
  const payloads = decoded.plans.flatMap((p, i) => (p.kind === 'staged' && (external[i] ?? 0) > 0 ? [p.bytes] : []));
  return { request: decoded.request, message: framed.message, cuts: framed.cuts, payloads, encoding: jsonEncoding(decoded.plans, base64Bytes), text: staged };
}
