// Differential conformance of the generate extension: each case goes to Triton's own HTTP
// /generate and /generate_stream, then through tensorgate (ModelStreamInfer) to the same Triton;
// status, compared headers and body bytes must agree.
import type { RunningGateway } from '../../gateway/gateway';
import { gatewayFor } from '../support/gateway';
import { type Answer, differences, report, send } from './cases/exchange';
import type { Case } from './cases/types';

const TRITON = `http://${process.env.TRITON_HTTP}`;

const post = (name: string, path: string, body: string, headers: Record<string, string> = {}): Case => ({
  name, method: 'POST', path: `/v2/models/${path}`, body: Buffer.from(body), headers: { 'Content-Type': 'application/json', ...headers },
});
const S16 = (v: number): string => JSON.stringify(Array(16).fill(v));

const cases: Case[] = [
  post('one response', 'repeat_int32/generate', '{"INPUT0":1}'),
  post('three responses: 200 error', 'repeat_int32/generate', '{"INPUT0":3}'),
  post('no response: 200 error', 'repeat_int32/generate', '{"INPUT0":0}'),
  post('stream of three, id and parameters', 'repeat_int32/generate_stream', '{"INPUT0":3,"id":"abc","foo":"bar","parameters":{"x":1}}'),
  post('empty stream', 'repeat_int32/generate_stream', '{"INPUT0":0}'),
  post('mid-stream error', 'repeat_int32/generate_stream', '{"INPUT0":3,"fail_after":1}'),
  post('first response an error (generate)', 'repeat_int32/generate', '{"INPUT0":1,"fail_after":0}'),
  post('first response an error (stream)', 'repeat_int32/generate_stream', '{"INPUT0":2,"fail_after":0}'),
  post('text words', 'echo_text/generate_stream', '{"TEXT":"hello big world"}'),
  // The tiny LLMs as LLM clients of Triton's generate extension call them: optional inputs left out.
  // Their lower-case output names show that Triton writes every key of the answer in byte order.
  post('tiny_llm: a stream with a stop string', 'tiny_llm/generate_stream', '{"text_input":"hello there","stream":true,"sampling_parameters":"{\\"max_tokens\\":3,\\"stop\\":[\\"zeta\\"]}"}'),
  post('tiny_llm: one answer', 'tiny_llm/generate', '{"text_input":"hello there","exclude_input_in_output":true}'),
  post('tiny_llm_trtllm: a stream with stop words', 'tiny_llm_trtllm/generate_stream', '{"text_input":"a","max_tokens":5,"stream":true,"stop_words":["delta"]}'),
  post('tiny_llm: a model error', 'tiny_llm/generate', '{"text_input":"x","sampling_parameters":"{\\"max_tokens\\":0}"}'),
  post('tiny_llm_trtllm: without max_tokens', 'tiny_llm_trtllm/generate', '{"text_input":"a"}'),
  post('fp32 array', 'identity_fp32/generate', '{"INPUT0":[1.5,2]}'),
  post('fp32 scalar printed as double', 'identity_fp32/generate', '{"INPUT0":0.1}'),
  post('fp32 stream with identity encoding', 'identity_fp32/generate_stream', '{"INPUT0":[1.5]}', { 'Content-Encoding': 'identity' }),
  post('two inputs, batch dim 1', 'simple/generate', `{"INPUT0":${S16(2)},"INPUT1":${S16(1)}}`),
  post('int64 exact', 'identity_int64/generate', '{"INPUT0":[9007199254740993]}'),
  post('bytes', 'identity_bytes/generate', '{"INPUT0":["a","b"]}'),
  post('bool', 'identity_bool/generate', '{"INPUT0":[true]}'),
  post('two outputs unwrapped', 'image_stats/generate', '{"IMAGE":[1,2,3]}'),
  post('no-batch 2-d model', 'identity_fp32_nobatch/generate', '{"INPUT0":[1,2,3]}'),
  post('explicit version', 'identity_fp32/versions/1/generate', '{"INPUT0":[1],"id":"q"}'),
  post('parameter types', 'identity_fp32/generate', '{"INPUT0":[1],"x":1.5,"y":true,"z":"s","w":-3,"parameters":{"p":2}}'),
  post('triton_ key', 'identity_fp32/generate', '{"INPUT0":[1],"triton_x":1}'),
  post('model error (generate)', 'failing/generate', '{"INPUT0":[1.5]}'),
  post('model error (stream)', 'failing/generate_stream', '{"INPUT0":[1.5]}'),
  post('unknown model', 'nope/generate', '{"INPUT0":[1.5]}'),
  post('unknown model (stream)', 'nope/generate_stream', '{"INPUT0":[1.5]}'),
  post('unknown version', 'identity_fp32/versions/2/generate', '{"INPUT0":[1]}'),
  post('gzip refused', 'identity_fp32/generate', '{"INPUT0":[1.5]}', { 'Content-Encoding': 'gzip' }),
  post('bad JSON', 'identity_fp32/generate', '{"INPUT0":[1.5'),
  post('bad JSON (stream)', 'identity_fp32/generate_stream', '{"INPUT0":[1'),
  post('empty body', 'identity_fp32/generate', ''),
  post('not an object', 'identity_fp32/generate', '[1]'),
  post('unknown key with array value', 'identity_fp32/generate', '{"INPUT1":[1.5]}'),
  post('null parameter', 'identity_fp32/generate', '{"INPUT0":[1],"x":null}'),
  post('nested parameter', 'identity_fp32/generate', '{"INPUT0":[1],"parameters":{"a":{"b":1}}}'),
  post('parameters not an object', 'identity_fp32/generate', '{"INPUT0":[1],"parameters":5}'),
  post('numeric id', 'identity_fp32/generate', '{"INPUT0":[1],"id":5}'),
  post('nested data', 'identity_fp32/generate', '{"INPUT0":[[1.5,2],[3,4]]}'),
  post('string for fp32', 'identity_fp32/generate', '{"INPUT0":["a"]}'),
  post('shape not deducible', 'repeat_int32/generate', '{"INPUT0":[1,2]}'),
  post('missing input', 'identity_fp32/generate', '{"x":1}'),
  post('missing input (stream)', 'identity_fp32/generate_stream', '{"x":1}'),
  { name: 'GET: 405', method: 'GET', path: '/v2/models/identity_fp32/generate' },
];

describe('generate endpoints: Triton HTTP vs tensorgate', () => {
  let gw: RunningGateway;
  beforeAll(async () => {
    gw = await gatewayFor(['--backend', process.env.TRITON_GRPC!]);
  });
  afterAll(async () => {
    await gw?.close();
  });

  test.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const ref: Answer = await send(TRITON, c);
    const got: Answer = await send(gw.url, c);
    const diffs = differences(c, ref, got);
    if (diffs.length > 0) throw new Error(report(c, ref, got, diffs));
  });
});
