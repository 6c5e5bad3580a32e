// gRPC pass-through (docs/production.md "gRPC pass-through"): the handler the listener calls for
// every HTTP/2 stream whose content-type starts with application/grpc. Calls of Triton's
// inference.GRPCInferenceService go to a ready backend, one call at a time
// (passthrough/grpc-relay.ts); grpc.health.v1.Health/Check is answered for the gateway itself;
// anything else is UNIMPLEMENTED. Before a call goes anywhere it meets what a REST request
// meets, answered as a gRPC status with a message, never as an HTTP error:
//   1. the restricted API groups by Triton's gRPC categories (api-access.ts RPC_CATEGORY): a
//      group of api.restricted wants the metadata Triton's own --grpc-restricted-protocol wants,
//      `triton-grpc-protocol-<key>: <value>`, and a refusal is Triton's (UNAVAILABLE "This
//      protocol is restricted, expecting header 'triton-grpc-protocol-<key>'"); api.disabled is
//      PERMISSION_DENIED;
//   2. the in-flight bound (limits.maxInFlightRequests): UNAVAILABLE, as Envoy answers overload,
//      which gRPC clients may retry;
//   3. auth (auth/guard.ts judge()): `authorization: Bearer …` or the key header, UNAUTHENTICATED
//      when missing or invalid, PERMISSION_DENIED for another group or model, UNAVAILABLE when the
//      JWKS cannot be fetched. Credentials limited to some models are checked against the model
//      every request message names, read as protobuf reads it (grpc/fields.ts: the
//      field's last copy wherever it is; every message of a stream), before the message's last
//      byte is forwarded; a message whose model cannot be read (compressed, malformed, a name
//      longer than MAX_NAME_BYTES) is refused to such credentials. So are the calls that reach
//      past their models (modelAnswer): an empty name (every model, every region), the
//      repository index, the log settings, a load with parameters, an unload of dependents;
//   4. the credentials' limits (auth/limits.ts, auth/guard.ts takeLimits): RESOURCE_EXHAUSTED past
//      their rate or concurrency, as gRPC's own servers answer a quota, with the wait as
//      grpc-retry-pushback-ms; the place is given back when the call is done, however it ends
//      (#end);
//   5. the deadline: the client's grpc-timeout capped by upstream.timeoutMs.
// Each call leaves one RequestRecord (protocol "grpc", route "grpc <Method>", the model the first
// message names). No credential header goes upstream (auth/credential-headers.ts).
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http2';
import { type ApiCategory, grpcRestrictionMetadata, RPC_CATEGORY } from '../api-access';
import type { Authenticator } from '../auth/authenticator';
import { credentialHeaders } from '../auth/credential-headers';
import { EVERY_MODEL, judge, limitedRefusal, missingMessage, modelRefusal, takeLimits } from '../auth/guard';
import type { Grant } from '../auth/key-file';
import type { Config } from '../config/schema';
import { isReservedRegion } from '../decode/control/shared-memory';
import { type ErrorCode, GatewayError, isGatewayError } from '../errors';
import { EnvelopeDecoder } from '../grpc/envelope';
import { type MessageFacts, type MessageFields, MessageReader } from '../grpc/fields';
import { encodeGrpcMessage, GrpcStatus, grpcStatusOf } from '../grpc/status';
import { parseGrpcTimeout } from '../grpc/timeout';
import { Admission } from '../ingress/admission';
import { type AnswerBound, type GrpcStream, UNBOUNDED } from '../ingress/h2';
import type { AccessTable } from '../ingress/router';
import { GRPC_ROUTE_PREFIX, type ObservedRequest, type RequestObserver, type RequestRecord } from '../telemetry/record';
import type { BackendSet } from '../upstream/backends/backend-set';
import { answerStatus, forwardGrpcCall, type ForwardedCall, type ForwardOutcome, type ForwardOwner, relayHeaders, stopUpload } from './grpc-relay';
import type { H2Connections } from '../upstream/connections/h2-sessions';
import { unhook } from '../unhook';
import { nowNs } from '../infer/clock';

/**
 * The handler the listener calls for each gRPC stream; `unread()`: the listener reset the stream
 * for a client that did not read its answer (ingress/h2.ts, server.h2.unreadAnswerMs and
 * server.h2.maxUnreadAnswerBytes).
 */
