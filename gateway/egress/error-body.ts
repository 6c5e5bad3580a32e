// The bodies of error answers, in the shape of the route family that answers (Route.errorShape):
// the one place a dialect's error object is made, for an error answer and for the error event a
// stream ends with alike. The dialect's details are fields of the error (GatewayError.dialect).
import { type ErrorShape, GatewayError, isGatewayError } from '../errors';

/** `err` as the error the client is answered with: itself, or GW_ERR_GATEWAY_INTERNAL around anything else. */
export function asGatewayError(err: unknown): GatewayError {
  return isGatewayError(err)
    ? err
    : new GatewayError('GW_ERR_GATEWAY_INTERNAL', `internal error: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

/** The body of `e`'s answer in `shape`; every shape but Triton's is JSON whatever the condition. */
export function errorBody(shape: ErrorShape, e: GatewayError): string {
  switch (shape) {
    case 'triton': return JSON.stringify({ error: e.message });
    case 'openai': return openAiError(e);
    case 'torchserve': return torchServeError(e);
  }
}

/**
 * OpenAI's error object, {"error": {"message", "type", "param", "code"}}: the type by the status,
 * param and code as the error gives them (a 404 is model_not_found unless it says otherwise).
 */
function openAiError(e: GatewayError): string {
  const d = e.dialect?.shape === 'openai' ? e.dialect : undefined;
  const { status } = e;
  const type = status === 401 ? 'authentication_error' : status === 403 ? 'permission_error' : status === 404 ? 'invalid_request_error'
    : status === 429 ? 'rate_limit_exceeded' : status < 500 ? 'invalid_request_error' : 'server_error';
  return JSON.stringify({ error: { message: e.message, type, param: d?.param ?? null, code: d?.code ?? (status === 404 ? 'model_not_found' : null) } });
}

/** TorchServe's {"code", "type", "message"}: its exception class as the error names it, else the one for the status. */
function torchServeError(e: GatewayError): string {
  const type = e.dialect?.shape === 'torchserve' ? e.dialect.type : torchServeType(e.status);
  return JSON.stringify({ code: e.status, type, message: e.message });
}

/** TorchServe's exception class for a status the gateway answers with (its frontend's NettyUtils.sendError). */
function torchServeType(status: number): string {
  if (status === 404) return 'ResourceNotFoundException';
  // TorchServe's token authorization refuses with InvalidKeyException (its TokenAuthorization plugin).
  if (status === 401 || status === 403) return 'InvalidKeyException';
  if (status === 503) return 'ServiceUnavailableException';
  if (status < 500) return 'BadRequestException';
  return 'InternalServerException';
}
