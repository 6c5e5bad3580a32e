// Declarative routes: the configuration check (every problem by key), the example file, the
// check against Triton's metadata, and JSON Pointers.
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../../../gateway/config/load';
import { parsePassthrough, parseRoutes, resolvePointer, routeMetadataProblems } from '../../../gateway/config/routes';

const problems = (raw: unknown): string[] => {
  const r = parseRoutes(raw);
  return 'problem' in r ? [...r.problem] : [];
};

test('the example configuration loads', () => {
  const r = loadConfig({ argv: ['--config', join(__dirname, '../../../config/routes.example.yaml')], env: {} });
  if (r.help) throw new Error('help');
  expect(r.config.routes.map((x) => [x.path, x.model, x.response.form])).toEqual([
    ['/api/image-stats', 'image_stats', 'map'],
    ['/api/image-stats/batch', 'image_stats', 'v1'],
    ['/api/add-sub', 'simple', 'v2'],
    ['/api/text-length', 'blob_len', 'map'],
    ['/api/upload', 'blob_len', 'map'],
  ]);
  expect(r.config.routes[4]!.forms).toEqual({ json: true, multipart: true, raw: ['image/*', 'application/octet-stream'] });
  expect(r.config.routes[0]!.parameters.get('client_request')).toBe('/request_id');
});

test('every syntax problem is listed, by key', () => {
  expect(problems([
    { path: 'api', model: '', inputs: { X: { from: 'x', decode: 'hex', datatype: 'FP33', shape: [0.5] } }, response: 'v3', extra: 1 },
    { path: '/v2/models/x', model: 'm', inputs: {} },
    { path: '/a', model: 'm', inputs: { T: { from: '/t', decode: 'text', datatype: 'INT32' } }, parameters: { p: 'q' }, response: { map: { OUT: 'x' } } },
    { path: '/a', model: 'm', inputs: { N: { from: '/n', decode: 'numbers', datatype: 'BYTES' } } },
  ])).toEqual([
    'routes[0].extra: unknown key',
    'routes[0].path: must be an absolute path, got "api"',
    'routes[0].model: must be a model name',
    'routes[0].inputs.X.from: must be a JSON Pointer ("/field", "/a/0/b"), got "x"',
    'routes[0].inputs.X.decode: must be one of base64, data-uri, numbers, text, got "hex"',
    'routes[0].inputs.X.datatype: unknown datatype "FP33"',
    'routes[0].inputs.X.shape: must be a non-empty list of dims (integers ≥ -1)',
    'routes[0].response: must be v2, v1 or {map: {<output>: <JSON Pointer>}}',
    'routes[1].path: must not be under /v1 or /v2 (Triton\'s and the V1 routes)',
    'routes[1].inputs: must map each model input name to its source (from and decode, part, or body)',
    'routes[2].inputs.T.decode: text fills BYTES inputs only',
    'routes[2].parameters.p: must be a JSON Pointer, got "q"',
    'routes[2].response.map.OUT: must be a JSON Pointer, got "x"',
    'routes[3].path: /a is given twice',
    'routes[3].inputs.N.decode: numbers cannot fill a BYTES input',
  ]);
});

test('inputs from multipart parts and from the raw body: the forms a route takes', () => {
  const r = parseRoutes([
    // One endpoint for every client: a JSON field, a form's file part, an image body.
    { path: '/any', model: 'blob_echo', inputs: { BLOB: { from: '/image', decode: 'base64', part: 'file', body: ['image/*', 'Application/Octet-Stream'] } },
      parameters: { tag: { from: '/tag', part: 'tag' }, id: '/id' } },
    { path: '/form', model: 'm', inputs: { IMAGE: { part: 'image' }, TEXT: { part: 'caption' } }, parameters: { lang: { part: 'lang' } }, response: 'v1' },
    { path: '/raw', model: 'blob_len', inputs: { BLOB: { body: '*/*' } }, response: { map: { LEN: '/length' } } },
  ]);
  if (!('value' in r)) throw new Error(r.problem.join('\n'));
  const [any, form, raw] = r.value;
  expect(any!.forms).toEqual({ json: true, multipart: true, raw: ['image/*', 'application/octet-stream'] });
  expect(any!.inputs.get('BLOB')).toEqual({ from: '/image', decode: 'base64', part: 'file', body: ['image/*', 'application/octet-stream'], datatype: undefined, shape: undefined });
  expect([...any!.parameters]).toEqual([['tag', '/tag'], ['id', '/id']]);
  expect([...any!.parameterParts]).toEqual([['tag', 'tag']]);
  expect(form!.forms).toEqual({ json: false, multipart: true, raw: undefined });
  expect([...form!.parameterParts]).toEqual([['lang', 'lang']]);
  expect(raw!.forms).toEqual({ json: false, multipart: false, raw: ['*/*'] });
});

