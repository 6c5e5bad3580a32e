// A gRPC client for tests: the gateway's own control plane pointed at one address.
import { BackendSet, type BackendSetOptions } from '../../gateway/upstream/backends/backend-set';
import { ControlPlane } from '../../gateway/upstream/control/control-plane';

/** The defaults of the upstream.* options (gateway/config/schema.ts). */
export const SET_DEFAULTS = {
  dnsRefreshMs: 30_000, healthCheckIntervalMs: 5000, healthyThreshold: 2, unhealthyThreshold: 3, ejectAfterFailures: 5,
  ejectionBaseMs: 30_000, maxEjectionPercent: 50, retries: 1,
} as const;

/**
 * A backend set of fixed addresses without health checks: its backends stay 'connecting' and are
 * picked in turn (no timers, nothing to close).
 */
export function fixedBackends(addresses: readonly string[], options: Partial<BackendSetOptions> = {}): BackendSet {
  return new BackendSet({ ...SET_DEFAULTS, targets: addresses, ...options });
}

export function grpcClient(address: string): ControlPlane {
  return new ControlPlane({ backends: fixedBackends([address]), timeoutMs: 30_000, maxMessageBytes: 2 ** 31 - 1 });
}

/** Resolves to the GatewayError a call rejects with. */
export async function callError(p: Promise<unknown>): Promise<{ code: string; status: number; message: string }> {
  try {
    await p;
  } catch (err) {
    const e = err as { code: string; status: number; message: string };
    return { code: e.code, status: e.status, message: e.message };
  }
  throw new Error('expected the call to fail');
}
