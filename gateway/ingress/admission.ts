// Admission: the gateway's in-flight bounds (limits.maxInFlightRequests, limits.maxInFlightBodyBytes)
// shared by every request of a server, REST and gRPC pass-through alike. A request is refused with
// 503 (GW_ERR_REQUEST_OVERLOADED, Retry-After) before its body is read, so that an overload costs
// the gateway a head, never a body's memory.
import type { Config } from '../config/schema';
import { OVERLOADED_RETRY_AFTER_S } from '../egress/write';
import { GatewayError } from '../errors';

export type AdmissionLimits = Pick<Config['limits'], 'maxInFlightRequests' | 'maxInFlightBodyBytes'>;

/** Where Admission.counts holds each count. */
export const enum Counted { REQUESTS = 0, BODY_BYTES = 1 }

export class Admission {
  /**
   * Requests admitted and not over yet, and the sum of their declared bodies (probes apart), at
   * Counted's indexes. The compiled lane (native/lane.c) admits its requests in the same memory,
   * so the bounds hold for both: an ArrayBuffer's of its own, whose bytes never move.
   */
  readonly counts = new Float64Array(new ArrayBuffer(2 * Float64Array.BYTES_PER_ELEMENT));

  constructor(readonly limits: AdmissionLimits) {}

  private get requests(): number {
    return this.counts[Counted.REQUESTS]!;
  }

  private get bodyBytes(): number {
    return this.counts[Counted.BODY_BYTES]!;
  }

  /**
   * The answer to refuse a request declaring `declared` body bytes with, or undefined. A body
   * larger than the whole byte bound still goes through when no other body is in flight, or it
   * could never be served (limits.maxBodyBytes caps it).
   */
  refusal(declared: number): GatewayError | undefined {
    const { limits, requests, bodyBytes } = this;
    if (requests >= limits.maxInFlightRequests) {
      return new GatewayError('GW_ERR_REQUEST_OVERLOADED',
        `the gateway is overloaded: ${requests} requests in flight (limits.maxInFlightRequests); retry after ${OVERLOADED_RETRY_AFTER_S} s`);
    }
    if (declared > 0 && bodyBytes > 0 && bodyBytes + declared > limits.maxInFlightBodyBytes) {
      return new GatewayError('GW_ERR_REQUEST_OVERLOADED',
        `the gateway is overloaded: ${bodyBytes} body bytes in flight and ${declared} more declared exceed ${limits.maxInFlightBodyBytes} (limits.maxInFlightBodyBytes); retry after ${OVERLOADED_RETRY_AFTER_S} s`);
    }
    return undefined;
  }

  /** A request admitted (after refusal() said undefined), holding `declared` body bytes. */
  enter(declared: number): void {
    this.counts[Counted.REQUESTS]!++;
    this.counts[Counted.BODY_BYTES]! += declared;
  }

  /** An admitted request over: its place and its bytes given back. */
  leave(declared: number): void {
    this.counts[Counted.REQUESTS]!--;
    this.counts[Counted.BODY_BYTES]! -= declared;
  }

  /**
   * A place in the in-flight count for a call that is not an HTTP request (a gRPC pass-through
   * call), within limits.maxInFlightRequests: the function that gives it back (once, however often
   * called), or undefined when the bound is reached.
   */
  admit(): (() => void) | undefined {
    if (this.requests >= this.limits.maxInFlightRequests) return undefined;
    this.counts[Counted.REQUESTS]!++;
    let held = true;
    return () => {
      if (held) this.counts[Counted.REQUESTS]!--;
      held = false;
    };
  }
}