export type GrpcStreamHandler = (stream: GrpcStream, headers: IncomingHttpHeaders, bound?: AnswerBound) => void;

export interface GrpcPassthroughOptions {
  /** The live backend set and the HTTP/2 sessions to it (the data plane's: H2DataPlane.connections). */
  readonly backends: BackendSet;
  readonly connections: H2Connections;
  readonly upstream: Pick<Config['upstream'], 'timeoutMs' | 'restricted'>;
  readonly limits: Pick<Config['limits'], 'maxInputSizeBytes' | 'maxInFlightRequests'>;
  /** Restricted API groups (api.restricted, api.disabled): accessTable(). */
  readonly access?: AccessTable;
  /** auth.enabled: the authenticator, and auth.keyHeader. */
  readonly auth?: Authenticator;
  readonly keyHeader?: string;
  /**
   * upstream.sharedMemory.prefix when the mode is on: the gateway's own regions, which no call may
   * name (decode/control/shared-memory.ts; REST refuses the same).
   */
  readonly reservedPrefix?: string;
  /** api.restricted (its headers are removed before a call goes upstream, as upstream.restricted's are). */
  readonly apiRestricted?: Config['api']['restricted'];
  readonly observer: RequestObserver;
  /** True once the gateway drains: Health/Check says NOT_SERVING. */
  readonly draining: () => boolean;
  /**
   * Admission against the in-flight bound: a release function, or undefined when full. The
   * listener's (ingress/admission.ts Admission.admit, shared with its HTTP requests); without it,
   * an Admission of this handler's own calls against limits.maxInFlightRequests.
   */
  readonly admit?: () => (() => void) | undefined;
}

const INFERENCE = '/inference.GRPCInferenceService/';
const HEALTH = '/grpc.health.v1.Health/';
/**
 * The field naming the model in each request that names one (proto/inference.proto, as Triton's
 * grpc_service.proto numbers them): field 1 (ModelInferRequest.model_name, the others' name),
 * field 2 in the repository and trace requests (model_name after repository_name or settings).
 */
const MODEL_FIELD: ReadonlyMap<string, MessageFields> = new Map(Object.entries({
  ModelInfer: { name: 1, sequence: true }, ModelStreamInfer: { name: 1, sequence: false },
  ModelReady: { name: 1, sequence: false }, ModelMetadata: { name: 1, sequence: false },
  ModelConfig: { name: 1, sequence: false }, ModelStatistics: { name: 1, sequence: false },
  RepositoryModelLoad: { name: 2, sequence: false, repositoryParameters: true },
  RepositoryModelUnload: { name: 2, sequence: false, repositoryParameters: true },
  TraceSetting: { name: 2, sequence: false },
  // A region's name, not a model's (field 1): read for the empty name, which unregisters every region.
  SystemSharedMemoryUnregister: { name: 1, sequence: false }, CudaSharedMemoryUnregister: { name: 1, sequence: false },
} satisfies Record<string, MessageFields>)); // a Map: keyed by the client's method name (api-access.ts RPC_CATEGORY)
/** Calls that name a shared-memory region in MODEL_FIELD's field, not a model. */
const REGION_CALLS: ReadonlySet<string> = new Set(['SystemSharedMemoryUnregister', 'CudaSharedMemoryUnregister']);
/** Calls on the whole server, naming no model: refused to credentials limited to some models. */
const WHOLE_SERVER_CALLS: ReadonlySet<string> = new Set(['RepositoryIndex', 'LogSettings']);
/** HealthCheckRequest.service. */
const HEALTH_FIELDS: MessageFields = { name: 1, sequence: false };
/** A Health/Check request is a service name: anything longer is no health check. */
const MAX_HEALTH_REQUEST_BYTES = 1024;

/** grpc.health.v1 HealthCheckResponse.ServingStatus. */
const SERVING = 1;
const NOT_SERVING = 2;

/** How a call ended, for its record: the gRPC status the client got, and the code when the gateway answered. */
interface CallEnd {
  readonly grpcStatus: number;
  readonly code?: ErrorCode;
}

/** The end of a call the gateway answered itself: the status is the error table's. */
function endOf(err: GatewayError | ErrorCode): CallEnd {
  const e = typeof err === 'string' ? { code: err, grpcCode: undefined } : err;
  return { grpcStatus: grpcStatusOf(e), code: e.code };
}

