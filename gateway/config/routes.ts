// Declarative routes (docs/dialects.md "Declarative routes"): hand-rolled REST bodies mapped onto a model's
// inputs — JSON fields by JSON Pointers, multipart/form-data parts by field name, or the whole raw
// body. This module checks the `routes` configuration value (syntax, every problem listed by key)
// and, once Triton's metadata is known, the route against the model.
import { type ApiCategory, API_CATEGORIES, isApiCategory } from '../api-access';
import { isDatatype } from '../infer/datatype';
import { normalisePath } from '../passthrough/path';
import { type Bad, isObject, problemsAt } from './problems';

export type DecodeKind = 'base64' | 'data-uri' | 'numbers' | 'text';
export const DECODE_KINDS: readonly DecodeKind[] = ['base64', 'data-uri', 'numbers', 'text'];

export interface RouteInput {
  /** In a JSON body: RFC 6901 JSON Pointer into it, and how its value is read (both or neither). */
  readonly from: string | undefined;
  readonly decode: DecodeKind | undefined;
  /** In a multipart/form-data body: the field name of the part (a file's bytes, a text field's UTF-8). */
  readonly part: string | undefined;
  /** A raw body whose media type matches one of these ranges (lower case) is this input. */
  readonly body: readonly string[] | undefined;
  readonly datatype: string | undefined;
  readonly shape: readonly number[] | undefined;
}

export type RouteResponse =
  | { readonly form: 'v2' }
  | { readonly form: 'v1' }
  /** Output name → JSON Pointer in the answer object. */
  | { readonly form: 'map'; readonly fields: ReadonlyMap<string, string> };

export interface DeclarativeRoute {
  /** Exact request path (POST). */
  readonly path: string;
  readonly model: string;
  readonly version: string;
  /** Model input name → where it comes from. */
  readonly inputs: ReadonlyMap<string, RouteInput>;
  /** Request parameter name → JSON Pointer of the JSON body's field sent as that parameter. */
  readonly parameters: ReadonlyMap<string, string>;
  /** Request parameter name → field name of the multipart text field sent as that parameter (a string). */
  readonly parameterParts: ReadonlyMap<string, string>;
  readonly response: RouteResponse;
  /**
   * The bodies the route takes: JSON when every input has `from`, multipart/form-data when every
   * input has `part`, a raw body of the media ranges of its one input's `body`.
   */
  readonly forms: { readonly json: boolean; readonly multipart: boolean; readonly raw: readonly string[] | undefined };
}

/**
 * Media types a JSON body comes under (none at all, JSON, and the `application/x-www-form-urlencoded`
 * that `curl -d` sends): never a raw body, whatever the ranges say.
 */
export function jsonMediaType(type: string | undefined): boolean {
  return type === undefined || type === 'application/json' || type.endsWith('+json') || type === 'application/x-www-form-urlencoded';
}

/** A media type (decode/framing.ts mediaType) fits a `body` range: type/subtype, type/* or any (RFC 9110 §12.5.1) */
export function matchesMediaRange(ranges: readonly string[], type: string): boolean {
  return ranges.some((r) => r === '*/*' || r === type || (r.endsWith('/*') && type.startsWith(r.slice(0, -1))));
}

const TOKEN = "[!#$%&'*+.^_`|~0-9a-z-]+";
const MEDIA_RANGE = new RegExp(`^(\\*/\\*|${TOKEN}/(\\*|${TOKEN}))$`);
/** A multipart field name: any text but control characters and quotes (RFC 7578 §4.2 puts it in a quoted string). */
const isFieldName = (v: unknown): v is string => typeof v === 'string' && v !== '' && ![...v].some((c) => c === '"' || c.charCodeAt(0) < 0x20 || c === '\x7f');

const isPointer = (v: unknown): v is string => typeof v === 'string' && (v === '' || (v.startsWith('/') && !/~[^01]|~$/.test(v)));

