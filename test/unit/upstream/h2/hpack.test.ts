// upstream/h2/hpack.ts and huffman.ts against the examples of RFC 7541 Appendix C (C.1 integers, C.2
// single fields, C.3–C.6 header lists sharing one dynamic table, with and without Huffman, with
// evictions at a 256-octet table), the representations RFC 7541 forbids, and the blocks the
// gateway builds for itself (never indexed: the peer's table stays empty).
import { BlockWriter, headerBlock, HpackDecoder, literalField, writeInteger } from '../../../../gateway/upstream/h2/hpack';

type Field = [string, string];

function decode(d: HpackDecoder, hex: string, max = Infinity): { fields: Field[]; result: string | undefined } {
  const fields: Field[] = [];
  const result = d.decode(Buffer.from(hex, 'hex'), { field: (n, v) => fields.push([n, v]) }, max);
  return { fields, result };
}

const REQ1: Field[] = [[':method', 'GET'], [':scheme', 'http'], [':path', '/'], [':authority', 'www.example.com']];
const REQ2: Field[] = [...REQ1, ['cache-control', 'no-cache']];
const REQ3: Field[] = [[':method', 'GET'], [':scheme', 'https'], [':path', '/index.html'], [':authority', 'www.example.com'], ['custom-key', 'custom-value']];
const RES1: Field[] = [[':status', '302'], ['cache-control', 'private'], ['date', 'Mon, 21 Oct 2013 20:13:21 GMT'], ['location', 'https://www.example.com']];
const RES2: Field[] = [[':status', '307'], ...RES1.slice(1)];
const RES3: Field[] = [[':status', '200'], ['cache-control', 'private'], ['date', 'Mon, 21 Oct 2013 20:13:22 GMT'], ['location', 'https://www.example.com'],
  ['content-encoding', 'gzip'], ['set-cookie', 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1']];

/** One connection's blocks in order: [hex, the header list, the table size after it] (RFC 7541 Appendix C). */
const SEQUENCES: Record<string, { table: number; blocks: [string, Field[], number][] }> = {
  'C.3 requests without Huffman': { table: 4096, blocks: [
    ['828684410f7777772e6578616d706c652e636f6d', REQ1, 57],
    ['828684be58086e6f2d6361636865', REQ2, 110],
    ['828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565', REQ3, 164],
  ] },
  'C.4 requests with Huffman': { table: 4096, blocks: [
    ['828684418cf1e3c2e5f23a6ba0ab90f4ff', REQ1, 57],
    ['828684be5886a8eb10649cbf', REQ2, 110],
    ['828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf', REQ3, 164],
  ] },
  'C.5 responses without Huffman (256-octet table, evictions)': { table: 256, blocks: [
    ['4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d', RES1, 222],
    ['4803333037c1c0bf', RES2, 222],
    ['88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31', RES3, 215],
  ] },
  'C.6 responses with Huffman (256-octet table, evictions)': { table: 256, blocks: [
    ['488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3', RES1, 222],
    ['4883640effc1c0bf', RES2, 222],
    ['88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007', RES3, 215],
  ] },
};

describe('HpackDecoder (RFC 7541 Appendix C)', () => {
  test.each([
    ['C.2.1 literal with indexing', '400a637573746f6d2d6b65790d637573746f6d2d686561646572', [['custom-key', 'custom-header']], 55],
    ['C.2.2 literal without indexing', '040c2f73616d706c652f70617468', [[':path', '/sample/path']], 0],
    ['C.2.3 literal never indexed', '100870617373776f726406736563726574', [['password', 'secret']], 0],
    ['C.2.4 indexed', '82', [[':method', 'GET']], 0],
  ] as [string, string, Field[], number][])('%s', (_name, hex, fields, size) => {
    const d = new HpackDecoder();
    expect(decode(d, hex)).toEqual({ fields, result: undefined });
    expect(d.size).toBe(size);
  });

  test.each(Object.entries(SEQUENCES))('%s', (_name, { table, blocks }) => {
    const d = new HpackDecoder(table);
    for (const [hex, fields, size] of blocks) {
      expect(decode(d, hex)).toEqual({ fields, result: undefined });
      expect(d.size).toBe(size);
    }
  });

  test.each([
    ['index 0', '80'],
    ['an index past both tables', 'be'],
    ['a table size update over the advertised 4096', '3fe21f'],
    ['a table size update after a field', '8220'],
    ['a string that runs past the block', '40036162'],
    ['Huffman padding that is not all ones', '408100'],
    ['Huffman padding longer than 7 bits', '4082ffff00'],
    ['the EOS symbol in a Huffman string', '4084ffffffff'],
    ['an integer that runs past the block', '3fff'],
    ['an integer over 2^31', '7fffffffffff0f'],
  ])('refuses %s', (_name, hex) => {
    expect(decode(new HpackDecoder(), hex).result).toBe('compression');
  });

  test('a header list over the bound is reported, but read to its end: the table follows the peer', () => {
    const d = new HpackDecoder();
    const { fields, result } = decode(d, '828684410f7777772e6578616d706c652e636f6d', 100);
    expect(result).toBe('too large');
    expect(fields).toEqual(REQ1.slice(0, 2)); // 42 + 43 octets fit in 100; the third field does not
    expect(d.size).toBe(57);
    expect(decode(d, 'be')).toEqual({ fields: [[':authority', 'www.example.com']], result: undefined });
  });

  test('a table size update evicts, and 0 empties the table', () => {
    const d = new HpackDecoder();
    decode(d, '400a637573746f6d2d6b65790d637573746f6d2d686561646572');
    expect(d.size).toBe(55);
    expect(decode(d, '20').result).toBeUndefined();
    expect(d.size).toBe(0);
    expect(decode(d, 'be').result).toBe('compression');
  });
});

describe('encoding', () => {
  test('integers (RFC 7541 C.1)', () => {
    const out = Buffer.alloc(8);
    expect(out.subarray(0, writeInteger(out, 0, 10, 5, 0)).toString('hex')).toBe('0a');
    expect(out.subarray(0, writeInteger(out, 0, 1337, 5, 0)).toString('hex')).toBe('1f9a0a');
    expect(out.subarray(0, writeInteger(out, 0, 42, 8, 0)).toString('hex')).toBe('2a');
  });

  test('the gateway\'s blocks decode to their fields and leave the peer\'s table empty', () => {
    const fields: Field[] = [[':method', 'POST'], [':scheme', 'http'], [':path', '/inference.GRPCInferenceService/ModelInfer'],
      [':authority', 'triton:8001'], ['content-type', 'application/grpc'], ['te', 'trailers'], ['user-agent', 'tensorgate'],
      ['grpc-timeout', '29999m'], ['x-long', 'v'.repeat(300)]];
    const block = headerBlock(fields);
    expect(block.subarray(0, 2).toString('hex')).toBe('8386'); // the static table's :method POST, :scheme http
    const d = new HpackDecoder();
    expect(decode(d, block.toString('hex'))).toEqual({ fields, result: undefined });
    expect(d.size).toBe(0);
    expect(decode(d, literalField('grpc-timeout', '5S').toString('hex')).fields).toEqual([['grpc-timeout', '5S']]);
  });

  test('a block of fields encoded before, then more: the same fields in order, past the writer\'s first buffer', () => {
    const before: Field[] = [[':method', 'POST'], [':path', '/p'], ['x-long', 'a'.repeat(700)]];
    const w = new BlockWriter();
    w.begin();
    w.field('x-first', '1');
    w.bytes(headerBlock(before));
    w.field('grpc-timeout', '20m');
    expect(decode(new HpackDecoder(), w.end().toString('hex')).fields).toEqual([['x-first', '1'], ...before, ['grpc-timeout', '20m']]);
  });
});
