// A declarative route's body form, chosen by the request's media type before anything is read:
// multipart/form-data its parts, a type its `body` ranges match the raw body (never a JSON type),
// anything else JSON; a form the route does not take is 415 naming those it does.
import { parseRoutes } from '../../../gateway/config/routes';
import { mediaType } from '../../../gateway/decode/framing';
import { bodyForm } from '../../../gateway/pipeline/declarative';

const routes = (() => {
  const r = parseRoutes([
    { path: '/any', model: 'blob_echo', inputs: { BLOB: { from: '/image', decode: 'base64', part: 'file', body: ['image/*', 'application/octet-stream'] } } },
    { path: '/form', model: 'two', inputs: { IMAGE: { part: 'photo' }, TEXT: { part: 'caption' } }, parameters: { language: { part: 'lang' } } },
    { path: '/raw', model: 'blob_len', inputs: { BLOB: { body: '*/*' } } },
    { path: '/json', model: 'blob_len', inputs: { BLOB: { from: '/text', decode: 'text' } } },
  ]);
  if (!('value' in r)) throw new Error(r.problem.join('\n'));
  return Object.fromEntries(r.value.map((x) => [x.path, x]));
})();

const form = (path: string, contentType: string | undefined): string => {
  try {
    return bodyForm(routes[path]!, mediaType(contentType));
  } catch (err) {
    const e = err as { code: string; status: number; message: string };
    return `${e.status} ${e.code} ${e.message}`;
  }
};

test('one route, every client: a JSON field, a form part, an image body', () => {
  expect([
    form('/any', 'multipart/form-data; boundary=x'), form('/any', 'image/JPEG'), form('/any', 'application/octet-stream'),
    form('/any', 'application/json'), form('/any', undefined), form('/any', 'application/x-www-form-urlencoded'), form('/any', 'text/plain'),
  ]).toEqual(['multipart', 'raw', 'raw', 'json', 'json', 'json', 'json']);
});

test('*/* takes any raw body but JSON and multipart ones', () => {
  expect([form('/raw', 'image/png'), form('/raw', 'text/plain; charset=utf-8'), form('/raw', 'application/pdf')]).toEqual(['raw', 'raw', 'raw']);
  expect(form('/raw', 'application/json')).toBe('415 GW_ERR_DECODE_ROUTE_INVALID route /raw takes a body of type */*, not a body of type application/json');
  expect(form('/raw', undefined)).toBe('415 GW_ERR_DECODE_ROUTE_INVALID route /raw takes a body of type */*, not a body of type (none)');
  expect(form('/raw', 'multipart/form-data; boundary=x')).toBe('415 GW_ERR_DECODE_ROUTE_INVALID route /raw takes a body of type */*, not a body of type multipart/form-data');
});

test('a form the route does not take is 415 naming those it takes', () => {
  expect(form('/form', 'multipart/form-data; boundary=x')).toBe('multipart');
  expect(form('/form', 'image/jpeg')).toBe('415 GW_ERR_DECODE_ROUTE_INVALID route /form takes multipart/form-data (parts: photo, caption, lang), not a body of type image/jpeg');
  expect(form('/form', 'application/json')).toBe('415 GW_ERR_DECODE_ROUTE_INVALID route /form takes multipart/form-data (parts: photo, caption, lang), not a body of type application/json');
  expect(form('/json', 'multipart/form-data; boundary=x')).toBe('415 GW_ERR_DECODE_ROUTE_INVALID route /json takes a JSON body, not a body of type multipart/form-data');
  // As before bodies had other forms: a JSON route reads any other type as JSON.
  expect(form('/json', 'image/jpeg')).toBe('json');
});
