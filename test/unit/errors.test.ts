import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERRORS, GatewayError, isGatewayError, renderErrorsDoc, STAGES } from '../../gateway/errors';
import { shutdownError } from '../../gateway/upstream/connections/in-flight';
import { clientCancelled, failsBackend, httpStatusOfGrpc, inferCallError, streamError, upstreamError } from '../../gateway/upstream/status';

describe('the error table', () => {
  test('docs/errors.md is generated from it (run `npm run docs` after changing errors.ts)', () => {
    const committed = readFileSync(join(__dirname, '../../docs/errors.md'), 'utf8');
    expect(committed).toBe(renderErrorsDoc());
  });

  test('codes follow GW_ERR_<STAGE>_<PROBLEM>, the stage from the closed list', () => {
    const pattern = new RegExp(`^GW_ERR_(${STAGES.join('|')})_[A-Z0-9_]+$`);
    for (const code of Object.keys(ERRORS)) expect(code).toMatch(pattern);
  });

  test('every code the gateway can produce is produced by a test (test/integration/error-codes.test.ts has one per code)', () => {
    // Codes no request from outside can provoke, each with its reason. Keep this list short: a
    // code that can be provoked belongs in a test instead.
    const UNREACHABLE_FROM_OUTSIDE: Partial<Record<keyof typeof ERRORS, string>> = {
      // An exception escaping a handler is a bug; the ways found from outside (protobufjs errors on
      // a malformed upstream answer) now answer GW_ERR_UPSTREAM_PROTOCOL. error-codes.test.ts
      // shows the answer with a route of its own that throws.
      GW_ERR_GATEWAY_INTERNAL: 'only a bug in tensorgate produces it',
    };
    const root = join(__dirname, '..');
    const self = __filename;
    const sources: string[] = [];
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, e.name);
        if (e.isDirectory()) walk(path);
        else if (e.name.endsWith('.ts') && path !== self) sources.push(readFileSync(path, 'utf8'));
      }
    };
    walk(root);
    const quoted = (code: string): RegExp => new RegExp(`['"\`]${code}['"\`]`);
    const missing = Object.keys(ERRORS).filter((code) => !(code in UNREACHABLE_FROM_OUTSIDE) && !sources.some((s) => quoted(code).test(s)));
    expect(missing).toEqual([]);
    for (const code of Object.keys(UNREACHABLE_FROM_OUTSIDE)) expect(Object.keys(ERRORS)).toContain(code);
  });

  test('errors are recognised by code, across realms', () => {
    const e = new GatewayError('GW_ERR_ROUTE_NOT_FOUND', 'Not Found');
    expect(isGatewayError(e)).toBe(true);
    expect(isGatewayError({ ...e, name: 'GatewayError', code: 'GW_ERR_ROUTE_NOT_FOUND' })).toBe(true);
    expect(isGatewayError(new Error('x'))).toBe(false);
    expect(e.status).toBe(404);
  });
});

describe('gRPC status → HTTP (Triton\'s HttpCodeFromError and GrpcStatusUtil)', () => {
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

  test('the gRPC code travels as a field of the error, whatever the condition', () => {
    expect(upstreamError(5, 'x', false).grpcCode).toBe(5);
    expect(upstreamError(14, 'refused', true).grpcCode).toBe(14);
    expect(upstreamError(4, 'Deadline Exceeded', false).grpcCode).toBe(4);
    expect(clientCancelled()).toMatchObject({ code: 'GW_ERR_UPSTREAM_CANCELLED', grpcCode: 1 });
    expect(new GatewayError('GW_ERR_DECODE_INVALID', 'x').grpcCode).toBeUndefined();
  });

  test('errors inside a generate stream are 400 with Triton\'s message', () => {
    expect(streamError('boom')).toMatchObject({ code: 'GW_ERR_UPSTREAM_STREAM_ERROR', status: 400, message: 'boom', grpcCode: undefined });
  });

  test('infer call errors: Triton\'s content-type rule and the raw input\'s name', () => {
    const json = inferCallError(upstreamError(3, "unexpected shape for input 'x'", false)) as GatewayError;
    expect([json.status, json.plain]).toEqual([400, false]);
    const plain = inferCallError(upstreamError(13, 'model failed', false)) as GatewayError;
    expect([plain.status, plain.plain, plain.grpcCode]).toEqual([500, true, 13]);
    expect((inferCallError(upstreamError(3, 'incomplete string data', false)) as GatewayError).plain).toBe(true);
    const renamed = inferCallError(upstreamError(3, "input 'x' bad", false), (m) => m.replace("'x'", "'raw_input'")) as GatewayError;
    expect([renamed.message, renamed.code, renamed.grpcCode]).toEqual(["input 'raw_input' bad", 'GW_ERR_UPSTREAM_STATUS', 3]);
    const other = new GatewayError('GW_ERR_UPSTREAM_DEADLINE', 'late');
    expect(inferCallError(other, () => 'renamed')).toBe(other);
  });
});

describe('conditions told by code or mark, never by message text', () => {
  test('a call the client left: GW_ERR_UPSTREAM_CANCELLED, 499, gRPC CANCELLED; not the backend\'s fault', () => {
    const e = clientCancelled();
    expect([e.code, e.status, e.grpcCode, e.message]).toEqual(['GW_ERR_UPSTREAM_CANCELLED', 499, 1, 'request cancelled: the client went away']);
    expect(failsBackend(e)).toBe(false);
  });

  test('the gateway\'s shutdown is no fault of the backend\'s; the same words from elsewhere do not pass for it', () => {
    const shutdown = shutdownError();
    expect([shutdown.code, shutdown.message]).toEqual(['GW_ERR_UPSTREAM_UNAVAILABLE', 'upstream unavailable: the gateway is shutting down (server.drainTimeoutMs has passed)']);
    expect(failsBackend(shutdown)).toBe(false);
    expect(failsBackend(upstreamError(14, 'the gateway is shutting down (server.drainTimeoutMs has passed)', true))).toBe(true);
    expect(failsBackend(upstreamError(14, 'connection refused', true))).toBe(true);
  });
});
