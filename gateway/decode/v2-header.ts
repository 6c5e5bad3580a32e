// The V2 inference request header — the whole body in JSON mode, the first
// Inference-Header-Content-Length bytes in binary-extension mode — checked in Triton's order
// with Triton's messages and statuses (docs/architecture.md#json-bodies): id → parameters → each input in order
// (content kind, name, datatype, shape, binary slice or JSON data) → leftover binary bytes →
// outputs. Model-dependent checks (datatype, shape and byte size against the config) are Triton's
// own and come back over gRPC unchanged.
import { GatewayError } from '../errors';
import { INT64_MAX } from '../infer/datatype';
import { type InferRequest, type InputTensor, NO_PARAMETERS, type ParamValue, type RequestedOutput } from '../infer/request';
import { inference } from '../../proto/services';
import { type InputPlan, jsonInput } from './json-data';
import { type DecodedHeader, type HeaderContext, readKnownHeader } from './v2-header-known';
import { refuseShapeBeyondInt32 } from './tensor-shape';
import { type NumberValue, readNumber } from '../json/number-parse';
import { type JsonArray, type JsonExtent, type JsonNode, type JsonObject, JsonSyntaxError, member, NOT, parseJson } from '../json/reader';

export type { DecodedHeader, HeaderContext } from './v2-header-known';

const malformed = (msg: string): GatewayError => new GatewayError('GW_ERR_DECODE_MALFORMED', msg);
const invalid = (msg: string): GatewayError => new GatewayError('GW_ERR_DECODE_INVALID', msg);

const missing = (key: string): string => `attempt to access non-existing object member '${key}'`;

/** Request-level parameters the gateway consumes instead of forwarding. */
interface RequestFlags {
  binaryDataOutput: boolean;
  /** `content_type: "base64"`: string elements of every BYTES input are base64. */
  base64Inputs: boolean;
  /** `output_content_type: "base64"`: outputs not asked for otherwise are rendered as base64. */
  base64Output: boolean;
}

/** A `content_type` parameter that says base64 (MLServer's convention). */
function isBase64(v: JsonNode | undefined): boolean {
  return v?.kind === 'string' && v.value === 'base64';
}

const scratch: NumberValue = { integer: false, value: 0, big: undefined, negative: false };

export function decodeV2Header(body: Uint8Array, start: number, end: number, ctx: HeaderContext): DecodedHeader {
  return readKnownHeader(body, start, end, ctx) ?? readV2Header(body, start, end, ctx);
}

/**
 * decodeV2Header on the generic JSON tree (json/reader.ts): every header the known-shape reader
 * hands back, and the reference it is fuzzed against (test/fuzz/v2-header.test.ts).
 */