test('every problem of parts and raw bodies is listed, by key', () => {
  expect(problems([
    { path: '/a', model: 'm', inputs: { A: { part: 'x' }, B: { part: 'x', body: 'image/jpeg' }, C: { from: '/c', decode: 'text' } } },
    { path: '/b', model: 'm', inputs: { A: {}, B: { part: '', decode: 'base64' }, C: { part: 'a"b' }, D: { part: 'ok', body: 7 } } },
    { path: '/c', model: 'm', inputs: { A: { body: ['image/*', 'application/json'] } }, parameters: { p: '/p', q: { part: 'q' } } },
    { path: '/d', model: 'm', inputs: { A: { body: [] } } },
    { path: '/e', model: 'm', inputs: { A: { body: 'jpeg' } } },
    { path: '/f', model: 'm', inputs: { A: { body: 'multipart/form-data' } } },
    { path: '/g', model: 'm', inputs: { A: { part: 'a' } }, parameters: { p: { part: 'a' }, q: { from: '/q' }, r: {}, s: { part: 's', other: 1 } } },
  ])).toEqual([
    "routes[0].inputs.B.part: the part 'x' also fills inputs.A",
    'routes[0].inputs.B.body: a raw body fills one input, and this route has 3',
    'routes[0].inputs.A: has no from, and inputs.C has one: a JSON body must fill every input',
    'routes[0].inputs.B: has no from, and inputs.C has one: a JSON body must fill every input',
    'routes[0].inputs.C: has no part, and inputs.A has one: a multipart/form-data body must fill every input',
    'routes[1].inputs.A: must say where the input comes from: from (a JSON Pointer) with decode, part (a multipart/form-data field name), or body (media types of a raw body)',
    'routes[1].inputs.B.from: must be a JSON Pointer ("/field", "/a/0/b"), got undefined',
    'routes[1].inputs.B.part: must be a multipart/form-data field name (no quotes or control characters), got ""',
    'routes[1].inputs.C.part: must be a multipart/form-data field name (no quotes or control characters), got "a\\"b"',
    'routes[1].inputs.D.body: must be a media range (image/jpeg, image/*, */*) or a list of them, got 7',
    'routes[1].inputs.A: has no part, and inputs.B has one: a multipart/form-data body must fill every input',
    'routes[2].inputs.A.body: a raw body is not JSON, form-urlencoded or multipart; got ["image/*","application/json"] (a JSON body is read with from, a multipart one with part)',
    'routes[2].parameters.p: is a JSON Pointer, and the route takes no JSON body (its inputs have no from)',
    'routes[2].parameters.q.part: the route takes no multipart/form-data body (its inputs have no part)',
    'routes[3].inputs.A.body: must be a media range (image/jpeg, image/*, */*) or a list of them, got []',
    'routes[4].inputs.A.body: must be a media range (image/jpeg, image/*, */*) or a list of them, got "jpeg"',
    'routes[5].inputs.A.body: a raw body is not JSON, form-urlencoded or multipart; got "multipart/form-data" (a JSON body is read with from, a multipart one with part)',
    "routes[6].parameters.p.part: the part 'a' also fills inputs.A",
    'routes[6].parameters.q.from: is a JSON Pointer, and the route takes no JSON body (its inputs have no from)',
    'routes[6].parameters.r: must name a JSON Pointer (from) or a multipart text field (part)',
    'routes[6].parameters.s.other: unknown key',
  ]);
});

test('the loader reports route problems with where they came from, exit-2 style', () => {
  expect(() => loadConfig({ argv: ['--backend', 't:1', '--routes', '[{path: /x, model: m}]'], env: {} })).toThrow(ConfigError);
  try {
    loadConfig({ argv: ['--backend', 't:1', '--routes', '[{path: /x, model: m}]'], env: {} });
  } catch (e) {
    expect((e as ConfigError).problems).toEqual(['routes[0].inputs: must map each model input name to its source (from and decode, part, or body) (--routes)']);
  }
});

