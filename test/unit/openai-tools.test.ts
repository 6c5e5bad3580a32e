// The tool call parsers (gateway/pipeline/openai/tools.ts) on text written as each model family
// writes its calls (the formats' sources are cited there), whole and streamed in pieces of every
// size; the strict checks of an answer; and the demo chat template's rendering of tools, calls and
// results (config/tiny_llm/tokenizer_config.json), which the tiny LLMs read.
import { join } from 'node:path';
import { loadChatTemplate } from '../../gateway/config/openai';
import type { ToolParserName } from '../../gateway/config/openai';
import { renderChat } from '../../gateway/decode/dialects/chat-template';
import { schemaProblem } from '../../gateway/decode/dialects/json-schema';
import { checkedCalls, checkStructured, parseToolCalls, ToolScan } from '../../gateway/pipeline/openai/tools';

const strip = (p: { content: string; calls: readonly { name: string; arguments: string }[] }) =>
  ({ content: p.content, calls: p.calls.map((c) => ({ name: c.name, arguments: JSON.parse(c.arguments) as unknown })) });

const CASES: [ToolParserName, string, string, { name: string; arguments: unknown }[]][] = [
  ['hermes', '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', '', [{ name: 'get_weather', arguments: { city: 'Paris' } }]],
  ['hermes', 'Let me look.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {"x": "</tool_call>"}}\n</tool_call>', 'Let me look.',
    [{ name: 'a', arguments: {} }, { name: 'b', arguments: { x: '' } }]],
  ['mistral', '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "b", "arguments": {}}]', '',
    [{ name: 'get_weather', arguments: { city: 'Paris' } }, { name: 'b', arguments: {} }]],
  ['llama3_json', '{"name": "get_weather", "parameters": {"city": "Paris"}}', '', [{ name: 'get_weather', arguments: { city: 'Paris' } }]],
  ['llama3_json', '<|python_tag|>{"name": "a", "parameters": {"s": "}{;"}}; {"name": "b", "arguments": {}}', '', [{ name: 'a', arguments: { s: '}{;' } }, { name: 'b', arguments: {} }]],
];

describe.each(['hermes', 'mistral', 'llama3_json'] as const)('the %s parser', (parser) => {
  const cases = CASES.filter((c) => c[0] === parser);

  test('whole answers: the calls, and the text beside them as content', () => {
    for (const [, text, content, calls] of cases) {
      const got = strip(parseToolCalls(parser, text));
      // hermes' second case: a string holding the end tag ends the call there (as vLLM's regex
      // does), so the call does not parse.
      if (text.includes('"</tool_call>"')) expect(got).toEqual({ content: text, calls: [] });
      else expect(got).toEqual({ content, calls });
    }
  });

  test('text that is no call is content, whole and streamed in pieces of every size', () => {
    for (const text of [' alpha beta gamma', '', 'I cannot call {tools} today', '<tool', '[TOOL', '{"broken": ']) {
      expect(parseToolCalls(parser, text)).toEqual({ content: text, calls: [] });
      for (const size of [1, 2, 5, 64]) {
        const scan = new ToolScan(parser);
        let sent = '';
        for (let i = 0; i < text.length; i += size) sent += scan.push(text.slice(i, i + size));
        const end = scan.end();
        expect([sent + end.content, end.calls]).toEqual([text, []]);
      }
    }
  });

  test('streamed in pieces of every size: content as it comes, the calls at the end', () => {
    for (const [, text, content, calls] of cases.filter((c) => !c[1].includes('"</tool_call>"'))) {
      for (const size of [1, 3, 7, 1000]) {
        const scan = new ToolScan(parser);
        let sent = '';
        for (let i = 0; i < text.length; i += size) sent += scan.push(text.slice(i, i + size));
        const end = strip(scan.end());
        expect([sent.trim(), end.calls]).toEqual([content, calls]);
      }
    }
  });
});

test('hermes streamed at every piece size: each call starts once its name is read, its arguments go out as written, and the calls at the end are those', () => {
  const texts = [
    'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Pa}ris", "n": [1, {"x": "\\"{"}]}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>',
    '<tool_call>\n{"name":"get_weather","arguments":{"city":"","days":1}}\n</tool_call>',
  ];
  for (const text of texts) {
    const whole = parseToolCalls('hermes', text);
    for (let size = 1; size <= text.length; size++) {
      const scan = new ToolScan('hermes');
      let content = '';
      const started: { id: string; name: string }[] = [];
      const args: string[] = [];
      for (let i = 0; i < text.length; i += size) {
        content += scan.push(text.slice(i, i + size));
        for (const piece of scan.drain()) {
          if (piece.kind === 'start') {
            expect(piece.index).toBe(started.length);
            started.push({ id: piece.id, name: piece.name });
            args.push('');
          } else {
            args[piece.index] += piece.text;
          }
        }
      }
      const end = scan.end();
      // The text before the calls went out as content as it came; the end holds none.
      expect([size, content.trim(), end.streamed, end.content]).toEqual([size, whole.content, whole.calls.length, '']);
      expect(end.calls.map((c) => ({ id: c.id, name: c.name }))).toEqual(started);
      expect(end.calls.map((c) => c.arguments)).toEqual(args);
      expect(args.map((a) => JSON.parse(a) as unknown)).toEqual(whole.calls.map((c) => JSON.parse(c.arguments) as unknown));
    }
  }
});

