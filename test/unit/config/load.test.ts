import { mkdtempSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, helpText, loadCommand, loadConfig, unreadableFileProblems } from '../../../gateway/config/load';
import { envName, OPTIONS } from '../../../gateway/config/schema';

function load(argv: string[], env: Record<string, string> = {}) {
  const r = loadConfig({ argv, env });
  if (r.help) throw new Error('unexpected help');
  return r.config;
}

function problems(argv: string[], env: Record<string, string> = {}): readonly string[] {
  try {
    loadConfig({ argv, env });
  } catch (err) {
    expect((err as ConfigError).code).toBe('GW_ERR_CONFIG_INVALID');
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

function yamlFile(text: string): string {
  const p = join(mkdtempSync(join(tmpdir(), 'tg-config-')), 'config.yaml');
  writeFileSync(p, text);
  return p;
}

describe('loadConfig', () => {
  test('upstream.pools and upstream.models from YAML: pools with their own health keys, the model table', () => {
    const c = load(['--config', yamlFile([
      'upstream:',
      '  backends: [triton:8001]',
      '  pools:',
      '    gpu: {backends: ["dns:///triton-gpu:8001"], healthCheckIntervalMs: 2000}',
      '    canary: {backends: [c1:8001, c2:8001]}',
      '  models:',
      '    - {model: "det*", pool: gpu}',
      '    - {model: resnet50, pool: canary}',
      '    - {model: bert, split: {default: 90, canary: 10}, header: X-Variant}',
      '  picking: round-robin',
    ].join('\n'))]);
    expect(c.upstream.pools).toEqual([
      { name: 'gpu', targets: ['dns:///triton-gpu:8001'], settings: { healthCheckIntervalMs: 2000 } },
      { name: 'canary', targets: ['c1:8001', 'c2:8001'], settings: {} },
    ]);
    expect(c.upstream.models).toEqual([
      { model: 'det*', split: [{ pool: 'gpu', weight: 1 }] },
      { model: 'resnet50', split: [{ pool: 'canary', weight: 1 }] },
      { model: 'bert', split: [{ pool: 'default', weight: 90 }, { pool: 'canary', weight: 10 }], header: 'x-variant' },
    ]);
    expect(c.upstream.picking).toBe('round-robin');
    // Pools alone are enough backends.
    expect(load(['--pools', '{p: {backends: [a:1]}}']).upstream.pools).toHaveLength(1);
  });

  test('upstream.pools and upstream.models: every problem named by key', () => {
    expect(problems(['--backend', 't:1', '--pools', '{Bad: {backends: [a:1]}, default: {backends: [b:1]}, p: {backends: [], color: red, healthyThreshold: 0}, q: {backends: [t:1, "x"]}}'])).toEqual([
      "upstream.pools.Bad: a pool name is lower-case letters, digits, '-' and '_' (--pools)",
      'upstream.pools.default: "default" is upstream.backends\' pool; give those backends there (--pools)',
      'upstream.pools.p.color: unknown key (known: backends, healthCheckIntervalMs, healthyThreshold, unhealthyThreshold, ejectAfterFailures, ejectionBaseMs, maxEjectionPercent) (--pools)',
      'upstream.pools.p.backends: must list at least one host:port, dns:///name:port or unix:/path (--pools)',
      'upstream.pools.p.healthyThreshold: must be an integer in [1, 100], got 0 (--pools)',
      'upstream.pools.q.backends: "x" is not host:port, dns:///name:port or unix:/path (--pools)',
    ]);
    expect(problems(['--backend', 't:1', '--pools', '{p: {backends: [a:1]}}', '--models', '[{model: m, pool: nope}, {model: "", pool: p}]'])).toEqual([
      'upstream.models[1].model: must be a model name, or a pattern with * (--models)',
    ]);
    expect(problems(['--backend', 't:1', '--pools', '{p: {backends: [a:1]}}', '--models', '[{model: m, pool: nope}, {model: n, split: {p: 5, gone: 5}}]'])).toEqual([
      'upstream.models[0].pool: no pool named "nope" (pools: default, p)',
      'upstream.models[1].split.gone: no pool named "gone" (pools: default, p)',
    ]);
    expect(problems(['--backend', 't:1', '--models', '[{model: m, pool: default, split: {default: 1}}, {model: n, split: {default: 0}}, {model: o, split: {default: -1}, header: "a b"}]'])).toEqual([
      'upstream.models[0]: give pool (one pool) or split (pools and weights), not both (--models)',
      'upstream.models[1].split: at least one weight must be above 0 (--models)',
      'upstream.models[2].split.default: a weight is an integer in [0, 1000000], got -1 (--models)',
      'upstream.models[2].header: must be a header name (--models)',
    ]);
    expect(problems(['--backend', 't:1', '--pools', '{s: {backends: [a:1]}}', '--models',
      '[{model: m, pool: default, mirror: {pool: s, percent: 0}}, {model: n, pool: s, mirror: {pool: s, percent: 5}}, {model: o, pool: s, mirror: {pool: gone, percent: 5}}]'])).toEqual([
      'upstream.models[0].mirror: must be {pool: <name>, percent: <above 0, at most 100>} (--models)',
    ]);
    expect(problems(['--backend', 't:1', '--pools', '{s: {backends: [a:1]}}', '--models',
      '[{model: n, pool: s, mirror: {pool: s, percent: 5}}, {model: o, pool: s, mirror: {pool: gone, percent: 5}}]'])).toEqual([
      'upstream.models[0].mirror.pool: s already serves the model\'s calls; mirror to another pool',
      'upstream.models[1].mirror.pool: no pool named "gone" (pools: default, s)',
    ]);
  });

  test('the gRPC port: a port of its own, and a fixed one with workers', () => {
    expect(problems(['--backend', 't:1', '--grpc-port-enabled', '--grpc-port', '8000'])).toEqual([
      'server.grpc.port: 8000 is server.port too; the gRPC port needs a port of its own (--grpc-port), or leave it off and call gRPC on server.port',
    ]);
    expect(problems(['--backend', 't:1', '--grpc-port-enabled', '--grpc-port', '0', '--workers', '2'])).toEqual([
      'server.grpc.port: 0 (a free port) with 2 workers would give each worker a port of its own; choose a port (--grpc-port)',
    ]);
    const on = loadConfig({ argv: ['--backend', 't:1', '--grpc-port-enabled', '--workers', '2'], env: {} });
    expect(on.help ? undefined : on.config.server.grpc).toEqual({ enabled: true, port: 8001 });
  });

  test('defaults with one backend', () => {
    const c = load(['--backend', 'triton:8001']);
    expect(c).toEqual({
      server: {
        host: '0.0.0.0', port: 8000, metricsPort: 8002, corsOrigin: '', reusePort: true, compiledLane: true, drainTimeoutMs: 10000, drainGraceMs: 0,
        headersTimeoutMs: 10000, requestTimeoutMs: 300000, keepAliveTimeoutMs: 65000, discardBodyBytes: 16777216, discardBodyMs: 5000,
        maxHeaderBytes: 16384, maxHeaderCount: 100, maxUrlBytes: 8192, fastPath: true, plannedInfer: true,
        tls: { cert: '', key: '', clientCa: '', minVersion: 'TLSv1.2', ciphers: '' },
        grpc: { enabled: false, port: 8001 },
        h2: { maxConcurrentStreams: 100, maxSessionMemoryMb: 32, streamWindowBytes: 1048576, connectionWindowBytes: 8388608, maxResetsPerSecond: 200,
          maxUnreadAnswerBytes: 33554432, unreadAnswerMs: 30000 },
      },
      workers: 1,
      upstream: {
        backends: ['triton:8001'], transport: 'h2', http2Client: 'own', cutThrough: true, timeoutMs: 60000, restricted: [], dnsRefreshMs: 30000, healthCheckIntervalMs: 5000,
        healthyThreshold: 2, unhealthyThreshold: 3, ejectAfterFailures: 5, ejectionBaseMs: 30000, maxEjectionPercent: 50, retries: 1,
        pools: [], models: [], picking: 'least-request', modelRefreshMs: 5000, mirrorMaxInFlight: 32,
        queueMetrics: { port: 0, intervalMs: 1000 },
        tls: { ca: '', cert: '', key: '', serverName: '' },
        sharedMemory: { enabled: false, regions: 8, regionBytes: 32 * 1024 * 1024, prefix: 'tensorgate' },
      },
      api: { restricted: [], disabled: ['model-repository', 'shared-memory', 'trace', 'logging'] },
      auth: {
        enabled: false, keysFile: '', keyHeader: '', open: ['health'],
        jwt: {
          jwksUrl: '', jwksFile: '', issuer: '', audience: '', algorithms: ['RS256', 'PS256', 'ES256', 'ES384', 'EdDSA'], clockToleranceS: 60,
          groupsClaim: 'scope', modelsClaim: '', fetchTimeoutMs: 5000, cacheMaxAgeMs: 600000, cooldownMs: 30000,
        },
        limits: { subjects: new Map(), groupsClaim: '', groups: new Map() },
      },
      limits: {
        maxInputSizeBytes: 67108864, maxBodyBytes: 2147483647, growYoungGeneration: false,
        maxInFlightRequests: 2048, maxInFlightBodyBytes: 1073741824, decodeThreads: 1, decodeThreadMinBytes: 262144, multipartMaxParts: 64,
      },
      telemetry: {
        serverTiming: true, logLevel: 'info', tracing: false, traceExporter: 'otlp',
        otlpEndpoint: 'http://127.0.0.1:4318/v1/traces', serviceName: 'tensorgate', recent: { size: 512, perSecond: 50 },
      },
      v1: { statusFormat: 'tfserving' },
      torchserve: { enabled: false },
      sagemaker: { enabled: false, defaultModel: '', inferenceType: 'infer', pingMode: 'ready' },
      vertexAi: { enabled: false, predictRoute: '', healthRoute: '', defaultModel: '' },
      binary: { headerless: true },
      buffers: { poolBytes: 67108864 },
      openai: { enabled: true, prefix: '/openai/v1', timeoutMs: 600000, models: [] },
      routes: [],
      passthrough: [],
      demo: false,
    });
  });

  test('SageMaker and Vertex AI: off by default; Vertex AI\'s routes from AIP_* when not given', () => {
    const c = load(['--backend', 't:1', '--sagemaker', '--sagemaker-default-model', 'm', '--vertex-ai', '--vertex-ai-default-model', 'd'],
      { AIP_PREDICT_ROUTE: '/v1/endpoints/1/deployedModels/2:predict', AIP_HEALTH_ROUTE: '/health' });
    expect([c.sagemaker, c.vertexAi]).toEqual([{ enabled: true, defaultModel: 'm', inferenceType: 'infer', pingMode: 'ready' },
      { enabled: true, predictRoute: '/v1/endpoints/1/deployedModels/2:predict', healthRoute: '/health', defaultModel: 'd' }]);
    // the keys win over the variables
    expect(load(['--backend', 't:1', '--vertex-ai', '--vertex-ai-default-model', 'd', '--vertex-ai-predict-route', '/p', '--vertex-ai-health-route', '/h'],
      { AIP_PREDICT_ROUTE: '/x', AIP_HEALTH_ROUTE: '/y' }).vertexAi).toEqual({ enabled: true, predictRoute: '/p', healthRoute: '/h', defaultModel: 'd' });
    // off: the variables are not read
    expect(load(['--backend', 't:1'], { AIP_PREDICT_ROUTE: '/x' }).vertexAi.predictRoute).toBe('');
  });

  test('SageMaker and Vertex AI: every problem named by key', () => {
    expect(problems(['--backend', 't:1', '--sagemaker-default-model', 'm'])).toEqual([
      'sagemaker.defaultModel: given but the SageMaker routes are off; set sagemaker.enabled (--sagemaker) or remove it',
    ]);
    expect(problems(['--backend', 't:1', '--sagemaker', '--sagemaker-inference-type', 'generate'])).toEqual([
      'sagemaker.inferenceType: generate runs on sagemaker.defaultModel, which is not set; name the model (--sagemaker-default-model)',
    ]);
    expect(problems(['--backend', 't:1', '--sagemaker', '--sagemaker-inference-type', 'predict'])[0]).toMatch(/^--sagemaker-inference-type: /);
    expect(problems(['--backend', 't:1', '--vertex-ai'])).toEqual([
      'vertexAi.predictRoute: required with vertexAi.enabled; give the path Vertex AI sends to (--vertex-ai-predict-route) or set AIP_PREDICT_ROUTE',
      'vertexAi.healthRoute: required with vertexAi.enabled; give the path Vertex AI sends to (--vertex-ai-health-route) or set AIP_HEALTH_ROUTE',
      'vertexAi.defaultModel: required with vertexAi.enabled; name the model the predict route calls (--vertex-ai-default-model)',
    ]);
    expect(problems(['--backend', 't:1', '--sagemaker', '--vertex-ai', '--vertex-ai-default-model', 'a/b',
      '--vertex-ai-predict-route', '/v2/models/x/infer', '--vertex-ai-health-route', '/ping'])).toEqual([
      'vertexAi.predictRoute: /v2/models/x/infer is one of the gateway\'s own routes; choose another path',
      'vertexAi.healthRoute: /ping is one of the gateway\'s own routes; choose another path',
      'vertexAi.defaultModel: "a/b" is not a model name (no /, ? or #)',
    ]);
    expect(problems(['--backend', 't:1', '--vertex-ai', '--vertex-ai-default-model', 'd', '--vertex-ai-predict-route', 'p?q=1', '--vertex-ai-health-route', 'p?q=1'])).toEqual([
      'vertexAi.predictRoute: "p?q=1" is not a path (it starts with / and has no query, fragment, blank or control character)',
      'vertexAi.healthRoute: "p?q=1" is not a path (it starts with / and has no query, fragment, blank or control character)',
      'vertexAi.healthRoute: the same path as vertexAi.predictRoute; give them different paths',
    ]);
  });

  test('TorchServe: its GET /ping is SageMaker\'s too, and its routes are not Vertex AI\'s to take', () => {
    expect(problems(['--backend', 't:1', '--torchserve', '--sagemaker'])).toEqual([
      'torchserve.enabled: TorchServe and SageMaker both answer GET /ping; enable one of torchserve.enabled and sagemaker.enabled',
    ]);
    expect(problems(['--backend', 't:1', '--torchserve', '--vertex-ai', '--vertex-ai-default-model', 'd',
      '--vertex-ai-predict-route', '/predictions/d', '--vertex-ai-health-route', '/ping'])).toEqual([
      'vertexAi.predictRoute: /predictions/d is one of the gateway\'s own routes; choose another path',
      'vertexAi.healthRoute: /ping is one of the gateway\'s own routes; choose another path',
    ]);
  });

  test('restricted API groups: Triton\'s syntax from flags, environment and YAML; none disabled', () => {
    const c = load(['--backend', 't:1', '--api-restricted', 'model-repository,trace:admin-key=s3cret', '--api-restricted', 'logging:x=a=b', '--api-disabled', 'none']);
    expect(c.api).toEqual({
      restricted: [
        { categories: ['model-repository', 'trace'], key: 'admin-key', value: 's3cret' },
        { categories: ['logging'], key: 'x', value: 'a=b' },
      ],
      disabled: [],
    });
    const e = load(['--backend', 't:1'], { TENSORGATE_API_RESTRICTED: 'statistics:k=v;health:h=1', TENSORGATE_API_DISABLED: 'inference,trace' });
    expect(e.api.restricted.map((r) => r.categories)).toEqual([['statistics'], ['health']]);
    expect(e.api.disabled).toEqual(['inference', 'trace']);
    const y = load(['--config', yamlFile('upstream:\n  backends: [t:1]\n  restricted: ["inference:tok=1"]\napi:\n  disabled: []\n')]);
    expect(y.api.disabled).toEqual([]);
    expect(y.upstream.restricted).toEqual([{ categories: ['inference'], key: 'tok', value: '1' }]);
  });

  test('restricted API groups: unknown category, bad syntax, a category twice', () => {
    expect(problems(['--backend', 't:1', '--api-restricted', 'nope:k=v'])).toEqual([
      '--api-restricted: unknown API category "nope" (known: health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging)',
    ]);
    expect(problems(['--backend', 't:1', '--api-restricted', 'trace'])).toEqual(['--api-restricted: "trace" is not <category>[,<category>...]:<key>=<value>']);
    expect(problems(['--backend', 't:1', '--api-restricted', 'trace:a=1', '--api-restricted', 'logging,trace:b=2'])).toEqual([
      "--api-restricted: API category 'trace' is given in more than one restriction",
    ]);
    expect(problems(['--backend', 't:1', '--api-disabled', 'trace,bogus'])).toEqual([
      '--api-disabled: unknown API category "bogus" (known: health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging)',
    ]);
  });

  test('auth: from YAML, flags and variables; off by default', () => {
    const file = yamlFile('auth:\n  enabled: true\n  keysFile: /etc/tg/keys.yaml\n  open: none\n  jwt:\n    jwksUrl: https://idp.example/jwks\n    audience: tensorgate\n');
    const c = load(['--backend', 'x:1', '--config', file, '--auth-jwt-algorithms', 'ES256,EdDSA'], { TENSORGATE_AUTH_KEY_HEADER: 'X-API-Key' });
    expect(c.auth).toMatchObject({ enabled: true, keysFile: '/etc/tg/keys.yaml', keyHeader: 'X-API-Key', open: [] });
    expect(c.auth.jwt).toMatchObject({ jwksUrl: 'https://idp.example/jwks', audience: 'tensorgate', algorithms: ['ES256', 'EdDSA'] });
  });

  test('auth: credentials without auth.enabled, auth.enabled without credentials, both JWKS sources, a bad URL or algorithm', () => {
    expect(problems(['--backend', 'x:1', '--auth-keys-file', '/k.yaml'])).toEqual([
      'auth.enabled: auth.keysFile given but auth is off; set auth.enabled (--auth) or remove them',
    ]);
    expect(problems(['--backend', 'x:1', '--auth'])).toEqual(['auth.enabled: needs auth.keysFile, auth.jwt.jwksUrl or auth.jwt.jwksFile']);
    expect(problems(['--backend', 'x:1', '--auth', '--auth-jwks-url', 'ftp://idp/jwks', '--auth-jwks-file', '/j.json', '--auth-jwt-algorithms', 'HS256'])).toEqual([
      '--auth-jwt-algorithms: "HS256" is not one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA',
      'auth.jwt.jwksUrl: give either auth.jwt.jwksUrl or auth.jwt.jwksFile, not both',
      'auth.jwt.jwksUrl: must be an http(s) URL, got "ftp://idp/jwks"',
    ]);
  });

  test('auth.limits: from YAML or a flag in flow syntax; every problem by key; nothing without auth or a JWKS to limit', () => {
    const file = yamlFile([
      'auth:', '  enabled: true', '  jwt: { jwksUrl: https://idp.example/jwks }', '  limits:',
      '    default: { rate: 5, concurrency: 2 }', '    subjects: { batch-runner: { rate: 100, burst: 200 } }',
      '    groupsClaim: groups', '    groups: { team-a: { concurrency: 16 } }', '',
    ].join('\n'));
    const c = load(['--backend', 'x:1', '--config', file]);
    expect(c.auth.limits.default).toEqual({ ratePerSecond: 5, burst: 5, concurrency: 2 });
    expect([...c.auth.limits.subjects]).toEqual([['batch-runner', { ratePerSecond: 100, burst: 200 }]]);
    expect([...c.auth.limits.groups]).toEqual([['team-a', { concurrency: 16 }]]);
    expect(c.auth.limits.groupsClaim).toBe('groups');
    expect(load(['--backend', 'x:1', '--auth', '--auth-keys-file', '/k.yaml', '--auth-limits', '{default: {rate: 0.5}}']).auth.limits.default)
      .toEqual({ ratePerSecond: 0.5, burst: 1 });
    expect(problems(['--backend', 'x:1', '--auth', '--auth-keys-file', '/k.yaml', '--auth-limits', '{default: {rate: 0}, groups: {a: {rate: 1}}}'])).toEqual([
      'auth.limits.default.rate: must be requests per second, a number above 0 (0.5 = one every 2 s), got 0 (--auth-limits)',
      'auth.limits.groups: needs auth.limits.groupsClaim, the JWT claim that names a token\'s groups (--auth-limits)',
    ]);
    expect(problems(['--backend', 'x:1', '--auth-limits', '{default: {rate: 1}}'])).toEqual([
      'auth.enabled: auth.limits given but auth is off; set auth.enabled (--auth) or remove them',
    ]);
    expect(problems(['--backend', 'x:1', '--auth', '--auth-keys-file', '/k.yaml', '--auth-limits', '{subjects: {alice: {concurrency: 1}}}'])).toEqual([
      'auth.limits.subjects: limits JWTs, but none can be valid without auth.jwt.jwksUrl or auth.jwt.jwksFile; give a JWKS, or put an API key\'s limits next to it in auth.keysFile',
    ]);
  });

  test('upstream.sharedMemory: off by default; on, it needs one host:port backend, h2 and cut-through, and a file-name prefix', () => {
    expect(load(['--backend', 'x:1']).upstream.sharedMemory).toEqual({ enabled: false, regions: 8, regionBytes: 32 * 1024 * 1024, prefix: 'tensorgate' });
    expect(load(['--backend', 'x:1', '--shared-memory', '--shared-memory-regions', '2']).upstream.sharedMemory.regions).toBe(2);
    expect(problems(['--backend', 'x:1', '--backend', 'y:1', '--shared-memory', '--transport', 'grpc-js', '--cut-through=false',
      '--shared-memory-prefix', 'a/b'])).toEqual([
      'upstream.sharedMemory.enabled: needs exactly one host:port or unix:/path backend (the Triton of the same pod), got ["x:1","y:1"]',
      'upstream.sharedMemory.enabled: needs upstream.transport h2',
      'upstream.sharedMemory.enabled: needs upstream.cutThrough',
      'upstream.sharedMemory.prefix: letters, digits, `_` and `.` only (it names files under /dev/shm)',
    ]);
    // --demo: the demo backend stands in for the one backend, in this process, on the same /dev/shm.
    expect(load(['--demo', '--shared-memory']).upstream.sharedMemory.enabled).toBe(true);
    expect(load(['--demo', '--backend', 'x:1', '--backend', 'y:1', '--shared-memory']).upstream.sharedMemory.enabled).toBe(true);
  });

  test('the result is deeply frozen', () => {
    const c = load(['--demo']);
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.server)).toBe(true);
    expect(Object.isFrozen(c.upstream.backends)).toBe(true);
  });

  test('precedence: defaults < file < environment < flags', () => {
    const file = yamlFile('server:\n  port: 1111\n  host: 127.0.0.1\nupstream:\n  backends: [a:1]\n  timeoutMs: 5\n');
    const c = load(['--config', file, '--port', '3333'], { TENSORGATE_SERVER_PORT: '2222', TENSORGATE_UPSTREAM_TIMEOUT_MS: '7' });
    expect(c.server.port).toBe(3333);
    expect(c.server.host).toBe('127.0.0.1');
    expect(c.upstream.timeoutMs).toBe(7);
    expect(c.upstream.backends).toEqual(['a:1']);
  });

  test('TENSORGATE_CONFIG names the file', () => {
    const file = yamlFile('demo: true\n');
    expect(load([], { TENSORGATE_CONFIG: file }).demo).toBe(true);
  });

  test('repeated and comma-separated backends', () => {
    expect(load(['--backend', 'a:1', '--backend=b:2']).upstream.backends).toEqual(['a:1', 'b:2']);
    expect(load([], { TENSORGATE_UPSTREAM_BACKENDS: 'a:1, [::1]:8001' }).upstream.backends).toEqual(['a:1', '[::1]:8001']);
  });

  test('every problem is reported together, by key', () => {
    const file = yamlFile('server:\n  port: 70000\n  colour: blue\nupstream:\n  transport: http3\n');
    const p = problems(['--config', file, '--metrics-port', 'x', '--backend', 'no-port'], { TENSORGATE_LIMITS_MAX_INPUT_SIZE_BYTES: '0' });
    expect(p).toEqual(expect.arrayContaining([
      expect.stringMatching(/^server\.colour \(in .*\): unknown key$/),
      expect.stringMatching(/^server\.port \(in .*\): must be an integer in \[0, 65535\], got 70000$/),
      expect.stringMatching(/^upstream\.transport \(in .*\): must be one of h2, grpc-js, got "http3"$/),
      expect.stringMatching(/^TENSORGATE_LIMITS_MAX_INPUT_SIZE_BYTES: must be an integer in \[1, 2147483647\], got "0"$/),
      expect.stringMatching(/^--metrics-port: must be an integer/),
      expect.stringMatching(/^--backend: "no-port" is not host:port, dns:\/\/\/name:port or unix:\/path$/),
    ]));
    expect(p).toHaveLength(6);
  });

  test('config/demo-openai.yaml (a gateway in front of the demo backend run apart) offers what --demo offers by itself', () => {
    // Its chat template's path is relative to the project's root, where the README runs it (and jest runs).
    const models = (argv: string[]) => load(argv).openai.models.map((m) => ({ ...m, chatTemplate: m.chatTemplate?.source }));
    const fromFile = models(['--backend', '127.0.0.1:8001', '--config', join(__dirname, '../../../config/demo-openai.yaml')]);
    expect(fromFile.map((m) => m.id)).toEqual(['tiny_llm', 'tiny_llm_trtllm', 'tiny_embed']);
    expect(fromFile).toEqual(models(['--demo']));
  });

  test('a refused backend is its own problem only, not also a missing one', () => {
    expect(problems(['--backend', 'not-a-host'])).toEqual(['--backend: "not-a-host" is not host:port, dns:///name:port or unix:/path']);
  });

  test('a Unix socket backend: an absolute path within sun_path\'s bytes, taken as Triton gives it (its port appended), never with TLS', () => {
    expect(load(['--backend', 'unix:/run/triton/grpc.sock:8001']).upstream.backends).toEqual(['unix:/run/triton/grpc.sock:8001']);
    expect(load(['--backend', 't:1', '--pools', '{a: {backends: ["unix:/run/a.sock:8001"]}}']).upstream.pools[0]!.targets).toEqual(['unix:/run/a.sock:8001']);
    expect(problems(['--backend', 'unix:run/grpc.sock'])).toEqual(['--backend: "unix:run/grpc.sock": a socket\'s path is absolute (unix:/path/to/triton.sock)']);
    expect(problems(['--backend', `unix:/${'x'.repeat(107)}`])).toEqual([`--backend: "unix:/${'x'.repeat(107)}": a socket's path is at most 107 bytes (unix(7))`]);
    expect(problems(['--backend', 'unix:/run/grpc.sock', '--upstream-tls-ca', __filename])).toEqual([
      'upstream.tls.ca: TLS to Triton is not spoken over a Unix socket (unix:/run/grpc.sock); remove upstream.tls or give Triton\'s host:port']);
  });

  test('after a mistyped flag, the values\' own problems but nothing the checks across keys would add', () => {
    expect(problems(['--nope', '--metrics-port', 'x'])).toEqual(['unknown flag --nope; tensorgate --help lists the flags', '--metrics-port: must be an integer in [0, 65535], got "x"']);
  });

  test('an unknown flag is one line, with the nearest flag within two edits, its value no second problem', () => {
    const unknown = (flag: string, near?: string): string => `unknown flag --${flag}; ${near === undefined ? '' : `did you mean --${near}? `}tensorgate --help lists the flags`;
    expect(problems(['--prot', '8000'])).toEqual([unknown('prot', 'port')]);
    expect(problems(['--bakend', 'a:1'])).toEqual([unknown('bakend', 'backend')]);
    expect(problems(['--metric-port=9', '--demo'])).toEqual([unknown('metric-port', 'metrics-port')]);
    expect(problems(['--confg', 'x.yaml'])).toEqual([unknown('confg', 'config')]);
    expect(problems(['--helpp'])).toEqual([unknown('helpp', 'help')]);
    expect(problems(['--po', '1', '--demo'])).toEqual([unknown('po')]);
    expect(problems(['--colour', 'blue', 'extra'])).toEqual([unknown('colour'), 'unexpected argument "extra"']);
  });

  test('a backend or --demo is required; --demo with backends stands in for them', () => {
    expect(problems([])).toEqual([expect.stringContaining('at least one Triton gRPC address is required')]);
    expect(load(['--demo', '--backend', 'a:1']).upstream.backends).toEqual(['a:1']);
  });

  test('--version and --demo-backend', () => {
    expect(loadCommand({ argv: ['--version'], env: {} })).toEqual({ run: 'version' });
    expect(loadCommand({ argv: ['--demo-backend'], env: {} })).toEqual({ run: 'demo-backend', host: '127.0.0.1', port: 8001 });
    expect(loadCommand({ argv: ['--demo-backend', '--port', '0', '--host=::1'], env: {} })).toEqual({ run: 'demo-backend', host: '::1', port: 0 });
    expect(() => loadCommand({ argv: ['--demo-backend', '--workers', '2'], env: {} })).toThrow(/^--demo-backend: takes only --host and --port, got --workers/);
    expect(() => loadCommand({ argv: ['--demo-backend', '--port', 'x'], env: {} })).toThrow('--port: must be an integer in [0, 65535], got "x"');
  });

  test('files the configuration names are checked apart, one problem each naming the key and the flag', () => {
    const config = load(['--backend', 'a:1', '--auth', '--auth-keys-file', '/nonexistent/keys.yaml', '--upstream-tls-ca', tmpdir()]);
    expect(unreadableFileProblems(config)).toEqual([
      `upstream.tls.ca: cannot read ${tmpdir()} (a directory, not a file); give a readable file (--upstream-tls-ca)`,
      'auth.keysFile: cannot read /nonexistent/keys.yaml (ENOENT: no such file); give a readable file (--auth-keys-file)',
    ]);
    expect(unreadableFileProblems(load(['--backend', 'a:1', '--auth', '--auth-keys-file', yamlFile('keys: []\n')]))).toEqual([]);
  });

  test('upstream.tls: from YAML; cert and key together, both and the server name need the CA, not with --demo', () => {
    const c = load(['--config', yamlFile('upstream:\n  backends: [a:1]\n  tls:\n    ca: /c/ca.pem\n    cert: /c/tls.crt\n    key: /c/tls.key\n    serverName: triton\n')]);
    expect(c.upstream.tls).toEqual({ ca: '/c/ca.pem', cert: '/c/tls.crt', key: '/c/tls.key', serverName: 'triton' });
    expect(load(['--backend', 'a:1']).upstream.tls).toEqual({ ca: '', cert: '', key: '', serverName: '' });
    expect(problems(['--backend', 'a:1', '--upstream-tls-ca', 'ca.pem', '--upstream-tls-cert', 'tls.crt'])).toEqual([
      'upstream.tls.cert and upstream.tls.key: give both or neither',
    ]);
    expect(problems(['--backend', 'a:1', '--upstream-tls-cert', 'tls.crt', '--upstream-tls-key', 'tls.key'], { TENSORGATE_UPSTREAM_TLS_SERVER_NAME: 'triton' })).toEqual([
      'upstream.tls.cert: needs upstream.tls.ca (TLS to Triton is on when the CA is set)',
      'upstream.tls.key: needs upstream.tls.ca (TLS to Triton is on when the CA is set)',
      'upstream.tls.serverName: needs upstream.tls.ca (TLS to Triton is on when the CA is set)',
    ]);
    expect(problems(['--demo', '--upstream-tls-ca', 'ca.pem'])).toEqual([
      'upstream.tls.ca: --demo starts a plaintext reference backend; remove upstream.tls (--upstream-tls-ca) to try this configuration on the demo',
    ]);
  });

  test('workers: auto, N from flag, variable and YAML', () => {
    expect(load(['--demo', '--workers', 'auto']).workers).toBe(availableParallelism());
    expect(load(['--demo', '--workers=2']).workers).toBe(2);
    expect(load(['--demo'], { TENSORGATE_WORKERS: '3' }).workers).toBe(3);
    expect(load(['--config', yamlFile('demo: true\nworkers: 4\n')]).workers).toBe(4);
    expect(load(['--config', yamlFile('demo: true\nworkers: auto\n')]).workers).toBe(availableParallelism());
    expect(load(['--demo', '--reuse-port=false']).server.reusePort).toBe(false);
  });

  test('workers: 0, negative, fractional or garbage are listed with the other problems', () => {
    const p = problems(['--workers', '0', '--port', 'x', '--demo'], { TENSORGATE_WORKERS: 'lots' });
    expect(p).toEqual([
      '--port: must be an integer in [0, 65535], got "x"',
      'TENSORGATE_WORKERS: must be auto or an integer in [1, 256], got "lots"',
      '--workers: must be auto or an integer in [1, 256], got "0"',
    ]);
    expect(problems(['--demo', '--workers', '-2'])).toEqual(['--workers: must be auto or an integer in [1, 256], got "-2"']);
    expect(problems(['--config', yamlFile('demo: true\nworkers: 1.5\n')])).toEqual([expect.stringMatching(/^workers \(in .*\): must be auto or an integer in \[1, 256\], got 1\.5$/)]);
    expect(problems(['--demo', '--workers', '257'])).toEqual(['--workers: must be auto or an integer in [1, 256], got "257"']);
  });

  test('a flag without its value', () => {
    expect(problems(['--demo', '--port'])).toEqual(['--port needs a value']);
  });

  test('malformed YAML is a problem, not a crash', () => {
    const file = yamlFile('server: [\n');
    expect(problems(['--demo', '--config', file])).toEqual([expect.stringMatching(/^--config: .*config\.yaml is not valid YAML: [^\n]+ at line 2, column 1; fix the file there$/)]);
    expect(problems(['--demo', '--config', '/nonexistent/c.yaml'])).toEqual([
      '--config: cannot read /nonexistent/c.yaml (ENOENT: no such file); give the path of a readable YAML file (or TENSORGATE_CONFIG)',
    ]);
  });

  test('--help lists every option with its flag, variable and key', () => {
    expect(loadConfig({ argv: ['--help'], env: {} })).toEqual({ help: true });
    const text = helpText();
    for (const o of OPTIONS) {
      expect(text).toContain(`--${o.flag}`);
      expect(text).toContain(envName(o.key));
    }
  });
});
