// Bodies of the administrative endpoints (repository, shared memory, trace, logging), read as
// Triton's HTTP frontend reads them: rapidjson's grammar and messages for malformed JSON, an
// empty body allowed, and TritonJson's typed accessors, whose failures Triton reports as
// INTERNAL (500) with TritonJson's own wording (observed on 2.51); the gateway gives the wording
// with 400 (docs/differences.md "Client mistakes are 4xx").
import { GatewayError } from '../../errors';
import { UINT64_MAX } from '../../infer/datatype';
import { type JsonNode, type JsonObject, JsonSyntaxError, member, NOT, numberText, parseJson } from '../../json/reader';

export interface ControlBody {
  readonly bytes: Buffer;
  /** undefined for an empty body. */
  readonly root: JsonNode | undefined;
}

function typeError(message: string): GatewayError {
  return new GatewayError('GW_ERR_DECODE_MALFORMED', message);
}

/**
 * Parses a whole (small) body (ingress/body.ts readControlBody).
 * `allowEmpty`: repository index, load and unload accept an empty body; Triton 2.51's trace,
 * logging and shared-memory register parse it and fail ("The document is empty.", observed).
 */
export function parseControlBody(bytes: Buffer, allowEmpty: boolean): ControlBody {
  if (bytes.length === 0 && allowEmpty) return { bytes, root: undefined };
  try {
    return { bytes, root: parseJson(bytes) };
  } catch (err) {
    if (err instanceof JsonSyntaxError) throw typeError(`failed to parse the request JSON buffer: ${err.message}`);
    throw err;
  }
}

/** TritonJson's Find: a member of an object; nothing for other values. */
export function find(node: JsonNode | undefined, key: string): JsonNode | undefined {
  return node?.kind === 'object' ? member(node, key) : undefined;
}

export function asString(node: JsonNode | undefined): string {
  if (node?.kind !== 'string') throw typeError(NOT.string);
  return node.value;
}

export function asBool(node: JsonNode | undefined): boolean {
  if (node?.kind !== 'bool') throw typeError(NOT.bool);
  return node.value;
}

/** rapidjson's IsUint64: an integer literal in [0, 2^64-1]. */
export function asUInt(body: Uint8Array, node: JsonNode | undefined): bigint {
  if (node?.kind === 'number' && node.integer) {
    const text = numberText(body, node);
    if (/^\d+$/.test(text)) {
      const v = BigInt(text);
      if (v <= UINT64_MAX) return v;
    }
  }
  throw typeError(NOT.uint);
}

export function asObject(node: JsonNode | undefined): JsonObject {
  if (node?.kind !== 'object') throw typeError('attempt to get members for non-object');
  return node;
}

/** The string elements of an array (TritonJson's MemberAsArray + IndexAsString). */
export function asStringArray(body: Uint8Array, node: JsonNode | undefined): string[] {
  if (node?.kind !== 'array') throw typeError(NOT.array);
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8', node.start, node.end));
  } catch {
    values = [null]; // NaN/Infinity literals: not strings either
  }
  const out: string[] = [];
  for (const v of values as unknown[]) {
    if (typeof v !== 'string') throw typeError(NOT.string);
    out.push(v);
  }
  return out;
}
