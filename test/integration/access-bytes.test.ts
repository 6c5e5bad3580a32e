// The access line's bytes_out is what the client received, for every kind of answer — server-sent
// events (OpenAI streams, V2 infer as events, generate_stream), JSON, errors — over HTTP/1.1 and
// h2c, as curl counts it (%{size_download}); and a stream the client leaves mid-way (Python httpx
// closing its response) is logged as incomplete, with the bytes that went out before. A built
// gateway (bin/tensorgate --demo) and its real stdout.
import { execFile } from 'node:child_process';
import { curl } from '../support/curl';
import { interopPython } from '../support/interop';
import { accessLines, type ObservedGateway, startObservedGateway } from '../support/observed';
import { CURL, needs, PYTHON } from '../support/tools';
import { waitUntil } from '../support/wait';

const SIMPLE = JSON.stringify({
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i) })),
});
const COMPLETION = (stream: boolean, maxTokens: number, prompt = 'one two three'): string =>
  JSON.stringify({ model: 'tiny_llm', prompt, max_tokens: maxTokens, stream });

describe('bytes_out and incomplete in the access line', () => {
  let gw: ObservedGateway;
  beforeAll(async () => {
    gw = await startObservedGateway(['--log-level', 'info']);
  }, 30_000);
  afterAll(async () => {
    await gw?.stop();
  }, 30_000);

  /** The access line of the request `send` makes (the next line after those already there). */
  async function lineOf<T>(send: () => Promise<T>): Promise<{ answer: T; line: Record<string, unknown> }> {
    const before = accessLines(gw).length;
    const answer = await send();
    await waitUntil(() => accessLines(gw).length > before, 'the access line', 10_000);
    return { answer, line: accessLines(gw)[before]! };
  }

  const json = ['-H', 'Content-Type: application/json'];
  needs(CURL()).test.each([
    ['OpenAI completion stream (HTTP/1.1)', 'openai_completions', 200, () => ['--http1.1', ...json, '--data-binary', COMPLETION(true, 8), `${gw.url}/openai/v1/completions`]],
    ['OpenAI completion stream (h2c)', 'openai_completions', 200, () => ['--http2-prior-knowledge', ...json, '--data-binary', COMPLETION(true, 8), `${gw.url}/openai/v1/completions`]],
    ['OpenAI completion, whole', 'openai_completions', 200, () => [...json, '--data-binary', COMPLETION(false, 8), `${gw.url}/openai/v1/completions`]],
    ['V2 infer as events (Accept: text/event-stream)', 'infer', 200, () => ['-H', 'Accept: text/event-stream', '--data-binary', SIMPLE, `${gw.url}/v2/models/simple/infer`]],
    ['generate_stream', 'generate_stream', 200, () => ['--data-binary', '{"text_input":"one two","max_tokens":4}', `${gw.url}/v2/models/tiny_llm/generate_stream`]],
    ['V2 infer, JSON', 'infer', 200, () => ['--data-binary', SIMPLE, `${gw.url}/v2/models/simple/infer`]],
    ['an unknown model (404)', 'infer', 404, () => ['--data-binary', SIMPLE, `${gw.url}/v2/models/nope/infer`]],
    ['malformed JSON (400)', 'infer', 400, () => ['--data-binary', '{"inputs":[', `${gw.url}/v2/models/simple/infer`]],
    ['an OpenAI refusal (404, OpenAI\'s error object)', 'openai_completions', 404, () => [...json, '--data-binary', '{"model":"nope","prompt":"x"}', `${gw.url}/openai/v1/completions`]],
  ] as const)('%s: bytes_out is what curl received', async (_name, route, status, args) => {
    const { answer, line } = await lineOf(() => curl('-N', ...args()));
    expect([answer.exit, answer.status]).toEqual([0, status]);
    expect(answer.body.length).toBeGreaterThan(0);
    expect({ route: line.route, status: line.status, bytes_out: line.bytes_out, incomplete: line.incomplete })
      .toEqual({ route, status, bytes_out: answer.body.length, incomplete: undefined });
  });

  needs(PYTHON()).test('a client that leaves mid-stream (Python httpx): incomplete, with the bytes sent before', async () => {
    const python = await interopPython();
    // `go slowly`: 50 ms a token after the first, so 1000 tokens would take 50 s; the client reads
    // 200 bytes of events and closes its response (and connection).
    const program = [
      'import httpx, sys',
      'n = 0',
      'with httpx.Client(timeout=20) as c:',
      '    with c.stream("POST", sys.argv[1], json={"model": "tiny_llm", "prompt": "go slowly", "max_tokens": 1000, "stream": True}) as r:',
      '        for chunk in r.iter_raw():',
      '            n += len(chunk)',
      '            if n >= 200: break',
      'print(n)',
    ].join('\n');
    const { answer, line } = await lineOf(() => new Promise<number>((resolve, reject) => {
      execFile(python, ['-c', program, `${gw.url}/openai/v1/completions`], { encoding: 'utf8', timeout: 30_000 }, (err, out, stderr) => {
        if (err !== null) reject(new Error(`${err.message}\n${stderr}`));
        else resolve(Number(out.trim()));
      });
    }));
    expect(answer).toBeGreaterThanOrEqual(200);
    expect({ route: line.route, status: line.status, incomplete: line.incomplete }).toEqual({ route: 'openai_completions', status: 200, incomplete: true });
    // What went out before the client left: at least what it read, far less than 1000 tokens' events.
    expect(line.bytes_out).toBeGreaterThanOrEqual(answer);
    expect(line.bytes_out).toBeLessThan(20_000);
    expect(line.output_tokens).toBeLessThan(1000);
  }, 60_000);
});
