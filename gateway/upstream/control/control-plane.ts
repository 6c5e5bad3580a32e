// The control plane: health, metadata, config and (later) every administrative RPC, as unary
// calls on @grpc/grpc-js. These messages are small, so grpc-js's robustness (reconnects,
// keepalive, flow control) matters more here than its extra copies (docs/architecture.md#two-data-planes).
import type { Client, ClientUnaryCall, ServiceError } from '@grpc/grpc-js';
import { inferenceService } from '../../../proto/services';
import { grpcRestrictionMetadata, type Restriction } from '../../api-access';
import { isReady, mayBeUp } from '../backends/backend';
import type { BackendSet } from '../backends/backend-set';
import type { ModelKey } from '../backends/pools';
import { callMetadata, GrpcClients, grpcJsError } from '../connections/grpc-clients';
import { InFlight, shutdownError } from '../connections/in-flight';
import { clientCancelled } from '../status';
import { withRetries } from '../backends/retry';
import type { UpstreamTls } from '../connections/tls';

type Service = typeof inferenceService;
type UnaryName = Exclude<keyof Service, 'ModelStreamInfer'>;
export type RequestOf<K extends UnaryName> = Parameters<Service[K]['requestSerialize']>[0];
export type ResponseOf<K extends UnaryName> = ReturnType<Service[K]['decodeResponse']>;

export interface ControlPlaneOptions {
  readonly backends: BackendSet;
  readonly timeoutMs: number;
  readonly maxMessageBytes: number;
  /** Triton's own restricted gRPC groups: their header is sent as triton-grpc-protocol-<key> metadata. */
  readonly restricted?: readonly Restriction[];
  /** upstream.tls: the connections to Triton use TLS. */
  readonly tls?: UpstreamTls;
}

export class ControlPlane {
  readonly #clients: GrpcClients;
  readonly #timeoutMs: number;
  readonly #metadata: ReadonlyMap<string, readonly [string, string]>;
  readonly #inFlight = new InFlight();

  constructor(options: ControlPlaneOptions) {
    this.#timeoutMs = options.timeoutMs;
    // Decided once: which calls carry which restriction header.
    const md = new Map<string, readonly [string, string]>();
    for (const rpc of Object.keys(inferenceService)) {
      const h = grpcRestrictionMetadata(options.restricted ?? [], rpc);
      if (h !== undefined) md.set(rpc, h);
    }
    this.#metadata = md;
    this.#clients = new GrpcClients(options.backends, options.maxMessageBytes, options.tls);
  }

  /**
   * One unary call on the next ready backend (round robin), sent again on another when it never
   * reached the first (upstream/backends/retry.ts). Rejects with a GatewayError; aborting `signal` cancels
   * the call, which Triton honours (docs/architecture.md#calls-to-triton).
   */
  call<K extends UnaryName>(name: K, request: RequestOf<K>, signal?: AbortSignal): Promise<ResponseOf<K>> {
    const deadline = Date.now() + this.#timeoutMs;
    const model = modelOf(request);
    return withRetries(this.#clients.set, model === undefined ? { deadline } : { deadline, model },
      (b) => this.#callOn(this.#clients.client(b), name, request, deadline, signal));
  }

  /**
   * The same call on every backend that may answer (ready, or not known to be down), in every pool:
   * each one's answer, or its error. For what is the union of the backends' answers (the
   * repository index). No backend at all fails as call() does.
   */
  async callEach<K extends UnaryName>(name: K, request: RequestOf<K>, signal?: AbortSignal): Promise<PromiseSettledResult<ResponseOf<K>>[]> {
    const set = this.#clients.set;
    const ready = set.all.filter(isReady);
    const asked = ready.length > 0 ? ready : set.all.filter(mayBeUp);
    if (asked.length === 0) set.pickOrFail();
    const deadline = Date.now() + this.#timeoutMs;
    return Promise.allSettled(asked.map((b) => this.#callOn(this.#clients.client(b), name, request, deadline, signal)));
  }

  /**
   * True when at least one backend of the set is ready (the gateway's /readyz): the set's health
   * checks decide (upstream/backends/health.ts), so a probe costs no upstream call.
   */
  anyReady(): boolean {
    return this.#clients.set.anyReady();
  }

  #callOn<K extends UnaryName>(client: Client, name: K, request: RequestOf<K>, deadline: number, signal?: AbortSignal): Promise<ResponseOf<K>> {
    const def: Service[UnaryName] = inferenceService[name];
    return new Promise<ResponseOf<K>>((resolve, reject) => {
      if (this.#inFlight.closed) {
        reject(shutdownError());
        return;
      }
      let call: ClientUnaryCall | undefined;
      // Rejected here, before grpc-js reports its own CANCELLED: the caller's abort is the cause.
      const onAbort = (): void => {
        reject(clientCancelled());
        call?.cancel();
      };
      const onShutdown = (): void => {
        reject(shutdownError());
        call?.cancel();
      };
      const running = this.#inFlight.add(onShutdown);
      call = client.makeUnaryRequest(
        def.path,
        def.requestSerialize as unknown as (m: RequestOf<K>) => Buffer,
        def.decodeResponse as unknown as (b: Buffer) => ResponseOf<K>,
        request,
        callMetadata(this.#metadata.get(name)),
        { deadline },
        (err: ServiceError | null, value?: ResponseOf<K>) => {
          signal?.removeEventListener('abort', onAbort);
          this.#inFlight.delete(running);
          if (err) reject(grpcJsError(err, client));
          else resolve(value as ResponseOf<K>);
        },
      );
      if (signal?.aborted) onAbort();
      else signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Cancels the calls still running (they reject with GW_ERR_UPSTREAM_UNAVAILABLE) and closes the channels. */
  close(): void {
    this.#inFlight.cancelAll();
    this.#clients.close();
  }
}

/**
 * The model a control call names, if any: `name` and `version` (ModelReady, ModelMetadata,
 * ModelConfig, ModelStatistics), or `model_name` (repository load and unload, trace settings).
 * The empty name (every model) names none.
 */
function modelOf(request: unknown): ModelKey | undefined {
  const r = request as { name?: unknown; version?: unknown; model_name?: unknown };
  const name = typeof r.name === 'string' ? r.name : typeof r.model_name === 'string' ? r.model_name : '';
  if (name === '') return undefined;
  return { name, version: typeof r.version === 'string' ? r.version : '' };
}
