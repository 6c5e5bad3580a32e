// The official `openai` npm SDK against the gateway's OpenAI-compatible API: the twin of
// openai_sdk_check.py (same groups, same cases, same JSON lines; test/conformance/openai-sdk.test.ts
// holds the expectations). Run under the project's Node 24 as a program of its own, as its users run
// it: a client made with baseURL and apiKey only, everything else its defaults.
//
//   node openai_sdk_check.mjs BASE_URL API_KEY GROUP [IMAGE_FILE | WRONG_KEY LIMITED_KEY]
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const LLMS = ['tiny_llm', 'tiny_llm_trtllm'];
const CHAT = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Name four letters.' }];

async function run(name, fn) {
  let line;
  try {
    line = { case: name, ok: true, value: await fn() };
  } catch (e) {
    const error = e instanceof OpenAI.APIError
      ? { class: e.constructor.name, status: e.status, code: e.code ?? null, param: e.param ?? null, type: e.type ?? null,
        message: e.message, body: e.error ?? null }
      : { class: e?.constructor?.name ?? typeof e, message: String(e?.message ?? e) };
    line = { case: name, ok: false, error };
  }
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

async function chunks(streamPromise) {
  const got = [];
  for await (const c of await streamPromise) got.push(c);
  return got;
}

async function all(page) {
  const got = [];
  for await (const m of page) got.push(m);
  return got;
}

async function mainGroup(client, imageFile) {
  await run('models.list', () => all(client.models.list()));
  await run('models.retrieve', () => client.models.retrieve('tiny_llm'));
  await run('models.retrieve unknown', () => client.models.retrieve('no_such_model'));
  for (const m of LLMS) {
    const cmp = (body) => client.completions.create({ model: m, ...body });
    await run(`${m} completion`, () => cmp({ prompt: 'one two three', max_tokens: 5 }));
    await run(`${m} completion stream`, () => chunks(cmp({ prompt: 'one two three', max_tokens: 5, stream: true })));
    await run(`${m} completion stream usage`, () => chunks(cmp({ prompt: 'one two three', max_tokens: 5, stream: true, stream_options: { include_usage: true } })));
    await run(`${m} completion stop`, () => cmp({ prompt: 'one', max_tokens: 10, stop: ['delta'] }));
    await run(`${m} completion stop stream`, () => chunks(cmp({ prompt: 'one', max_tokens: 10, stop: 'delta', stream: true })));
    const chat = (body) => client.chat.completions.create({ model: m, messages: CHAT, ...body });
    await run(`${m} chat`, () => chat({ max_tokens: 4 }));
    await run(`${m} chat stream`, () => chunks(chat({ max_tokens: 4, stream: true })));
    await run(`${m} chat stream usage`, () => chunks(chat({ max_tokens: 4, stream: true, stream_options: { include_usage: true } })));
    await run(`${m} chat stop`, () => chat({ max_tokens: 16, stop: ['delta'] }));
  }
  await run('tiny_llm completion echo', () => client.completions.create({ model: 'tiny_llm', prompt: 'one two three', max_tokens: 2, echo: true }));

  const url = `data:image/png;base64,${readFileSync(imageFile).toString('base64')}`;
  const vision = [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url } }] }];
  await run('tiny_llm chat image', () => client.chat.completions.create({ model: 'tiny_llm', messages: vision, max_tokens: 3 }));
  await run('tiny_llm chat image stream', () => chunks(client.chat.completions.create({ model: 'tiny_llm', messages: vision, max_tokens: 3, stream: true })));
  await run('tiny_llm_trtllm chat image', () => client.chat.completions.create({ model: 'tiny_llm_trtllm', messages: vision, max_tokens: 3 }));

  const emb = (body) => client.embeddings.create({ model: 'tiny_embed', ...body });
  await run('embed float', () => emb({ input: 'hello world', encoding_format: 'float' }));
  await run('embed base64', () => emb({ input: 'hello world', encoding_format: 'base64' }));
  // The SDK's default: base64 on the wire, decoded by the SDK into a Float32Array (written out as numbers).
  await run('embed default', async () => {
    const r = await emb({ input: 'hello world' });
    return { ...r, data: r.data.map((d) => ({ ...d, embedding: Array.from(d.embedding) })) };
  });
  await run('embed list', () => emb({ input: ['hello world', 'a b c'], encoding_format: 'float' }));

  await run('completion unknown model', () => client.completions.create({ model: 'no_such_model', prompt: 'x', max_tokens: 2 }));
  await run('chat unknown model', () => client.chat.completions.create({ model: 'no_such_model', messages: CHAT }));
  await run('embed unknown model', () => emb({ model: 'no_such_model', input: 'x' }));
  await run('completion n=2', () => client.completions.create({ model: 'tiny_llm', prompt: 'x', max_tokens: 2, n: 2 }));
  await run('chat n=2', () => client.chat.completions.create({ model: 'tiny_llm', messages: CHAT, max_tokens: 2, n: 2 }));
  await run('chat logprobs', () => client.chat.completions.create({ model: 'tiny_llm_trtllm', messages: CHAT, max_tokens: 2, logprobs: true }));
  await run('completion max_tokens=-1', () => client.completions.create({ model: 'tiny_llm', prompt: 'x', max_tokens: -1 }));
}