/**
 * What the calls of one method share, decided once for each method the gateway serves (Shared.plans)
 * rather than per call: its API group, record route, the fields its messages are read for, where
 * it goes and the restricted-API metadata it carries upstream.
 */
interface MethodPlan {
  /** The call's :path. */
  readonly path: string;
  /** The method of inference.GRPCInferenceService; undefined for Health/Check (or an unknown service). */
  readonly rpc: string | undefined;
  /** The call's API group; undefined: a method the gateway does not serve. */
  readonly category: ApiCategory | undefined;
  /** The call's record route (`grpc <Method>`). */
  readonly route: string;
  /** What its messages are read for (fieldsOf). */
  readonly fields: MessageFields | undefined;
  /** Its messages name a shared-memory region in the fields' name field, not a model (REGION_CALLS). */
  readonly regionCall: boolean;
  /** Its backend is picked by the model its first message names (ForwardOptions.byModel). */
  readonly byModel: boolean;
  /** upstream.restricted's metadata for the method's group, added upstream. */
  readonly restriction: readonly [string, string] | undefined;
}

/** A method's plan (MethodPlan). */
function methodPlan(o: GrpcPassthroughOptions, path: string): MethodPlan {
  const rpc = path.startsWith(INFERENCE) ? path.slice(INFERENCE.length) : undefined;
  const category = rpc === undefined ? path === `${HEALTH}Check` ? 'health' : undefined : RPC_CATEGORY.get(rpc);
  const method = category === undefined ? 'unimplemented' : rpc ?? 'Health/Check';
  const fields = rpc === undefined || category === undefined ? undefined : fieldsOf(rpc, o.reservedPrefix);
  const regionCall = rpc !== undefined && REGION_CALLS.has(rpc);
  return {
    path, rpc, category, route: `${GRPC_ROUTE_PREFIX}${method}`, fields, regionCall,
    byModel: rpc !== undefined && fields !== undefined && !regionCall && !WHOLE_SERVER_CALLS.has(rpc),
    restriction: rpc === undefined || category === undefined ? undefined : grpcRestrictionMetadata(o.upstream.restricted, rpc),
  };
}

/** The plans of every method the gateway serves, by :path (an unknown path gets its plan per call, not kept). */
function methodPlans(o: GrpcPassthroughOptions): ReadonlyMap<string, MethodPlan> {
  const paths = [`${HEALTH}Check`, ...[...RPC_CATEGORY.keys()].map((rpc) => `${INFERENCE}${rpc}`)];
  return new Map(paths.map((path) => [path, methodPlan(o, path)]));
}

/** What every call of one handler shares, made once. */
interface Shared {
  readonly o: GrpcPassthroughOptions;
  readonly plans: ReadonlyMap<string, MethodPlan>;
  readonly admit: () => (() => void) | undefined;
  /** The message of a call without credentials (auth/guard.ts missingMessage). */
  readonly missing: string;
  /** Credential and restricted-API headers, and grpc-timeout (the relay sets its own): never relayed. */
  readonly unrelayed: (name: string) => boolean;
  /** The relayed metadata of a shared (frozen) request header object, frozen (GrpcIngressCall.#forward). */
  readonly relayed: WeakMap<IncomingHttpHeaders, OutgoingHttpHeaders>;
}

export function grpcPassthrough(o: GrpcPassthroughOptions): GrpcStreamHandler {
  const shared: Shared = {
    o,
    plans: methodPlans(o),
    admit: o.admit ?? ownAdmission(o.limits.maxInFlightRequests),
    missing: missingMessage(o.keyHeader ?? ''),
    unrelayed: unrelayedOf(credentialHeaders({ keyHeader: o.keyHeader ?? '', restricted: [...o.apiRestricted ?? [], ...o.upstream.restricted] })),
    relayed: new WeakMap(),
  };
  return (stream, headers, bound = UNBOUNDED) => new GrpcIngressCall(shared, stream, headers, bound).start();
}

/** An object with no own enumerable field (a request's trace context when there is none to pass on). */
function isEmpty(o: object): boolean {
  for (const _ in o) return false;
  return true;
}

