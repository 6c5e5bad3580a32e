// Tools and structured output (docs/openai.md "Tools", "Structured output") driven by clients we
// did not write, on the demo gateway (the reference backend's tiny LLMs) and in front of real
// Triton (test/triton/zoo.py's twins): the official Python SDK (openai_sdk_check.py `tools`: a call
// whole and streamed, a round trip through a `tool` message, chat.completions.parse and
// beta.chat.completions.parse with a Pydantic model, bad tools as BadRequestError naming the
// param), the official npm SDK (openai_sdk_check.mjs `tools`: a streamed call, raw and through its
// stream helper), LangChain's ChatOpenAI(...).bind_tools and the OpenAI Agents SDK running one
// agent with one function tool to completion (openai_agents_check.py; the Agents SDK over chat
// completions, through its OpenAIChatCompletionsModel, and over the Responses API, its default); the
// Responses API through both SDKs (responses.create, a round trip, responses.parse, responses.stream).
// The tiny LLMs call the first tool offered with a minimal instance of its parameters, and answer a
// guide with a minimal instance of its schema.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { run } from '../support/run';
import { tritonVenv } from '../support/triton';
import { openaiConfig } from './openai-config';

jest.setTimeout(300_000);

const ROOT = join(__dirname, '..', '..');
const LLMS = ['tiny_llm', 'tiny_llm_trtllm'] as const;
const TARGETS = ['demo', 'triton'] as const;
type Target = (typeof TARGETS)[number];
/** A value as JSON.parse gives it (expect() checks its shape). */
type Json = ReturnType<typeof JSON.parse>;
interface Line { readonly case: string; readonly ok: boolean; readonly value?: Json; readonly error?: Json }

/** The call the tiny LLMs make of get_weather({city: string, days: integer >= 1}, both required). */
const CALL = { name: 'get_weather', arguments: '{"city":"","days":1}' };

async function driver(program: 'python' | 'node' | 'agents', args: readonly string[]): Promise<Map<string, Line>> {
  const python = join(tritonVenv('test/openai/requirements.txt'), 'bin', 'python');
  const [file, script] = program === 'node' ? [process.execPath, 'openai_sdk_check.mjs']
    : [python, program === 'python' ? 'openai_sdk_check.py' : 'openai_agents_check.py'];
  const r = await run(file, [join(__dirname, script), ...args], { timeoutMs: 240_000, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' } });
  if (r.code !== 0) throw new Error(`${program} driver exited with ${r.code}\n${r.stderr.slice(0, 20_000)}`);
  return new Map(r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Line).map((l) => [l.case, l]));
}

function ok(lines: Map<string, Line>, name: string): Json {
  const l = lines.get(name);
  expect([name, l?.ok, l?.error]).toEqual([name, true, undefined]);
  return l!.value;
}

let work: string;
const gateways = new Map<Target, RunningGateway>();
const results = new Map<Target, { python: Map<string, Line>; node: Map<string, Line>; agents: Map<string, Line> }>();

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'tg-openai-tools-'));
  writeFileSync(join(work, 'openai.yaml'), openaiConfig(ROOT));
  gateways.set('demo', await gatewayFor(['--demo']));
  gateways.set('triton', await gatewayFor(['--config', join(work, 'openai.yaml'), '--backend', process.env.TRITON_GRPC!]));
  for (const target of TARGETS) {
    const base = `${gateways.get(target)!.url}/openai/v1`;
    const [python, node, ...agents] = await Promise.all([driver('python', [base, 'unused', 'tools']), driver('node', [base, 'unused', 'tools']),
      ...LLMS.map((m) => driver('agents', [base, 'unused', m]))]);
    results.set(target, { python, node, agents: new Map(agents.flatMap((a) => [...a])) });
  }
});
afterAll(async () => {
  for (const gw of gateways.values()) await gw.close(2000);
  if (work !== undefined) rmSync(work, { recursive: true, force: true });
});

