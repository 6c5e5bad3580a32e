// The grpc-timeout request header a client asks its deadline with, in the gRPC over HTTP/2 spec's
// syntax: 1 to 8 digits and a unit.
import { parseGrpcTimeout } from '../../../gateway/grpc/timeout';

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

  test.each(['', '200', 'm', '200ms', '200 m', ' 200m', '-1m', '1.5S', '123456789m', '200x', '200m, 300m'])('%j is a 400 that quotes it', (value) => {
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