function unrelayedOf(credentials: ReadonlySet<string>): (name: string) => boolean {
  return (k) => k === 'grpc-timeout' || credentials.has(k) || k.startsWith('triton-grpc-protocol-');
}

/** One call from its headers to its end, through the steps at the top of this file in order. */
class GrpcIngressCall implements ForwardOwner {
  readonly #started = Date.now();
  readonly #plan: MethodPlan;
  readonly #record: RequestRecord;
  readonly #observed: ObservedRequest;
  /** The call's place under the in-flight bound, once admitted. */
  #release: (() => void) | undefined;
  /** The call's places under its credentials' limits, once taken. */
  #releaseLimits: (() => void) | undefined;
  /** A soft quota spent by this call: its warning, sent in the answer's headers. */
  #quotaWarning: string | undefined;
  /** The credentials of a call limited to some models (requestMessage checks each message against them). */
  #scoped: Grant | undefined;
  /** How the call ended, once it has, while its stream's 'close' has not come (#end waits for it). */
  #ending: CallEnd | undefined;
  /** The stream's 'close' was emitted (streamClosed); and the call's end was recorded. */
  #closeHeard = false;
  #ended = false;
  /** The call going upstream, once forwarded: told of the stream's close before the call ends. */
  #forwarding: ForwardedCall | undefined;

