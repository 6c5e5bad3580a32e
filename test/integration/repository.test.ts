// Repository load/unload as sent to Triton's gRPC: `config` as string_param, `file:` contents
// base64-decoded into bytes_param, unload_dependents as bool_param, repository_name always "",
// and the cached model configuration evicted by both (a fake Triton records the calls).
import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from '@grpc/grpc-js';
import type { RunningGateway } from '../../gateway/gateway';
import { inference, inferenceService } from '../../proto/services';
import { gatewayFor } from '../support/gateway';
import { send } from '../support/http';

describe('repository calls', () => {
  let server: Server;
  let gw: RunningGateway;
  const calls: { rpc: string; req: unknown }[] = [];
  let configVersion = 0;
  beforeAll(async () => {
    server = new Server();
    const record = (rpc: string, answer: () => unknown) => (call: ServerUnaryCall<unknown, unknown>, cb: sendUnaryData<unknown>) => {
      calls.push({ rpc, req: call.request });
      cb(null, answer());
    };
    server.addService(inferenceService, {
      // Ready, as Triton: without it every health check fails (UNIMPLEMENTED, then ServerReady too)
      // and after upstream.unhealthyThreshold of them (~1 s) the backend is known down and the
      // infers below get 503 before any ModelConfig call — on a busy machine, mid-test.
      ServerReady: (_call: ServerUnaryCall<unknown, unknown>, cb: sendUnaryData<unknown>) => cb(null, { ready: true }),
      RepositoryModelLoad: record('load', () => ({})),
      RepositoryModelUnload: record('unload', () => ({})),
      RepositoryIndex: record('index', () => ({ models: [{ name: 'a', version: '1', state: 'READY' }, { name: 'b', state: 'UNAVAILABLE', reason: 'unloaded' }] })),
      // Each ModelConfig answer differs, so a cache hit is visible.
      ModelConfig: record('config', () => ({ config: { name: 'm', max_batch_size: ++configVersion } })),
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    gw = await gatewayFor(['--backend', `127.0.0.1:${port}`, '--api-disabled', 'none']);
  });
  afterAll(async () => {
    await gw.close();
    server.forceShutdown();
  });

  test('load: config string, files decoded', async () => {
    const file = Buffer.from([0, 1, 2, 250, 255]);
    const r = await send(`${gw.url}/v2/repository/models/m/load`, {
      body: JSON.stringify({ parameters: { config: '{"backend":"python"}', 'file:1/model.py': file.toString('base64') } }),
    });
    expect([r.status, r.headers['content-type'], r.body.length]).toEqual([200, 'application/json', 0]);
    const req = calls.filter((c) => c.rpc === 'load').pop()!.req as inference.RepositoryModelLoadRequest;
    expect(req.repository_name).toBe('');
    expect(req.model_name).toBe('m');
    expect(req.parameters.config).toMatchObject({ string_param: '{"backend":"python"}' });
    expect(Buffer.from(req.parameters['file:1/model.py']!.bytes_param!)).toEqual(file);
  });

  test('unload: unload_dependents as bool_param', async () => {
    const r = await send(`${gw.url}/v2/repository/models/m/unload`, { body: '{"parameters":{"unload_dependents":true}}' });
    expect(r.status).toBe(200);
    const req = calls.filter((c) => c.rpc === 'unload').pop()!.req as inference.RepositoryModelUnloadRequest;
    expect(req.parameters.unload_dependents).toMatchObject({ bool_param: true });
  });

  test('index: a JSON array, empty fields left out', async () => {
    const r = await send(`${gw.url}/v2/repository/index`, { body: '' });
    expect(r.body.toString()).toBe('[{"name":"a","version":"1","state":"READY"},{"name":"b","state":"UNAVAILABLE","reason":"unloaded"}]');
  });

  test('load and unload evict the cached model configuration', async () => {
    const raw = () => send(`${gw.url}/v2/models/m/infer`, { body: Buffer.alloc(4), headers: { 'Inference-Header-Content-Length': 0 } });
    const configCalls = () => calls.filter((c) => c.rpc === 'config').length;
    await raw();
    await raw();
    expect(configCalls()).toBe(1); // cached
    await send(`${gw.url}/v2/repository/models/m/load`, { body: '' });
    await raw();
    expect(configCalls()).toBe(2);
    await send(`${gw.url}/v2/repository/models/m/unload`, { body: '' });
    await raw();
    expect(configCalls()).toBe(3);
  });
});
