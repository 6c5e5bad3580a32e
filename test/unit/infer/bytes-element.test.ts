import { frameBytesElements, unframeBytesElements } from '../../../gateway/infer/bytes-element';

describe('BYTES element framing', () => {
  test('frames with uint32 LE lengths, NULs and empty elements included', () => {
    const framed = frameBytesElements([Buffer.from('ab'), Buffer.alloc(0), Buffer.from([0, 255])]);
    expect(framed.toString('hex')).toBe('020000006162' + '00000000' + '0200000000ff');
    const u = unframeBytesElements(framed);
    expect(u.ok && u.elements.map((e) => e.toString('hex'))).toEqual(['6162', '', '00ff']);
  });

  test('elements are views of the input, not copies', () => {
    const framed = frameBytesElements([Buffer.from('xyz')]);
    const u = unframeBytesElements(framed);
    expect(u.ok && u.elements[0]!.buffer).toBe(framed.buffer);
  });

  test('a truncated length and truncated data are told apart', () => {
    expect(unframeBytesElements(Buffer.from([1, 0, 0, 0, 65, 2, 0]))).toEqual(
      { ok: false, problem: 'length', index: 1, expected: 4, available: 2 });
    expect(unframeBytesElements(Buffer.from([10, 0, 0, 0, 65, 66, 67]))).toEqual(
      { ok: false, problem: 'data', index: 0, expected: 10, available: 3 });
  });
});
