// A declarative route's JSON body (docs/dialects.md "Declarative routes"): each model input comes from
// the field its JSON Pointer names, decoded as base64 / data: URI / numbers / text. The fields
// become a KServe-V1 columnar body for the model (names, datatypes and shapes from Triton's
// metadata, the route's datatype/shape when given), so batching, shape fitting and the one-copy
// base64 decode are the V1 predict decoder's.
import { type DeclarativeRoute, resolvePointer } from '../../config/routes';
import { GatewayError, isGatewayError } from '../../errors';
import type { ModelMetadata } from '../../infer/model-metadata';
import type { ParamValue } from '../../infer/request';
import { MAX_CONTAINER_DEPTH, nestedTooDeepAt } from '../../json/reader';
import { decodeV1Object, type V1Decoded } from './v1-predict';

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
  switch (spec.decode!) {
    case 'base64':
      return strings('a base64 string', () => true).map((b64) => ({ b64 }));
    case 'data-uri':
      return strings('a data: URI with base64 content', (s) => /^data:[^,]*;base64,/i.test(s)).map((b64) => ({ b64 }));
    case 'text':
      return strings('a string', () => true);
    case 'numbers': {
      let rank = 0;
      for (let x: unknown = v; Array.isArray(x); x = (x as unknown[])[0]) rank++;
      if (!numbersOnly(v)) throw bad(route, key, `${spec.from} must be a number or nested arrays of numbers`);
      // One sample (rank one less than the model's, batch dim included) is one row.
      return rank < modelRank ? [v] : v;
    }
  }
}

/** Numbers and booleans in nested arrays (no recursion: any depth). */
function numbersOnly(v: unknown): boolean {
  const pending: unknown[] = [v];
  while (pending.length > 0) {
    const x = pending.pop();
    if (Array.isArray(x)) for (const y of x) pending.push(y); // not push(...x): an argument list has a bound
    else if (typeof x !== 'number' && typeof x !== 'boolean') return false;
  }
  return true;
}

function parameter(route: DeclarativeRoute, name: string, v: unknown): ParamValue {
  if (typeof v === 'string') return { type: 'string', value: v };
  if (typeof v === 'boolean') return { type: 'bool', value: v };
  if (typeof v === 'number' && Number.isSafeInteger(v)) return { type: 'int64', value: BigInt(v) };
  if (typeof v === 'number') return { type: 'double', value: v };
  throw bad(route, `parameters.${name}`, `${route.parameters.get(name)} must be a string, number or boolean`);
}

/** The body as the V1 decoder's request (its parameters and output form the route's), with its fill. */
export function decodeDeclarative(body: string, route: DeclarativeRoute, md: ModelMetadata, maxInputSizeBytes: number): V1Decoded {
  const deep = nestedTooDeepAt(body);
  if (deep >= 0) throw bad(route, 'body', `nests deeper than ${MAX_CONTAINER_DEPTH} arrays/objects (at offset ${deep})`);
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch (err) {
    throw bad(route, 'body', `invalid JSON: ${(err as Error).message}`);
  }
  const specs = md.inputs.map((m) => {
    const r = route.inputs.get(m.name)!;
    return { name: m.name, datatype: r.datatype ?? m.datatype, shape: r.shape ?? m.shape };
  });
  const columns: Record<string, unknown> = {};
  for (const s of specs) columns[s.name] = column(route, s.name, resolvePointer(doc, route.inputs.get(s.name)!.from!), s.shape.length);
  const parameters = new Map<string, ParamValue>();
  for (const [name, p] of route.parameters) {
    const v = resolvePointer(doc, p);
    if (v !== undefined) parameters.set(name, parameter(route, name, v));
  }
  let decoded;
  try {
    decoded = decodeV1Object({ inputs: columns }, { name: route.model, version: route.version, inputs: specs }, maxInputSizeBytes);
  } catch (err) {
    if (isGatewayError(err) && err.code === 'GW_ERR_DECODE_V1_INVALID') throw bad(route, 'inputs', err.message);
    throw err;
  }
  return { ...decoded, request: { ...decoded.request, parameters, binaryDataOutput: route.response.form !== 'v2' } };
}
