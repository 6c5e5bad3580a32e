// gRPC pass-through (docs/production.md "gRPC pass-through"): the handler the listener calls for
// every HTTP/2 stream whose content-type starts with application/grpc. Calls of Triton's
// inference.GRPCInferenceService go to a ready backend, one call at a time
// (passthrough/grpc-upstream.ts); grpc.health.v1.Health/Check is answered for the gateway itself;
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
//      every request message names, read as protobuf reads it (grpc/envelope.ts: the
//      field's last copy wherever it is; every message of a stream), before the message's last
//      byte is forwarded; a message whose model cannot be read (compressed, malformed, a name
//      longer than MAX_NAME_BYTES) is refused to such credentials. So are the calls that reach
//      past their models (modelAnswer): an empty name (every model, every region), the
//      repository index, the log settings, a load with parameters, an unload of dependents;
//   4. the deadline: the client's grpc-timeout capped by upstream.timeoutMs.
// Each call leaves one RequestRecord (protocol "grpc", route "grpc <Method>", the model the first
// message names). No credential header goes upstream (auth/credential-headers.ts).
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { type ApiCategory, grpcRestrictionMetadata, RPC_CATEGORY } from '../api-access';
import type { Authenticator } from '../auth/authenticator';
import { credentialHeaders } from '../auth/credential-headers';
import { EVERY_MODEL, judge, limitedRefusal, missingMessage, modelRefusal } from '../auth/guard';
import type { Grant } from '../auth/key-file';
import type { Config } from '../config/schema';
import { isReservedRegion } from '../decode/control/shared-memory';
import { isGatewayError } from '../errors';
import { parseGrpcTimeout } from '../grpc/timeout';
import type { AccessTable } from '../ingress/router';
import { GRPC_ROUTE_PREFIX, type RequestObserver, type RequestRecord } from '../telemetry/record';
import type { BackendSet } from '../upstream/backends/backend-set';
import { type MessageFacts, type MessageFields, readMessage } from '../grpc/envelope';
import { answerStatus, encodeGrpcMessage, forwardGrpcCall, type LocalAnswer, relayHeaders, stopUpload } from './grpc-upstream';
import type { H2Connections } from '../upstream/connections/h2-sessions';
import { GrpcStatus } from '../upstream/infer/status';

/**
 * The handler the listener calls for each gRPC stream; `unread()`: the listener reset the stream
 * for a client that did not read its answer (ingress/h2.ts, server.h2.unreadAnswerMs and
 * server.h2.maxUnreadAnswerBytes).
 */
export type GrpcStreamHandler = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, unread?: () => boolean) => void;

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
   * Admission against the in-flight bound: a release function, or undefined when full. Default: a
   * count of this handler's own calls against limits.maxInFlightRequests; the listener may share
   * its count with HTTP requests instead.
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

