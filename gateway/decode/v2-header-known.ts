// The V2 request header read on its known shape, straight into the InferRequest: no generic JSON
// tree, strings only for the values kept (names, datatypes, id), numbers read in place. It takes the
// headers clients send (binary extension and JSON data: id, parameters.binary_data_output, inputs
// of name/datatype/shape and binary_data_size or data, outputs of name and binary_data) and gives
// up on anything else — an escape, a control character, an unknown or repeated key, a number that
// is not a plain integer below 2^53, a BOM, bytes after the root, any refusal — which the generic
// reader then reads (decode/v2-header.ts readV2Header), so every answer and error stays its.
// A fast-json-stringify-style decision: the shape is known up front (docs/architecture.md#json-bodies).
import { type InferRequest, type InputTensor, NO_PARAMETERS, type RequestedOutput } from '../infer/request';
import { type JsonExtent, type JsonNode, parseJsonValue } from '../json/reader';
import { type InputPlan, jsonInput } from './json-data';
import { refuseShapeBeyondInt32 } from './tensor-shape';

/* The header's context and result, shared with decode/v2-header.ts. */
export interface DecodedHeader {
  readonly request: InferRequest;
  /** One per input, aligned with request.inputs. */
  readonly plans: readonly InputPlan[];
  /** Where the binary section starts: `end`, except for a header-less binary body (`headerless`). */
  readonly headerEnd: number;
}

export interface HeaderContext {
  readonly modelName: string;
  readonly modelVersion: string;
  /** Bytes after the header (binary-extension section); 0 in JSON mode. */
  readonly binaryBytes: number;
  /** limits.maxInputSizeBytes: per JSON-decoded input. */
  readonly maxInputSizeBytes: number;
  /**
   * No Inference-Header-Content-Length and binary.headerless on: when the JSON object ends before
   * `end` and an input declares binary_data_size, the rest of the body is the binary section.
   */
  readonly headerless?: boolean;
  /**
   * Base64 strings decoded while the body arrived (decode/base64/base64-staging.ts), by the offset of
   * their opening quote in `body` (whose content was cut out of it).
   */
  readonly staged?: ReadonlyMap<number, Buffer>;
}

/** Thrown to give up: the generic reader takes the header. */
const GIVE_UP = new Error('not of the known shape'); // one instance: throwing it captures no stack

/** The header, or undefined when it is not of the known shape or is refused (readV2Header reads it then). */
export function readKnownHeader(body: Uint8Array, start: number, end: number, ctx: HeaderContext): DecodedHeader | undefined {
  const r = reader;
  r.b = body;
  r.pos = start;
  r.end = end;
  try {
    return r.header(ctx);
  } catch {
    return undefined;
  } finally {
    r.b = EMPTY;
  }
}

const EMPTY = new Uint8Array(0);
const WS = new Uint8Array(256);
WS[0x20] = WS[0x09] = WS[0x0a] = WS[0x0d] = 1;

/** Member names, compared as bytes (a key is never made a string). */
const KEY = {
  id: bytes('id'), parameters: bytes('parameters'), inputs: bytes('inputs'), outputs: bytes('outputs'), name: bytes('name'),
  datatype: bytes('datatype'), shape: bytes('shape'), data: bytes('data'), binaryDataSize: bytes('binary_data_size'),
  binaryData: bytes('binary_data'), binaryDataOutput: bytes('binary_data_output'),
};

function bytes(s: string): Uint8Array {
  return Buffer.from(s, 'latin1');
}

const utf8Slice = (Buffer.prototype as unknown as { utf8Slice: (this: Uint8Array, start: number, end: number) => string }).utf8Slice;

/** Plain unsigned integers of at most this many digits are exact doubles (below 2^53). */
const MAX_DIGITS = 15;
/** Nesting of a `data` array beyond which the generic reader decides (its depth counts from the root). */
const MAX_DATA_DEPTH = 64;

class KnownHeaderReader {
  b: Uint8Array = EMPTY;
  pos = 0;
  end = 0;
  /** The current string token's content [strStart, strEnd), set by str(). */
  strStart = 0;
  strEnd = 0;
  readonly extent: JsonExtent = { rootEnd: 0, trailing: undefined };

  header(ctx: HeaderContext): DecodedHeader {
    let id: string | undefined;
    let seen = 0; // bits: id 1, parameters 2, inputs 4, outputs 8
    let binaryDataOutput = false;
    let inputs: InputTensor[] | undefined;
    let plans: InputPlan[] | undefined;
    let outputs: RequestedOutput[] | undefined;
    this.ws();
    this.open(0x7b);
    do {
      const k = this.key();
      if (this.is(k, KEY.id) && (seen & 1) === 0) {
        seen |= 1;
        id = this.string();
      } else if (this.is(k, KEY.parameters) && (seen & 2) === 0) {
        seen |= 2;
        binaryDataOutput = this.requestParameters();
      } else if (this.is(k, KEY.inputs) && (seen & 4) === 0) {
        seen |= 4;
        inputs = [];
        plans = [];
        this.inputs(ctx, inputs, plans);
      } else if (this.is(k, KEY.outputs) && (seen & 8) === 0) {
        seen |= 8;
        outputs = [];
        this.outputs(outputs);
      } else {
        throw GIVE_UP;
      }
    } while (this.next(0x7d));
    if (ctx.headerless !== true) this.ws();
    if (this.pos !== this.end || inputs === undefined || plans === undefined) throw GIVE_UP;
    return {
      request: {
        modelName: ctx.modelName, modelVersion: ctx.modelVersion, id, parameters: NO_PARAMETERS, inputs, outputs, binaryDataOutput, base64Output: false,
      },
      plans,
      headerEnd: this.end,
    };
  }