  constructor(private readonly shared: Shared, private readonly stream: GrpcStream, private readonly headers: IncomingHttpHeaders,
    private readonly bound: AnswerBound) {
    const startNs = nowNs();
    const path = String(headers[':path'] ?? '');
    const plan = this.#plan = shared.plans.get(path) ?? methodPlan(shared.o, path);
    this.#record = {
      route: plan.route, method: 'POST', status: 200, startNs, endNs: 0, declaredBytes: 0, protocol: '2', rpc: 'grpc',
    };
    this.#observed = shared.o.observer.start({ headers, method: 'POST' }, startNs, this.#record.route);
  }

  start(): void {
    const { o, admit } = this.shared;
    const stream = this.stream as OwnedStream;
    stream.on('error', ignore); // the call's outcome says what happened
    // A call is done when its stream's 'close' has been emitted (#end): an answer relayed whole may
    // still wait in the stream for a client that does not read it, holding its memory and its
    // in-flight place; and a stream destroyed before its handler ran still has 'close' to come.
    stream[CALL] = this;
    stream.on('close', callStreamClosed);
    const category = this.#plan.category;
    if (category === undefined) {
      this.#refuse(new GatewayError('GW_ERR_ROUTE_GRPC_UNIMPLEMENTED', `Method not found: ${this.#plan.path.slice(0, 256)}`));
      return;
    }
    const denied = accessRefusal(o.access?.[category], category, this.headers);
    if (denied !== undefined) {
      this.#refuse(denied);
      return;
    }
    let askedMs: number | undefined;
    try {
      askedMs = parseGrpcTimeout(this.headers['grpc-timeout']);
    } catch (err) {
      this.#refuse(err as GatewayError); // GW_ERR_REQUEST_HEADER_INVALID
      return;
    }
    const deadline = this.#started + Math.min(askedMs ?? Infinity, o.upstream.timeoutMs);
    const rpc = this.#plan.rpc;
    if (rpc === undefined) {
      const serving = o.backends.anyReady() && !o.draining();
      healthCheck(this.stream, serving, deadline).then((e) => this.#end(e), () => this.#end({ grpcStatus: GrpcStatus.CANCELLED }));
      return;
    }
    this.#release = admit();
    if (this.#release === undefined) {
      this.#refuse(new GatewayError('GW_ERR_REQUEST_OVERLOADED',
        `the gateway is overloaded: ${o.limits.maxInFlightRequests} calls in flight (limits.maxInFlightRequests)`));
      return;
    }
    const auth = o.auth;
    // A group open to all goes on in this turn: no promise chain per call for nothing to wait on.
    if (auth === undefined || auth.open.has(category)) {
      this.#forwardOrRefuse(rpc, undefined, deadline);
      return;
    }
    this.#authorize(auth, category).then((grant) => this.#limitThenForward(auth, rpc, grant, deadline)).catch((err: unknown) => this.#internalRefusal(err));
  }

  /** The credentials' limits: a place taken (given back in #end), or RESOURCE_EXHAUSTED before anything is sent. */
  async #limitThenForward(auth: Authenticator, rpc: string, grant: Grant | undefined, deadline: number): Promise<void> {
    const method = this.#record.auth?.method;
    if (grant !== undefined && method !== undefined) {
      const r = await takeLimits(auth.limiter, grant, method, this.#record);
      if ('refusal' in r) {
        // gRFC A6's server pushback, gRPC's Retry-After: a client whose retry policy covers
        // RESOURCE_EXHAUSTED waits this long instead of its own backoff.
        this.#refuse(r.refusal, { 'grpc-retry-pushback-ms': String(r.retryAfterS * 1000) });
        return;
      }
      this.#releaseLimits = r.release;
      // A soft quota spent: the answer's headers say so, as X-Quota-Warning does on REST.
      if (r.warning !== undefined) this.#quotaWarning = r.warning.replace(/[^\x20-\x7e]/g, '?');
    }
    this.#forwardOrRefuse(rpc, grant, deadline);
  }

  #forwardOrRefuse(rpc: string, grant: Grant | undefined, deadline: number): void {
    try {
      this.#forward(rpc, grant, deadline);
    } catch (err) {
      this.#internalRefusal(err);
    }
  }

  #internalRefusal(err: unknown): void {
    this.#refuse(isGatewayError(err) ? err : new GatewayError('GW_ERR_GATEWAY_INTERNAL', (err as Error).message));
  }

  /** auth/guard.ts judge() for the call's group: the grant, or the refusal thrown. */
  #authorize(auth: Authenticator, category: ApiCategory): Promise<Grant | undefined> {
    return auth.authenticate(this.headers).then((a) => {
      const { decision, refusal } = judge(a, category, undefined, this.shared.missing);
      this.#record.auth = { ...decision };
      if (refusal === undefined) return (a as { grant: Grant }).grant;
      throw refusal.error;
    });
  }

  /** The call goes upstream (passthrough/grpc-relay.ts), its messages read as they pass. */
  #forward(rpc: string, grant: Grant | undefined, deadline: number): void {
    const { o, unrelayed } = this.shared;
    if (this.stream.closed || this.stream.destroyed) {
      this.#end(endOf('GW_ERR_UPSTREAM_CANCELLED'));
      return;
    }
    const plan = this.#plan;
    const trace = this.#observed.upstreamHeaders;
    // A frozen header object is shared by the calls whose header block repeats (the gRPC port's,
    // ingress/grpc-port/connection.ts): what it relays is made once, frozen, so that the upstream
    // call encodes its fields once per connection (upstream/call/grpc-call.ts). The same object
    // always names the same method, so the same plan and restriction.
    const shared = Object.isFrozen(this.headers) && isEmpty(trace);
    let metadata = shared ? this.shared.relayed.get(this.headers) : undefined;
    if (metadata === undefined) {
      metadata = relayHeaders(this.headers, unrelayed);
      for (const k in trace) metadata[k] = trace[k];
      const restriction = plan.restriction;
      if (restriction !== undefined) metadata[restriction[0]] = restriction[1];
      if (shared) this.shared.relayed.set(this.headers, Object.freeze(metadata));
    }
    const scoped = grant?.models === undefined ? undefined : grant;
    if (scoped !== undefined && WHOLE_SERVER_CALLS.has(rpc)) {
      this.#refuse(modelAnswer(scoped, rpc, { name: EVERY_MODEL }, this.#record)!);
      return;
    }
    this.#scoped = scoped;
    this.#forwarding = forwardGrpcCall(this.stream, o.backends, o.connections, {
      path: plan.path, metadata, deadline, maxMessageBytes: o.limits.maxInputSizeBytes, fields: plan.fields, bound: this.bound,
      answerMetadata: this.#quotaWarning === undefined ? undefined : { 'x-quota-warning': this.#quotaWarning },
      // Calls that name a model go where the model table and the backends' models say (first message read first).
      byModel: plan.byModel,
    }, this);
  }

  /** ForwardOwner: each request message as its last byte passes: its model recorded, and refused when it must be. */
  requestMessage(facts: MessageFacts): GatewayError | undefined {
    const plan = this.#plan;
    const rpc = plan.rpc!;
    const record = this.#record;
    if (record.model === undefined && facts.name !== undefined && facts.name !== '' && !plan.regionCall) record.model = facts.name;
    const prefix = this.shared.o.reservedPrefix;
    const reserved = prefix === undefined ? undefined : regionAnswer(prefix, rpc, facts);
    if (reserved !== undefined) return reserved;
    const scoped = this.#scoped;
    return scoped === undefined ? undefined : modelAnswer(scoped, rpc, facts, record);
  }

  /** ForwardOwner: the call went as `out` says. */
  forwarded(out: ForwardOutcome): void {
    const record = this.#record;
    record.bytesIn = out.bytesIn;
    record.bytesOut = out.bytesOut;
    record.firstByteNs = out.firstByteNs;
    if (out.backend !== undefined) record.backend = out.backend;
    if (out.pool !== undefined) {
      record.pool = out.pool;
      record.routeDecision = out.routeDecision;
    }
    if (out.retries > 0) record.retries = out.retries;
    if (out.upstreamStartNs !== 0 && out.firstByteNs !== 0) {
      record.upstreamStatus = out.grpcStatus;
      record.upstreamDurationNs = nowNs() - out.upstreamStartNs;
    }
    this.#end(out);
  }

  /**
   * The gateway's own answer: the call is not forwarded, what arrives is dropped, and a client
   * still sending is reset once the status has gone out (grpc-relay.ts stopUpload; never before
   * it: grpcio would report INTERNAL "Stream removed"); one whose request has ended is not reset.
   */
  #refuse(err: GatewayError, trailers?: Record<string, string>): void {
    const stream = this.stream;
    answerStatus(stream, err, trailers);
    let ended = stream.readableEnded;
    stream.once('end', () => { ended = true; });
    stream.resume();
    stopUpload(stream, () => ended);
    this.#end(endOf(err));
  }

  /**
   * A call is done when its stream is: an answer relayed whole may still wait in the stream for a
   * client that does not read it, holding its memory and its in-flight place.
   */
  #end(a: CallEnd): void {
    if (!this.#closeHeard) {
      this.#ending ??= a;
      return;
    }
    if (this.#ended) return;
    this.#ended = true;
    const stream = this.stream as OwnedStream;
    stream[CALL] = undefined;
    // Within the stream's 'close', never before: the listener's own 'close' (ingress/h2.ts), added
    // first, has counted the stream.
    unhook(stream); // closed: it lets go of the call
    this.#release?.();
    this.#releaseLimits?.();
    // Reset by the listener, the client's stream closed: the relay saw a client that left.
    const end = this.bound.cutOff(stream) ? endOf('GW_ERR_REQUEST_ANSWER_UNREAD') : a;
    const record = this.#record;
    record.grpcStatus = end.grpcStatus;
    if (end.code !== undefined) record.errorCode = end.code;
    record.endNs = nowNs();
    this.#observed.end(record);
  }

  /** The call's stream emitted 'close': a call that has ended is done, one still running ends by #end. */
  streamClosed(): void {
    this.#closeHeard = true;
    // A call still upstream is cancelled, and ends through forwarded(); one that has ended ends here.
    this.#forwarding?.clientClosed();
    this.#forwarding = undefined;
    const a = this.#ending;
    if (a !== undefined) this.#end(a);
  }
}

