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
// held, and read as calls when the generation ends. Hermes' calls are streamed as they are written
// too: once a call's name is read, its arguments' text goes out as it comes (CallPiece), and the
// calls read at the end keep those ids and that text.
import { randomBytes } from 'node:crypto';
import type { ToolParserName } from '../../config/openai';
import type { ToolCall } from '../../encode/openai';
import { isObject } from '../../config/problems';
import type { GenerateAsk } from '../../decode/dialects/openai';
import { violation } from '../../decode/dialects/json-schema';
import { GatewayError } from '../../errors';

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

/** A piece of a call streamed as the model writes it: its start (id and name), or a fragment of its arguments. */
export type CallPiece =
  | { readonly kind: 'start'; readonly index: number; readonly id: string; readonly name: string }
  | { readonly kind: 'arguments'; readonly index: number; readonly text: string };

/** The text of a stream as it comes: what can go out as content now, the rest held until the end. */
export class ToolScan {
  private held = '';
  /** undecided: the text so far may yet begin a call; content: it cannot; calls: it does. */
  private state: 'undecided' | 'content' | 'calls' = 'undecided';
  readonly #calls: HermesCalls | undefined;

  /** `parallel` false: only the first call is streamed (the answer keeps only it). */
  constructor(private readonly parser: ToolParserName, parallel = true) {
    this.#calls = parser === 'hermes' ? new HermesCalls(parallel) : undefined;
  }

  /** The call pieces the text so far lets out, once each. */
  drain(): CallPiece[] {
    return this.state === 'calls' && this.#calls !== undefined ? this.#calls.read(this.held) : [];
  }

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

  /** At the end: the held text read as calls (or as content, when it is none); streamed calls keep id and text. */
  end(): Parsed & { readonly streamed: number } {
    const parsed = parseToolCalls(this.parser, this.held);
    return this.#calls === undefined ? { ...parsed, streamed: 0 } : this.#calls.end(parsed);
  }
}

/** A Hermes call's head, up to its arguments' first character: `{"name": "…", "arguments": `. */
const HERMES_HEAD = /^\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*(\S)/;

/**
 * Hermes' calls read as they are written: `<tool_call>`, the head with the name (the call starts),
 * then the arguments object's text as it comes, to its end (valueEnd: strings skipped whole).
 * A call written otherwise (arguments first, arguments not an object) stops the streaming there;
 * the calls from there on go out whole at the end.
 */
class HermesCalls {
  readonly #streamed: { id: string; name: string; args: string }[] = [];
  /** Where the reading is: the held text before it is read. */
  #cursor = 0;
  /** The call whose arguments are being streamed: where they start, and how much of them went out. */
  #open: { readonly from: number; sent: number } | undefined;
  #stopped = false;

  constructor(private readonly parallel: boolean) {}

  read(held: string): CallPiece[] {
    const out: CallPiece[] = [];
    while (!this.#stopped) {
      if (this.#open !== undefined) {
        const index = this.#streamed.length - 1;
        const end = valueEnd(held, this.#open.from);
        const upTo = end < 0 ? held.length : end;
        if (upTo > this.#open.sent) out.push({ kind: 'arguments', index, text: held.slice(this.#open.sent, upTo) });
        this.#open.sent = upTo;
        if (end < 0) break;
        this.#streamed[index]!.args = held.slice(this.#open.from, end);
        this.#open = undefined;
        this.#cursor = end;
        if (!this.parallel) this.#stopped = true;
        continue;
      }
      const at = held.indexOf('<tool_call>', this.#cursor);
      if (at < 0) break;
      const after = at + '<tool_call>'.length;
      const m = HERMES_HEAD.exec(held.slice(after));
      if (m === null) break;
      const name = parseJsonOrUndefined(`"${m[1]!}"`);
      if (typeof name !== 'string' || m[2] !== '{') {
        this.#stopped = true;
        break;
      }
      const from = after + m[0].length - 1;
      const call = { id: callId(), name, args: '' };
      this.#streamed.push(call);
      out.push({ kind: 'start', index: this.#streamed.length - 1, id: call.id, name });
      this.#open = { from, sent: from };
    }
    return out;
  }

  /** The whole text's calls, streamed ones with their id and text; one the whole text does not hold is an error. */
  end(parsed: Parsed): Parsed & { readonly streamed: number } {
    const n = this.#streamed.length;
    if (n === 0) return { ...parsed, streamed: 0 };
    if (this.#open !== undefined) throw outputError(`The model's call of '${this.#streamed[n - 1]!.name}' ended before its arguments did.`);
    if (parsed.calls.length < n) throw outputError('The model\'s calls, streamed as written, do not read as calls whole.');
    const calls = parsed.calls.map((c, i) => (i < n ? { ...c, id: this.#streamed[i]!.id, arguments: this.#streamed[i]!.args } : c));
    return { content: parsed.content, calls, streamed: n };
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