/** The `routes` value checked; problems name `routes[i].<key>`. */
export function parseRoutes(raw: unknown): { value: DeclarativeRoute[] } | { problem: string[] } {
  const problems: string[] = [];
  if (!Array.isArray(raw)) return { problem: ['must be a list of routes'] };
  const out: DeclarativeRoute[] = [];
  const paths = new Set<string>();
  raw.forEach((r: unknown, i) => {
    const bad = problemsAt(problems, `routes[${i}]`);
    if (!isObject(r)) { bad('', 'must be a mapping'); return; }
    for (const k of Object.keys(r)) if (!['path', 'model', 'version', 'inputs', 'parameters', 'response'].includes(k)) bad(k, 'unknown key');
    const path = r.path;
    if (typeof path !== 'string' || !/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/.test(path)) bad('path', `must be an absolute path, got ${JSON.stringify(path)}`);
    else if (/^\/v[12](\/|$)/.test(path)) bad('path', 'must not be under /v1 or /v2 (Triton\'s and the V1 routes)');
    else if (paths.has(path)) bad('path', `${path} is given twice`);
    else paths.add(path);
    if (typeof r.model !== 'string' || r.model === '') bad('model', 'must be a model name');
    const version = r.version === undefined ? '' : typeof r.version === 'number' ? String(r.version) : r.version;
    if (typeof version !== 'string' || !/^[0-9]*$/.test(version)) bad('version', 'must be a version number');

    const parts = new Map<string, string>(); // field name → what it fills, for duplicates
    const inputs = parseInputs(r.inputs, bad, parts);
    const all = [...inputs.values()];
    const forms = {
      json: all.length > 0 && all.every((i) => i.from !== undefined),
      multipart: all.length > 0 && all.every((i) => i.part !== undefined),
      raw: all.length === 1 ? all[0]!.body : undefined,
    };

    const { parameters, parameterParts } = parseParameters(r.parameters, bad, parts, forms);
    const response = parseResponse(r.response, bad);

    out.push({ path: path as string, model: r.model as string, version: version as string, inputs, parameters, parameterParts, response, forms });
  });
  return problems.length > 0 ? { problem: problems } : { value: out };
}

