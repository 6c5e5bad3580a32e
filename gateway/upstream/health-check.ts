// Active health checks of the backend set: grpc.health.v1.Health/Check with the empty service
// name, which Triton answers SERVING exactly when the server is ready (proto/health.proto). One
// grpc-js client per address, kept apart from the planes' clients so a check never waits behind
// inference traffic; its reconnect backoff is kept as short as the set's own (backends.ts), so a
// returning Triton is seen by the next check rather than after grpc-js' default of up to 120 s.
// A server without the health service (UNIMPLEMENTED: not Triton, but a Triton-protocol server)
// is asked ServerReady instead, as the gateway's /readyz did before the set existed.
import { Client, credentials, type ServiceError } from '@grpc/grpc-js';
import { grpcHealth, healthService, inferenceService } from '../../proto/services';
import { type CheckResult, type HealthChecker, RECONNECT_BASE_MS, RECONNECT_MAX_MS } from './backends';

const SERVING = grpcHealth.health.v1.HealthCheckResponse.ServingStatus.SERVING;
const DEADLINE_EXCEEDED = 4;
const UNIMPLEMENTED = 12;

function outcome(err: ServiceError | null, serving: boolean): CheckResult {
  if (err === null) return serving ? 'serving' : 'down';
  return err.code === DEADLINE_EXCEEDED ? 'timeout' : 'down';
}

export class GrpcHealthChecker implements HealthChecker {
  readonly #clients = new Map<string, Client>();
  /** Addresses whose server has no health service: asked ServerReady. */
  readonly #noHealthService = new Set<string>();

  check(address: string, timeoutMs: number): Promise<CheckResult> {
    let client = this.#clients.get(address);
    if (client === undefined) {
      client = new Client(address, credentials.createInsecure(), {
        'grpc.initial_reconnect_backoff_ms': RECONNECT_BASE_MS,
        'grpc.max_reconnect_backoff_ms': RECONNECT_MAX_MS,
        'grpc.enable_retries': 0,
      });
      this.#clients.set(address, client);
    }
    const deadline = Date.now() + timeoutMs;
    if (this.#noHealthService.has(address)) return serverReady(client, deadline);
    const def = healthService.Check;
    return new Promise<CheckResult>((resolve) => {
      client.makeUnaryRequest(def.path, def.requestSerialize, def.decodeResponse, { service: '' }, { deadline },
        (err: ServiceError | null, value?: ReturnType<typeof def.decodeResponse>) => {
          if (err?.code === UNIMPLEMENTED) {
            this.#noHealthService.add(address);
            resolve(serverReady(client, deadline));
            return;
          }
          resolve(outcome(err, value?.status === SERVING));
        });
    });
  }

  forget(address: string): void {
    this.#noHealthService.delete(address);
    this.#clients.get(address)?.close();
    this.#clients.delete(address);
  }

  close(): void {
    for (const c of this.#clients.values()) c.close();
    this.#clients.clear();
  }
}

function serverReady(client: Client, deadline: number): Promise<CheckResult> {
  const def = inferenceService.ServerReady;
  return new Promise<CheckResult>((resolve) => {
    client.makeUnaryRequest(def.path, def.requestSerialize, def.decodeResponse, {}, { deadline },
      (err: ServiceError | null, value?: ReturnType<typeof def.decodeResponse>) => resolve(outcome(err, value?.ready === true)));
  });
}
