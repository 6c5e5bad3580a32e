// A gRPC client for tests: the gateway's own control plane pointed at one address.
import { ControlPlane } from '../../gateway/upstream/control-plane';

export function grpcClient(address: string): ControlPlane {
  return new ControlPlane({ backends: [address], timeoutMs: 30_000, maxMessageBytes: 2 ** 31 - 1 });
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
