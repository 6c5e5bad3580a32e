// `openai.models` (docs/openai.md): the models the OpenAI-compatible API offers, each an id the
// clients use, the Triton model behind it, what kind of model it is and how its inputs are laid
// out — checked and loaded at start, so a mistake stops the start with one line naming the key,
// and nothing is read from disk (or fetched from a model hub) while serving.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Template } from '@huggingface/jinja';
import { isObject, problemsAt } from './problems';

/** The two layouts of a generate model's inputs that Triton's own OpenAI frontend speaks. */
export type OpenAiConvention = 'vllm' | 'trtllm';

/**
 * How a model writes a tool call in its text (pipeline/openai/tools.ts reads each back): Llama 3.1's
 * JSON, Mistral's `[TOOL_CALLS]`, Hermes' `<tool_call>` (Qwen 2.5 and later write Hermes').
 */
export const TOOL_PARSERS = ['llama3_json', 'mistral', 'hermes'] as const;
export type ToolParserName = (typeof TOOL_PARSERS)[number];

/** A model's chat template (its tokenizer_config.json's `chat_template`) and the special tokens it may use. */
export interface ChatTemplate {
  readonly path: string;
  readonly source: string;
  /** bos_token, eos_token, … of the tokenizer config, as the template sees them. */
  readonly tokens: Readonly<Record<string, string>>;
}

export interface OpenAiModel {
  /** The name clients send as `model` and see in `/models`. */
  readonly id: string;
  /** The Triton model behind it (default: the id). */
  readonly model: string;
  /** The model version ('' = Triton's choice). */
  readonly version: string;
  readonly kind: 'generate' | 'embedding';
  /**
   * How a generate model takes its inputs; undefined: from the model's config at Triton (backend
   * `vllm` → vllm, `tensorrtllm` → trtllm), else the request is refused.
   */
  readonly convention: OpenAiConvention | undefined;
  /** Renders chat messages into the prompt; undefined: chat completions are refused for this model. */
  readonly chatTemplate: ChatTemplate | undefined;
  /** The BYTES or UINT8 input that takes an image content part's bytes; '' = images are refused. */
  readonly imageInput: string;
  /** max_tokens when the request gives none. */
  readonly maxTokens: number;
  /** Embedding models: the FP32 output that holds the vector ('' = the model's only FP32 output). */
  readonly output: string;
  /** How the model writes tool calls; undefined: requests with `tools` are refused. */
  readonly toolParser: ToolParserName | undefined;
}

const KEYS = ['id', 'model', 'version', 'kind', 'convention', 'chatTemplate', 'imageInput', 'maxTokens', 'output', 'toolParser'];

/** The list of `openai.models`, or every problem, each naming its key. */
export function parseOpenAiModels(raw: unknown): { value: OpenAiModel[] } | { problem: string[] } {
  if (!Array.isArray(raw)) return { problem: ['must be a list of {id, model?, kind, convention?, chatTemplate?, imageInput?, maxTokens?, output?, toolParser?}'] };
  const problems: string[] = [];
  const out: OpenAiModel[] = [];
  raw.forEach((m: unknown, i) => {
    const bad = problemsAt(problems, `openai.models[${i}]`);
    if (!isObject(m)) { bad('', 'must be a mapping'); return; }
    for (const k of Object.keys(m)) if (!KEYS.includes(k)) bad(k, `unknown key (known: ${KEYS.join(', ')})`);
    const str = (k: string, fallback: string): string => {
      const v = m[k] ?? fallback;
      if (typeof v !== 'string') { bad(k, `must be a string, got ${JSON.stringify(v)}`); return fallback; }
      return v;
    };
    const id = str('id', '');
    if (!/^[A-Za-z0-9._:/-]{1,256}$/.test(id)) bad('id', `must be 1 to 256 of A-Z a-z 0-9 . _ : / -, got ${JSON.stringify(m.id)}`);
    else if (out.some((o) => o.id === id)) bad('id', `${JSON.stringify(id)} is given twice`);
    const model = str('model', id);
    if (model === '' || model.includes('/')) bad('model', `must name a Triton model, got ${JSON.stringify(m.model)}`);
    const version = str('version', '');
    if (!/^[0-9]*$/.test(version)) bad('version', `must be a model version number, got ${JSON.stringify(m.version)}`);
    const kind = m.kind ?? 'generate';
    if (kind !== 'generate' && kind !== 'embedding') bad('kind', `must be generate or embedding, got ${JSON.stringify(m.kind)}`);
    const convention = m.convention;
    if (convention !== undefined && convention !== 'vllm' && convention !== 'trtllm') bad('convention', `must be vllm or trtllm, got ${JSON.stringify(convention)}`);
    const maxTokens = m.maxTokens ?? 16;
    if (!Number.isInteger(maxTokens) || (maxTokens as number) < 1 || (maxTokens as number) > 1_000_000) bad('maxTokens', `must be an integer from 1 to 1000000, got ${JSON.stringify(m.maxTokens)}`);
    let chatTemplate: ChatTemplate | undefined;
    if (m.chatTemplate !== undefined) {
      const path = str('chatTemplate', '');
      const t = loadChatTemplate(path);
      if (typeof t === 'string') bad('chatTemplate', t);
      else chatTemplate = t;
    }
    const toolParser = m.toolParser;
    if (toolParser !== undefined && !(TOOL_PARSERS as readonly unknown[]).includes(toolParser)) bad('toolParser', `must be one of ${TOOL_PARSERS.join(', ')}, got ${JSON.stringify(toolParser)}`);
    if (kind === 'embedding' && (chatTemplate !== undefined || convention !== undefined || toolParser !== undefined)) bad('kind', 'an embedding model takes no chatTemplate, convention or toolParser');
    out.push({
      id, model, version, kind: kind as OpenAiModel['kind'], convention: convention as OpenAiConvention | undefined, chatTemplate,
      imageInput: str('imageInput', ''), maxTokens: maxTokens as number, output: str('output', ''), toolParser: toolParser as ToolParserName | undefined,
    });
  });
  return problems.length > 0 ? { problem: problems } : { value: out };
}

