// TF-Serving / KServe-V1 predict bodies (`instances` rows or `inputs` columns) turned into a V2
// InferRequest with the model's names, datatypes and shapes from Triton's metadata (README
// "TF-Serving / KServe-V1"). One input: bare values (or an object keyed by its name); several:
// objects keyed by input name. Rows are stacked on dim 0; a columnar value's outer array is that
// same dim. `{"b64": …}` is one BYTES element, or the raw little-endian bytes of a numeric row.
//
// The body is small-valued JSON from legacy clients and goes through JSON.parse: base64 payloads
// stay JS strings until they are decoded once, straight into their slot.
import { isObject } from '../../config/problems';
import { GatewayError } from '../../errors';
import { type Datatype, elementSize, isDatatype, writeNumberElement } from '../../infer/datatype';
import type { InferRequest, InputTensor } from '../../infer/request';
import { base64Size, writeBase64 } from '../base64/base64';
import { MAX_CONTAINER_DEPTH, nestedTooDeepAt } from '../../json/reader';
import { refuseShapeBeyondInt32 } from '../tensor-shape';

interface TensorSpec {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
}

export interface V1Decoded {
  readonly request: InferRequest;
  /** `instances` (row format): the answer is `predictions` split on dim 0. */
  readonly row: boolean;
  /** Some tensor bytes come from base64 (`{"b64": …}` rows or elements, base64 fields of a declarative route). */
  readonly base64: boolean;
  /**
   * Each input's last rows that were decoded while the body arrived (decode/base64/base64-staging.ts), in
   * order: what a message may leave out (its cut) and send from where they are.
   */
  readonly stagedTails: readonly (readonly Buffer[])[];
  /**
   * Writes every input into its slot — up to the slot's length, when a slot is shorter than the
   * input (its staged tail cut out); returns the bytes decoded from base64.
   */
  fill(message: Buffer, slots: readonly ({ readonly offset: number; readonly length?: number } | undefined)[]): number;
}

const bad = (msg: string): GatewayError => new GatewayError('GW_ERR_DECODE_V1_INVALID', msg);

type B64 = { readonly b64: string };
const isB64 = (v: unknown): v is B64 => isObject(v) && typeof v.b64 === 'string';

/**
 * A value for a message: JSON, cut short. Never throws: a leaf may be an object nested thousands
 * deep, where JSON.stringify overflows the stack.
 */
export function preview(v: unknown): string {
  if (typeof v === 'object' && v !== null) return Array.isArray(v) ? 'an array' : 'an object';
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 64 ? `${s.slice(0, 64)}…` : s;
}

/** A rectangular nested array: its shape and leaves in row-major order (no recursion: any depth). */
function flatten(v: unknown, name: string): { shape: number[]; leaves: unknown[] } {
  const shape: number[] = [];
  for (let x = v; Array.isArray(x); x = x[0]) shape.push(x.length);
  const leaves: unknown[] = [];
  const ragged = (): GatewayError => bad(`input '${name}': ragged nested arrays (all rows must have the same shape)`);
  // Depth-first, in order: a stack of arrays and the index of the next element of each.
  if (shape.length === 0) {
    leaves.push(v);
    return { shape, leaves };
  }
  const arrays: unknown[][] = [v as unknown[]];
  const next: number[] = [0];
  while (arrays.length > 0) {
    const depth = arrays.length - 1;
    const a = arrays[depth]!;
    if (a.length !== shape[depth]) throw ragged();
    const i = next[depth]!;
    if (i === a.length) {
      arrays.pop();
      next.pop();
      continue;
    }
    next[depth] = i + 1;
    const x = a[i];
    if (depth + 1 === shape.length) {
      if (Array.isArray(x)) throw ragged();
      leaves.push(x);
    } else {
      if (!Array.isArray(x)) throw ragged();
      arrays.push(x);
      next.push(0);
    }
  }
  return { shape, leaves };
}

/** The row shape: the model's own dims when the row fits them (resolving one -1), else the value's. */
function rowShape(modelDims: readonly number[], count: number, valueShape: readonly number[]): number[] {
  const fixed = modelDims.filter((d) => d >= 0).reduce((a, b) => a * b, 1);
  const free = modelDims.filter((d) => d < 0).length;
  if (free === 0 && fixed === count) return [...modelDims];
  if (free === 1 && fixed > 0 && count % fixed === 0) return modelDims.map((d) => (d < 0 ? count / fixed : d));
  return [...valueShape];
}

interface Built {
  readonly input: InputTensor;
  readonly base64: boolean;
  /** The last parts, when they are staged rows. */
  readonly stagedTail: readonly Buffer[];
  /** Writes the parts from `at`, those that begin before `end`. */
  write(message: Buffer, at: number, end: number): number;
}

/**
 * Row payloads decoded while the body arrived (decode/base64/base64-staging.ts), by the placeholder text
 * their `b64` string became; `used` collects the ones taken.
 */