/** The call of a stream, for callStreamClosed. */
const CALL = Symbol('tensorgate.grpcIngressCall');
type OwnedStream = GrpcStream & { [CALL]?: GrpcIngressCall | undefined };

/** The 'close' listener of a call's stream (`this`: the stream; shared, not a closure per call). */
function callStreamClosed(this: OwnedStream): void {
  this[CALL]?.streamClosed();
}

function ignore(): void { /* the call's outcome says what happened */ }

/**
 * PERMISSION_DENIED for a message of credentials limited to some models (docs/production.md
 * "Authentication", as the REST routes judge the same calls): a model they do not cover, a model
 * that cannot be read, an empty name (Triton's "every model" in ModelStatistics and TraceSetting,
 * every region in the shared-memory unregister calls; the other calls need a name, and Triton
 * refuses an empty one itself), the whole server's calls (WHOLE_SERVER_CALLS), a load with
 * parameters (a configuration or files: code Triton may run) and an unload with
 * unload_dependents. undefined: let it through.
 */
function modelAnswer(grant: Grant, rpc: string, facts: MessageFacts, record: RequestRecord): GatewayError | undefined {
  const forbid = (refusal: GatewayError): GatewayError => {
    if (record.auth !== undefined) record.auth = { ...record.auth, outcome: 'forbidden' };
    return refusal;
  };
  if (facts.name === undefined) {
    return forbid(new GatewayError('GW_ERR_AUTH_FORBIDDEN',
      `these credentials are limited to some models, and the message's model cannot be read before it is forwarded: ${facts.unreadable ?? 'unknown'}`));
  }
  let refusal = REGION_CALLS.has(rpc)
    ? facts.name === '' ? limitedRefusal(grant, 'unregister every shared-memory region') : undefined
    : modelRefusal(grant, facts.name)?.error;
  if (refusal === undefined && (facts.parameterCount ?? 0) > 0 && rpc === 'RepositoryModelLoad') refusal = limitedRefusal(grant, 'load a model with parameters (a configuration or files)');
  if (refusal === undefined && facts.unloadDependents === true && rpc === 'RepositoryModelUnload') refusal = limitedRefusal(grant, 'unload a model with unload_dependents');
  return refusal === undefined ? undefined : forbid(refusal);
}