/**
 * A chat template from a tokenizer_config.json (its `chat_template`: a string, or a list of named
 * templates of which `default` is taken) or from a file holding the Jinja text itself; parsed once
 * here, so a template the engine cannot read stops the start.
 */
export function loadChatTemplate(path: string): ChatTemplate | string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return `cannot read ${JSON.stringify(path)} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}): give the path of the model's tokenizer_config.json or of a .jinja file`;
  }
  let source = text;
  const tokens: Record<string, string> = {};
  if (path.endsWith('.json')) {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      return `${JSON.stringify(path)} is not JSON: ${(err as Error).message}`;
    }
    if (!isObject(json)) return `${JSON.stringify(path)} must hold a JSON object`;
    const t = json.chat_template;
    const named = Array.isArray(t) ? (t as unknown[]).find((x) => isObject(x) && x.name === 'default') : undefined;
    const chosen = isObject(named) ? named.template : t;
    if (typeof chosen !== 'string') return `${JSON.stringify(path)} has no chat_template string (nor a list with a "default" one)`;
    source = chosen;
    for (const [k, v] of Object.entries(json)) {
      if (!k.endsWith('_token')) continue;
      if (typeof v === 'string') tokens[k] = v;
      else if (isObject(v) && typeof v.content === 'string') tokens[k] = v.content;
    }
  }
  try {
    new Template(source); // parsed only to refuse a broken template at start
  } catch (err) {
    return `the chat template of ${JSON.stringify(path)} does not parse: ${(err as Error).message}`;
  }
  return { path, source, tokens };
}

/** The demo's chat template: config/tiny_llm/ of the package, found from source or from dist/. */
function demoTemplatePath(): string {
  const rel = join('config', 'tiny_llm', 'tokenizer_config.json');
  let dir = __dirname;
  while (!existsSync(join(dir, rel)) && dirname(dir) !== dir) dir = dirname(dir);
  return join(dir, rel);
}

/**
 * The demo zoo's OpenAI models (gateway/reference-backend/zoo.ts, test/triton/zoo.py), offered
 * with `--demo` when `openai.models` is empty: so `npm start` answers the README's SDK example.
 */
export function demoOpenAiModels(): OpenAiModel[] {
  const template = loadChatTemplate(demoTemplatePath());
  if (typeof template === 'string') throw new Error(`the demo's chat template: ${template}`);
  const base = { version: '', imageInput: '', maxTokens: 16, output: '', toolParser: undefined };
  // The demo's template offers tools as Hermes' models are offered them, and the tiny LLMs answer so.
  return [
    { ...base, id: 'tiny_llm', model: 'tiny_llm', kind: 'generate', convention: 'vllm', chatTemplate: template, imageInput: 'image', toolParser: 'hermes' },
    { ...base, id: 'tiny_llm_trtllm', model: 'tiny_llm_trtllm', kind: 'generate', convention: 'trtllm', chatTemplate: template, toolParser: 'hermes' },
    { ...base, id: 'tiny_embed', model: 'tiny_embed', kind: 'embedding', convention: undefined, chatTemplate: undefined },
  ];
}

/** openai.prefix: an absolute path the other routes do not own. */
export function openAiPrefixProblems(prefix: string): string[] {
  if (!/^(\/[A-Za-z0-9._~-]+)+$/.test(prefix)) return [`openai.prefix: must be an absolute path such as /openai/v1 (segments of A-Z a-z 0-9 . _ ~ -, no trailing /), got ${JSON.stringify(prefix)}`];
  if (/^\/v2(\/|$)/.test(prefix)) return [`openai.prefix: must not be under /v2 (Triton's routes), got ${JSON.stringify(prefix)}`];
  return [];
}