/** A route's `inputs`, each with its sources; `parts` gathers the multipart field names used. */
function parseInputs(raw: unknown, bad: Bad, parts: Map<string, string>): Map<string, RouteInput> {
  const inputs = new Map<string, RouteInput>();
  if (!isObject(raw) || Object.keys(raw).length === 0) bad('inputs', 'must map each model input name to its source (from and decode, part, or body)');
  else {
    const count = Object.keys(raw).length;
    for (const [name, spec] of Object.entries(raw)) {
      const k = (x: string): string => `inputs.${name}${x === '' ? '' : '.' + x}`;
      if (!isObject(spec)) { bad(k(''), 'must be a mapping: from and decode, part, or body'); continue; }
      for (const key of Object.keys(spec)) if (!['from', 'decode', 'part', 'body', 'datatype', 'shape'].includes(key)) bad(k(key), 'unknown key');
      const json = spec.from !== undefined || spec.decode !== undefined;
      if (!json && spec.part === undefined && spec.body === undefined) {
        bad(k(''), 'must say where the input comes from: from (a JSON Pointer) with decode, part (a multipart/form-data field name), or body (media types of a raw body)');
      }
      if (json && !isPointer(spec.from)) bad(k('from'), `must be a JSON Pointer ("/field", "/a/0/b"), got ${JSON.stringify(spec.from)}`);
      if (json && !DECODE_KINDS.includes(spec.decode as DecodeKind)) bad(k('decode'), `must be one of ${DECODE_KINDS.join(', ')}, got ${JSON.stringify(spec.decode)}`);
      if (spec.part !== undefined) {
        if (!isFieldName(spec.part)) bad(k('part'), `must be a multipart/form-data field name (no quotes or control characters), got ${JSON.stringify(spec.part)}`);
        else if (parts.has(spec.part)) bad(k('part'), `the part '${spec.part}' also fills ${parts.get(spec.part)!}`);
        else parts.set(spec.part, `inputs.${name}`);
      }
      let body: string[] | undefined;
      if (spec.body !== undefined) {
        const list = (Array.isArray(spec.body) ? spec.body : [spec.body]) as unknown[];
        body = list.filter((m): m is string => typeof m === 'string').map((m) => m.toLowerCase());
        const wrong = list.find((m) => typeof m !== 'string' || !MEDIA_RANGE.test(m.toLowerCase()));
        if (list.length === 0 || wrong !== undefined) bad(k('body'), `must be a media range (image/jpeg, image/*, */*) or a list of them, got ${JSON.stringify(list.length === 0 ? spec.body : wrong)}`);
        else if (body.some((m) => m !== '*/*' && (jsonMediaType(m) || m.startsWith('multipart/')))) {
          bad(k('body'), `a raw body is not JSON, form-urlencoded or multipart; got ${JSON.stringify(spec.body)} (a JSON body is read with from, a multipart one with part)`);
        } else if (count > 1) bad(k('body'), `a raw body fills one input, and this route has ${count}`);
      }
      if (spec.datatype !== undefined && (typeof spec.datatype !== 'string' || !isDatatype(spec.datatype))) bad(k('datatype'), `unknown datatype ${JSON.stringify(spec.datatype)}`);
      if (spec.datatype === 'BYTES' && spec.decode === 'numbers') bad(k('decode'), 'numbers cannot fill a BYTES input');
      if (spec.datatype !== undefined && spec.datatype !== 'BYTES' && spec.decode === 'text') bad(k('decode'), 'text fills BYTES inputs only');
      if (spec.shape !== undefined && !(Array.isArray(spec.shape) && spec.shape.length > 0 && spec.shape.every((d) => Number.isInteger(d) && d >= -1))) {
        bad(k('shape'), 'must be a non-empty list of dims (integers ≥ -1)');
      }
      inputs.set(name, {
        from: spec.from as string | undefined, decode: spec.decode as DecodeKind | undefined, part: spec.part as string | undefined, body,
        datatype: spec.datatype as string | undefined, shape: spec.shape as number[] | undefined,
      });
    }
    // A body of one form fills every input: an input without a source in a form the route takes
    // would leave the model short.
    for (const [key, form] of [['from', 'a JSON body'], ['part', 'a multipart/form-data body']] as const) {
      const some = [...inputs].find(([, i]) => i[key] !== undefined);
      if (some === undefined) continue;
      for (const [name, i] of inputs) if (i[key] === undefined) bad(`inputs.${name}`, `has no ${key}, and inputs.${some[0]} has one: ${form} must fill every input`);
    }
  }
  return inputs;
}

/** A route's `parameters`: JSON Pointers, or multipart text fields (`parts` gathers them too). */
function parseParameters(raw: unknown, bad: Bad, parts: Map<string, string>, forms: DeclarativeRoute['forms']): {
  parameters: Map<string, string>; parameterParts: Map<string, string>;
} {
  const parameters = new Map<string, string>();
  const parameterParts = new Map<string, string>();
  if (raw !== undefined) {
    if (!isObject(raw)) bad('parameters', 'must map request parameter names to JSON Pointers or {from, part}');
    else {
      for (const [name, p] of Object.entries(raw)) {
        const k = `parameters.${name}`;
        const spec = isObject(p) ? p : { from: p };
        if (isObject(p)) {
          for (const key of Object.keys(p)) if (key !== 'from' && key !== 'part') bad(`${k}.${key}`, 'unknown key');
          if (p.from === undefined && p.part === undefined) bad(k, 'must name a JSON Pointer (from) or a multipart text field (part)');
        }
        const at = isObject(p) ? `${k}.from` : k;
        if (spec.from !== undefined) {
          if (!isPointer(spec.from) || spec.from === '') bad(at, `must be a JSON Pointer, got ${JSON.stringify(spec.from)}`);
          else if (!forms.json) bad(at, 'is a JSON Pointer, and the route takes no JSON body (its inputs have no from)');
          else parameters.set(name, spec.from);
        }
        if (spec.part !== undefined) {
          if (!isFieldName(spec.part)) bad(`${k}.part`, `must be a multipart/form-data field name (no quotes or control characters), got ${JSON.stringify(spec.part)}`);
          else if (!forms.multipart) bad(`${k}.part`, 'the route takes no multipart/form-data body (its inputs have no part)');
          else if (parts.has(spec.part)) bad(`${k}.part`, `the part '${spec.part}' also fills ${parts.get(spec.part)!}`);
          else {
            parts.set(spec.part, k);
            parameterParts.set(name, spec.part);
          }
        }
      }
    }
  }

  return { parameters, parameterParts };
}