export function readV2Header(body: Uint8Array, start: number, end: number, ctx: HeaderContext): DecodedHeader {
  let root: JsonNode;
  const extent: JsonExtent | undefined = ctx.headerless === true ? { rootEnd: end, trailing: undefined } : undefined;
  try {
    root = parseJson(body, start, end, extent);
  } catch (err) {
    if (err instanceof JsonSyntaxError) throw malformed(`failed to parse the request JSON buffer: ${err.message}`);
    throw err;
  }
  let headerEnd = end;
  let binaryBytes = ctx.binaryBytes;
  if (extent !== undefined && extent.rootEnd < end) {
    const found = headerlessBinary(body, root, extent.rootEnd, end);
    if (found === undefined) {
      if (extent.trailing !== undefined) throw malformed(`failed to parse the request JSON buffer: ${extent.trailing.message}`);
    } else {
      headerEnd = found;
      binaryBytes = end - found;
    }
  }
  const obj = root.kind === 'object' ? root : undefined;
  const get = (key: string): JsonNode | undefined => (obj === undefined ? undefined : member(obj, key));

  // id
  let id: string | undefined;
  const idNode = get('id');
  if (idNode !== undefined) {
    if (idNode.kind !== 'string') throw malformed(`Unable to parse 'id': ${NOT.string}`);
    id = idNode.value;
  }

  // parameters
  let parameters: Map<string, ParamValue> | undefined;
  const flags: RequestFlags = { binaryDataOutput: false, base64Inputs: false, base64Output: false };
  const paramsNode = get('parameters');
  if (paramsNode !== undefined) {
    if (paramsNode.kind !== 'object') throw malformed('failed to get request params.: attempt to get members for non-object');
    for (let i = 0; i < paramsNode.members.length; i++) {
      const key = paramsNode.members[i]!.key;
      const v = member(paramsNode, key)!; // rapidjson finds the first member of that name
      requestParameter(body, key, v, parameters ??= new Map<string, ParamValue>(), flags);
    }
  }

  // inputs
  const inputsNode = get('inputs');
  if (inputsNode === undefined) throw malformed(`Unable to parse 'inputs': ${missing('inputs')}`);
  if (inputsNode.kind !== 'array') throw malformed(`Unable to parse 'inputs': ${NOT.array}`);
  const inputs: InputTensor[] = [];
  const plans: InputPlan[] = [];
  let binaryLeft = binaryBytes;
  const elements = arrayElements(inputsNode);
  for (let i = 0; i < elements.length; i++) binaryLeft = decodeInput(body, elements[i], ctx, id, flags, binaryLeft, inputs, plans);
  if (binaryLeft > 0) throw invalid(`unexpected additional input data for model '${ctx.modelName}'`);

  // outputs (optional)
  let outputs: RequestedOutput[] | undefined;
  const outputsNode = get('outputs');
  if (outputsNode !== undefined) {
    if (outputsNode.kind !== 'array') throw malformed(`Unable to parse 'outputs': ${NOT.array}`);
    outputs = decodeOutputs(body, outputsNode);
  }

  return {
    request: { modelName: ctx.modelName, modelVersion: ctx.modelVersion, id, parameters: parameters ?? NO_PARAMETERS, inputs, outputs,
      binaryDataOutput: flags.binaryDataOutput, base64Output: flags.base64Output },
    plans,
    headerEnd,
  };
}

/**
 * One element of `inputs`, in Triton's order: its content kind, name, datatype, shape, then its
 * binary slice, shared-memory region or JSON data. Pushed onto `inputs` and `plans`; returns the
 * binary section's bytes not taken yet.
 */
function decodeInput(
  body: Uint8Array, el: JsonNode | undefined, ctx: HeaderContext, id: string | undefined, flags: RequestFlags,
  binaryLeft: number, inputs: InputTensor[], plans: InputPlan[],
): number {
  const params = memberOf(el, 'parameters');

  const hasData = memberOf(el, 'data') !== undefined;
  const hasBinary = memberOf(params, 'binary_data_size') !== undefined;
  const hasShm = memberOf(params, 'shared_memory_region') !== undefined;
  const setCount = Number(hasData) + Number(hasBinary) + Number(hasShm);
  if (setCount !== 1) {
    let msg = "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
      + "'shared_memory_region' in 'parameters'. But";
    if (setCount === 0) msg += ' no field is set';
    else msg += ` set${hasData ? " 'data'" : ''}${hasBinary ? " 'binary_data_size'" : ''}${hasShm ? " 'shared_memory_region'" : ''}`;
    throw invalid(msg);
  }

  const name = stringMember(el, 'name');
  const datatype = stringMember(el, 'datatype');
  const shapeNode = memberOf(el, 'shape');
  if (shapeNode === undefined) throw malformed(`Unable to parse 'shape': ${missing('shape')}`);
  if (shapeNode.kind !== 'array') throw malformed(`Unable to parse 'shape': ${NOT.array}`);
  const shape = readShape(body, shapeNode);

  // Triton adds the input to its request here; a repeated name is refused at once.
  if (named(inputs, name)) throw invalid(`[request id: ${id === undefined || id === '' ? '<id_unknown>' : id}] input '${name}' already exists in request`);

  let forwarded = NO_PARAMETERS;
  let byteSize: number | undefined;
  let plan: InputPlan;
  if (hasBinary) {
    const size = memberOf(params, 'binary_data_size')!;
    const n = uintValue(body, size);
    if (n === undefined) throw malformed(`Unable to parse 'binary_data_size': ${NOT.uint}`);
    if (n === 0n) {
      byteSize = 0;
      plan = { kind: 'empty' };
    } else {
      // Bytes are taken in input order; too few is Triton's "expecting N additional bytes".
      if (n > BigInt(binaryLeft)) {
        throw invalid(`unexpected size for input '${name}', expecting ${n - BigInt(binaryLeft)} additional bytes for model '${ctx.modelName}'`);
      }
      binaryLeft -= Number(n);
      byteSize = Number(n);
      plan = { kind: 'binary' };
    }
  } else if (hasShm) {
    forwarded = sharedMemoryParameters(body, params, new Map());
    plan = { kind: 'shm' };
  } else {
    const r = jsonInput(body, memberOf(el, 'data')!, name, datatype, shape, ctx, flags.base64Inputs || isBase64(memberOf(params, 'content_type')));
    byteSize = r.byteSize;
    plan = r.plan;
  }
  // After Triton's own checks of the input, so their messages come first.
  refuseShapeBeyondInt32(name, shape);
  inputs.push({ name, datatype, shape, parameters: forwarded, byteSize });
  plans.push(plan);
  return binaryLeft;
}