export interface StagedRows {
  readonly bytes: ReadonlyMap<string, Buffer>;
  readonly used: Set<string>;
}

function buildInput(spec: TensorSpec, rows: readonly unknown[], maxInputSizeBytes: number, staged?: StagedRows): Built {
  const { name, datatype } = spec;
  if (!isDatatype(datatype)) throw bad(`input '${name}': unsupported datatype ${datatype}`);
  const size = elementSize(datatype);
  const modelRow = spec.shape.slice(1);
  let perRow: number[] | undefined;
  const parts: RowPart[] = [];
  let byteSize = 0;
  let base64 = false;
  rows.forEach((row, r) => {
    let shape: number[];
    const stagedRow = isB64(row) && datatype !== 'BYTES' ? staged?.bytes.get(row.b64) : undefined;
    if (stagedRow !== undefined) {
      staged!.used.add((row as B64).b64);
      const bytes = stagedRow.length;
      if (bytes % size !== 0) throw bad(`input '${name}' row ${r}: ${bytes} bytes is not a whole number of ${datatype} elements`);
      shape = rowShape(modelRow, bytes / size, [bytes / size]);
      parts.push({ kind: 'staged', staged: stagedRow });
      byteSize += bytes;
      base64 = true;
    } else if (isB64(row) && datatype !== 'BYTES') {
      const text = Buffer.from(row.b64, 'latin1');
      const bytes = base64Size(text, 0, text.length, `input '${name}' row ${r}`);
      if (bytes % size !== 0) throw bad(`input '${name}' row ${r}: ${bytes} bytes is not a whole number of ${datatype} elements`);
      shape = rowShape(modelRow, bytes / size, [bytes / size]);
      parts.push({ kind: 'b64', text, bytes });
      byteSize += bytes;
      base64 = true;
    } else {
      const f = flatten(row, name);
      shape = rowShape(modelRow, f.leaves.length, f.shape);
      parts.push({ kind: 'leaves', leaves: f.leaves });
      if (datatype === 'BYTES') {
        for (const leaf of f.leaves) {
          byteSize += 4 + bytesLeafSize(leaf, name);
          base64 ||= isB64(leaf);
        }
      } else byteSize += f.leaves.length * size;
    }
    if (perRow !== undefined && perRow.join() !== shape.join()) {
      throw bad(`input '${name}': rows have different shapes ([${perRow.join(',')}] and [${shape.join(',')}])`);
    }
    perRow = shape;
  });
  if (byteSize > maxInputSizeBytes) {
    throw new GatewayError('GW_ERR_DECODE_TOO_LARGE', `input '${name}' has a byte size of ${byteSize} bytes, over limits.maxInputSizeBytes (${maxInputSizeBytes})`);
  }
  const input: InputTensor = { name, datatype, shape: [rows.length, ...(perRow ?? [])], parameters: new Map(), byteSize };
  refuseShapeBeyondInt32(name, input.shape, 'GW_ERR_DECODE_V1_INVALID');
  const stagedTail: Buffer[] = [];
  for (let i = parts.length - 1; i >= 0; i--) {
    const part = parts[i]!;
    if (part.kind !== 'staged') break;
    stagedTail.unshift(part.staged);
  }
  return {
    input,
    base64,
    stagedTail,
    write: (message, at, end) => writeRows(parts, datatype, name, message, at, end),
  };
}

/** One row of an input as the body gave it: base64 text, bytes staged while it arrived, or its leaves. */
type RowPart = { kind: 'b64'; text: Buffer; bytes: number } | { kind: 'staged'; staged: Buffer } | { kind: 'leaves'; leaves: unknown[] };

/** Writes an input's rows from `at` (those that begin before `end`); returns the bytes base64 decoded. */
function writeRows(parts: readonly RowPart[], datatype: Datatype, name: string, message: Buffer, at: number, end: number): number {
  const size = elementSize(datatype);
  let decoded = 0;
  parts.forEach((part, r) => {
    if (at >= end) return;
    if (part.kind === 'staged') {
      decoded += part.staged.copy(message, at);
      at += part.staged.length;
      return;
    }
    if (part.kind === 'b64') {
      decoded += writeBase64(part.text, 0, part.text.length, message, at, part.bytes, `input '${name}' row ${r}`);
      at += part.bytes;
      return;
    }
    for (const leaf of part.leaves) {
      if (datatype === 'BYTES') {
        const n = bytesLeafSize(leaf, name);
        message.writeUInt32LE(n, at);
        if (isB64(leaf)) {
          const text = Buffer.from(leaf.b64, 'latin1');
          decoded += writeBase64(text, 0, text.length, message, at + 4, n, `input '${name}'`);
        } else message.write(String(leaf), at + 4, n, 'utf8');
        at += 4 + n;
      } else {
        writeNumber(datatype, leaf, name, message, at);
        at += size;
      }
    }
  });
  return decoded;
}