describe.each(TARGETS)('on %s', (target) => {
  const r = () => results.get(target)!;

  describe.each(LLMS)('%s', (model) => {
    test('Python SDK: create(tools=…) gives the call, finish_reason tool_calls', () => {
      const c = ok(r().python, `${model} tools`);
      expect(c.choices).toEqual([{ index: 0, finish_reason: 'tool_calls', logprobs: null,
        message: { role: 'assistant', content: null, refusal: null, tool_calls: [{ id: expect.stringMatching(/^call_/), type: 'function', function: CALL }] } }]);
    });

    test('Python and npm SDKs: the call streamed — index, id, type, name and arguments "" first, then the arguments as written', () => {
      // The tiny LLMs write their call 16 characters a token: the arguments come in those pieces.
      const pieces = ['{"', 'city":"","days":', '1}'];
      for (const sdk of ['python', 'node'] as const) {
        const chunks = ok(r()[sdk], `${model} tools stream`) as Json[];
        expect(chunks.map((ch) => ch.choices[0].delta)).toEqual([
          { role: 'assistant', content: null, tool_calls: [{ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: CALL.name, arguments: '' } }] },
          ...pieces.map((a) => ({ tool_calls: [{ index: 0, function: { arguments: a } }] })),
          {},
        ]);
        expect(pieces.join('')).toBe(CALL.arguments);
        expect(chunks.map((ch) => ch.choices[0].finish_reason)).toEqual([null, null, null, null, 'tool_calls']);
      }
      const helped = ok(r().node, `${model} tools stream helper`);
      expect(helped.tool_calls).toEqual([{ id: expect.stringMatching(/^call_/), type: 'function', function: CALL }]);
    });

    test('Python SDK: a round trip — the call, the tool\'s result, an answer in words', () => {
      const { call, answer } = ok(r().python, `${model} tools round trip`);
      expect(call.tool_calls[0].function).toEqual(CALL);
      expect([answer.choices[0].finish_reason, answer.choices[0].message.tool_calls]).toEqual(['length', undefined]);
      expect(answer.choices[0].message.content).toMatch(/^( [a-z]+){3}$/);
    });

    test('Python SDK: chat.completions.parse with a Pydantic model (json_schema, strict) — the guided answer, parsed', () => {
      expect(ok(r().python, `${model} parse`)).toEqual({ parsed: { city: '', temperature: 0, tags: [] }, content: '{"city":"","temperature":0,"tags":[]}' });
    });

    test('LangChain ChatOpenAI(...).bind_tools: the call as LangChain\'s tool_calls', () => {
      expect(ok(r().agents, `${model} langchain bind_tools`)).toEqual({ content: '', tool_calls: [{ name: 'get_weather', args: { city: '' }, id: expect.stringMatching(/^call_/), type: 'tool_call' }] });
    });

    test('OpenAI Agents SDK (OpenAIChatCompletionsModel): one agent, one function tool, run to completion', () => {
      const a = ok(r().agents, `${model} agents`);
      expect(a).toEqual({ called: [''], items: ['ToolCallItem', 'ToolCallOutputItem', 'MessageOutputItem'], final_output: expect.stringMatching(/^( [a-z]+)+$/) });
    });

    test('OpenAI Agents SDK over the Responses API (OpenAIResponsesModel, its default): the tool called, a typed final output', () => {
      const a = ok(r().agents, `${model} agents responses`);
      expect(a).toEqual({ called: [''], items: ['ToolCallItem', 'ToolCallOutputItem', 'MessageOutputItem'], final_output: { summary: '' } });
    });

    test('Python SDK: responses.create — instructions and a string input, a message item; cut at max_output_tokens: incomplete', () => {
      const { response, output_text: text } = ok(r().python, `${model} responses create`);
      expect(text).toMatch(/^( [a-z]+){3}$/);
      expect(response).toEqual(expect.objectContaining({ object: 'response', id: expect.stringMatching(/^resp_/), status: 'incomplete', model,
        incomplete_details: { reason: 'max_output_tokens' }, output: [expect.objectContaining({ type: 'message', role: 'assistant', content: [expect.objectContaining({ type: 'output_text', text })] })],
        usage: expect.objectContaining({ output_tokens: 3 }) }));
    });

    test('Python SDK: a Responses round trip — a function_call item, its function_call_output, an answer in words', () => {
      const { call, answer, output_text: text } = ok(r().python, `${model} responses round trip`);
      expect(call).toEqual({ type: 'function_call', id: expect.stringMatching(/^fc_/), call_id: expect.stringMatching(/^call_/), ...CALL, status: 'completed' });
      expect([answer.status, text]).toEqual(['incomplete', expect.stringMatching(/^( [a-z]+){3}$/)]);
    });

    test('Python SDK: responses.parse with a Pydantic model (text.format json_schema, strict)', () => {
      expect(ok(r().python, `${model} responses parse`)).toEqual({ parsed: { city: '', temperature: 0, tags: [] }, output_text: '{"city":"","temperature":0,"tags":[]}' });
    });

    test('Python SDK: responses.stream — the typed events in order, the final response; a cut answer ends response.incomplete', () => {
      const { types, final, parsed, cut } = ok(r().python, `${model} responses stream`);
      const deltas = (types as string[]).filter((t) => t === 'response.output_text.delta');
      expect(types).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added', ...deltas,
        'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
      expect([deltas.length > 0, final.status, parsed]).toEqual([true, 'completed', { city: '', temperature: 0, tags: [] }]);
      expect((cut as Json[]).map((e) => [e.type, e.sequence_number])).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
        'response.output_text.delta', 'response.output_text.delta', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.incomplete'].map((t, i) => [t, i]));
    });

    test('Python SDK: a streamed call — a function_call item, its arguments delta(s) and done, completed', () => {
      const { events, final } = ok(r().python, `${model} responses stream call`);
      const types = (events as Json[]).map((e) => e.type as string);
      const deltas = types.filter((t) => t === 'response.function_call_arguments.delta');
      expect(types).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', ...deltas,
        'response.function_call_arguments.done', 'response.output_item.done', 'response.completed']);
      expect((events as Json[]).filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta)).toEqual(['{"', 'city":"","days":', '1}']);
      expect(final.output).toEqual([expect.objectContaining({ type: 'function_call', ...CALL, status: 'completed' })]);
    });

    test('npm SDK: responses.create with a function tool, and a streamed answer\'s events', () => {
      const { response, output_text: text } = ok(r().node, `${model} responses create`);
      expect([response.status, text, response.output]).toEqual(['completed', '', [expect.objectContaining({ type: 'function_call', ...CALL })]]);
      const events = ok(r().node, `${model} responses stream`) as Json[];
      expect([events[0].type, events.at(-1).type, events.at(-1).response.status]).toEqual(['response.created', 'response.incomplete', 'incomplete']);
      expect(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('')).toMatch(/^( [a-z]+){2}$/);
    });
  });

  test('Python SDK: logprobs and top_logprobs (tiny_llm, the vLLM backend\'s logprobs output) — the demo\'s deterministic values', () => {
    const alt = (token: string, logprob: number) => ({ token, logprob, bytes: [...Buffer.from(token)] });
    expect(ok(r().python, 'tiny_llm logprobs')).toEqual({ content: [
      { ...alt(' iota', -0.125), top_logprobs: [alt(' iota', -0.125), alt(' kappa', -1.125)] },
      { ...alt(' kappa', -0.125), top_logprobs: [alt(' kappa', -0.125), alt(' lambda', -1.125)] }], refusal: null });
  });

  test('Python SDK: beta.chat.completions.parse, where the SDK still has it', () => {
    const l = r().python.get('tiny_llm beta parse');
    if (l !== undefined) expect(ok(r().python, 'tiny_llm beta parse')).toEqual({ city: '', temperature: 0, tags: [] });
  });

  test('Python SDK: a tool without a name, a tool_choice naming no tool, previous_response_id — BadRequestError (400) naming the param', () => {
    for (const [name, param] of [['tools no name', 'tools[0].function.name'], ['tools choice unknown', 'tool_choice'], ['responses previous_response_id', 'previous_response_id']]) {
      const e = r().python.get(name!)?.error;
      expect([name, e?.class, e?.status, e?.param, e?.type]).toEqual([name, 'BadRequestError', 400, param, 'invalid_request_error']);
    }
  });
});