/** The elements of `outputs`: each one's parameters checked as Triton does; a repeated name kept once. */
function decodeOutputs(body: Uint8Array, outputsNode: JsonArray): RequestedOutput[] {
  const outputs: RequestedOutput[] = [];
  const elements = arrayElements(outputsNode);
  for (let i = 0; i < elements.length; i++) {
    const el = elements[i];
    const params = memberOf(el, 'parameters');
    const shm = memberOf(params, 'shared_memory_region') !== undefined;
    if (shm && memberOf(params, 'classification') !== undefined) {
      throw invalid("Output can't set both 'shared_memory_region' and 'classification'");
    }
    if (shm && memberOf(params, 'binary_data') !== undefined) {
      const b = memberOf(params, 'binary_data')!;
      if (b.kind !== 'bool') throw malformed(`Unable to set 'binary_data': ${NOT.bool}`);
      if (b.value) throw invalid("Output can't set both 'shared_memory_region' and 'binary_data'");
    }
    const name = stringMember(el, 'name');
    // Triton 2.51 keeps the first of repeated output names and answers it once.
    const repeated = named(outputs, name);
    let forwarded: Map<string, ParamValue> | undefined;
    const cls = memberOf(params, 'classification');
    if (cls !== undefined) {
      const k = uintValue(body, cls);
      if (k === undefined) throw malformed(`Unable to set 'classification': ${NOT.uint}`);
      if (k > 0n) (forwarded = new Map()).set('classification', { type: 'int64', value: BigInt.asIntN(64, k) });
    }
    if (shm) forwarded = sharedMemoryParameters(body, params, forwarded ?? new Map<string, ParamValue>());
    let binary: boolean | undefined;
    if (!shm) {
      const b = memberOf(params, 'binary_data');
      if (b !== undefined) {
        if (b.kind !== 'bool') throw malformed(`Unable to parse 'binary_data': ${NOT.bool}`);
        binary = b.value;
      }
    }
    const base64 = shm ? undefined : isBase64(memberOf(params, 'content_type')) || undefined;
    if (!repeated) outputs.push({ name, parameters: forwarded ?? NO_PARAMETERS, binary, sharedMemory: shm, base64 });
  }
  return outputs;
}

/**
 * The start of the binary section of a header-less binary body whose JSON root ends at `rootEnd`,
 * or undefined when it is not one: no input declares binary_data_size, or only blanks and NULs
 * follow the root (Triton's reading stands then). The section is the last Σ binary_data_size bytes
 * when only blanks come between the root and them, else it starts right after the root (and the
 * size checks give Triton's "expecting N additional bytes" / "unexpected additional input data").
 */
