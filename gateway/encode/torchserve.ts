// Triton's answer as a TorchServe handler would return it (docs/dialects.md "TorchServe"): the
// Python backend sends bytes as they are and anything else as JSON (ts/protocol/otf_message_handler.py).
// So: one BYTES output holding one element is that element's bytes, application/octet-stream (an
// image, audio, a serialized tensor); every other answer is JSON — for a batching model the
// request's one item (row 0 of dim 0, as a handler returns one result per request), else the
// whole output; bare for one output, an object by output name for several. Numbers and BYTES print
// as in the TF-Serving answers (encode/v1-predict.ts).
import { GatewayError } from '../errors';
import { elementCount } from '../infer/datatype';
import { type InferResponse, outputBytes } from '../infer/response';
import { outputValues } from './v1-predict';

export interface TorchServeAnswer {
  readonly contentType: string;
  readonly body: Buffer;
}

export function encodeTorchServeAnswer(res: InferResponse, batching: boolean): TorchServeAnswer {
  const only = res.outputs.length === 1 ? res.outputs[0]! : undefined;
  if (only?.datatype === 'BYTES' && elementCount(only.shape) === 1) {
    const data = outputBytes(only);
    const length = data.length >= 4 ? data.readUInt32LE(0) : -1;
    if (length !== data.length - 4) {
      throw new GatewayError('GW_ERR_ENCODE_MALFORMED', `output '${only.name}': its bytes do not match its shape and datatype`);
    }
    return { contentType: 'application/octet-stream', body: data.subarray(4) };
  }
  const rows = res.outputs[0]?.shape[0] ?? 0;
  return { contentType: 'application/json', body: outputValues(res, batching && rows === 1 ? 0 : undefined) };
}
