import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERRORS, GatewayError, isGatewayError, renderErrorsDoc } from '../../gateway/errors';
import { httpStatusOfGrpc, upstreamError } from '../../gateway/upstream/status';

describe('the error table', () => {
  test('docs/errors.md is generated from it (run `npm run docs` after changing errors.ts)', () => {
    const committed = readFileSync(join(__dirname, '../../docs/errors.md'), 'utf8');
    expect(committed).toBe(renderErrorsDoc());
  });

  test('codes follow GW_ERR_<STAGE>_<PROBLEM>', () => {
    for (const code of Object.keys(ERRORS)) expect(code).toMatch(/^GW_ERR_[A-Z]+_[A-Z0-9_]+$/);
  });

  test('errors are recognised by code, across realms', () => {
    const e = new GatewayError('GW_ERR_ROUTE_NOT_FOUND', 'Not Found');
    expect(isGatewayError(e)).toBe(true);
    expect(isGatewayError({ ...e, name: 'GatewayError', code: 'GW_ERR_ROUTE_NOT_FOUND' })).toBe(true);
    expect(isGatewayError(new Error('x'))).toBe(false);
    expect(e.status).toBe(404);
  });
});

describe('gRPC status → HTTP (PROTOCOL.md §8)', () => {
  test.each([
    [13, 500], [5, 404], [14, 503], [12, 501], [3, 400], [2, 400], [6, 400], [1, 400], [4, 504], [8, 400], [7, 500], [16, 500],
  ])('gRPC %i → HTTP %i', (grpc, http) => {
    expect(httpStatusOfGrpc(grpc)).toBe(http);
  });

  test('Triton\'s message is kept verbatim; transport failures are the gateway\'s own 503', () => {
    const e = upstreamError(5, "Request for unknown model: 'x' is not found", false);
    expect([e.code, e.status, e.message]).toEqual(['GW_ERR_UPSTREAM_STATUS', 404, "Request for unknown model: 'x' is not found"]);
    const t = upstreamError(14, 'No connection established', true);
    expect([t.code, t.status]).toEqual(['GW_ERR_UPSTREAM_UNAVAILABLE', 503]);
    expect(upstreamError(4, 'Deadline Exceeded', false).status).toBe(504);
  });
});
