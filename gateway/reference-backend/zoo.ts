// The demo and test model zoo. test/triton/zoo.py declares the same models for real Triton
// (PyTriton); a conformance test keeps the two twins (same metadata; the tiny LLMs and the
// embedder also the same answers). Each model's `execute` works on whole tensors: raw
// little-endian bytes, batch dim included when the model batches.
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { frameBytesElements, unframeBytesElements } from '../infer/bytes-element';
import type { Datatype } from '../infer/datatype';

export interface Tensor {
  readonly datatype: Datatype;
  readonly shape: readonly number[];
  readonly data: Buffer;
}

export interface TensorSpec {
  readonly name: string;
  readonly datatype: Datatype;
  /** Without the batch dim; -1 = any size. */
  readonly dims: readonly number[];
  /** An input a request may leave out (model config `optional: true`). */
  readonly optional?: boolean;
}

/** What a model may use besides its inputs. */
export interface ExecuteContext {
  readonly parameters: ReadonlyMap<string, bigint | number | string | boolean>;
  /** Aborted when the client cancels the call. */
  readonly signal: AbortSignal;
}

/** A failure the model reports; the server answers it as gRPC `code` with `message`. */
export class ModelError extends Error {
  constructor(readonly grpcCode: number, message: string) {
    super(message);
  }
}

export interface ModelSpec {
  readonly name: string;
  /** Decoupled models answer through `stream` (ModelStreamInfer only). */
  readonly decoupled?: boolean;
  stream?(inputs: ReadonlyMap<string, Tensor>, ctx: ExecuteContext): AsyncIterable<Map<string, Tensor>>;
  /** 0 = the model does not batch. */
  readonly maxBatchSize: number;
  readonly inputs: readonly TensorSpec[];
  readonly outputs: readonly TensorSpec[];
  execute(inputs: ReadonlyMap<string, Tensor>, ctx: ExecuteContext): Promise<Map<string, Tensor>> | Map<string, Tensor>;
}

const GRPC_INTERNAL = 13;
const GRPC_INVALID_ARGUMENT = 3;
const BATCH = 8;

function get(inputs: ReadonlyMap<string, Tensor>, name: string): Tensor {
  const t = inputs.get(name);
  if (t === undefined) throw new ModelError(GRPC_INTERNAL, `missing input ${name}`);
  return t;
}

function identity(name: string, datatype: Datatype, dims: readonly number[], maxBatchSize: number): ModelSpec {
  return {
    name,
    maxBatchSize,
    inputs: [{ name: 'INPUT0', datatype, dims }],
    outputs: [{ name: 'OUTPUT0', datatype, dims }],
    execute: (inputs) => new Map([['OUTPUT0', get(inputs, 'INPUT0')]]),
  };
}

function simpleInt32(): ModelSpec {
  return {
    name: 'simple',
    maxBatchSize: BATCH,
    inputs: [{ name: 'INPUT0', datatype: 'INT32', dims: [16] }, { name: 'INPUT1', datatype: 'INT32', dims: [16] }],
    outputs: [{ name: 'OUTPUT0', datatype: 'INT32', dims: [16] }, { name: 'OUTPUT1', datatype: 'INT32', dims: [16] }],
    execute(inputs) {
      const a = get(inputs, 'INPUT0');
      const b = get(inputs, 'INPUT1');
      const sum = Buffer.allocUnsafe(a.data.byteLength);
      const diff = Buffer.allocUnsafe(a.data.byteLength);
      for (let i = 0; i < a.data.byteLength; i += 4) {
        const x = a.data.readInt32LE(i);
        const y = b.data.readInt32LE(i);
        sum.writeInt32LE((x + y) | 0, i); // int32 arithmetic wraps, as numpy's does
        diff.writeInt32LE((x - y) | 0, i);
      }
      return new Map([
        ['OUTPUT0', { datatype: 'INT32', shape: a.shape, data: sum }],
        ['OUTPUT1', { datatype: 'INT32', shape: a.shape, data: diff }],
      ]);
    },
  };
}

function simpleString(): ModelSpec {
  const parse = (e: Buffer): bigint => {
    const s = e.toString('utf8').trim();
    if (!/^[+-]?\d+$/.test(s)) throw new ModelError(GRPC_INTERNAL, `simple_string: element ${JSON.stringify(s)} is not a decimal integer`);
    return BigInt.asIntN(32, BigInt(s));
  };
  const elements = (t: Tensor): Buffer[] => {
    const u = unframeBytesElements(t.data);
    if (!u.ok) throw new ModelError(GRPC_INVALID_ARGUMENT, 'simple_string: malformed BYTES tensor');
    return u.elements;
  };
  return {
    name: 'simple_string',
    maxBatchSize: BATCH,
    inputs: [{ name: 'INPUT0', datatype: 'BYTES', dims: [16] }, { name: 'INPUT1', datatype: 'BYTES', dims: [16] }],
    outputs: [{ name: 'OUTPUT0', datatype: 'BYTES', dims: [16] }, { name: 'OUTPUT1', datatype: 'BYTES', dims: [16] }],
    execute(inputs) {
      const a = get(inputs, 'INPUT0');
      const xs = elements(a);
      const ys = elements(get(inputs, 'INPUT1'));
      const sums = xs.map((x, i) => Buffer.from(String(BigInt.asIntN(32, parse(x) + parse(ys[i]!)))));
      const diffs = xs.map((x, i) => Buffer.from(String(BigInt.asIntN(32, parse(x) - parse(ys[i]!)))));
      return new Map([
        ['OUTPUT0', { datatype: 'BYTES', shape: a.shape, data: frameBytesElements(sums) }],
        ['OUTPUT1', { datatype: 'BYTES', shape: a.shape, data: frameBytesElements(diffs) }],
      ]);
    },
  };
}

