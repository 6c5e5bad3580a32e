// A ModelInferRequest as the data plane sends it: protobuf-encoded with its one input's bytes in
// raw_input_contents, behind the 5-byte gRPC message prefix (uncompressed, big-endian length).
import { inference } from '../../proto/services';

/** `payload` as a UINT8 [1, n] input INPUT0 of `model`; payloadAt: where its bytes start in the message. */
export function framedModelInfer(model: string, payload: Buffer): { message: Buffer; payloadAt: number } {
  const m = inference.ModelInferRequest.encode({
    model_name: model, inputs: [{ name: 'INPUT0', datatype: 'UINT8', shape: [1, payload.length] }], raw_input_contents: [payload],
  }).finish();
  const message = Buffer.allocUnsafe(5 + m.length);
  message[0] = 0;
  message.writeUInt32BE(m.length, 1);
  message.set(m, 5);
  return { message, payloadAt: message.length - payload.length };
}
