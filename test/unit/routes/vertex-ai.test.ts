// Where X-Vertex-Ai-Triton-Redirect goes: the table of VertexAiAPIServer::Handle
// (src/vertex_ai_server.cc) — the redirect is "/" + the header, matched by Triton's own regular
// expressions (src/http_server.cc HTTPAPIServer), in its order.
import { redirectTarget } from '../../../gateway/routes/vertex-ai';

test.each([
  ['v2/models/stats', { kind: 'route', method: 'GET', path: '/v2/models/stats', routes: ['statistics_all'] }],
  ['v2/models/m', { kind: 'route', method: 'GET', path: '/v2/models/m', routes: ['model_metadata'] }],
  ['v2/models/m/versions/3', { kind: 'route', method: 'GET', path: '/v2/models/m/versions/3', routes: ['model_metadata'] }],
  ['v2/models/m/ready', { kind: 'route', method: 'GET', path: '/v2/models/m/ready', routes: ['model_ready'] }],
  ['v2/models/m/config', { kind: 'route', method: 'GET', path: '/v2/models/m/config', routes: ['model_config'] }],
  ['v2/models/m/versions/2/stats', { kind: 'route', method: 'GET', path: '/v2/models/m/versions/2/stats', routes: ['statistics_model'] }],
  ['v2/models/m/infer', { kind: 'infer', path: '/v2/models/m/infer' }],
  ['v2/models/m/versions/1/infer', { kind: 'infer', path: '/v2/models/m/versions/1/infer' }],
  ['v2', { kind: 'route', method: 'GET', path: '/v2', routes: ['server_metadata'] }],
  ['v2/health/live', { kind: 'route', method: 'GET', path: '/v2/health/live', routes: ['health_live', 'health_ready'] }],
  ['v2/health/ready', { kind: 'route', method: 'GET', path: '/v2/health/ready', routes: ['health_live', 'health_ready'] }],
  ['v2/systemsharedmemory/status', { kind: 'route', method: 'GET', path: '/v2/systemsharedmemory/status', routes: ['systemsharedmemory_status'] }],
  ['v2/cudasharedmemory/region/r/status', { kind: 'route', method: 'GET', path: '/v2/cudasharedmemory/region/r/status', routes: ['cudasharedmemory_status'] }],
  // the index keeps POST (HandleRepositoryIndex takes it)
  ['v2/repository/index', { kind: 'route', method: 'POST', path: '/v2/repository/index', routes: ['repository_index'] }],
  ['v2/repository/r/index', { kind: 'route', method: 'POST', path: '/v2/repository/r/index', routes: ['repository_index'] }],
])('%s is redirected', (value, target) => {
  expect(redirectTarget(value)).toEqual(target);
});

test.each([
  // 403: what changes Triton (Triton answers 403), and Triton's metrics
  ['v2/systemsharedmemory/region/r/register', 'refused'],
  ['v2/systemsharedmemory/unregister', 'refused'],
  ['v2/cudasharedmemory/region/r/register', 'refused'],
  ['v2/repository/models/m/load', 'refused'],
  ['v2/repository/r/models/m/unload', 'refused'],
  ['metrics', 'refused'],
  // 400: Triton's model_regex_ matches these, but its redirect serves none of them
  ['v2/models/m/generate', 'invalid'],
  ['v2/models/m/generate_stream', 'invalid'],
  ['v2/models/m/trace/setting', 'invalid'],
  ['v2/trace/setting', 'invalid'],
  ['v2/logging', 'invalid'],
  ['v2/models/m/versions/x/infer', 'invalid'],
  ['', 'invalid'],
  ['/v2', 'invalid'],
  ['v2/', 'invalid'],
  ['v1/models/m:predict', 'invalid'],
  // what the router would read differently from Triton: a query, a fragment, a blank
  ['v2/models/m/ready?x=1', 'invalid'],
  ['v2/models/m#x', 'invalid'],
  ['v2/models/a, b/infer', 'invalid'],
  ['v2/models/m\tx', 'invalid'],
])('%s is %s', (value, kind) => {
  expect(redirectTarget(value).kind).toBe(kind);
});