/** PROBS[j] = x[j] + x[j + 1000] in float32 per row: exact in both zoos (a float32 sum computed
 * in double and rounded once equals the float32 sum, since 53 >= 2*24 + 2). */
function classifier(): ModelSpec {
  const rowFloats = 3 * 224 * 224;
  return {
    name: 'classifier_fp32',
    maxBatchSize: BATCH,
    inputs: [{ name: 'INPUT', datatype: 'FP32', dims: [3, 224, 224] }],
    outputs: [{ name: 'PROBS', datatype: 'FP32', dims: [1000] }],
    execute(inputs) {
      const x = get(inputs, 'INPUT');
      const rows = x.shape[0] ?? 0;
      const out = Buffer.allocUnsafe(rows * 1000 * 4);
      for (let r = 0; r < rows; r++) {
        const base = r * rowFloats * 4;
        for (let j = 0; j < 1000; j++) {
          const v = x.data.readFloatLE(base + j * 4) + x.data.readFloatLE(base + (j + 1000) * 4);
          out.writeFloatLE(v, (r * 1000 + j) * 4);
        }
      }
      return new Map([['PROBS', { datatype: 'FP32', shape: [rows, 1000], data: out }]]);
    },
  };
}

function imageStats(): ModelSpec {
  return {
    name: 'image_stats',
    maxBatchSize: BATCH,
    inputs: [{ name: 'IMAGE', datatype: 'UINT8', dims: [-1] }],
    outputs: [{ name: 'LEN', datatype: 'INT64', dims: [1] }, { name: 'SUM', datatype: 'UINT64', dims: [1] }],
    execute(inputs) {
      const img = get(inputs, 'IMAGE');
      const rows = img.shape[0] ?? 0;
      const width = img.shape[1] ?? 0;
      const len = Buffer.allocUnsafe(rows * 8);
      const sum = Buffer.allocUnsafe(rows * 8);
      for (let r = 0; r < rows; r++) {
        let s = 0;
        for (let i = r * width; i < (r + 1) * width; i++) s += img.data[i]!;
        len.writeBigInt64LE(BigInt(width), r * 8);
        sum.writeBigUInt64LE(BigInt(s), r * 8);
      }
      return new Map([
        ['LEN', { datatype: 'INT64', shape: [rows, 1], data: len }],
        ['SUM', { datatype: 'UINT64', shape: [rows, 1], data: sum }],
      ]);
    },
  };
}

function blobLen(): ModelSpec {
  return {
    name: 'blob_len',
    maxBatchSize: BATCH,
    inputs: [{ name: 'BLOB', datatype: 'BYTES', dims: [1] }],
    outputs: [{ name: 'LEN', datatype: 'INT64', dims: [1] }],
    execute(inputs) {
      const blob = get(inputs, 'BLOB');
      const u = unframeBytesElements(blob.data);
      if (!u.ok) throw new ModelError(GRPC_INVALID_ARGUMENT, 'blob_len: malformed BYTES tensor');
      const out = Buffer.allocUnsafe(u.elements.length * 8);
      u.elements.forEach((e, i) => out.writeBigInt64LE(BigInt(e.byteLength), i * 8));
      return new Map([['LEN', { datatype: 'INT64', shape: blob.shape, data: out }]]);
    },
  };
}

/** Answers its BYTES input as is: an upload's tensor can be compared with the file, byte for byte. */
function blobEcho(): ModelSpec {
  return {
    name: 'blob_echo',
    maxBatchSize: BATCH,
    inputs: [{ name: 'BLOB', datatype: 'BYTES', dims: [1] }],
    outputs: [{ name: 'ECHO', datatype: 'BYTES', dims: [1] }],
    execute(inputs) {
      const blob = get(inputs, 'BLOB');
      return new Map([['ECHO', { datatype: 'BYTES', shape: blob.shape, data: blob.data }]]);
    },
  };
}

