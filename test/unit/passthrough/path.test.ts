import fc from 'fast-check';
import { isUnder, NormalisedPrefix, normalisePath } from '../../../gateway/passthrough/path';

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
    ['/a/%c3%a9%3f%23%20', '/a/%C3%A9%3F%23%20'],
    // Every character that may stand in a path as itself is decoded (pchar, RFC 3986 §3.3).
    ['/legacy/a%3Ab/x', '/legacy/a:b/x'],
    ['/legacy/models/foo%3apredict', '/legacy/models/foo:predict'],
    ['/a/%40%21%24%26%27%28%29%2A%2B%2C%3D', "/a/@!$&'()*+,="],
    ['/a/b:c@d!e', '/a/b:c@d!e'],
    ['/', '/'],
    ['//', '/'],
  ])('%s → %s', (raw, path) => {
    expect(normalisePath(raw)).toEqual({ path });
  });

  test.each([
    ['/a%2Fb', 'an encoded slash (%2F)'],
    ['/a%5cb', 'an encoded backslash (%5C)'],
    ['/a\\b', "a backslash in the path (RFC 3986 §3.3 allows only pchar and '/')"],
    // Path parameters: Tomcat, Jetty and Spring drop `;…` from a segment.
    ['/legacy/admin;x/secret', "a ';' in the path (a path parameter to Java servers)"],
    ['/legacy/..;/admin/secret', "a ';' in the path (a path parameter to Java servers)"],
    ['/legacy/admin%3bx/secret', "an encoded ';' (%3B, a path parameter to Java servers once decoded)"],
    // Not pchar: nginx and uvicorn end the path at '#'.
    ['/legacy/admin#/x', "a '#' in the path (RFC 3986 §3.3 allows only pchar and '/')"],
    ['/legacy/a b', "a space in the path (RFC 3986 §3.3 allows only pchar and '/')"],
    ['/legacy/\u00e9', "the byte 0xe9 in the path (RFC 3986 §3.3 allows only pchar and '/')"],
    ['/legacy/a"b', "a '\"' in the path (RFC 3986 §3.3 allows only pchar and '/')"],
    ['/legacy/a|b', "a '|' in the path (RFC 3986 §3.3 allows only pchar and '/')"],
    // A second decoding upstream would make another path; control characters have no reading.
    ['/legacy/%252e%252e/admin', "an encoded '%' (%25)"],
    ['/legacy/a%00b', 'an encoded control character (%00)'],
    ['/legacy/a%0Ab', 'an encoded control character (%0A)'],
    ['/a%', 'a malformed percent-encoding'],
    ['/a%g1', 'a malformed percent-encoding'],
    ['/..', 'dot segments above the root'],
    ['/a/../..', 'dot segments above the root'],
    ['http://legacy/admin/x', 'the request target is not a path'],
  ])('%s refused: %s', (raw, problem) => {
    expect(normalisePath(raw)).toEqual({ problem });
  });

  test('idempotent, and its output has no dot segment, no empty segment but the last, no encoded pchar', () => {
    const segment = fc.oneof(fc.constantFrom('', '.', '..', '%2e', '%2E%2e', '%61', '%7E', '%20', '%3a', '%40', '%2b', '%3F', 'a', 'b', '~', ':', '@'), fc.stringMatching(/^[a-z0-9%]{0,4}$/));
    fc.assert(fc.property(fc.array(segment, { maxLength: 8 }), (segments) => {
      const n = normalisePath(`/${segments.join('/')}`);
      if (!('path' in n)) return;
      expect(normalisePath(n.path)).toEqual(n);
      const inner = n.path.split('/').slice(1, -1);
      expect(inner.filter((s) => s === '' || s === '.' || s === '..')).toEqual([]);
      // No triplet of a character that may stand as itself: unreserved, sub-delims, ':' and '@'.
      expect(n.path).not.toMatch(/%(?:4[0-9A-F]|5[0-9A]|6[1-9A-F]|7[0-9A]|3[0-9AD]|2[146-9A-E]|5F|7E)/i);
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
