// The grpc-timeout request header a client asks its deadline with, in the gRPC over HTTP/2 spec's
// syntax: 1 to 8 digits and a unit; and the one the gateway sends Triton.
import { formatGrpcTimeout, parseGrpcTimeout } from '../../../gateway/grpc/timeout';

describe('parseGrpcTimeout', () => {
  test.each<[string, number]>([
    ['200m', 200],
    ['1S', 1000],
    ['2M', 120_000],
    ['1H', 3_600_000],
    ['1500u', 1.5],
    ['2000000n', 2],
    ['0m', 0],
    ['99999999m', 99_999_999],
  ])('%s is %d ms', (value, ms) => {
    expect(parseGrpcTimeout(value)).toBe(ms);
  });

  test('no header: no deadline asked', () => {
    expect(parseGrpcTimeout(undefined)).toBeUndefined();
  });

  test.each(['', '200', 'm', '200ms', '200 m', ' 200m', '-1m', '1.5S', '123456789m', '200x', '200m, 300m',
    '1/m', '1:m', '\u0663m', '20M0'])('%j is a 400 that quotes it', (value) => {
    expect(() => parseGrpcTimeout(value)).toThrow(expect.objectContaining({
      code: 'GW_ERR_REQUEST_HEADER_INVALID',
      status: 400,
      message: `Unable to parse 'grpc-timeout': '${value}' is not a gRPC timeout (1 to 8 digits and a unit H, M, S, m, u or n)`,
    }));
  });

  test('a repeated header (an array) is refused as the joined value', () => {
    expect(() => parseGrpcTimeout(['200m', '300m'])).toThrow("'200m, 300m' is not a gRPC timeout");
  });
});

describe('formatGrpcTimeout', () => {
  test.each<[number, string]>([
    [200, '200m'],
    [0.2, '1m'], // rounded up: never a shorter deadline than asked
    [0, '1m'], // grpc-timeout has no value for "already passed"
    [-5, '1m'],
    [1500.5, '1501m'],
    [99_999_999, '99999999m'], // the largest in milliseconds: 8 digits
    [100_000_000, '100000S'],
    [100_000_001, '100001S'],
    [2 ** 31, '2147484S'],
  ])('%d ms is %s', (ms, value) => {
    expect(formatGrpcTimeout(ms)).toBe(value);
  });

  test.each([1, 199.1, 1e8 - 1, 1e8, 1e8 + 1, 36e5 * 24 * 30])('what it writes parses back to no less than %d ms, in at most 8 digits', (ms) => {
    const value = formatGrpcTimeout(ms);
    expect(value).toMatch(/^\d{1,8}[mS]$/);
    expect(parseGrpcTimeout(value)).toBeGreaterThanOrEqual(ms);
  });
});