/** Answers N bytes (byte i = i % 251): for responses over grpc-js's 4 MiB default. */
function bigOutput(maxBytes: number): ModelSpec {
  return {
    name: 'big_output',
    maxBatchSize: 0,
    inputs: [{ name: 'N', datatype: 'INT64', dims: [1] }],
    outputs: [{ name: 'DATA', datatype: 'UINT8', dims: [-1] }],
    execute(inputs) {
      const n = Number(get(inputs, 'N').data.readBigInt64LE(0));
      if (n < 0 || n > maxBytes) throw new ModelError(GRPC_INVALID_ARGUMENT, `big_output: N must be in [0, ${maxBytes}], got ${n}`);
      const out = Buffer.allocUnsafe(n);
      for (let i = 0; i < n; i++) out[i] = i % 251;
      return new Map([['DATA', { datatype: 'UINT8', shape: [n], data: out }]]);
    },
  };
}

/** Identity after `delay_ms` (parameter, default 1000); counts cancelled executions and the most at once. */
function slow(stats: ZooStats, events: EventEmitter<ZooEvents>): ModelSpec {
  return {
    name: 'slow',
    maxBatchSize: 0,
    inputs: [{ name: 'INPUT0', datatype: 'FP32', dims: [-1] }],
    outputs: [{ name: 'OUTPUT0', datatype: 'FP32', dims: [-1] }],
    async execute(inputs, ctx) {
      const delay = Number(ctx.parameters.get('delay_ms') ?? 1000);
      stats.slowMaxInFlight = Math.max(stats.slowMaxInFlight, ++stats.slowInFlight);
      await new Promise<void>((resolve) => {
        const onAbort = (): void => {
          clearTimeout(timer);
          stats.slowCancellations++;
          events.emit('slow-cancelled');
          resolve();
        };
        // Only a cancellation while waiting counts (grpc-js may report one after the answer too),
        // or one that came before the model ran: a call cancelled while it was queued (a loaded
        // machine, a short deadline) hears no 'abort' event any more.
        const timer = setTimeout(() => {
          ctx.signal.removeEventListener('abort', onAbort);
          resolve();
        }, delay);
        if (ctx.signal.aborted) {
          onAbort();
          return;
        }
        ctx.signal.addEventListener('abort', onAbort, { once: true });
        events.emit('slow-started');
      }).finally(() => { stats.slowInFlight--; });
      return new Map([['OUTPUT0', get(inputs, 'INPUT0')]]);
    },
  };
}

/** Decoupled: N responses, OUTPUT0 = [i]; parameter `fail_after` = k fails after k responses. */
function repeatInt32(stats: ZooStats, events: EventEmitter<ZooEvents>): ModelSpec {
  return {
    name: 'repeat_int32',
    maxBatchSize: 0,
    decoupled: true,
    inputs: [{ name: 'INPUT0', datatype: 'INT32', dims: [1] }],
    outputs: [{ name: 'OUTPUT0', datatype: 'INT32', dims: [1] }],
    execute() {
      throw new ModelError(GRPC_INTERNAL, 'repeat_int32 is decoupled');
    },
    async *stream(inputs, ctx) {
      const n = get(inputs, 'INPUT0').data.readInt32LE(0);
      const failAfter = ctx.parameters.get('fail_after');
      const delay = Number(ctx.parameters.get('delay_ms') ?? 0);
      for (let i = 0; i < n; i++) {
        if (ctx.signal.aborted) {
          stats.streamCancellations++;
          events.emit('stream-cancelled', ctx.parameters);
          return;
        }
        if (failAfter !== undefined && i >= Number(failAfter)) throw new ModelError(GRPC_INTERNAL, `RuntimeError: repeat_int32 failed after ${i} responses`);
        if (delay > 0 && i > 0) await new Promise((r) => setTimeout(r, delay));
        if (ctx.signal.aborted) {
          stats.streamCancellations++;
          events.emit('stream-cancelled', ctx.parameters);
          return;
        }
        const out = Buffer.alloc(4);
        out.writeInt32LE(i, 0);
        yield new Map([['OUTPUT0', { datatype: 'INT32', shape: [1], data: out }]]);
      }
    },
  };
}

/** Decoupled: one response per whitespace-separated word of TEXT, OUTPUT = [word]. */
function echoText(): ModelSpec {
  return {
    name: 'echo_text',
    maxBatchSize: 0,
    decoupled: true,
    inputs: [{ name: 'TEXT', datatype: 'BYTES', dims: [1] }],
    outputs: [{ name: 'OUTPUT', datatype: 'BYTES', dims: [1] }],
    execute() {
      throw new ModelError(GRPC_INTERNAL, 'echo_text is decoupled');
    },
    async *stream(inputs) {
      const u = unframeBytesElements(get(inputs, 'TEXT').data);
      if (!u.ok) throw new ModelError(GRPC_INVALID_ARGUMENT, 'echo_text: malformed BYTES tensor');
      const text = Buffer.concat(u.elements.flatMap((e, i) => (i > 0 ? [Buffer.from(' '), e] : [e]))).toString('latin1');
      for (const w of text.split(/[ \t\n\r\v\f]+/).filter((x) => x !== '')) {
        yield new Map([['OUTPUT', { datatype: 'BYTES', shape: [1], data: frameBytesElements([Buffer.from(w, 'latin1')]) }]]);
      }
    },
  };
}

