// The binary media types of Triton's SageMaker and Vertex AI frontends (docs/dialects.md): the
// length of the JSON header travels in the Content-Type,
//   application/vnd.sagemaker-triton.binary+json;json-header-size=N
//   application/vnd.vertex-ai-triton.binary+json;json-header-size=N
// and stands for Inference-Header-Content-Length, which those frontends never read; the body is
// then the binary extension (decode/binary-extension.ts), N = 0 a raw request. Read as
// GetInferenceHeaderLength reads it in Triton's src/sagemaker_server.cc and src/vertex_ai_server.cc:
// the media type is found by a case-sensitive search of the field; found elsewhere than at its
// start it is an error; N is the leading integer (std::stoi: blanks and a sign allowed, trailing
// junk ignored, no digits or past int32 an error); negative or past the body the range error.
// Without the media type the whole body is the JSON header, as with no
// Inference-Header-Content-Length. (Triton 2.51 read N with atoi, where no digits meant 0, a raw
// request; its later releases refuse it, and so does the gateway: docs/differences.md.)
import { GatewayError } from '../../errors';

export const SAGEMAKER_BINARY = 'application/vnd.sagemaker-triton.binary+json;json-header-size=';
export const VERTEX_AI_BINARY = 'application/vnd.vertex-ai-triton.binary+json;json-header-size=';

const INT32_MAX = 2 ** 31 - 1;

/**
 * The header length the Content-Type `contentType` declares in the media type `prefix`, as
 * Inference-Header-Content-Length would carry it (a decimal string), or undefined when the field
 * does not carry that media type. `bodyBytes`: the Content-Length (undefined: chunked, checked
 * once the body is in, by the V2 path's own range check).
 */
export function jsonHeaderSize(prefix: string, contentType: string | undefined, bodyBytes: number | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  const at = contentType.indexOf(prefix);
  if (at === -1) return undefined;
  if (at !== 0) {
    throw new GatewayError('GW_ERR_REQUEST_HEADER_INVALID', `expect MIME type for binary data starts with '${prefix}', got: ${contentType}`);
  }
  const given = contentType.slice(prefix.length);
  const m = /^[ \t\n\v\f\r]*([+-]?\d+)/.exec(given);
  if (m === null) throw new GatewayError('GW_ERR_REQUEST_HEADER_INVALID', `Unable to parse inference header size, got: ${given}`);
  const n = Number(m[1]);
  if (n > INT32_MAX || n < -INT32_MAX - 1) {
    throw new GatewayError('GW_ERR_REQUEST_HEADER_INVALID', `Unable to parse inference header size, value is out of range, got: ${given}`);
  }
  if (bodyBytes !== undefined && (n < 0 || n > bodyBytes)) {
    throw new GatewayError('GW_ERR_REQUEST_HEADER_INVALID', `inference header size should be in range (0, ${bodyBytes}), got: ${given}`);
  }
  return String(n);
}