function headerlessBinary(body: Uint8Array, root: JsonNode, rootEnd: number, end: number): number | undefined {
  if (root.kind !== 'object') return undefined;
  const inputs = member(root, 'inputs');
  if (inputs?.kind !== 'array') return undefined;
  let declared = false;
  let sum = 0;
  for (let i = 0; i < inputs.containers.length; i++) {
    const el = inputs.containers[i]!;
    const params = el.kind === 'object' ? member(el, 'parameters') : undefined;
    const size = params?.kind === 'object' ? member(params, 'binary_data_size') : undefined;
    if (size === undefined) continue;
    declared = true;
    const n = uintValue(body, size);
    if (n !== undefined) sum += Number(n);
  }
  if (!declared || sum === 0) return undefined;
  const isBlank = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
  let p = rootEnd;
  while (p < end && (isBlank(body[p]!) || body[p] === 0)) p++;
  if (p === end && sum > end - rootEnd) return undefined;
  const from = end - sum;
  if (from >= rootEnd) {
    let q = rootEnd;
    while (q < from && isBlank(body[q]!)) q++;
    if (q === from) return from;
  }
  return rootEnd;
}

/** Whether one of `tensors` (a few, in the order given) is named `name`. */
function named(tensors: readonly { readonly name: string }[], name: string): boolean {
  for (let i = 0; i < tensors.length; i++) if (tensors[i]!.name === name) return true;
  return false;
}

/** The elements of an array node, scalars as undefined (they are never inputs or outputs). */
function arrayElements(a: JsonArray): readonly (JsonObject | JsonArray | undefined)[] {
  if (a.containers.length === a.length) return a.containers;
  // Mixed scalars and containers only happen in malformed requests; order is not recoverable
  // without a re-read, and Triton's answer is the same for any non-object element.
  return [...a.containers, ...Array<undefined>(a.length - a.containers.length)];
}

/** The member `key` of `o` when it is an object (rapidjson's first of that name), else undefined. */
function memberOf(o: JsonNode | undefined, key: string): JsonNode | undefined {
  return o?.kind === 'object' ? member(o, key) : undefined;
}

function stringMember(o: JsonNode | undefined, key: string): string {
  const v = memberOf(o, key);
  if (v === undefined) throw malformed(`Unable to parse '${key}': ${missing(key)}`);
  if (v.kind !== 'string') throw malformed(`Unable to parse '${key}': ${NOT.string}`);
  return v.value;
}

/** A JSON value as rapidjson's GetUint64, or undefined when it is not an unsigned integer. */
function uintValue(body: Uint8Array, v: JsonNode): bigint | undefined {
  if (v.kind !== 'number' || !v.integer) return undefined;
  const n = readNumber(body, v.start, v.end, scratch);
  const big = n.big ?? BigInt(n.value);
  return big >= 0n ? big : undefined;
}

function intValue(body: Uint8Array, v: JsonNode): bigint | undefined {
  if (v.kind !== 'number' || !v.integer) return undefined;
  const n = readNumber(body, v.start, v.end, scratch);
  const big = n.big ?? BigInt(n.value);
  return big <= INT64_MAX ? big : undefined;
}