// ------------------------------------------------- tiny LLMs and an embedder
// Deterministic stand-ins for an LLM served by Triton's vLLM backend (tiny_llm) and by
// TensorRT-LLM (tiny_llm_trtllm), and for an embedding model (tiny_embed), byte for byte as
// test/triton/zoo.py's. Text is handled as UTF-8 bytes, words split on ASCII whitespace.

const VOCAB = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta', 'eta', 'theta', 'iota', 'kappa', 'lambda', 'mu', 'nu', 'xi', 'omicron', 'pi'];
const DEFAULT_MAX_TOKENS = 16;
/** The model's "context length": a larger max_tokens is refused. */
const MAX_TOKENS_LIMIT = 4096;
/** The wait before each token after the first, when the prompt has the word `slowly`. */
const SLOW_TOKEN_MS = 50;
const SPACE = Buffer.from(' ');

/** The words of UTF-8 text, split on ASCII whitespace (Python's bytes.split()). */
function words(text: Buffer): string[] {
  return text.toString('latin1').split(/[ \t\n\r\v\f]+/).filter((w) => w !== '');
}

/** A Python exception as the model's error (PyTriton reports the traceback; its last line is this). */
const valueError = (message: string): ModelError => new ModelError(GRPC_INTERNAL, `ValueError: ${message}`);

/** The elements of a BYTES input, or undefined when the request does not carry the (optional) input. */
function elementsOf(inputs: ReadonlyMap<string, Tensor>, name: string): Buffer[] | undefined {
  const t = inputs.get(name);
  if (t === undefined) return undefined;
  const u = unframeBytesElements(t.data);
  if (!u.ok) throw new ModelError(GRPC_INVALID_ARGUMENT, `malformed BYTES tensor ${name}`);
  return u.elements;
}

/** The first element of an optional BOOL input, or undefined. */
function flagOf(inputs: ReadonlyMap<string, Tensor>, name: string): boolean | undefined {
  const t = inputs.get(name);
  return t === undefined || t.data.byteLength === 0 ? undefined : t.data[0] !== 0;
}

function checkMaxTokens(v: unknown): number {
  if (typeof v !== 'number' || !(v >= 1 && v <= MAX_TOKENS_LIMIT) || !Number.isInteger(v)) {
    throw valueError(`max_tokens must be an integer between 1 and ${MAX_TOKENS_LIMIT}`);
  }
  return v;
}

/** tiny_llm's sampling_parameters (vLLM's JSON object): max tokens and stop strings; the rest is ignored. */
function samplingParameters(raw: Buffer | undefined): { maxTokens: number; stops: Buffer[]; guide: { schema: unknown } | undefined; logprobs: number } {
  if (raw === undefined) return { maxTokens: DEFAULT_MAX_TOKENS, stops: [], guide: undefined, logprobs: 0 };
  let params: unknown;
  try {
    params = JSON.parse(new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(raw));
  } catch {
    throw valueError('sampling_parameters must be a JSON object');
  }
  if (typeof params !== 'object' || params === null || Array.isArray(params)) throw valueError('sampling_parameters must be a JSON object');
  const p = params as Record<string, unknown>;
  const maxTokens = p.max_tokens === undefined || p.max_tokens === null ? DEFAULT_MAX_TOKENS : checkMaxTokens(p.max_tokens);
  const stop = p.stop ?? [];
  const list = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) throw valueError('stop must be a string or a list of strings');
  const logprobs = p.logprobs ?? 0;
  if (!Number.isInteger(logprobs) || (logprobs as number) < 0 || (logprobs as number) > 20) throw valueError('logprobs must be an integer from 0 to 20');
  return { maxTokens, stops: list.map((s: string) => Buffer.from(s, 'utf8')), guide: guideOf(p.guided_decoding), logprobs: logprobs as number };
}

/** vLLM's guided_decoding (an object, or its JSON text): `json` a schema, or `json_object`. */
function guideOf(v: unknown): { schema: unknown } | undefined {
  let g = v;
  if (typeof g === 'string') {
    try {
      g = JSON.parse(g);
    } catch {
      throw valueError('guided_decoding must be a JSON object');
    }
  }
  if (g === undefined || g === null) return undefined;
  if (typeof g !== 'object' || Array.isArray(g)) throw valueError('guided_decoding must be a JSON object');
  const o = g as Record<string, unknown>;
  if (o.json !== undefined && o.json !== null) return { schema: typeof o.json === 'string' ? JSON.parse(o.json) as unknown : o.json };
  if (o.json_object === true) return { schema: {} };
  throw valueError('guided_decoding: the tiny LLM follows json and json_object only');
}