/**
 * What a call's messages are read for: the model (MODEL_FIELD) and, with upstream.sharedMemory on
 * (`prefix`), the regions they name: an inference's tensors, a system region's register (name and
 * key) and unregister.
 */
function fieldsOf(rpc: string, prefix: string | undefined): MessageFields | undefined {
  const fields = MODEL_FIELD.get(rpc);
  if (prefix === undefined) return fields;
  if (rpc === 'ModelInfer' || rpc === 'ModelStreamInfer') return { ...fields!, reservedRegion: (name) => isReservedRegion(name, prefix) };
  if (rpc === 'SystemSharedMemoryRegister') return { name: 1, sequence: false, key: 2 };
  return fields;
}

/**
 * With upstream.sharedMemory on, the gateway's own system regions (`<prefix>-<pid>-<n>`) hold other
 * requests' tensors: a message naming one (an inference's `shared_memory_region`, a register's
 * name or key, an unregister), or unregistering every region (which would take the gateway's too),
 * is refused with PERMISSION_DENIED, whoever sends it. undefined: let it through.
 */
function regionAnswer(prefix: string, rpc: string, facts: MessageFacts): GatewayError | undefined {
  const refuse = (message: string): GatewayError => new GatewayError('GW_ERR_DECODE_SHM_REGION_RESERVED', message);
  const reserved = (what: string, name: string): GatewayError =>
    refuse(`${what} '${name}' is reserved: names starting with '${prefix}-' are the gateway's own regions (upstream.sharedMemory.prefix)`);
  if (rpc === 'ModelInfer' || rpc === 'ModelStreamInfer') {
    if (facts.reservedRegion === undefined) return undefined;
    return facts.reservedRegion === ''
      ? refuse('a tensor\'s parameters cannot be read before the message is forwarded, and may name a region of the gateway (upstream.sharedMemory.prefix)')
      : reserved('shared_memory_region', facts.reservedRegion);
  }
  if (rpc === 'SystemSharedMemoryRegister' || rpc === 'SystemSharedMemoryUnregister') {
    if (facts.name === undefined) return refuse(`the region's name cannot be read before the message is forwarded: ${facts.unreadable ?? 'unknown'}`);
    if (isReservedRegion(facts.name, prefix)) return reserved('system shared memory region', facts.name);
    if (facts.key !== undefined && isReservedRegion(facts.key, prefix)) return reserved('system shared memory key', facts.key);
    if (rpc === 'SystemSharedMemoryUnregister' && facts.name === '') {
      return refuse('unregistering every system shared memory region would take the gateway\'s own too (upstream.sharedMemory.prefix): name the region');
    }
  }
  return undefined;
}