export function grpcPassthrough(o: GrpcPassthroughOptions): GrpcStreamHandler {
  const admit = o.admit ?? ownCount(o.limits.maxInFlightRequests);
  const missing = missingMessage(o.keyHeader ?? '');
  const credentials = credentialHeaders({ keyHeader: o.keyHeader ?? '', restricted: [...o.apiRestricted ?? [], ...o.upstream.restricted] });
  return (stream, headers, unread = () => false) => {
    const startNs = process.hrtime.bigint();
    const started = Date.now();
    const path = String(headers[':path'] ?? '');
    const rpc = path.startsWith(INFERENCE) ? path.slice(INFERENCE.length) : undefined;
    const category: ApiCategory | undefined = rpc === undefined ? path === `${HEALTH}Check` ? 'health' : undefined : RPC_CATEGORY.get(rpc);
    const method = category === undefined ? 'unimplemented' : rpc ?? 'Health/Check';
    const record: RequestRecord = {
      route: `${GRPC_ROUTE_PREFIX}${method}`, method: 'POST', status: 200, startNs, endNs: 0n, declaredBytes: 0, protocol: '2', rpc: 'grpc',
    };
    const observed = o.observer.start({ headers, method: 'POST' }, startNs, record.route);
    let release: (() => void) | undefined;
    const end = (a: { grpcStatus: number; code?: string }): void => {
      // A call is done when its stream is: an answer relayed whole may still wait in the stream
      // for a client that does not read it, holding its memory and its in-flight place.
      if (!stream.closed && !stream.destroyed) {
        stream.once('close', () => end(a));
        return;
      }
      release?.();
      // Reset by the listener, the client's stream closed: the relay saw a client that left.
      if (unread()) a = { grpcStatus: GrpcStatus.CANCELLED, code: 'GW_ERR_REQUEST_ANSWER_UNREAD' };
      record.grpcStatus = a.grpcStatus;
      if (a.code !== undefined) record.errorCode = a.code;
      record.endNs = process.hrtime.bigint();
      observed.end(record);
    };
    const refuse = (a: LocalAnswer): void => {
      answerStatus(stream, a);
      // The request is not forwarded: what arrives is dropped, and a client still sending is reset
      // once the status has gone out (grpc-upstream.ts stopUpload; never before it: grpcio would
      // report INTERNAL "Stream removed"), one whose request has ended is not reset at all.
      let ended = stream.readableEnded;
      stream.once('end', () => { ended = true; });
      stream.resume();
      stopUpload(stream, () => ended);
      end(a);
    };
    stream.on('error', () => { /* the call's outcome says what happened */ });

    if (category === undefined) {
      refuse({ grpcStatus: GrpcStatus.UNIMPLEMENTED, code: 'GW_ERR_ROUTE_GRPC_UNIMPLEMENTED', message: `Method not found: ${path.slice(0, 256)}` });
      return;
    }
    const denied = accessRefusal(o.access?.[category], category, headers);
    if (denied !== undefined) {
      refuse(denied);
      return;
    }
    let askedMs: number | undefined;
    try {
      askedMs = parseGrpcTimeout(headers['grpc-timeout']);
    } catch (err) {
      refuse({ grpcStatus: GrpcStatus.INVALID_ARGUMENT, code: 'GW_ERR_REQUEST_HEADER_INVALID', message: (err as Error).message });
      return;
    }
    const deadline = started + Math.min(askedMs ?? Infinity, o.upstream.timeoutMs);
    if (rpc === undefined) {
      healthCheck(stream, o.backends.anyReady() && !o.draining(), deadline).then(end, () => end({ grpcStatus: GrpcStatus.CANCELLED }));
      return;
    }
    release = admit();
    if (release === undefined) {
      refuse({
        grpcStatus: GrpcStatus.UNAVAILABLE, code: 'GW_ERR_REQUEST_OVERLOADED',
        message: `the gateway is overloaded: ${o.limits.maxInFlightRequests} calls in flight (limits.maxInFlightRequests)`,
      });
      return;
    }
    const auth = o.auth;
    const authorized = auth === undefined || auth.open.has(category)
      ? Promise.resolve<Grant | undefined>(undefined)
      : auth.authenticate(headers).then((a) => {
        const { decision, refusal } = judge(a, category, undefined, missing);
        record.auth = { ...decision };
        if (refusal === undefined) return (a as { grant: Grant }).grant;
        throw refusal.error;
      });
    authorized.then((grant) => {
      if (stream.closed || stream.destroyed) {
        end({ grpcStatus: GrpcStatus.CANCELLED, code: 'GW_ERR_UPSTREAM_CANCELLED' });
        return;
      }
      const restriction = grpcRestrictionMetadata(o.upstream.restricted, rpc);
      const metadata = relayHeaders(headers, (k) => k === 'grpc-timeout' || credentials.has(k) || k.startsWith('triton-grpc-protocol-'));
      Object.assign(metadata, observed.upstreamHeaders);
      if (restriction !== undefined) metadata[restriction[0]] = restriction[1];
      const fields = fieldsOf(rpc, o.reservedPrefix);
      const scoped = grant?.models === undefined ? undefined : grant;
      if (scoped !== undefined && WHOLE_SERVER_CALLS.has(rpc)) {
        refuse(modelAnswer(scoped, rpc, { name: EVERY_MODEL }, record)!);
        return;
      }
      return forwardGrpcCall(stream, o.backends, o.connections, {
        path, metadata, deadline, maxMessageBytes: o.limits.maxInputSizeBytes, fields,
        onRequestMessage: fields === undefined ? undefined : (facts) => {
          if (record.model === undefined && facts.name !== undefined && facts.name !== '' && !REGION_CALLS.has(rpc)) record.model = facts.name;
          const reserved = o.reservedPrefix === undefined ? undefined : regionAnswer(o.reservedPrefix, rpc, facts);
          if (reserved !== undefined) return reserved;
          return scoped === undefined ? undefined : modelAnswer(scoped, rpc, facts, record);
        },
      }).then((out) => {
        record.bytesIn = out.bytesIn;
        record.bytesOut = out.bytesOut;
        record.firstByteNs = out.firstByteNs;
        if (out.backend !== undefined) record.backend = out.backend;
        if (out.retries > 0) record.retries = out.retries;
        if (out.upstreamStartNs !== 0n && out.firstByteNs !== 0n) {
          record.upstreamStatus = out.grpcStatus;
          record.upstreamDurationNs = process.hrtime.bigint() - out.upstreamStartNs;
        }
        end(out);
      });
    }).catch((err: unknown) => {
      const code = isGatewayError(err) ? err.code : 'GW_ERR_GATEWAY_INTERNAL';
      refuse({ grpcStatus: grpcStatusOfAuth(code), code, message: (err as Error).message });
    });
  };
}