interface Step {
  readonly delta: Buffer;
  /** undefined before the last token. */
  readonly finish: 'stop' | 'length' | undefined;
}

/**
 * The generation rule: a token is " " + word; word i = VOCAB[(prompt words + i) % 16], word 0
 * replaced by "[image:<length>:<sha256[:8]>]" when there is an image. After each token the text
 * so far is cut before the earliest stop string in it and the generation ends ("stop"); after
 * max tokens it ends with "length". Text already given out stays given (the last delta may be empty).
 */
export function* generate(prompt: Buffer, maxTokens: number, stops: readonly Buffer[], image: Buffer): Generator<Step> {
  const nPrompt = words(prompt).length;
  let text = Buffer.alloc(0);
  for (let i = 0; i < maxTokens; i++) {
    const word = i === 0 && image.byteLength > 0
      ? `[image:${image.byteLength}:${createHash('sha256').update(image).digest('hex').slice(0, 8)}]`
      : VOCAB[(nPrompt + i) % VOCAB.length]!;
    const sent = text.byteLength;
    text = Buffer.concat([text, SPACE, Buffer.from(word, 'latin1')]);
    const cuts = stops.filter((s) => s.byteLength > 0).map((s) => text.indexOf(s)).filter((at) => at >= 0);
    if (cuts.length > 0) {
      yield { delta: text.subarray(sent, Math.max(Math.min(...cuts), sent)), finish: 'stop' };
      return;
    }
    yield { delta: text.subarray(sent), finish: i === maxTokens - 1 ? 'length' : undefined };
  }
}

// What the tiny LLMs do with tools and schemas (docs/openai.md "The demo models"): a prompt that
// offers tools the way the demo's chat template writes them (Hermes': a `<tools>` block, a tool's
// JSON a line) and holds no tool result yet (`<tool_response>`) is answered with a call of the first
// tool in Hermes' format, its arguments a minimal instance of the tool's parameters; else guided
// decoding (vLLM's `guided_decoding` sampling parameter, TensorRT-LLM's guided_decoding_guide_type
// and guided_decoding_guide inputs) is answered with a minimal instance of the schema (`{}` for
// json_object). Such a text is given out in pieces of SCRIPT_PIECE characters, one a token.

const SCRIPT_PIECE = 16;

