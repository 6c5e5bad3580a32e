import fc from 'fast-check';
import { isUnder, NormalisedPrefix, normalisePath } from '../../gateway/passthrough-path';

describe('normalisePath (RFC 3986 §6.2.2)', () => {
  test.each([
    ['/legacy//admin/x', '/legacy/admin/x'],
    ['/legacy/./admin/x', '/legacy/admin/x'],
    ['/legacy/x/../admin/x', '/legacy/admin/x'],
    ['/legacy/%61dmin/x', '/legacy/admin/x'],
    ['/legacy/%2e%2E/admin', '/admin'],
    ['/a/b/..', '/a/'],
    ['/a/b/.', '/a/b/'],
    ['/a/%7e/%7E', '/a/~/~'],
    ['/a/%c3%a9%3b', '/a/%C3%A9%3B'],
    ['/', '/'],
    ['//', '/'],
  ])('%s → %s', (raw, path) => {
    expect(normalisePath(raw)).toEqual({ path });
  });

  test.each([
    ['/a%2Fb', 'an encoded slash (%2F)'],
    ['/a%5cb', 'an encoded backslash (%5C)'],
    ['/a\\b', 'a backslash in the path'],
    ['/a%', 'a malformed percent-encoding'],
    ['/a%g1', 'a malformed percent-encoding'],
    ['/..', 'dot segments above the root'],
    ['/a/../..', 'dot segments above the root'],
    ['http://legacy/admin/x', 'the request target is not a path'],
  ])('%s refused: %s', (raw, problem) => {
    expect(normalisePath(raw)).toEqual({ problem });
  });

  test('idempotent, and its output has no dot segment, no empty segment but the last, no encoded unreserved character', () => {
    const segment = fc.oneof(fc.constantFrom('', '.', '..', '%2e', '%2E%2e', '%61', '%7E', '%20', 'a', 'b', '~'), fc.stringMatching(/^[a-z0-9%]{0,4}$/));
    fc.assert(fc.property(fc.array(segment, { maxLength: 8 }), (segments) => {
      const n = normalisePath(`/${segments.join('/')}`);
      if (!('path' in n)) return;
      expect(normalisePath(n.path)).toEqual(n);
      const inner = n.path.split('/').slice(1, -1);
      expect(inner.filter((s) => s === '' || s === '.' || s === '..')).toEqual([]);
      expect(n.path).not.toMatch(/%(?:[46][1-9A-F]|[57][0-9A]|3[0-9]|2D|2E|5F|7E)/i);
    }), { numRuns: 500 });
  });
});

describe('NormalisedPrefix: what the router hands a pass-through route', () => {
  const p = new NormalisedPrefix('/legacy');
  test('matches the normalised path, segment-wise', () => {
    expect(p.exec('/legacy//x')).not.toBeNull();
    expect(p.exec('/elsewhere/../legacy/x')).not.toBeNull();
    expect(p.exec('/legacyx')).toBeNull();
    expect(p.exec('/other/x')).toBeNull();
    expect(p.test('/legacy')).toBe(true);
    expect(isUnder('/legacy-x', '/legacy')).toBe(false);
  });

  test('throws GW_ERR_PASSTHROUGH_PATH_INVALID for a path written under the prefix that escapes it or cannot be normalised; other paths are just no match', () => {
    expect(() => p.exec('/legacy/../admin')).toThrow(expect.objectContaining({ code: 'GW_ERR_PASSTHROUGH_PATH_INVALID', message: 'the path is refused: its dot segments leave /legacy' }));
    expect(() => p.exec('//legacy/a%2Fb')).toThrow(expect.objectContaining({ code: 'GW_ERR_PASSTHROUGH_PATH_INVALID' }));
    expect(p.exec('/other/a%2Fb')).toBeNull();
  });
});
