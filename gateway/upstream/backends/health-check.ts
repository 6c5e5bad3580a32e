// Active health checks of the backend set: grpc.health.v1.Health/Check with the empty service
// name, which Triton answers SERVING exactly when the server is ready (proto/health.proto). One
// grpc-js client per address, kept apart from the planes' clients so a check never waits behind
// inference traffic; its reconnect backoff is kept as short as the set's own (health.ts), so a
// returning Triton is seen by the next check rather than after grpc-js' default of up to 120 s.
// A server without the health service (UNIMPLEMENTED: not Triton, but a Triton-protocol server)
// is asked ServerReady instead, as the gateway's /readyz did before the set existed.
// With upstream.tls the checks use the same TLS material as the planes (upstream/connections/tls.ts), and
// the reason of an address's last failed check (a refused certificate) is kept for the set's
// "no ready backend" message. A `host:port` whose name does not resolve gets its cause from
// node:dns (grpc-js says only "Name resolution failed"), as a `dns:///` target does.
// The same client reads each backend's ready models for model-aware routing: RepositoryIndex with
// `ready` set, which Triton answers with the READY versions only (with Triton's
// --grpc-restricted-protocol on model-repository, the restriction's header goes along).
import { lookup } from 'node:dns/promises';
import { grpcHealth, healthService, inferenceService } from '../../../proto/services';
import { Client, credentials, Metadata, type ServiceError } from '@grpc/grpc-js';
import { modelKey } from './backend';
import { type CheckResult, type HealthChecker, RECONNECT_BASE_MS, RECONNECT_MAX_MS } from './health';
import { grpcJsTransportDetails } from '../connections/grpc-clients';
import type { UpstreamTls } from '../connections/tls';

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
  readonly #failures = new Map<string, string>();
  /** Addresses whose last check failed at name resolution. */
  readonly #unresolved = new Set<string>();

  /** `restriction`: the header Triton's --grpc-restricted-protocol wants for RepositoryIndex, if any. */
  constructor(private readonly tls?: UpstreamTls, private readonly restriction?: readonly [string, string]) {}

  check(address: string, timeoutMs: number): Promise<CheckResult> {
    const client = this.#client(address);
    const deadline = Date.now() + timeoutMs;
    const verdict = (err: ServiceError | null, serving: boolean): CheckResult => {
      const result = outcome(err, serving);
      // Kept on TLS channels only, where the reason is worth a client's reading (a refused
      // certificate); a plain backend that is down says so in its state.
      if (result === 'serving' || this.tls === undefined) this.#failures.delete(address);
      else this.#failures.set(address, err === null ? `${address} is not serving` : grpcJsTransportDetails(err.details, address, this.tls));
      return result;
    };
    if (this.#noHealthService.has(address)) return serverReady(client, deadline, verdict).then((r) => this.#resolutionCause(address, r));
    const def = healthService.Check;
    return new Promise<CheckResult>((resolve) => {
      client.makeUnaryRequest(def.path, def.requestSerialize, def.decodeResponse, { service: '' }, { deadline },
        (err: ServiceError | null, value?: ReturnType<typeof def.decodeResponse>) => {
          if (err?.code === UNIMPLEMENTED) {
            this.#noHealthService.add(address);
            resolve(serverReady(client, deadline, verdict));
            return;
          }
          if (err !== null && /^Name resolution failed/.test(err.details)) this.#unresolved.add(address);
          resolve(verdict(err, value?.status === SERVING));
        });
    }).then((r) => this.#resolutionCause(address, r));
  }

  #client(address: string): Client {
    let client = this.#clients.get(address);
    if (client === undefined) {
      client = new Client(address, this.tls === undefined ? credentials.createInsecure() : this.tls.channelCredentials(), {
        ...this.tls?.channelOptions(),
        'grpc.initial_reconnect_backoff_ms': RECONNECT_BASE_MS,
        'grpc.max_reconnect_backoff_ms': RECONNECT_MAX_MS,
        'grpc.enable_retries': 0,
      });
      this.#clients.set(address, client);
    }
    return client;
  }

  /** The address's READY models (names, and names with versions); undefined when the index could not be read. */
  models(address: string, timeoutMs: number): Promise<ReadonlySet<string> | undefined> {
    const client = this.#client(address);
    const def = inferenceService.RepositoryIndex;
    const metadata = new Metadata();
    if (this.restriction !== undefined) metadata.set(this.restriction[0], this.restriction[1]);
    return new Promise((resolve) => {
      client.makeUnaryRequest(def.path, def.requestSerialize, def.decodeResponse, { repository_name: '', ready: true }, metadata, { deadline: Date.now() + timeoutMs },
        (err: ServiceError | null, value?: ReturnType<typeof def.decodeResponse>) => {
          if (err !== null || value === undefined) {
            resolve(undefined);
            return;
          }
          const ready = new Set<string>();
          for (const m of value.models ?? []) {
            if (m.state !== 'READY' || typeof m.name !== 'string') continue;
            ready.add(modelKey(m.name));
            if (typeof m.version === 'string' && m.version !== '') ready.add(modelKey(m.name, m.version));
          }
          resolve(ready);
        });
    });
  }

  /** After a failed check whose name did not resolve: node:dns's reason kept as the failure (ENOTFOUND…). */
  async #resolutionCause(address: string, result: CheckResult): Promise<CheckResult> {
    if (!this.#unresolved.delete(address) || result === 'serving') return result;
    const host = address.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
    try {
      await lookup(host);
    } catch (err) {
      this.#failures.set(address, `${address} does not resolve (${(err as Error).message})`);
    }
    return result;
  }

  /** Why the address's last check failed (undefined after a pass). */
  failure(address: string): string | undefined {
    return this.#failures.get(address);
  }

  forget(address: string): void {
    this.#noHealthService.delete(address);
    this.#failures.delete(address);
    this.#clients.get(address)?.close();
    this.#clients.delete(address);
  }

  close(): void {
    for (const c of this.#clients.values()) c.close();
    this.#clients.clear();
  }
}

function serverReady(client: Client, deadline: number, verdict: (err: ServiceError | null, serving: boolean) => CheckResult): Promise<CheckResult> {
  const def = inferenceService.ServerReady;
  return new Promise<CheckResult>((resolve) => {
    client.makeUnaryRequest(def.path, def.requestSerialize, def.decodeResponse, {}, { deadline },
      (err: ServiceError | null, value?: ReturnType<typeof def.decodeResponse>) => resolve(verdict(err, value?.ready === true)));
  });
}