/** A minimal instance of a JSON Schema: required properties only, each its type's least value. */
export function minimalInstance(schema: unknown, root: unknown = schema, depth = 0): unknown {
  if (depth > 32 || typeof schema !== 'object' || schema === null || Array.isArray(schema)) return {};
  const s = schema as Record<string, unknown>;
  if (typeof s.$ref === 'string') {
    const target = s.$ref.replace(/^#\/?/, '').split('/').filter((k) => k !== '').reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], root);
    return minimalInstance(target, root, depth + 1);
  }
  if ('const' in s) return s.const;
  if (Array.isArray(s.enum) && s.enum.length > 0) return s.enum[0];
  for (const k of ['anyOf', 'oneOf', 'allOf']) {
    const list = s[k];
    if (Array.isArray(list) && list.length > 0) return minimalInstance(list[0], root, depth + 1);
  }
  const count = (v: unknown): number => (typeof v === 'number' ? v : 0);
  switch (Array.isArray(s.type) ? s.type[0] : s.type) {
    case 'string': return 'a'.repeat(count(s.minLength));
    case 'integer':
    case 'number': return typeof s.minimum === 'number' ? s.minimum : typeof s.exclusiveMinimum === 'number' ? Math.floor(s.exclusiveMinimum) + 1 : 0;
    case 'boolean': return false;
    case 'null': return null;
    case 'array': return Array.from({ length: count(s.minItems) }, () => minimalInstance(s.items, root, depth + 1));
    default: {
      const props = (typeof s.properties === 'object' && s.properties !== null ? s.properties : {}) as Record<string, unknown>;
      const required = Array.isArray(s.required) ? s.required.filter((k): k is string => typeof k === 'string') : [];
      return Object.fromEntries(required.map((k) => [k, minimalInstance(props[k], root, depth + 1)]));
    }
  }
}

/** The text the prompt (a call) or else the guide dictates, or undefined: the words as usual. */
function scripted(prompt: Buffer, guide: { readonly schema: unknown } | undefined): string | undefined {
  return call(prompt.toString('utf8')) ?? (guide === undefined ? undefined : JSON.stringify(minimalInstance(guide.schema)));
}

/** A call of the first tool the prompt offers, when it holds no tool result yet; else undefined. */
function call(text: string): string | undefined {
  const m = /<tools>\n([^\n]*)\n/.exec(text);
  if (m === null || text.includes('<tool_response>')) return undefined;
  let fn: { name?: unknown; parameters?: unknown } | undefined;
  try {
    fn = (JSON.parse(m[1]!) as { function?: { name?: unknown; parameters?: unknown } }).function;
  } catch {
    return undefined;
  }
  if (typeof fn?.name !== 'string') return undefined;
  return `<tool_call>\n${JSON.stringify({ name: fn.name, arguments: minimalInstance(fn.parameters ?? {}) })}\n</tool_call>`;
}

/** A scripted text given out SCRIPT_PIECE characters a token, cut at max tokens. */
function* recite(text: string, maxTokens: number): Generator<Step> {
  const n = Math.ceil(text.length / SCRIPT_PIECE);
  for (let i = 0; i < Math.min(n, maxTokens); i++) {
    const finish = i === n - 1 ? 'stop' : i === maxTokens - 1 ? 'length' : undefined;
    yield { delta: Buffer.from(text.slice(i * SCRIPT_PIECE, (i + 1) * SCRIPT_PIECE), 'utf8'), finish };
  }
}

interface LlmRequest {
  /** Guided decoding's schema ({} for any JSON object), when asked for. */
  readonly guide: { readonly schema: unknown } | undefined;
  readonly maxTokens: number;
  readonly stops: readonly Buffer[];
  readonly image: Buffer;
  /** tiny_llm's finish_reason output (TensorRT-LLM has none). */
  readonly finishReason: boolean;
  /** tiny_llm's logprobs output, asked for with return_logprobs: this many alternatives (undefined: not asked). */
  readonly logprobs: number | undefined;
  readonly countType: 'UINT32' | 'INT32';
  /** Where a cancelled stream is counted and told. */
  readonly stats: ZooStats;
  readonly events: EventEmitter<ZooEvents>;
}

const count = (type: 'UINT32' | 'INT32', n: number): Tensor => {
  const data = Buffer.alloc(4);
  if (type === 'UINT32') data.writeUInt32LE(n, 0);
  else data.writeInt32LE(n, 0);
  return { datatype: type, shape: [1], data };
};
const text1 = (b: Buffer): Tensor => ({ datatype: 'BYTES', shape: [1], data: frameBytesElements([b]) });

/** One request of tiny_llm / tiny_llm_trtllm: one response per token when streaming, else one. */
async function* llm(inputs: ReadonlyMap<string, Tensor>, ctx: ExecuteContext, r: LlmRequest): AsyncGenerator<Map<string, Tensor>> {
  const prompt = elementsOf(inputs, 'text_input')?.[0];
  if (prompt === undefined) throw valueError('the request has no text_input');
  const stream = flagOf(inputs, 'stream') ?? false;
  const exclude = flagOf(inputs, 'exclude_input_in_output');
  // vLLM's default: the prompt leads the text when not streaming, not when streaming
  const prepend = exclude === undefined ? !stream : !exclude;
  const promptWords = words(prompt);
  const slowly = promptWords.includes('slowly');
  const response = (t: Buffer, tokens: readonly Buffer[], finish: string | undefined): Map<string, Tensor> => {
    const out = new Map([['text_output', text1(t)], ['num_input_tokens', count(r.countType, promptWords.length)], ['num_output_tokens', count(r.countType, tokens.length)]]);
    if (r.finishReason) out.set('finish_reason', text1(Buffer.from(finish ?? '', 'latin1')));
    if (r.logprobs !== undefined) out.set('logprobs', text1(Buffer.from(JSON.stringify(tokens.map((tok) => tokenLogprobs(tok, r.logprobs!))))));
    return out;
  };
  const cancelled = (): boolean => {
    if (!ctx.signal.aborted) return false;
    r.stats.streamCancellations++;
    r.events.emit('stream-cancelled', ctx.parameters);
    return true;
  };
  const pieces: Buffer[] = [];
  const tokens: Buffer[] = [];
  let i = 0;
  const script = scripted(prompt, r.guide);
  for (const step of script === undefined ? generate(prompt, r.maxTokens, r.stops, r.image) : recite(script, r.maxTokens)) {
    if (slowly && i > 0) await new Promise((resolve) => setTimeout(resolve, SLOW_TOKEN_MS));
    if (cancelled()) return;
    const delta = i === 0 && prepend ? Buffer.concat([prompt, step.delta]) : step.delta;
    i++;
    if (stream) {
      yield response(delta, [step.delta], step.finish);
    } else {
      pieces.push(delta);
      tokens.push(step.delta);
      if (step.finish !== undefined) yield response(Buffer.concat(pieces), tokens, step.finish);
    }
  }
}

/**
 * A token's logprobs as Triton's vLLM backend writes them (src/utils/request.py in
 * triton-inference-server/vllm_backend: per token, {token_id: {logprob, rank, decoded_token}},
 * the sampled token first): the tiny LLM is sure of its word (logprob −0.125, rank 1), and the
 * next `top` − 1 words of VOCAB follow at −1.125, −2.125, …; a scripted piece has no alternatives.
 */
export function tokenLogprobs(token: Buffer, top: number): Record<string, { logprob: number; rank: number; decoded_token: string }> {
  const text = token.toString('utf8');
  const v = VOCAB.indexOf(text.trim());
  const out: Record<string, { logprob: number; rank: number; decoded_token: string }> = { [v < 0 ? 16 : v]: { logprob: -0.125, rank: 1, decoded_token: text } };
  if (v >= 0) for (let k = 1; k < top; k++) out[(v + k) % 16] = { logprob: -k - 0.125, rank: k + 1, decoded_token: ` ${VOCAB[(v + k) % 16]!}` };
  return out;
}

const optional = (name: string, datatype: Datatype, dims: readonly number[] = [1]): TensorSpec => ({ name, datatype, dims, optional: true });
const llmOutputs = (countType: 'UINT32' | 'INT32'): TensorSpec[] => [
  { name: 'text_output', datatype: 'BYTES', dims: [-1] },
  { name: 'num_input_tokens', datatype: countType, dims: [1] },
  { name: 'num_output_tokens', datatype: countType, dims: [1] },
];

/** Decoupled: Triton's vLLM backend's tensors (text_input, stream, sampling_parameters as JSON, …). */
function tinyLlm(stats: ZooStats, events: EventEmitter<ZooEvents>): ModelSpec {
  return {
    name: 'tiny_llm',
    maxBatchSize: 0,
    decoupled: true,
    inputs: [
      { name: 'text_input', datatype: 'BYTES', dims: [1] },
      optional('stream', 'BOOL'),
      optional('sampling_parameters', 'BYTES'),
      optional('exclude_input_in_output', 'BOOL'),
      optional('return_num_input_tokens', 'BOOL'),
      optional('return_num_output_tokens', 'BOOL'),
      optional('return_finish_reason', 'BOOL'),
      optional('return_logprobs', 'BOOL'),
      optional('image', 'BYTES'),
    ],
    outputs: [...llmOutputs('UINT32'), { name: 'finish_reason', datatype: 'BYTES', dims: [1] }, { name: 'logprobs', datatype: 'BYTES', dims: [-1], optional: true }],
    execute() {
      throw new ModelError(GRPC_INTERNAL, 'tiny_llm is decoupled');
    },
    stream(inputs, ctx) {
      const { maxTokens, stops, guide, logprobs } = samplingParameters(elementsOf(inputs, 'sampling_parameters')?.[0]);
      const image = elementsOf(inputs, 'image')?.[0] ?? Buffer.alloc(0);
      return llm(inputs, ctx, { guide, maxTokens, stops, image, finishReason: true, logprobs: flagOf(inputs, 'return_logprobs') === true ? logprobs : undefined, countType: 'UINT32', stats, events });
    },
  };
}

/** Decoupled: TensorRT-LLM's tensors (max_tokens, stop_words, sampling inputs; no finish reason). */
function tinyLlmTrtllm(stats: ZooStats, events: EventEmitter<ZooEvents>): ModelSpec {
  return {
    name: 'tiny_llm_trtllm',
    maxBatchSize: 0,
    decoupled: true,
    inputs: [
      { name: 'text_input', datatype: 'BYTES', dims: [1] },
      { name: 'max_tokens', datatype: 'INT32', dims: [1] },
      optional('stream', 'BOOL'),
      optional('stop_words', 'BYTES', [-1]),
      optional('temperature', 'FP32'),
      optional('top_p', 'FP32'),
      optional('frequency_penalty', 'FP32'),
      optional('presence_penalty', 'FP32'),
      optional('seed', 'UINT64'),
      optional('exclude_input_in_output', 'BOOL'),
      optional('return_num_input_tokens', 'BOOL'),
      optional('return_num_output_tokens', 'BOOL'),
      optional('guided_decoding_guide_type', 'BYTES'),
      optional('guided_decoding_guide', 'BYTES'),
    ],
    outputs: llmOutputs('INT32'),
    execute() {
      throw new ModelError(GRPC_INTERNAL, 'tiny_llm_trtllm is decoupled');
    },
    stream(inputs, ctx) {
      const t = inputs.get('max_tokens');
      if (t === undefined) throw valueError('the request has no max_tokens');
      const maxTokens = checkMaxTokens(t.data.readInt32LE(0));
      const stops = elementsOf(inputs, 'stop_words') ?? [];
      const guide = trtllmGuide(elementsOf(inputs, 'guided_decoding_guide_type')?.[0], elementsOf(inputs, 'guided_decoding_guide')?.[0]);
      return llm(inputs, ctx, { guide, maxTokens, stops, image: Buffer.alloc(0), finishReason: false, logprobs: undefined, countType: 'INT32', stats, events });
    },
  };
}

/** TensorRT-LLM's guide type (json, json_schema) and guide (the schema's JSON text). */
function trtllmGuide(type: Buffer | undefined, guide: Buffer | undefined): { schema: unknown } | undefined {
  if (type === undefined) return undefined;
  const t = type.toString('utf8');
  if (t === 'json') return { schema: {} };
  if (t !== 'json_schema') throw valueError('guided_decoding_guide_type: the tiny LLM follows json and json_schema only');
  try {
    return { schema: JSON.parse(guide?.toString('utf8') ?? '') as unknown };
  } catch {
    throw valueError('guided_decoding_guide must be a JSON schema');
  }
}

/** embedding[j] = (sha256(text)[j] - 128) / 128 for j < 8 (exact in FP32); num_input_tokens = its words. */
function tinyEmbed(): ModelSpec {
  return {
    name: 'tiny_embed',
    maxBatchSize: 0,
    inputs: [{ name: 'text_input', datatype: 'BYTES', dims: [1] }],
    outputs: [{ name: 'embedding', datatype: 'FP32', dims: [8] }, { name: 'num_input_tokens', datatype: 'INT32', dims: [1] }],
    execute(inputs) {
      const text = elementsOf(inputs, 'text_input')![0]!;
      const digest = createHash('sha256').update(text).digest();
      const embedding = Buffer.alloc(8 * 4);
      for (let j = 0; j < 8; j++) embedding.writeFloatLE((digest[j]! - 128) / 128, j * 4);
      return new Map([['embedding', { datatype: 'FP32', shape: [8], data: embedding }], ['num_input_tokens', count('INT32', words(text).length)]]);
    },
  };
}

export const FAILING_MESSAGE = 'failing model always fails';

function failing(): ModelSpec {
  return {
    name: 'failing',
    maxBatchSize: BATCH,
    inputs: [{ name: 'INPUT0', datatype: 'FP32', dims: [-1] }],
    outputs: [{ name: 'OUTPUT0', datatype: 'FP32', dims: [-1] }],
    execute() {
      // Triton (PyTriton) reports a raising model with this prefix, the model *instance* name and
      // a Python traceback; the reference keeps the prefix and the exception line.
      throw new ModelError(GRPC_INTERNAL,
        `Failed to process the request(s) for model 'failing_0_0', message: TritonModelException: Model execute error: RuntimeError: ${FAILING_MESSAGE}`);
    },
  };
}

/** Statistics of a zoo that has served nothing yet. */
export const newZooStats = (): ZooStats => ({
  slowCancellations: 0, slowInFlight: 0, slowMaxInFlight: 0, streamCancellations: 0, streamCalls: 0, inferCalls: 0, inferCancellations: 0,
});

export interface ZooStats {
  slowCancellations: number;
  /** `slow` executions running now, and the most that ran at once. */
  slowInFlight: number;
  slowMaxInFlight: number;
  /** Decoupled streams that stopped because the client cancelled the ModelStreamInfer call. */
  streamCancellations: number;
  /** ModelStreamInfer calls received. */
  streamCalls: number;
  /** ModelInfer calls received (any model, any outcome). */
  inferCalls: number;
  /** ModelInfer calls the client cancelled before their answer. */
  inferCancellations: number;
  /** The traceparent metadata of the last ModelInfer call, if any. */
  lastTraceparent?: string | undefined;
}

/**
 * What happens in the zoo, as it happens: `slow` began waiting (it can be cancelled from now on),
 * was cancelled; a decoupled stream stopped because it was cancelled.
 */
export interface ZooEvents {
  'slow-started': [];
  'slow-cancelled': [];
  /** With the request's parameters: a test tags its request to tell its own cancellation from a late one. */
  'stream-cancelled': [ReadonlyMap<string, bigint | number | string | boolean>];
}

const IDENTITY_TYPES: readonly [string, Datatype][] = [
  ['fp16', 'FP16'], ['fp32', 'FP32'], ['fp64', 'FP64'], ['int8', 'INT8'], ['int16', 'INT16'],
  ['int32', 'INT32'], ['int64', 'INT64'], ['uint8', 'UINT8'], ['uint16', 'UINT16'],
  ['uint32', 'UINT32'], ['uint64', 'UINT64'], ['bool', 'BOOL'], ['bytes', 'BYTES'], ['bf16', 'BF16'],
];

/** The zoo. `identity_bf16` exists only here: PyTriton cannot declare BF16. */
export function createZoo(stats: ZooStats, maxOutputBytes: number, events: EventEmitter<ZooEvents> = new EventEmitter<ZooEvents>()): ModelSpec[] {
  return [
    simpleInt32(),
    simpleString(),
    ...IDENTITY_TYPES.map(([suffix, d]) => identity(`identity_${suffix}`, d, [-1], BATCH)),
    identity('identity_fp32_nobatch', 'FP32', [-1, -1], 0),
    // Fixed dims (rows of 2 MiB): an output whose size is known before the call (the shared-memory mode).
    identity('identity_uint8_2mib', 'UINT8', [2 * 1024 * 1024], BATCH),
    classifier(),
    imageStats(),
    blobLen(),
    blobEcho(),
    bigOutput(maxOutputBytes),
    slow(stats, events),
    repeatInt32(stats, events),
    echoText(),
    tinyLlm(stats, events),
    tinyLlmTrtllm(stats, events),
    tinyEmbed(),
    failing(),
  ];
}