/**
 * PERMISSION_DENIED for a message of credentials limited to some models (docs/production.md
 * "Authentication", as the REST routes judge the same calls): a model they do not cover, a model
 * that cannot be read, an empty name (Triton's "every model" in ModelStatistics and TraceSetting,
 * every region in the shared-memory unregister calls; the other calls need a name, and Triton
 * refuses an empty one itself), the whole server's calls (WHOLE_SERVER_CALLS), a load with
 * parameters (a configuration or files: code Triton may run) and an unload with
 * unload_dependents. undefined: let it through.
 */
function modelAnswer(grant: Grant, rpc: string, facts: MessageFacts, record: RequestRecord): LocalAnswer | undefined {
  const forbid = (message: string, code = 'GW_ERR_AUTH_FORBIDDEN'): LocalAnswer => {
    if (record.auth !== undefined) record.auth = { ...record.auth, outcome: 'forbidden' };
    return { grpcStatus: GrpcStatus.PERMISSION_DENIED, code, message };
  };
  if (facts.name === undefined) {
    return forbid(`these credentials are limited to some models, and the message's model cannot be read before it is forwarded: ${facts.unreadable ?? 'unknown'}`);
  }
  let refusal = REGION_CALLS.has(rpc)
    ? facts.name === '' ? limitedRefusal(grant, 'unregister every shared-memory region') : undefined
    : modelRefusal(grant, facts.name)?.error;
  if (refusal === undefined && (facts.parameterCount ?? 0) > 0 && rpc === 'RepositoryModelLoad') refusal = limitedRefusal(grant, 'load a model with parameters (a configuration or files)');
  if (refusal === undefined && facts.unloadDependents === true && rpc === 'RepositoryModelUnload') refusal = limitedRefusal(grant, 'unload a model with unload_dependents');
  return refusal === undefined ? undefined : forbid(refusal.message, refusal.code);
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
function regionAnswer(prefix: string, rpc: string, facts: MessageFacts): LocalAnswer | undefined {
  const refuse = (message: string): LocalAnswer => ({ grpcStatus: GrpcStatus.PERMISSION_DENIED, code: 'GW_ERR_DECODE_SHM_REGION_RESERVED', message });
  const reserved = (what: string, name: string): LocalAnswer =>
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

/** The gRPC status of an auth refusal (auth/guard.ts codes; anything else is a bug: INTERNAL). */
function grpcStatusOfAuth(code: string): number {
  switch (code) {
    case 'GW_ERR_AUTH_MISSING': case 'GW_ERR_AUTH_INVALID': return GrpcStatus.UNAUTHENTICATED;
    case 'GW_ERR_AUTH_FORBIDDEN': return GrpcStatus.PERMISSION_DENIED;
    case 'GW_ERR_AUTH_UNAVAILABLE': return GrpcStatus.UNAVAILABLE;
    default: return GrpcStatus.INTERNAL;
  }
}

/** The restricted-API answer for a call's group, as Triton's gRPC frontend gives it; undefined: let through. */
function accessRefusal(access: AccessTable[ApiCategory] | undefined, category: ApiCategory, headers: IncomingHttpHeaders): LocalAnswer | undefined {
  if (access === undefined || access.kind === 'open') return undefined;
  if (access.kind === 'disabled') {
    return { grpcStatus: GrpcStatus.PERMISSION_DENIED, code: 'GW_ERR_ROUTE_DISABLED',
      message: `This API is restricted, the '${category}' API group is disabled on this gateway (api.disabled)` };
  }
  const key = `triton-grpc-protocol-${access.key.toLowerCase()}`;
  if (headers[key] === access.value) return undefined;
  return { grpcStatus: GrpcStatus.UNAVAILABLE, code: 'GW_ERR_ROUTE_RESTRICTED', message: `This protocol is restricted, expecting header '${key}'` };
}

/** Counts this handler's calls against `max`. */
function ownCount(max: number): () => (() => void) | undefined {
  let n = 0;
  return () => {
    if (n >= max) return undefined;
    n++;
    let released = false;
    return () => {
      if (!released) {
        released = true;
        n--;
      }
    };
  };
}

/**
 * grpc.health.v1.Health/Check for the gateway itself: SERVING when a backend is ready and the
 * gateway is not draining, NOT_SERVING otherwise, for the service "" only; another service is
 * NOT_FOUND, as gRPC's own health service answers an unknown one. A request that has not ended by
 * `deadline` (the client's grpc-timeout capped by upstream.timeoutMs, as for Triton's calls) gets
 * DEADLINE_EXCEEDED and is read no further.
 */
function healthCheck(stream: ServerHttp2Stream, serving: boolean, deadline: number): Promise<{ grpcStatus: number; code?: string }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let ended = false;
    const timer = setTimeout(() => {
      const a = { grpcStatus: GrpcStatus.DEADLINE_EXCEEDED, code: 'GW_ERR_REQUEST_TIMEOUT', message: 'Deadline Exceeded: the Health/Check request did not end within upstream.timeoutMs or the shorter grpc-timeout the call asked for' };
      answerStatus(stream, a);
      stopUpload(stream, () => ended);
      resolve(a);
    }, Math.max(0, deadline - Date.now()));
    stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_HEALTH_REQUEST_BYTES + 5) chunks.push(c);
    });
    stream.on('close', () => {
      clearTimeout(timer);
      resolve({ grpcStatus: GrpcStatus.CANCELLED, code: 'GW_ERR_UPSTREAM_CANCELLED' });
    });
    stream.on('end', () => {
      ended = true;
      clearTimeout(timer);
      const body = Buffer.concat(chunks); // at most 1 KiB: our own small message, not a pass-through one
      const length = body.length >= 5 ? body.readUInt32BE(1) : -1;
      if (size > MAX_HEALTH_REQUEST_BYTES + 5 || length !== body.length - 5 || body[0] !== 0) {
        const a = { grpcStatus: GrpcStatus.INVALID_ARGUMENT, code: 'GW_ERR_REQUEST_MALFORMED', message: 'the Health/Check request is not one HealthCheckRequest message' };
        answerStatus(stream, a);
        resolve(a);
        return;
      }
      const service = readMessage(body, 5, body.length, HEALTH_FIELDS).name ?? '';
      if (service !== '') {
        const a = { grpcStatus: GrpcStatus.NOT_FOUND, code: 'GW_ERR_ROUTE_NOT_FOUND', message: `unknown service ${service.slice(0, 128)}` };
        answerStatus(stream, a);
        resolve(a);
        return;
      }
      // HealthCheckResponse { status = 1 (enum) }: one varint field.
      const message = Buffer.from([0, 0, 0, 0, 2, 0x08, serving ? SERVING : NOT_SERVING]);
      if (stream.closed || stream.destroyed) return;
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': encodeGrpcMessage('') }));
      stream.end(message);
      resolve({ grpcStatus: GrpcStatus.OK });
    });
  });
}
