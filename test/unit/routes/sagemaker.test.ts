// A multi-model invoke's failures as Triton's src/sagemaker_server.cc answers them (SageMakerMMEHandleInfer,
// SageMakerMMEHandleOOMError, SagemakeInferRequestClass::InferResponseComplete): 400, or 507 when
// the message tells of memory running out, in application/json; the gateway's own conditions
// (limits, timeouts, Triton out of reach) keep their status.
import { GatewayError } from '../../../gateway/errors';
import { multiModelError } from '../../../gateway/routes/sagemaker';

const answer = (err: GatewayError) => {
  const e = multiModelError(err) as GatewayError;
  return { code: e.code, status: e.status, plain: e.plain, message: e.message, grpcCode: e.grpcCode };
};

test.each([
  ['Triton\'s NOT_FOUND', new GatewayError('GW_ERR_UPSTREAM_STATUS', "Request for unknown model: 'x' is not found", { status: 404, grpcCode: 5 }), 400],
  ['Triton\'s INTERNAL', new GatewayError('GW_ERR_UPSTREAM_STATUS', 'model failed', { status: 500, grpcCode: 13 }), 400],
  ['Triton\'s UNAVAILABLE', new GatewayError('GW_ERR_UPSTREAM_STATUS', 'model not ready', { status: 503, grpcCode: 14 }), 400],
  ['a PyTorch OOM', new GatewayError('GW_ERR_UPSTREAM_STATUS', 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB', { status: 500, grpcCode: 13 }), 507],
  ['a TensorFlow OOM', new GatewayError('GW_ERR_UPSTREAM_STATUS', 'OOM when allocating tensor', { status: 500, grpcCode: 13 }), 507],
  ['a full disk', new GatewayError('GW_ERR_UPSTREAM_STATUS', 'No space left on device', { status: 500, grpcCode: 13 }), 507],
  ['a decoupled model', new GatewayError('GW_ERR_MODEL_DECOUPLED', "HTTP end point doesn't support models with decoupled transaction policy"), 400],
  ['a bad json-header-size', new GatewayError('GW_ERR_REQUEST_HEADER_INVALID', 'Unable to parse inference header size, got: x'), 400],
])('%s: %d in application/json, code and message kept', (_name, err, status) => {
  expect(answer(err)).toEqual({ code: err.code, status, plain: false, message: err.message, grpcCode: err.grpcCode });
});

test.each([
  new GatewayError('GW_ERR_REQUEST_TOO_LARGE', 'request body of 9 bytes exceeds the limit of 8 bytes (limits.maxBodyBytes)'),
  new GatewayError('GW_ERR_REQUEST_TIMEOUT', 'slow'),
  new GatewayError('GW_ERR_UPSTREAM_UNAVAILABLE', 'no backend'),
])('the gateway\'s own $code keeps its status', (err) => {
  expect(multiModelError(err)).toBe(err);
});

test('what is not a GatewayError goes on as it is', () => {
  const err = new Error('x');
  expect(multiModelError(err)).toBe(err);
});
