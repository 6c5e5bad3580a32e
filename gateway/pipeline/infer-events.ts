// V2 infer answered as server-sent events (docs/dialects.md "Decoupled models as events"), asked for
// with `Accept: text/event-stream`: the only way HTTP reaches a decoupled model, which answers one
// request with zero or many responses. The body is decoded as any V2 infer body (every form), but
// whole — nothing cut through, nothing through the gateway's shared-memory regions — and its framed
// ModelInferRequest goes on a ModelStreamInfer stream (the generate routes' plane and writer)
// instead of ModelInfer, which Triton refuses for decoupled models. Each response is one event in
// the V2 JSON response shape; outputs asked for as binary come as base64 (an event is text).
import type { inference } from '../../proto/services';
import { encodeGenerateError, encodeInferResponse } from '../encode/infer-response';
import { GatewayError, isGatewayError } from '../errors';
import type { Ledger } from '../infer/ledger';
import type { RequestContext } from '../ingress/context';
import type { StreamMessage } from '../upstream/infer/stream-plane';
import { inferCallError, streamError } from '../upstream/status';
import { AnswerStreamer } from './answer-streamer';
import { GenerateEvents, streamCall } from './generate';
import { decodeInferBody, type InferPlan } from './infer-decode';
import { sequenceKey } from './steps';

/**
 * Decodes the body, streams the call and writes each response as an event. An error before the
 * first event (Triton refused the request, the model failed at once) is an ordinary JSON error —
 * 400 GW_ERR_UPSTREAM_STREAM_ERROR, a stream's error carries no status — and after it an event
 * `data: {"error":"…"}` that ends the stream, as generate_stream writes it. The stream ends after
 * the response Triton marks `triton_final_response` (or when Triton ends the call: a final flag
 * without a response is not sent unless asked for); a client that goes away cancels the call.
 */
export async function inferEvents(ctx: RequestContext, p: InferPlan, config: inference.ModelConfig, ledger: Ledger): Promise<void> {
  const whole: InferPlan = { ...p, cutThrough: false, sharedMemory: undefined };
  const decoded = await decodeInferBody(ctx, whole, config, ledger, new AnswerStreamer(ctx, false, false, ledger), { upload: undefined });
  const { sent, request } = decoded;
  // Nothing is cut through (the plan says so): the message is whole.
  if (!('message' in sent)) throw new GatewayError('GW_ERR_GATEWAY_INTERNAL', 'infer events: the request went out before the stream opened');
  ctx.record.encodingOut = 'sse';
  const events = new GenerateEvents(ctx, ledger, p.telemetry.serverTiming);
  const onMessage = (m: StreamMessage): Promise<void> | undefined => {
    if (m.kind === 'error') {
      if (!events.started) throw streamError(m.message);
      return events.write(encodeGenerateError(m.message));
    }
    const encoded = encodeInferResponse(m.response, request, true);
    events.open(200);
    return events.write(encoded.header);
  };
  try {
    await streamCall(ctx, p.streams, p.configs, p.upstream.timeoutMs, sent.message, ledger, onMessage, sequenceKey(request));
  } catch (err) {
    if (!events.started) throw inferCallError(err);
    // Mid-stream: the status is sent; the error becomes the last event.
    events.end(encodeGenerateError(isGatewayError(err) ? err.message : String(err)));
    return;
  }
  events.close();
}