/** The restricted-API answer for a call's group, as Triton's gRPC frontend gives it; undefined: let through. */
function accessRefusal(access: AccessTable[ApiCategory] | undefined, category: ApiCategory, headers: IncomingHttpHeaders): GatewayError | undefined {
  if (access === undefined || access.kind === 'open') return undefined;
  if (access.kind === 'disabled') {
    return new GatewayError('GW_ERR_ROUTE_DISABLED', `This API is restricted, the '${category}' API group is disabled on this gateway (api.disabled)`);
  }
  const key = `triton-grpc-protocol-${access.key.toLowerCase()}`;
  if (headers[key] === access.value) return undefined;
  return new GatewayError('GW_ERR_ROUTE_RESTRICTED', `This protocol is restricted, expecting header '${key}'`);
}

/** Admission of this handler's own calls against `max` (a listener shares its Admission instead). */
function ownAdmission(max: number): () => (() => void) | undefined {
  const admission = new Admission({ maxInFlightRequests: max, maxInFlightBodyBytes: Infinity });
  return () => admission.admit();
}

/**
 * grpc.health.v1.Health/Check for the gateway itself: SERVING when a backend is ready and the
 * gateway is not draining, NOT_SERVING otherwise, for the service "" only; another service is
 * NOT_FOUND, as gRPC's own health service answers an unknown one. A request that has not ended by
 * `deadline` (the client's grpc-timeout capped by upstream.timeoutMs, as for Triton's calls) gets
 * DEADLINE_EXCEEDED and is read no further.
 */
function healthCheck(stream: GrpcStream, serving: boolean, deadline: number): Promise<CallEnd> {
  return new Promise((resolve) => {
    const refuse = (err: GatewayError): void => {
      answerStatus(stream, err);
      resolve(endOf(err));
    };
    const request = new HealthRequest();
    let ended = false;
    const timer = setTimeout(() => {
      refuse(new GatewayError('GW_ERR_REQUEST_TIMEOUT', 'Deadline Exceeded: the Health/Check request did not end within upstream.timeoutMs or the shorter grpc-timeout the call asked for'));
      stopUpload(stream, () => ended);
    }, Math.max(0, deadline - Date.now()));
    stream.on('data', (c: Buffer) => request.push(c));
    stream.on('close', () => {
      clearTimeout(timer);
      resolve(endOf('GW_ERR_UPSTREAM_CANCELLED'));
    });
    stream.on('end', () => {
      ended = true;
      clearTimeout(timer);
      const service = request.service();
      if (service === undefined) {
        refuse(new GatewayError('GW_ERR_REQUEST_MALFORMED', 'the Health/Check request is not one HealthCheckRequest message'));
        return;
      }
      if (service !== '') {
        refuse(new GatewayError('GW_ERR_ROUTE_NOT_FOUND', `unknown service ${service.slice(0, 128)}`));
        return;
      }
      // HealthCheckResponse { status = 1 (enum) }: one varint field.
      const message = Buffer.from([0, 0, 0, 0, 2, 0x08, serving ? SERVING : NOT_SERVING]);
      if (stream.closed || stream.destroyed) return;
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': String(GrpcStatus.OK), 'grpc-message': encodeGrpcMessage('') }));
      stream.end(message);
      resolve({ grpcStatus: GrpcStatus.OK });
    });
  });
}

/**
 * A Health/Check request as it arrives: exactly one uncompressed HealthCheckRequest of at most
 * MAX_HEALTH_REQUEST_BYTES, read as it passes (nothing is kept but the service name).
 */
class HealthRequest {
  readonly #reader = new MessageReader(HEALTH_FIELDS);
  readonly #envelope: EnvelopeDecoder;
  #messages = 0;
  #facts: MessageFacts | undefined;
  #bad = false;

  constructor() {
    this.#envelope = new EnvelopeDecoder({
      prefix: (compressed, length) => {
        this.#messages++;
        if (this.#messages > 1 || compressed || length > MAX_HEALTH_REQUEST_BYTES) {
          this.#bad = true;
          return false;
        }
        this.#reader.begin(length);
        return true;
      },
      data: (chunk, from, to) => this.#reader.push(chunk, from, to),
      end: () => { this.#facts = this.#reader.end(); },
    });
  }

  push(chunk: Buffer): void {
    this.#envelope.push(chunk);
  }

  /**
   * The service asked about once the request has ended ('' for one protobuf cannot read, as
   * before: such a request names no service); undefined when the request is not one message.
   */
  service(): string | undefined {
    if (this.#bad || this.#facts === undefined || !this.#envelope.atBoundary) return undefined;
    return this.#facts.name ?? '';
  }
}