test('checked against the model\'s metadata: names, types, decode kinds, map outputs', () => {
  const r = parseRoutes([{ path: '/r', model: 'simple', inputs: {
    INPUT0: { from: '/a', decode: 'text' }, INPUTX: { from: '/x', decode: 'numbers' }, INPUT9: { from: '/b', decode: 'numbers', datatype: 'FP32' },
  }, response: { map: { NOPE: '/n' } } }]);
  if (!('value' in r)) throw new Error('parse');
  const md = {
    inputs: [{ name: 'INPUT0', datatype: 'INT32' }, { name: 'INPUT1', datatype: 'INT32' }, { name: 'INPUT9', datatype: 'INT32' }],
    outputs: [{ name: 'OUTPUT0', datatype: 'INT32' }],
  };
  expect(routeMetadataProblems(r.value[0]!, md)).toEqual([
    'route /r: inputs.INPUT0.decode: text fills BYTES inputs only; \'INPUT0\' is INT32',
    'route /r: inputs.INPUTX: model \'simple\' has no input \'INPUTX\' (inputs: INPUT0, INPUT1, INPUT9)',
    'route /r: inputs.INPUT9.datatype: FP32, but the model\'s input is INT32',
    'route /r: inputs: the model\'s input \'INPUT1\' has no source',
    'route /r: response.map.NOPE: model \'simple\' has no output \'NOPE\' (outputs: OUTPUT0)',
  ]);
});

test('JSON Pointers (RFC 6901)', () => {
  const doc = { a: [{ 'b/c': 1, 'd~e': 2 }], '': 3 };
  expect(resolvePointer(doc, '/a/0/b~1c')).toBe(1);
  expect(resolvePointer(doc, '/a/0/d~0e')).toBe(2);
  expect(resolvePointer(doc, '/')).toBe(3);
  expect(resolvePointer(doc, '')).toBe(doc);
  expect(resolvePointer(doc, '/a/1')).toBeUndefined();
  expect(resolvePointer(doc, '/a/01')).toBeUndefined();
  expect(resolvePointer(doc, '/toString')).toBeUndefined();
});

test('pass-through routes: defaults, and every problem by key', () => {
  expect(parsePassthrough([{ prefix: '/legacy/', upstream: 'http://svc:8080' }])).toEqual({
    value: [{ prefix: '/legacy', upstream: 'http://svc:8080', timeoutMs: 30_000, category: 'inference' }],
  });
  expect(parsePassthrough([{ prefix: '/ops', upstream: 'http://svc:8080', category: 'model-repository' }])).toEqual({
    value: [{ prefix: '/ops', upstream: 'http://svc:8080', timeoutMs: 30_000, category: 'model-repository' }],
  });
  expect(parsePassthrough([
    { prefix: '/', upstream: 'ftp://x', timeoutMs: 0, other: 1 },
    { prefix: '/v2/x', upstream: 'http://svc:1/base', category: 'admin' },
  ])).toEqual({ problem: [
    'passthrough[0].other: unknown key',
    'passthrough[0].prefix: must be an absolute path other than /, got "/"',
    'passthrough[0].upstream: must be an http(s) origin such as http://legacy:8080 (no path), got "ftp://x"',
    'passthrough[0].timeoutMs: must be a positive integer, got 0',
    'passthrough[1].prefix: must not be under /v1 or /v2 (Triton\'s and the V1 routes)',
    'passthrough[1].upstream: must be an http(s) origin such as http://legacy:8080 (no path), got "http://svc:1/base"',
    'passthrough[1].category: must be an API group (health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging), got "admin"',
  ] });
});

test('a pass-through prefix must be normalised: requests are matched in their normalised form', () => {
  expect(parsePassthrough([
    { prefix: '/legacy//admin', upstream: 'http://svc:8080' },
    { prefix: '/legacy/%61dmin', upstream: 'http://svc:8080' },
    { prefix: '/legacy/./x', upstream: 'http://svc:8080' },
    { prefix: '/a%2Fb', upstream: 'http://svc:8080' },
  ])).toEqual({ problem: [
    'passthrough[0].prefix: must be a normalised path (no //, . or .. segments, encoded unreserved characters or encoded slashes), got "/legacy//admin"; write /legacy/admin',
    'passthrough[1].prefix: must be a normalised path (no //, . or .. segments, encoded unreserved characters or encoded slashes), got "/legacy/%61dmin"; write /legacy/admin',
    'passthrough[2].prefix: must be a normalised path (no //, . or .. segments, encoded unreserved characters or encoded slashes), got "/legacy/./x"; write /legacy/x',
    'passthrough[3].prefix: must be a normalised path (no //, . or .. segments, encoded unreserved characters or encoded slashes), got "/a%2Fb"',
  ] });
});
