// The calls a plane has running, so that its close() can end them: grpc-js's Client.close()
// fails only calls that have not started yet, and an http2 session's close() waits for its
// streams — a call the gateway no longer wants (the drain deadline has passed) would otherwise
// run until its own deadline (upstream.timeoutMs) and hold the shutdown that long.
import type { GatewayError } from '../../errors';
import { GrpcStatus } from '../../grpc/status';
import { byShutdown, upstreamError } from '../status';

export class InFlight {
  readonly #cancels = new Set<() => void>();
  #closed = false;

  /** True once cancelAll() ran: the plane starts no more calls. */
  get closed(): boolean {
    return this.#closed;
  }

  /** A running call: `cancel` cancels it upstream and settles it with shutdownError(). */
  add(cancel: () => void): void {
    this.#cancels.add(cancel);
  }

  /** The call has settled. */
  delete(cancel: () => void): void {
    this.#cancels.delete(cancel);
  }

  /** Cancels every call still running; later calls fail at once with shutdownError(). */
  cancelAll(): void {
    this.#closed = true;
    const cancels = [...this.#cancels];
    this.#cancels.clear();
    for (const cancel of cancels) cancel();
  }
}

/** How a call ends that the gateway's shutdown cancelled, or that was started after it. */
export function shutdownError(): GatewayError {
  return byShutdown(upstreamError(GrpcStatus.UNAVAILABLE, 'the gateway is shutting down (server.drainTimeoutMs has passed)', true));
}