function bytesLeafSize(leaf: unknown, name: string): number {
  if (isB64(leaf)) {
    const text = Buffer.from(leaf.b64, 'latin1');
    return base64Size(text, 0, text.length, `input '${name}'`);
  }
  if (typeof leaf !== 'string') throw bad(`input '${name}': BYTES values must be strings or {"b64": …}, got ${preview(leaf)}`);
  return Buffer.byteLength(leaf, 'utf8');
}

function writeNumber(datatype: string, v: unknown, name: string, out: Buffer, at: number): void {
  if (datatype === 'BOOL') {
    if (typeof v !== 'boolean' && typeof v !== 'number') throw bad(`input '${name}': BOOL values must be booleans, got ${preview(v)}`);
    out[at] = v ? 1 : 0;
    return;
  }
  if (typeof v !== 'number') throw bad(`input '${name}': ${datatype} values must be numbers (or the row as {"b64": …}), got ${preview(v)}`);
  const float = datatype === 'FP32' || datatype === 'FP64';
  const written = isDatatype(datatype) && datatype !== 'FP16' && datatype !== 'BF16' && datatype !== 'BYTES';
  if (!written) throw bad(`input '${name}': ${datatype} values can only be sent as {"b64": …} rows`);
  if (!float && !Number.isInteger(v)) throw bad(`input '${name}': ${datatype} values must be integers, got ${v}`);
  writeNumberElement(datatype, v, out, at);
}

/** The values of each model input, as rows. */
function rowsByInput(body: Record<string, unknown>, inputs: readonly TensorSpec[]): { rows: Map<string, unknown[]>; row: boolean } {
  const rows = new Map<string, unknown[]>(inputs.map((i) => [i.name, []]));
  const keyed = (v: unknown): v is Record<string, unknown> => isObject(v) && !isB64(v);
  if ('instances' in body) {
    const instances = body.instances;
    if (!Array.isArray(instances)) throw bad("'instances' must be a list of rows");
    if (instances.length === 0) throw bad("'instances' is empty");
    for (const inst of instances) {
      if (inputs.length === 1 && !(keyed(inst) && inputs[0]!.name in inst)) {
        rows.get(inputs[0]!.name)!.push(inst);
        continue;
      }
      if (!keyed(inst)) throw bad(`the model has ${inputs.length} inputs: each instance must be an object keyed by input name`);
      for (const i of inputs) {
        if (!(i.name in inst)) throw bad(`instance without input '${i.name}'`);
        rows.get(i.name)!.push(inst[i.name]);
      }
    }
    return { rows, row: true };
  }
  if ('inputs' in body) {
    const cols = body.inputs;
    const columns: Record<string, unknown> = inputs.length === 1 && !(keyed(cols) && inputs[0]!.name in cols)
      ? { [inputs[0]!.name]: cols } : (cols as Record<string, unknown>);
    if (!keyed(columns)) throw bad(`the model has ${inputs.length} inputs: 'inputs' must be an object keyed by input name`);
    for (const i of inputs) {
      if (!(i.name in columns)) throw bad(`'inputs' without input '${i.name}'`);
      const v = columns[i.name];
      rows.set(i.name, Array.isArray(v) ? v : [v]);
    }
    return { rows, row: false };
  }
  throw bad("the body must have 'instances' (row format) or 'inputs' (columnar format)");
}

export function decodeV1Predict(
  text: string, model: { name: string; version: string; inputs: readonly TensorSpec[] }, maxInputSizeBytes: number, staged?: StagedRows,
): V1Decoded {
  const deep = nestedTooDeepAt(text);
  if (deep >= 0) throw bad(`the body nests deeper than ${MAX_CONTAINER_DEPTH} arrays/objects (at offset ${deep})`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw bad(`invalid JSON: ${(err as Error).message}`);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw bad('the body must be a JSON object');
  return decodeV1Object(body as Record<string, unknown>, model, maxInputSizeBytes, staged);
}

/** A parsed V1 body (`instances` or `inputs`); declarative routes build one from their fields. */
export function decodeV1Object(
  body: Record<string, unknown>, model: { name: string; version: string; inputs: readonly TensorSpec[] }, maxInputSizeBytes: number,
  staged?: StagedRows,
): V1Decoded {
  const { rows, row } = rowsByInput(body, model.inputs);
  const built = model.inputs.map((spec) => buildInput(spec, rows.get(spec.name)!, maxInputSizeBytes, staged));
  return {
    request: {
      modelName: model.name, modelVersion: model.version, id: undefined, parameters: new Map(),
      inputs: built.map((b) => b.input), outputs: undefined, binaryDataOutput: true,
    },
    row,
    base64: built.some((b) => b.base64),
    stagedTails: built.map((b) => b.stagedTail),
    fill(message, slots) {
      let decoded = 0;
      built.forEach((b, i) => {
        const slot = slots[i]!;
        decoded += b.write(message, slot.offset, slot.offset + (slot.length ?? b.input.byteSize!));
      });
      return decoded;
    },
  };
}
