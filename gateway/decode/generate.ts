// The generate extension's request body (docs/architecture.md#generate): a flat JSON
// object whose keys naming a model input are tensors (shape from the model's metadata), "id" is
// the id, and the other keys and the members of "parameters" are request parameters. Built as
// the V2 JSON header the same request would be, so tensor values follow the infer path's
// conversion rules exactly, then framed for ModelStreamInfer.
import { GatewayError } from '../errors';
import type { Frame } from '../infer/framed-message';
import type { ModelMetadata } from '../infer/model-metadata';
import type { InferRequest, ParamValue } from '../infer/request';
import { fillJsonSlots } from './json-data';
import { type JsonNode, JsonSyntaxError, type JsonObject, NOT, parseJson } from '../json/reader';
import { deduceShape } from './tensor-shape';
import { decodeV2Header } from './v2-header';

const PARAM_TYPE = "has invalid type. It should be either 'int', 'bool', or 'string'.";

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
export function decodeGenerate(
  b: Buffer, md: ModelMetadata, modelName: string, modelVersion: string, maxInputSizeBytes: number, frame: Frame,
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
      const shape = deduceShape(spec.shape, count);
      if (shape === undefined) throw invalid(`The schema can not convert input '${key}' to tensor with proper shape`);
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
  const framed = frame(request, []);
  fillJsonSlots(header, decoded.plans, request, framed.slots, framed.message);
  return { request, message: framed.message };
}
