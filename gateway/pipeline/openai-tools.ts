// A model's text read back into OpenAI's `tool_calls` (docs/openai.md "Tools"), by the parser its
// openai.models entry names — each written to the format those models are trained to emit:
// - hermes: `<tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>`, once per call, after any
//   text (NousResearch/Hermes-Function-Calling's format, which Qwen 2.5's and Qwen 3's chat
//   templates ask for as well; vLLM's hermes_tool_parser.py reads the same);
// - mistral: `[TOOL_CALLS]` then a JSON list of `{"name": …, "arguments": {…}}` (mistral-common's
//   tokenizer, v3: the token the model emits before its calls; vLLM's mistral_tool_parser.py);
// - llama3_json: the answer is the call, `{"name": …, "parameters": {…}}`, optionally after
//   `<|python_tag|>`, several separated by `;` (Meta's Llama 3.1 model card, "JSON based tool
//   calling"; vLLM's llama_tool_parser.py, which takes `arguments` too).
// Text that does not parse as calls is the answer's content, as vLLM's parsers leave it.
// A stream (ToolScan) sends text as content until the format's start shows; from there the text is
// held, and read as calls when the generation ends.
import { randomBytes } from 'node:crypto';
import type { ToolParserName } from '../config/openai';
import type { ToolCall } from '../encode/openai';
import { isObject } from '../config/problems';
import type { GenerateAsk } from '../decode/dialects/openai';
import { violation } from '../decode/dialects/json-schema';
import { GatewayError } from '../errors';

export interface Parsed {
  /** The text that is not a call ('' when there is none). */
  readonly content: string;
  readonly calls: readonly ToolCall[];
}

/** OpenAI's call ids: `call_` and 24 characters. */
const callId = (): string => `call_${randomBytes(12).toString('hex')}`;

const ALNUM = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
/**
 * Mistral's: 9 letters and digits — its chat templates refuse any other id when the call comes
 * back in the history (vLLM's mistral_tool_parser.py makes its ids so for the same reason).
 */
const mistralId = (): string => [...randomBytes(9)].map((b) => ALNUM[b % ALNUM.length]).join('');

/** One call of the model's JSON: its name and arguments (an object, re-serialised as OpenAI sends them: a string). */
function call(v: unknown, argsKeys: readonly string[], id: () => string = callId): ToolCall | undefined {
  if (!isObject(v) || typeof v.name !== 'string' || v.name === '') return undefined;
  const key = argsKeys.find((k) => v[k] !== undefined);
  const args = key === undefined ? {} : v[key];
  if (typeof args === 'string') return { id: id(), name: v.name, arguments: args };
  if (!isObject(args)) return undefined;
  return { id: id(), name: v.name, arguments: JSON.stringify(args) };
}

/** The end of the JSON value that starts at `from` (an object or a list), or -1; strings are skipped whole. */
function valueEnd(text: string, from: number): number {
  let depth = 0;
  let inString = false;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') {
      inString = true;
    } else if (c === '{' || c === '[') {
      depth++;
    } else if (c === '}' || c === ']') {
      if (--depth === 0) return i + 1;
    }
  }
  return -1;
}

const none = (text: string): Parsed => ({ content: text, calls: [] });

function hermes(text: string): Parsed {
  const at = text.indexOf('<tool_call>');
  if (at < 0) return none(text);
  const calls: ToolCall[] = [];
  for (const m of text.slice(at).matchAll(/<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g)) {
    const c = call(parseJsonOrUndefined(m[1]!.trim()), ['arguments']);
    if (c === undefined) return none(text);
    calls.push(c);
  }
  return { content: text.slice(0, at).trim(), calls };
}

function mistral(text: string): Parsed {
  const at = text.indexOf('[TOOL_CALLS]');
  if (at < 0) return none(text);
  const list = parseJsonOrUndefined(text.slice(at + '[TOOL_CALLS]'.length).trim());
  const items = Array.isArray(list) ? list : [list];
  const calls = items.map((v) => call(v, ['arguments'], mistralId));
  if (calls.length === 0 || calls.some((c) => c === undefined)) return none(text);
  return { content: text.slice(0, at).trim(), calls: calls as ToolCall[] };
}

const PYTHON_TAG = '<|python_tag|>';

function llama3Json(text: string): Parsed {
  let rest = text.trimStart();
  if (rest.startsWith(PYTHON_TAG)) rest = rest.slice(PYTHON_TAG.length).trimStart();
  if (!rest.startsWith('{')) return none(text);
  const calls: ToolCall[] = [];
  while (rest !== '') {
    const end = valueEnd(rest, 0);
    const c = end < 0 ? undefined : call(parseJsonOrUndefined(rest.slice(0, end)), ['parameters', 'arguments']);
    if (c === undefined) return none(text);
    calls.push(c);
    rest = rest.slice(end).trimStart();
    if (rest.startsWith(';')) rest = rest.slice(1).trimStart();
    else if (rest !== '') return none(text);
  }
  return { content: '', calls };
}