function readShape(body: Uint8Array, shape: JsonArray): number[] {
  if (shape.containers.length > 0) throw malformed(`Unable to parse 'shape': ${NOT.uint}`);
  const dims: number[] = [];
  // Scalars are not materialised by the reader: walk the array's source range.
  let p = shape.start + 1;
  while (p < shape.end - 1) {
    const c = body[p]!;
    if (c === 0x2c || c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) { p++; continue; }
    let q = p;
    if (c === 0x22) { // a string: skip it, it is an error anyway
      throw malformed(`Unable to parse 'shape': ${NOT.uint}`);
    }
    while (q < shape.end - 1 && body[q] !== 0x2c && body[q] !== 0x20 && body[q] !== 0x0a && body[q] !== 0x0d && body[q] !== 0x09) q++;
    const isNumber = (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x4e || c === 0x49;
    if (!isNumber) throw malformed(`Unable to parse 'shape': ${NOT.uint}`);
    const n = readNumber(body, p, q, scratch);
    if (!n.integer || n.negative && n.value !== 0) throw malformed(`Unable to parse 'shape': ${NOT.uint}`);
    // Triton keeps dims as int64: a uint64 above 2^63-1 wraps negative and is "invalid".
    dims.push(n.big !== undefined ? Number(BigInt.asIntN(64, n.big)) : n.value);
    p = q;
  }
  return dims;
}

function requestParameter(body: Uint8Array, key: string, v: JsonNode, out: Map<string, ParamValue>, flags: RequestFlags): void {
  switch (key) {
    case 'sequence_id': {
      const u = uintValue(body, v);
      if (u !== undefined) out.set(key, { type: 'int64', value: BigInt.asIntN(64, u) }); // Triton casts back to uint64
      else if (v.kind === 'string') out.set(key, { type: 'string', value: v.value });
      else throw malformed(`Unable to parse 'sequence_id': ${NOT.string}`);
      return;
    }
    case 'sequence_start':
    case 'sequence_end':
      if (v.kind !== 'bool') throw malformed(`Unable to parse '${key}': ${NOT.bool}`);
      out.set(key, { type: 'bool', value: v.value });
      return;
    case 'priority': {
      const u = uintValue(body, v);
      if (u === undefined) throw malformed(`Unable to parse 'priority': ${NOT.uint}`);
      out.set(key, { type: 'uint64', value: u });
      return;
    }
    case 'timeout': {
      const u = uintValue(body, v);
      if (u === undefined) throw malformed(`Unable to parse 'timeout': ${NOT.uint}`);
      out.set(key, { type: 'int64', value: BigInt.asIntN(64, u) });
      return;
    }
    case 'binary_data_output':
      // Consumed here: it decides the output kind and is never forwarded (docs/architecture.md#json-bodies).
      if (v.kind !== 'bool') throw malformed(`Unable to parse 'binary_data_output': ${NOT.bool}`);
      flags.binaryDataOutput = v.value;
      return;
    case 'content_type':
    case 'output_content_type':
      // The gateway's own (docs/dialects.md "Base64 in V2 JSON"): consumed when "base64", else
      // forwarded as Triton would.
      if (isBase64(v)) {
        if (key === 'content_type') flags.base64Inputs = true;
        else flags.base64Output = true;
        return;
      }
      break;
    default:
      break;
  }
  if (key.startsWith('triton_')) {
    throw invalid("parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified.");
  }
  if (v.kind === 'string') out.set(key, { type: 'string', value: v.value });
  else if (v.kind === 'bool') out.set(key, { type: 'bool', value: v.value });
  else if (v.kind === 'number') {
    const i = intValue(body, v);
    if (i !== undefined) out.set(key, { type: 'int64', value: i });
    else out.set(key, { type: 'double', value: readNumber(body, v.start, v.end, scratch).value });
  } else {
    throw invalid(`parameter '${key}' has invalid type. It should be either 'int', 'bool', or 'string'.`);
  }
}

/** The shared-memory parameters of `params`, set into `out`, which is returned. */
function sharedMemoryParameters(body: Uint8Array, params: JsonNode | undefined, out: Map<string, ParamValue>): Map<string, ParamValue> {
  const region = memberOf(params, 'shared_memory_region');
  if (region !== undefined) {
    if (region.kind !== 'string') throw malformed(`Unable to parse 'shared_memory_region': ${NOT.string}`);
    out.set('shared_memory_region', { type: 'string', value: region.value });
  }
  for (const key of ['shared_memory_offset', 'shared_memory_byte_size'] as const) {
    const v = memberOf(params, key);
    if (v === undefined) continue;
    const u = uintValue(body, v);
    if (u === undefined) throw malformed(`Unable to parse '${key}': ${NOT.uint}`);
    out.set(key, { type: 'int64', value: BigInt.asIntN(64, u) }); // Triton's gRPC reads these as int64_param
  }
  return out;
}

/**
 * Classification of a BYTES output takes tritonserver 2.51 down (observed: the process exits), so
 * it is refused here with the message Triton gives for other unsupported types.
 */
export function refuseBytesClassification(request: InferRequest, config: inference.IModelConfig): void {
  const outputs = request.outputs;
  if (outputs === undefined) return;
  for (let i = 0; i < outputs.length; i++) {
    const o = outputs[i]!;
    if (!o.parameters.has('classification')) continue;
    const spec = config.output?.find((x) => x.name === o.name);
    if (spec?.data_type === inference.DataType.TYPE_STRING) {
      throw new GatewayError('GW_ERR_DECODE_INVALID', "class result not available for output due to unsupported type 'BYTES'", { plain: true });
    }
  }
}
