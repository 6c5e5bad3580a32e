// The end of every ModelInfer call, whichever route made it and however its message went out
// (whole, or cut through while the body arrived): waits for the answer and records the upstream
// hops — sending, Triton, receiving — from the transport's timestamps, the bytes both ways, the
// call's duration and its gRPC status.
import type { Ledger } from '../../infer/ledger';
import type { CallTiming, ResponseMessage } from './data-plane';
import { nowNs } from '../../infer/clock';

/** What telemetry learns of the call (the request's record has these fields). */
export interface CallOutcome {
  upstreamDurationNs?: number;
  upstreamStatus?: number;
}

/** Waits for a call started at `startNs`; rejects with the data plane's GatewayError. */
export async function awaitAnswer(pending: Promise<ResponseMessage>, startNs: number, messageBytes: number, ledger: Ledger,
  outcome: CallOutcome): Promise<ResponseMessage> {
  ledger.startedAt('upstream_send', startNs);
  let answer: ResponseMessage;
  try {
    answer = await pending;
  } catch (err) {
    callFailed(err, startNs, outcome);
    throw err;
  }
  callAnswered(answer, startNs, messageBytes, ledger, outcome);
  return answer;
}

/** What a call started at `startNs` that failed with `err` tells telemetry. */
export function callFailed(err: unknown, startNs: number, outcome: CallOutcome): void {
  outcome.upstreamDurationNs = nowNs() - startNs;
  outcome.upstreamStatus = (err as { grpcCode?: number }).grpcCode;
}

/** What a call started at `startNs` that was answered tells telemetry: its hops and bytes. */
export function callAnswered(answer: ResponseMessage, startNs: number, messageBytes: number, ledger: Ledger, outcome: CallOutcome): void {
  const endNs = nowNs();
  outcome.upstreamDurationNs = endNs - startNs;
  outcome.upstreamStatus = 0;
  upstreamHops(ledger, startNs, endNs, answer.timing);
  ledger.bytes('upstream_send', messageBytes, messageBytes);
  ledger.bytes('upstream_receive', answer.byteLength, answer.byteLength);
}

/**
 * The three upstream hops from the transport's timestamps (upstream/infer/data-plane.ts CallTiming):
 * sending (first to last byte written), Triton (last byte sent to first byte of the answer),
 * receiving (first to last byte). While the answer still arrives (a binary answer streamed as it
 * comes), receiving has started but not ended: its end stays 0, so the Server-Timing of the
 * answer's head leaves it out rather than give the time so far as its duration. Without the
 * transport's timestamps (grpc-js) the whole call, to `end`, counts as Triton's.
 */
export function upstreamHops(ledger: Ledger, start: number, end: number, t: CallTiming | undefined): void {
  if (t === undefined || t.sentNs === 0 || t.firstByteNs === 0) {
    ledger.startedAt('upstream_send', start);
    ledger.endedAt('upstream_send', start);
    ledger.startedAt('triton', start);
    ledger.endedAt('triton', end);
    ledger.startedAt('upstream_receive', end);
    ledger.endedAt('upstream_receive', end);
    return;
  }
  ledger.startedAt('upstream_send', t.firstSentNs === 0 ? start : t.firstSentNs);
  ledger.endedAt('upstream_send', t.sentNs);
  ledger.startedAt('triton', t.sentNs);
  ledger.endedAt('triton', t.firstByteNs);
  ledger.startedAt('upstream_receive', t.firstByteNs);
  ledger.endedAt('upstream_receive', t.endNs);
}