test('hermes streamed: parallel_tool_calls false streams the first call only; a call cut inside its arguments is an error, not content', () => {
  const text = '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call>';
  const one = new ToolScan('hermes', false);
  one.push(text);
  expect(one.drain().filter((p) => p.kind === 'start').map((p) => p.kind === 'start' && p.name)).toEqual(['a']);
  expect(one.end().streamed).toBe(1);
  const cut = new ToolScan('hermes');
  cut.push('<tool_call>\n{"name": "a", "arguments": {"x": ');
  expect(cut.drain().map((p) => p.kind)).toEqual(['start', 'arguments']);
  expect(() => cut.end()).toThrow('The model\'s call of \'a\' ended before its arguments did.');
  // Written otherwise (arguments first): nothing streamed, the call read whole at the end.
  const other = new ToolScan('hermes');
  other.push('<tool_call>\n{"arguments": {}, "name": "a"}\n</tool_call>');
  expect([other.drain(), other.end().calls.map((c) => c.name)]).toEqual([[], ['a']]);
});

test('every call gets its own id: OpenAI\'s call_…, Mistral\'s 9 letters and digits (its templates take no other)', () => {
  const h = parseToolCalls('hermes', '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "a", "arguments": {}}</tool_call>');
  expect(h.calls.map((c) => c.id)).toEqual([expect.stringMatching(/^call_[0-9a-f]{24}$/), expect.stringMatching(/^call_[0-9a-f]{24}$/)]);
  expect(h.calls[0]!.id).not.toBe(h.calls[1]!.id);
  const m = parseToolCalls('mistral', '[TOOL_CALLS][{"name": "a", "arguments": {}}, {"name": "a", "arguments": {}}]');
  expect(m.calls.map((c) => c.id)).toEqual([expect.stringMatching(/^[a-zA-Z0-9]{9}$/), expect.stringMatching(/^[a-zA-Z0-9]{9}$/)]);
  expect(m.calls[0]!.id).not.toBe(m.calls[1]!.id);
});

describe('what the answer is checked against', () => {
  const base = { offered: [], legacy: false, parallel: true, strict: new Map<string, object>(), parser: 'hermes' as const };
  const one = parseToolCalls('hermes', '<tool_call>{"name": "a", "arguments": {"n": "x"}}</tool_call>');

  test('tool_choice required: no call is GW_ERR_MODEL_OPENAI_OUTPUT; named: a call of another function is too', () => {
    expect(() => checkedCalls({ ...base, choice: 'required' }, { content: 'hi', calls: [] })).toThrow(expect.objectContaining({ code: 'GW_ERR_MODEL_OPENAI_OUTPUT', status: 502 }));
    expect(checkedCalls({ ...base, choice: 'required' }, one)).toHaveLength(1);
    expect(() => checkedCalls({ ...base, choice: { name: 'b' } }, one)).toThrow(/called 'a', though tool_choice named 'b'/);
    expect(checkedCalls({ ...base, choice: 'auto' }, { content: 'hi', calls: [] })).toEqual([]);
  });

  test('a strict function\'s arguments satisfy its parameters', () => {
    const strict = new Map([['a', { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }]]);
    expect(() => checkedCalls({ ...base, choice: 'auto', strict }, one)).toThrow(/does not satisfy the function's parameters \(strict\): answer\/n must be integer/);
  });

  test('response_format json_schema strict: JSON satisfying the schema, else an error; not strict: not checked', () => {
    const format = { kind: 'json_schema' as const, name: 'w', schema: { type: 'object', required: ['city'], properties: { city: { type: 'string' } } }, strict: true };
    expect(() => checkStructured(format, '{"city": ""}')).not.toThrow();
    expect(() => checkStructured(format, '{"town": ""}')).toThrow(/does not satisfy the schema 'w' \(strict\): answer must have required property 'city'/);
    expect(() => checkStructured(format, ' alpha beta')).toThrow(/is not JSON/);
    expect(() => checkStructured({ ...format, strict: false }, ' alpha beta')).not.toThrow();
  });
});

test('the demo template: tools as Hermes\' models see them, calls and results in the history; without tools, as before', () => {
  const t = loadChatTemplate(join(__dirname, '../../config/tiny_llm/tokenizer_config.json'));
  if (typeof t === 'string') throw new Error(t);
  expect(renderChat(t, [{ role: 'user', content: 'one two three' }])).toBe('<s><|user|>\none two three\n<|assistant|>\n');
  const tool = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } };
  const prompt = renderChat(t, [
    { role: 'user', content: 'weather?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
    { role: 'tool', content: 'sunny', tool_call_id: 'c1' },
  ], [tool]);
  const toolsBlock = /<tools>\n(.*)\n<\/tools>/.exec(prompt);
  expect(JSON.parse(toolsBlock![1]!)).toEqual(tool);
  expect(prompt).toContain('<|assistant|>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<|tool|>\n<tool_response>\nsunny\n</tool_response>\n<|assistant|>\n');
});

test('a schema naming its draft ($schema) is read as draft-07; one Ajv cannot compile is refused, not thrown', () => {
  expect(schemaProblem({ $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', $defs: { A: { type: 'string' } }, properties: { a: { $ref: '#/$defs/A' } } })).toBeUndefined();
  expect(schemaProblem({ type: 'object', properties: { a: { $ref: '#/nowhere' } } })).toMatch(/^is not a JSON Schema the gateway can check: /);
  expect(schemaProblem({ type: 'objekt' })).toMatch(/^is not a valid JSON Schema: /);
  expect(schemaProblem([])).toBe('must be a JSON Schema object');
});
