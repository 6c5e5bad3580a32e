// The gRPC status vocabulary (grpc/status.ts): the codes by name, the status of the gateway's own
// answers from the error table, the spec's HTTP → gRPC table, grpc-message both ways.
import { ERRORS, type ErrorCode, GatewayError } from '../../../gateway/errors';
import { decodeGrpcMessage, encodeGrpcMessage, GrpcStatus, grpcStatusOf, grpcStatusOfHttp } from '../../../gateway/grpc/status';

describe('GrpcStatus', () => {
  test('the codes of the gRPC spec (doc/statuscodes.md), 0 to 16', () => {
    expect(Object.values(GrpcStatus)).toEqual(Array.from({ length: 17 }, (_, i) => i));
    expect([GrpcStatus.OK, GrpcStatus.CANCELLED, GrpcStatus.UNAVAILABLE, GrpcStatus.UNAUTHENTICATED]).toEqual([0, 1, 14, 16]);
  });
});

describe('grpcStatusOf: the gateway\'s own answers, from the error table', () => {
  test('every code of the table has a gRPC status', () => {
    for (const code of Object.keys(ERRORS) as ErrorCode[]) expect(Object.values(GrpcStatus)).toContain(grpcStatusOf(new GatewayError(code, 'x')));
  });

  test.each<[ErrorCode, number]>([
    ['GW_ERR_ROUTE_GRPC_UNIMPLEMENTED', GrpcStatus.UNIMPLEMENTED],
    ['GW_ERR_ROUTE_RESTRICTED', GrpcStatus.UNAVAILABLE], // Triton's gRPC frontend answers a restricted call so
    ['GW_ERR_ROUTE_DISABLED', GrpcStatus.PERMISSION_DENIED],
    ['GW_ERR_REQUEST_HEADER_INVALID', GrpcStatus.INVALID_ARGUMENT],
    ['GW_ERR_REQUEST_OVERLOADED', GrpcStatus.UNAVAILABLE],
    ['GW_ERR_REQUEST_GRPC_MESSAGE_TOO_LARGE', GrpcStatus.RESOURCE_EXHAUSTED],
    ['GW_ERR_REQUEST_ANSWER_UNREAD', GrpcStatus.CANCELLED],
    ['GW_ERR_DECODE_SHM_REGION_RESERVED', GrpcStatus.PERMISSION_DENIED],
    ['GW_ERR_UPSTREAM_PROTOCOL', GrpcStatus.INTERNAL],
    ['GW_ERR_UPSTREAM_NO_BACKEND', GrpcStatus.UNAVAILABLE],
    ['GW_ERR_UPSTREAM_DEADLINE', GrpcStatus.DEADLINE_EXCEEDED],
    ['GW_ERR_UPSTREAM_CANCELLED', GrpcStatus.CANCELLED],
    ['GW_ERR_AUTH_MISSING', GrpcStatus.UNAUTHENTICATED],
    ['GW_ERR_AUTH_INVALID', GrpcStatus.UNAUTHENTICATED],
    ['GW_ERR_AUTH_FORBIDDEN', GrpcStatus.PERMISSION_DENIED],
    ['GW_ERR_AUTH_UNAVAILABLE', GrpcStatus.UNAVAILABLE],
    ['GW_ERR_GATEWAY_INTERNAL', GrpcStatus.INTERNAL],
  ])('%s → %i', (code, status) => {
    expect(grpcStatusOf(new GatewayError(code, 'x'))).toBe(status);
    expect(grpcStatusOf({ code, grpcCode: undefined })).toBe(status);
  });

  test('an error standing for an upstream call keeps that call\'s status', () => {
    expect(grpcStatusOf(new GatewayError('GW_ERR_UPSTREAM_STATUS', 'unknown model', { grpcCode: GrpcStatus.NOT_FOUND }))).toBe(GrpcStatus.NOT_FOUND);
    expect(grpcStatusOf(new GatewayError('GW_ERR_UPSTREAM_PROTOCOL', 'HTTP 401', { grpcCode: GrpcStatus.UNAUTHENTICATED }))).toBe(GrpcStatus.UNAUTHENTICATED);
  });
});

describe('grpcStatusOfHttp (doc/http-grpc-status-mapping.md)', () => {
  test.each([[400, 13], [401, 16], [403, 7], [404, 12], [429, 14], [502, 14], [503, 14], [504, 14], [500, 2], [302, 2]])('HTTP %i → %i', (http, grpc) => {
    expect(grpcStatusOfHttp(http)).toBe(grpc);
  });
});

describe('grpc-message', () => {
  test('printable ASCII goes as it is, \'%\' and everything else percent-encoded (spaces kept)', () => {
    expect(encodeGrpcMessage('plain text: (ok) ~')).toBe('plain text: (ok) ~');
    expect(encodeGrpcMessage('100% sure')).toBe('100%25 sure');
    expect(encodeGrpcMessage('modèle\nnext')).toBe('mod%C3%A8le%0Anext');
    expect(encodeGrpcMessage('')).toBe('');
  });

  test.each(['plain', '100% sure', 'modèle é_model\t✓', 'a,b', ''])('decode(encode(%j)) is the message', (m) => {
    expect(decodeGrpcMessage(encodeGrpcMessage(m))).toBe(m);
  });

  test('a value that does not decode is kept as sent; a repeated field is joined with \',\'; none is \'\'', () => {
    expect(decodeGrpcMessage('bad %zz escape')).toBe('bad %zz escape');
    expect(decodeGrpcMessage('bad%20thing')).toBe('bad thing');
    expect(decodeGrpcMessage(['one', 'two%21'])).toBe('one,two!');
    expect(decodeGrpcMessage(undefined)).toBe('');
  });
});
