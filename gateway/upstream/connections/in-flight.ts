// The calls a plane has running, so that its close() can end them: grpc-js's Client.close()
// fails only calls that have not started yet, and an http2 session's close() waits for its
// streams — a call the gateway no longer wants (the drain deadline has passed) would otherwise
// run until its own deadline (upstream.timeoutMs) and hold the shutdown that long.
import { type Linked, LinkedList } from '../../linked-list';
import type { GatewayError } from '../../errors';
import { GrpcStatus } from '../../grpc/status';
import { byShutdown, upstreamError } from '../status';

/** A running call as InFlight lists it: what cancels it, and the list's links. */
export class Running implements Linked<Running> {
  linkPrev: Running | undefined;
  linkNext: Running | undefined;
  linked = false;
  constructor(readonly cancel: () => void) {}
}

export class InFlight {
  /** A list through the entries, not a Set of closures (../../linked-list.ts says why). */
  readonly #running = new LinkedList<Running>();
  #closed = false;

  /** True once cancelAll() ran: the plane starts no more calls. */
  get closed(): boolean {
    return this.#closed;
  }

  /** A running call: `cancel` cancels it upstream and settles it with shutdownError(); delete() takes the entry. */
  add(cancel: () => void): Running {
    const r = new Running(cancel);
    this.#running.add(r);
    return r;
  }

  /** The call has settled. */
  delete(r: Running | undefined): void {
    if (r !== undefined) this.#running.delete(r);
  }

  /** Cancels every call still running; later calls fail at once with shutdownError(). */
  cancelAll(): void {
    this.#closed = true;
    const running = [...this.#running];
    for (const r of running) this.#running.delete(r);
    for (const r of running) r.cancel();
  }
}

/** How a call ends that the gateway's shutdown cancelled, or that was started after it. */
export function shutdownError(): GatewayError {
  return byShutdown(upstreamError(GrpcStatus.UNAVAILABLE, 'the gateway is shutting down (server.drainTimeoutMs has passed)', true));
}