  /** `{"binary_data_output": bool}` or `{}`: its value (false when absent). */
  requestParameters(): boolean {
    this.open(0x7b);
    if (this.closeEmpty(0x7d)) return false;
    if (!this.is(this.key(), KEY.binaryDataOutput)) throw GIVE_UP;
    const v = this.bool();
    if (this.next(0x7d)) throw GIVE_UP;
    return v;
  }

  inputs(ctx: HeaderContext, inputs: InputTensor[], plans: InputPlan[]): void {
    this.open(0x5b);
    let binaryLeft = ctx.binaryBytes;
    if (!this.closeEmpty(0x5d)) {
      do binaryLeft = this.input(ctx, binaryLeft, inputs, plans);
      while (this.next(0x5d));
    }
    if (binaryLeft !== 0) throw GIVE_UP;
  }

  /** One input, pushed; returns the binary section's bytes not taken yet. */
  input(ctx: HeaderContext, binaryLeft: number, inputs: InputTensor[], plans: InputPlan[]): number {
    let name: string | undefined;
    let datatype: string | undefined;
    let shape: number[] | undefined;
    let size = -1;
    let data: JsonNode | undefined;
    let parameters = false;
    this.open(0x7b);
    do {
      const k = this.key();
      if (this.is(k, KEY.name) && name === undefined) name = this.string();
      else if (this.is(k, KEY.datatype) && datatype === undefined) datatype = this.string();
      else if (this.is(k, KEY.shape) && shape === undefined) shape = this.shape();
      else if (this.is(k, KEY.data) && data === undefined) data = this.data();
      else if (this.is(k, KEY.parameters) && !parameters) {
        parameters = true;
        size = this.inputParameters();
      } else {
        throw GIVE_UP;
      }
    } while (this.next(0x7d));
    if (name === undefined || datatype === undefined || shape === undefined || (data === undefined) === (size < 0)) throw GIVE_UP;
    for (let i = 0; i < inputs.length; i++) if (inputs[i]!.name === name) throw GIVE_UP;
    let byteSize: number;
    let plan: InputPlan;
    if (data !== undefined) {
      const r = jsonInput(this.b, data, name, datatype, shape, ctx, false);
      byteSize = r.byteSize;
      plan = r.plan;
    } else if (size === 0) {
      byteSize = 0;
      plan = EMPTY_PLAN;
    } else {
      if (size > binaryLeft) throw GIVE_UP;
      binaryLeft -= size;
      byteSize = size;
      plan = BINARY_PLAN;
    }
    refuseShapeBeyondInt32(name, shape);
    inputs.push({ name, datatype, shape, parameters: NO_PARAMETERS, byteSize });
    plans.push(plan);
    return binaryLeft;
  }

  /** An input's `{"binary_data_size": n}` or `{}`: n, or -1 when absent. */
  inputParameters(): number {
    this.open(0x7b);
    if (this.closeEmpty(0x7d)) return -1;
    if (!this.is(this.key(), KEY.binaryDataSize)) throw GIVE_UP;
    const n = this.uint();
    if (this.next(0x7d)) throw GIVE_UP;
    return n;
  }

  shape(): number[] {
    const dims: number[] = [];
    this.open(0x5b);
    if (this.closeEmpty(0x5d)) return dims;
    do dims.push(this.uint());
    while (this.next(0x5d));
    return dims;
  }

  /** A `data` value, read by the generic reader (it is tensor data: json/reader.ts keeps its numbers). */
  data(): JsonNode {
    const c = this.pos < this.end ? this.b[this.pos]! : -1;
    if (c !== 0x5b && c !== 0x22 && c !== 0x7b) throw GIVE_UP;
    const node = parseJsonValue(this.b, this.pos, this.end, this.extent);
    if (!shallow(node, 0)) throw GIVE_UP;
    this.pos = this.extent.rootEnd;
    return node;
  }

  outputs(outputs: RequestedOutput[]): void {
    this.open(0x5b);
    if (this.closeEmpty(0x5d)) return;
    do this.output(outputs);
    while (this.next(0x5d));
  }

