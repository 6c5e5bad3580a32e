// What Triton's SageMaker and Vertex AI frontends change in its V2 infer (src/sagemaker_server.cc,
// src/vertex_ai_server.cc), for the plan of pipeline/infer-decode.ts; the routes that set it are
// routes/sagemaker.ts and routes/vertex-ai.ts.
import type { OutgoingHttpHeaders } from 'node:http';
import { jsonHeaderSize, SAGEMAKER_BINARY, VERTEX_AI_BINARY } from '../decode/dialects/json-header-size';
import type { RequestContext } from '../ingress/context';

/**
 * What Triton's SageMaker and Vertex AI frontends change in its V2 infer: where the JSON header's
 * length comes from, the headers of a binary answer, and no compression either way (they
 * override GetRequestCompressionType and GetResponseCompressionType with identity).
 */
export interface InferDialect {
  /** Inference-Header-Content-Length as the dialect carries it; `bodyBytes`: the Content-Length. */
  headerLength(req: RequestContext['req'], bodyBytes: number | undefined): string | undefined;
  /** The headers of an answer with binary outputs whose JSON header is `headerBytes` long. */
  binaryHeaders(headerBytes: number): OutgoingHttpHeaders;
}

/** The headers of a binary answer: the dialect's, or V2's. */
export function binaryAnswerHeaders(dialect: InferDialect | undefined, headerBytes: number): OutgoingHttpHeaders {
  return dialect?.binaryHeaders(headerBytes) ?? { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': headerBytes };
}

export const SAGEMAKER_DIALECT: InferDialect = {
  headerLength: (req, bodyBytes) => jsonHeaderSize(SAGEMAKER_BINARY, req.headers['content-type'], bodyBytes),
  // Triton's SagemakeInferRequestClass::SetResponseHeader
  binaryHeaders: (headerBytes) => ({ 'Content-Type': `${SAGEMAKER_BINARY}${headerBytes}` }),
};

export const VERTEX_AI_DIALECT: InferDialect = {
  headerLength: (req, bodyBytes) => jsonHeaderSize(VERTEX_AI_BINARY, req.headers['content-type'], bodyBytes),
  binaryHeaders: (headerBytes) => ({ 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': headerBytes }),
};