/** A route's `response`: v2, v1, or a map of outputs to JSON Pointers. */
function parseResponse(raw: unknown, bad: Bad): RouteResponse {
  if (raw === 'v2' || raw === 'v1' || raw === undefined) return { form: raw ?? 'v2' };
  if (isObject(raw) && isObject(raw.map) && Object.keys(raw).length === 1) {
    const fields = new Map<string, string>();
    for (const [output, p] of Object.entries(raw.map)) {
      if (!isPointer(p) || p === '') bad(`response.map.${output}`, `must be a JSON Pointer, got ${JSON.stringify(p)}`);
      else fields.set(output, p);
    }
    if (Object.keys(raw.map).length === 0) bad('response.map', 'must name at least one output');
    return { form: 'map', fields };
  }
  bad('response', 'must be v2, v1 or {map: {<output>: <JSON Pointer>}}');
  return { form: 'v2' };
}

/** Splits a JSON Pointer into its reference tokens (RFC 6901: ~1 is /, ~0 is ~). */
export function pointerTokens(p: string): string[] {
  return p === '' ? [] : p.slice(1).split('/').map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** The value a pointer designates in a parsed body, or undefined. */
export function resolvePointer(doc: unknown, p: string): unknown {
  let v = doc;
  for (const t of pointerTokens(p)) {
    if (Array.isArray(v) && /^(0|[1-9][0-9]*)$/.test(t)) v = v[Number(t)];
    else if (isObject(v) && Object.prototype.hasOwnProperty.call(v, t)) v = v[t];
    else return undefined;
  }
  return v;
}

interface ModelTensors {
  readonly inputs: readonly { readonly name: string; readonly datatype: string }[];
  readonly outputs: readonly { readonly name: string; readonly datatype: string }[];
}

/** The route checked against Triton's metadata: every problem, naming the route and key. */
export function routeMetadataProblems(route: DeclarativeRoute, md: ModelTensors): string[] {
  const problems: string[] = [];
  const at = (k: string): string => `route ${route.path}: ${k}`;
  for (const [name, spec] of route.inputs) {
    const m = md.inputs.find((x) => x.name === name);
    if (m === undefined) {
      problems.push(`${at(`inputs.${name}`)}: model '${route.model}' has no input '${name}' (inputs: ${md.inputs.map((x) => x.name).join(', ')})`);
      continue;
    }
    if (spec.datatype !== undefined && spec.datatype !== m.datatype) problems.push(`${at(`inputs.${name}.datatype`)}: ${spec.datatype}, but the model's input is ${m.datatype}`);
    if (spec.decode === 'text' && m.datatype !== 'BYTES') problems.push(`${at(`inputs.${name}.decode`)}: text fills BYTES inputs only; '${name}' is ${m.datatype}`);
    if (spec.decode === 'numbers' && m.datatype === 'BYTES') problems.push(`${at(`inputs.${name}.decode`)}: numbers cannot fill the BYTES input '${name}'`);
  }
  for (const m of md.inputs) if (!route.inputs.has(m.name)) problems.push(`${at('inputs')}: the model's input '${m.name}' has no source`);
  if (route.response.form === 'map') {
    for (const output of route.response.fields.keys()) {
      if (!md.outputs.some((x) => x.name === output)) problems.push(`${at(`response.map.${output}`)}: model '${route.model}' has no output '${output}' (outputs: ${md.outputs.map((x) => x.name).join(', ')})`);
    }
  }
  return problems;
}

/**
 * A pass-through route: requests under `prefix` go unchanged to an HTTP upstream
 * (docs/dialects.md "Pass-through routes").
 */
export interface PassthroughRoute {
  /** Path prefix: the path itself and everything below it ("/legacy" matches /legacy, /legacy/x). */
  readonly prefix: string;
  /** Origin of the upstream, e.g. http://legacy:8080 (the path and query are sent unchanged). */
  readonly upstream: string;
  /** Time allowed for the upstream's response headers, and between two body chunks. */
  readonly timeoutMs: number;
  /**
   * The API group the route belongs to (api.restricted, api.disabled, auth). The paths are not
   * Triton's, so the operator says what the upstream does; by default `inference`, what a legacy
   * REST service behind a pass-through mostly serves.
   */
  readonly category: ApiCategory;
}

/** The `passthrough` value checked; problems name `passthrough[i].<key>`. */
export function parsePassthrough(raw: unknown): { value: PassthroughRoute[] } | { problem: string[] } {
  if (!Array.isArray(raw)) return { problem: ['must be a list of {prefix, upstream, timeoutMs?, category?}'] };
  const problems: string[] = [];
  const out: PassthroughRoute[] = [];
  raw.forEach((r: unknown, i) => {
    const bad = problemsAt(problems, `passthrough[${i}]`);
    if (!isObject(r)) { bad('', 'must be a mapping'); return; }
    for (const k of Object.keys(r)) if (!['prefix', 'upstream', 'timeoutMs', 'category'].includes(k)) bad(k, 'unknown key');
    const prefix = typeof r.prefix === 'string' ? r.prefix.replace(/\/+$/, '') : undefined;
    if (prefix === undefined || !/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]+$/.test(prefix)) bad('prefix', `must be an absolute path other than /, got ${JSON.stringify(r.prefix)}`);
    else if (/^\/v[12](\/|$)/.test(prefix)) bad('prefix', 'must not be under /v1 or /v2 (Triton\'s and the V1 routes)');
    else {
      // Requests are matched in their normalised form (passthrough/path.ts): so is the prefix.
      const n = normalisePath(prefix);
      if (!('path' in n) || n.path !== prefix) bad('prefix', `must be a normalised path (no //, . or .. segments, encoded unreserved characters or encoded slashes), got ${JSON.stringify(r.prefix)}${'path' in n ? `; write ${n.path}` : ''}`);
    }
    let origin = '';
    try {
      const u = new URL(String(r.upstream));
      if ((u.protocol !== 'http:' && u.protocol !== 'https:') || (u.pathname !== '/' && u.pathname !== '') || u.search !== '') throw new Error();
      origin = u.origin;
    } catch {
      bad('upstream', `must be an http(s) origin such as http://legacy:8080 (no path), got ${JSON.stringify(r.upstream)}`);
    }
    const timeoutMs = r.timeoutMs ?? 30_000;
    if (!Number.isInteger(timeoutMs) || (timeoutMs as number) < 1) bad('timeoutMs', `must be a positive integer, got ${JSON.stringify(r.timeoutMs)}`);
    const category = r.category ?? 'inference';
    if (typeof category !== 'string' || !isApiCategory(category)) bad('category', `must be an API group (${API_CATEGORIES.join(', ')}), got ${JSON.stringify(r.category)}`);
    out.push({ prefix: prefix ?? '', upstream: origin, timeoutMs: timeoutMs as number, category: category as ApiCategory });
  });
  return problems.length > 0 ? { problem: problems } : { value: out };
}