const PARSE: Record<ToolParserName, (text: string) => Parsed> = { hermes, mistral, llama3_json: llama3Json };

/** The calls in a whole answer, and the text beside them. */
export function parseToolCalls(parser: ToolParserName, text: string): Parsed {
  return PARSE[parser](text);
}

/** Where a format's calls begin: after text (a marker), or only at the start of the answer. */
const START: Record<ToolParserName, { readonly markers: readonly string[]; readonly atStart: boolean }> = {
  hermes: { markers: ['<tool_call>'], atStart: false },
  mistral: { markers: ['[TOOL_CALLS]'], atStart: false },
  llama3_json: { markers: [PYTHON_TAG, '{'], atStart: true },
};

/** The text of a stream as it comes: what can go out as content now, the rest held until the end. */
export class ToolScan {
  private held = '';
  /** undecided: the text so far may yet begin a call; content: it cannot; calls: it does. */
  private state: 'undecided' | 'content' | 'calls' = 'undecided';

  constructor(private readonly parser: ToolParserName) {}

  /** The content this delta lets out ('' while it may be the start of a call). */
  push(delta: string): string {
    if (this.state === 'content') return delta;
    this.held += delta;
    if (this.state === 'calls') return '';
    const { markers, atStart } = START[this.parser];
    if (atStart) {
      const t = this.held.trimStart();
      if (t === '' || markers.some((m) => m.startsWith(t))) return '';
      if (markers.some((m) => t.startsWith(m))) {
        this.state = 'calls';
        return '';
      }
      this.state = 'content';
      return this.release(this.held.length);
    }
    // Whitespace alone may still lead a call: held, as the whole answer's content is trimmed.
    if (this.held.trim() === '') return '';
    const at = Math.min(...markers.map((m) => this.held.indexOf(m)).filter((i) => i >= 0), Infinity);
    if (at !== Infinity) {
      this.state = 'calls';
      return this.release(at);
    }
    // Keep a tail that may be a marker's beginning.
    let keep = 0;
    for (const m of markers) for (let n = Math.min(m.length - 1, this.held.length); n > keep; n--) if (this.held.endsWith(m.slice(0, n))) keep = n;
    return this.release(this.held.length - keep);
  }

  private release(n: number): string {
    const out = this.held.slice(0, n);
    this.held = this.held.slice(n);
    return out;
  }

  /** At the end: the held text read as calls (or as content, when it is none). */
  end(): Parsed {
    return parseToolCalls(this.parser, this.held);
  }
}

const outputError = (message: string): GatewayError => new GatewayError('GW_ERR_MODEL_OPENAI_OUTPUT', message);

/**
 * The calls an answer gives, checked against the request: tool_choice required (a call) or named
 * (calls of that function only), a `strict` function's parameters (its arguments satisfy them);
 * parallel_tool_calls false keeps the first call. A breach is GW_ERR_MODEL_OPENAI_OUTPUT, never
 * passed on.
 */
export function checkedCalls(tools: NonNullable<GenerateAsk['tools']>, parsed: Parsed): readonly ToolCall[] {
  const calls = tools.parallel ? parsed.calls : parsed.calls.slice(0, 1);
  if (tools.choice === 'required' && calls.length === 0) throw outputError('The model answered without a tool call, though tool_choice required one.');
  const named = tools.choice;
  if (typeof named === 'object') {
    if (calls.length === 0) throw outputError(`The model answered without calling '${named.name}', though tool_choice named it.`);
    const other = calls.find((c) => c.name !== named.name);
    if (other !== undefined) throw outputError(`The model called '${other.name}', though tool_choice named '${named.name}'.`);
  }
  for (const c of calls) {
    const schema = tools.strict.get(c.name);
    if (schema === undefined) continue;
    const problem = violation(schema, parseJsonOrUndefined(c.arguments));
    if (problem !== undefined) throw outputError(`The model's call of '${c.name}' does not satisfy the function's parameters (strict): ${problem}.`);
  }
  return calls;
}

/** response_format json_schema, strict: the answer is JSON satisfying the schema, or GW_ERR_MODEL_OPENAI_OUTPUT. */
export function checkStructured(format: GenerateAsk['responseFormat'], text: string): void {
  if (format === undefined || format.kind !== 'json_schema' || !format.strict) return;
  const value = parseJsonOrUndefined(text);
  if (value === undefined) throw outputError(`The model's answer is not JSON, though response_format '${format.name}' is strict.`);
  const problem = violation(format.schema, value);
  if (problem !== undefined) throw outputError(`The model's answer does not satisfy the schema '${format.name}' (strict): ${problem}.`);
}

function parseJsonOrUndefined(s: string): unknown {
  try {
    return JSON.parse(s) as unknown;
  } catch {
    return undefined;
  }
}