  output(outputs: RequestedOutput[]): void {
    let name: string | undefined;
    let binary: boolean | undefined;
    let parameters = false;
    this.open(0x7b);
    do {
      const k = this.key();
      if (this.is(k, KEY.name) && name === undefined) {
        name = this.string();
      } else if (this.is(k, KEY.parameters) && !parameters) {
        parameters = true;
        this.open(0x7b);
        if (!this.closeEmpty(0x7d)) {
          if (!this.is(this.key(), KEY.binaryData)) throw GIVE_UP;
          binary = this.bool();
          if (this.next(0x7d)) throw GIVE_UP;
        }
      } else {
        throw GIVE_UP;
      }
    } while (this.next(0x7d));
    if (name === undefined) throw GIVE_UP;
    // Triton 2.51 keeps the first of repeated output names and answers it once.
    for (let i = 0; i < outputs.length; i++) if (outputs[i]!.name === name) return;
    outputs.push({ name, parameters: NO_PARAMETERS, binary, sharedMemory: false, base64: undefined });
  }

  // ---- tokens

  ws(): void {
    while (this.pos < this.end && WS[this.b[this.pos]!] === 1) this.pos++;
  }

  /** The opening bracket c, and the blanks after it. */
  open(c: number): void {
    if (this.pos >= this.end || this.b[this.pos] !== c) throw GIVE_UP;
    this.pos++;
    this.ws();
  }

  /** Whether the container closes at once (c, its closing bracket, consumed). */
  closeEmpty(c: number): boolean {
    if (this.pos >= this.end || this.b[this.pos] !== c) return false;
    this.pos++;
    return true;
  }

  /** After a member or element: true on a comma (another follows), false on the closing bracket c. */
  next(c: number): boolean {
    this.ws();
    const d = this.pos < this.end ? this.b[this.pos]! : -1;
    this.pos++;
    if (d === 0x2c) {
      this.ws();
      return true;
    }
    if (d !== c) throw GIVE_UP;
    return false;
  }

  /** A member name and its colon; returns the name's length (its bytes are at strStart). */
  key(): number {
    this.token();
    this.ws();
    if (this.pos >= this.end || this.b[this.pos] !== 0x3a) throw GIVE_UP;
    this.pos++;
    this.ws();
    return this.strEnd - this.strStart;
  }

  is(length: number, word: Uint8Array): boolean {
    if (length !== word.length) return false;
    const b = this.b;
    const s = this.strStart;
    for (let i = 0; i < length; i++) if (b[s + i] !== word[i]) return false;
    return true;
  }

  /** A string token without escapes or control characters: its content range in strStart/strEnd. */
  token(): void {
    const b = this.b;
    let p = this.pos;
    if (p >= this.end || b[p] !== 0x22) throw GIVE_UP;
    const s = ++p;
    for (;;) {
      if (p >= this.end) throw GIVE_UP;
      const c = b[p]!;
      if (c === 0x22) break;
      if (c === 0x5c || c < 0x20) throw GIVE_UP;
      p++;
    }
    this.strStart = s;
    this.strEnd = p;
    this.pos = p + 1;
  }

  string(): string {
    this.token();
    return utf8Slice.call(this.b, this.strStart, this.strEnd);
  }

  bool(): boolean {
    const b = this.b;
    const p = this.pos;
    if (p + 4 <= this.end && b[p] === 0x74 && b[p + 1] === 0x72 && b[p + 2] === 0x75 && b[p + 3] === 0x65) {
      this.pos = p + 4;
      return true;
    }
    if (p + 5 <= this.end && b[p] === 0x66 && b[p + 1] === 0x61 && b[p + 2] === 0x6c && b[p + 3] === 0x73 && b[p + 4] === 0x65) {
      this.pos = p + 5;
      return false;
    }
    throw GIVE_UP;
  }

  /** A plain unsigned integer: digits only, no leading zero, at most MAX_DIGITS (a fraction fails in next()). */
  uint(): number {
    const b = this.b;
    const s = this.pos;
    let p = s;
    let v = 0;
    while (p < this.end && b[p]! >= 0x30 && b[p]! <= 0x39) v = v * 10 + (b[p++]! - 0x30);
    const n = p - s;
    if (n === 0 || n > MAX_DIGITS || (n > 1 && b[s] === 0x30)) throw GIVE_UP;
    this.pos = p;
    return v;
  }
}

const EMPTY_PLAN: InputPlan = Object.freeze({ kind: 'empty' });
const BINARY_PLAN: InputPlan = Object.freeze({ kind: 'binary' });

/** Whether a `data` value nests at most MAX_DATA_DEPTH containers deep. */
function shallow(node: JsonNode, depth: number): boolean {
  if (node.kind === 'array') {
    if (node.containers.length === 0) return depth < MAX_DATA_DEPTH;
    for (let i = 0; i < node.containers.length; i++) if (!shallow(node.containers[i]!, depth + 1)) return false;
    return true;
  }
  if (node.kind === 'object') {
    for (let i = 0; i < node.members.length; i++) if (!shallow(node.members[i]!.value, depth + 1)) return false;
  }
  return depth < MAX_DATA_DEPTH;
}

const reader = new KnownHeaderReader();