async function abortGroup(client, model) {
  await run(`${model} abort`, async () => {
    const got = []; const ms = [];
    const start = performance.now();
    const stream = await client.completions.create({ model, prompt: 'count to two hundred slowly', max_tokens: 200, stream: true });
    for await (const c of stream) {
      got.push(c);
      ms.push(Math.round(performance.now() - start));
      if (got.length === 3) break; // leaving the loop aborts the request: the connection goes, mid-stream
    }
    return { chunks: got, ms };
  });
}

async function authGroup(client, wrong, limited) {
  const ids = async (c) => (await all(c.models.list())).map((m) => m.id);
  await run('auth models.list', () => ids(client));
  await run('auth completion', () => client.completions.create({ model: 'tiny_llm', prompt: 'one two three', max_tokens: 2 }));
  await run('auth wrong key models.list', () => ids(wrong));
  await run('auth wrong key completion', () => wrong.completions.create({ model: 'tiny_llm', prompt: 'one two three', max_tokens: 2 }));
  await run('auth limited key embed', () => limited.embeddings.create({ model: 'tiny_embed', input: 'hello world', encoding_format: 'float' }));
  await run('auth limited key completion', () => limited.completions.create({ model: 'tiny_llm', prompt: 'one two three', max_tokens: 2 }));
}

const WEATHER = { type: 'function', function: { name: 'get_weather', description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } }, required: ['city', 'days'] } } };
const ASK = [{ role: 'user', content: 'What is the weather in Paris?' }];

async function toolsGroup(client) {
  for (const m of LLMS) {
    await run(`${m} tools`, () => client.chat.completions.create({ model: m, messages: ASK, tools: [WEATHER] }));
    await run(`${m} tools stream`, () => chunks(client.chat.completions.create({ model: m, messages: ASK, tools: [WEATHER], stream: true })));
    // The SDK's own stream helper puts the call together from its deltas.
    await run(`${m} tools stream helper`, async () => {
      const stream = client.chat.completions.stream({ model: m, messages: ASK, tools: [WEATHER] });
      return (await stream.finalChatCompletion()).choices[0].message;
    });
    // The Responses API: a call, and a streamed answer's events.
    await run(`${m} responses create`, async () => {
      const r = await client.responses.create({ model: m, input: ASK[0].content, tools: [{ type: 'function', ...WEATHER.function }] });
      return { response: r, output_text: r.output_text };
    });
    await run(`${m} responses stream`, async () => {
      const events = [];
      for await (const e of await client.responses.create({ model: m, input: ASK[0].content, max_output_tokens: 2, stream: true })) events.push(e);
      return events;
    });
  }
}

async function basicGroup(client) {
  await run('basic models.list', async () => (await all(client.models.list())).map((m) => m.id));
  await run('basic models.retrieve', () => client.models.retrieve('tiny_llm'));
  await run('basic completion', () => client.completions.create({ model: 'tiny_llm', prompt: 'one two three', max_tokens: 2 }));
}

const [baseURL, apiKey, group, extra, limitedKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey });
if (group === 'main') await mainGroup(client, extra);
else if (group.startsWith('abort:')) await abortGroup(client, group.slice('abort:'.length));
else if (group === 'basic') await basicGroup(client);
else if (group === 'tools') await toolsGroup(client);
else if (group === 'auth') await authGroup(client, new OpenAI({ baseURL, apiKey: extra }), new OpenAI({ baseURL, apiKey: limitedKey }));
else throw new Error(`unknown group ${group}`);
