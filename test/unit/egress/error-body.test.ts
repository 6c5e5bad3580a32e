// The error answers' bodies by the route's shape (Route.errorShape): Triton's, OpenAI's error
// object and TorchServe's, with the dialect's fields as the error carries them (GatewayError.dialect)
// and what the status implies when it carries none.
import { asGatewayError, errorBody } from '../../../gateway/egress/error-body';
import { GatewayError } from '../../../gateway/errors';

const invalid = new GatewayError('GW_ERR_DECODE_OPENAI_INVALID', 'Unrecognized request argument supplied: x',
  { dialect: { shape: 'openai', param: 'x', code: null } });
const notFound = new GatewayError('GW_ERR_ROUTE_NOT_FOUND', 'no model', { plain: false });
const overloaded = new GatewayError('GW_ERR_REQUEST_OVERLOADED', 'busy');

test("Triton's shape is {\"error\": message}, whatever the dialect fields", () => {
  expect(JSON.parse(errorBody('triton', invalid))).toEqual({ error: 'Unrecognized request argument supplied: x' });
});

test("OpenAI's error object: the error's param and code, else model_not_found for a 404", () => {
  expect(JSON.parse(errorBody('openai', invalid))).toEqual({
    error: { message: 'Unrecognized request argument supplied: x', type: 'invalid_request_error', param: 'x', code: null },
  });
  expect(JSON.parse(errorBody('openai', notFound))).toEqual({
    error: { message: 'no model', type: 'invalid_request_error', param: null, code: 'model_not_found' },
  });
  expect(JSON.parse(errorBody('openai', overloaded)).error.type).toBe('server_error');
});

test("TorchServe's {code, type, message}: the error's exception class, else the status's", () => {
  const versionMissing = new GatewayError('GW_ERR_ROUTE_NOT_FOUND', 'Model version: 2 does not exist for model: m',
    { status: 404, dialect: { shape: 'torchserve', type: 'ModelVersionNotFoundException' } });
  expect(JSON.parse(errorBody('torchserve', versionMissing)))
    .toEqual({ code: 404, type: 'ModelVersionNotFoundException', message: 'Model version: 2 does not exist for model: m' });
  expect(JSON.parse(errorBody('torchserve', notFound))).toEqual({ code: 404, type: 'ResourceNotFoundException', message: 'no model' });
  // Another dialect's fields are not TorchServe's.
  expect(JSON.parse(errorBody('torchserve', invalid)).type).toBe('BadRequestException');
});

test('anything but a GatewayError is an internal error', () => {
  const e = asGatewayError(new Error('boom'));
  expect([e.code, e.status, e.message]).toEqual(['GW_ERR_GATEWAY_INTERNAL', 500, 'internal error: boom']);
  expect(asGatewayError(notFound)).toBe(notFound);
});
