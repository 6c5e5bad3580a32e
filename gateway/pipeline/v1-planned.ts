// V1 predict's planned requests (docs/architecture.md, "Planned requests"): a TF-Serving / KServe-V1
// body gathered whole by the HTTP/1.1 fast path, for a model whose metadata is cached, is served
// with V1 predict's own steps (pipeline/v1-body.ts) but none of the handler's objects nor its chain
// of awaited steps: its base64 rows staged as they are for the handler, each staged tail cut out
// of the message and sent from its staging buffer by reference (the call is whole: no payload is
// copied into the message), then the data plane's whole call, then the answer encoded as V1's.
// A request that is not plain (infer-planned.ts plainRequest), or whose model's metadata is not
// cached yet, is the handler's: takes() says so before anything happens. Metadata forgotten while
// the body arrived is read again before it is decoded.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { STAGE_MIN_CHARS } from '../decode/base64/base64-staging';
import type { V1Decoded } from '../decode/dialects/v1-predict';
import type { ModelMetadata } from '../infer/model-metadata';
import { printedByLane } from '../encode/json-answer-head';
import { Ledger } from '../infer/ledger';
import type { PlannedRequest, PlannedRoute } from '../ingress/router';
import type { GatewayError } from '../errors';
import { callFailed } from '../upstream/infer/answer-hops';
import type { TimedResponseMessage } from '../upstream/infer/data-plane';
import { gatherCuts, keptBase64, NEVER, PlannedCallee, plainRequest, UNPOOLED } from './infer-planned';
import { evictOnNotFound, staging } from './steps';
import { decodeV1Body, encodeV1Answer, frameV1, type V1Plan } from './v1-body';
import type { KeptRequest } from '../ingress/http1/lane';
import type { JsonAnswerHead } from '../encode/json-answer-head';

/**
 * V1 predict's planned requests, when its data plane sends whole calls and cuts through (as V2's:
 * with upstream.cutThrough off, every request is buffered whole first, by the handler).
 */
export function plannedV1(p: V1Plan): PlannedRoute | undefined {
  if (!p.upstream.cutThrough || p.dataPlane.startModelInfer === undefined || p.dataPlane.callWhole === undefined) return undefined;
  return {
    takes: (params, headers, bodyBytes) => takes(p, params, headers, bodyBytes),
    largeBodies: (params) => p.metadata.peek(params[0]!, params[1] ?? '')?.outputs.every((o) => printedByLane(o.datatype)) === true,
    serve: (x, body) => serve(p, x, body),
  };
}

function takes(p: V1Plan, params: readonly string[], headers: IncomingHttpHeaders, bodyBytes: number): boolean {
  return plainRequest(p.limits.maxBodyBytes, headers, bodyBytes) && p.metadata.peek(params[0]!, params[1] ?? '') !== undefined;
}

/** A V1 answer's head fields: shared by every answer, never written (PlannedCallee copies them to add any). */
const JSON_HEADERS: OutgoingHttpHeaders = Object.freeze({ 'Content-Type': 'application/json' });

/** A planned V1 request decoded and framed: its message as pieces in wire order (staged tails by reference). */
interface PlannedV1 {
  readonly decoded: V1Decoded;
  readonly pieces: readonly Buffer[];
  readonly sent: { readonly messageBytes: number };
  /** Staging buffers cut out of the message: kept warm for another body once Triton has answered. */
  readonly staged: readonly Buffer[];
  /** A body of one base64 row, as the compiled lane may keep it (keptBase64). */
  readonly base64?: KeptRequest | undefined;
}

/** Serves a planned V1 request, its body whole: decoded and sent at once, answered when Triton has. */
function serve(p: V1Plan, x: PlannedRequest, body: readonly Buffer[]): void {
  const name = x.params[0]!;
  const version = x.params[1] ?? '';
  const md = p.metadata.peek(name, version);
  if (md !== undefined) {
    serveWith(p, x, body, md);
    return;
  }
  // Forgotten while the body arrived (another request's NOT_FOUND): read again, as the handler reads it.
  p.metadata.get(name, version, NEVER).then((m) => serveWith(p, x, body, m), (err: unknown) => x.fail(err));
}

function serveWith(p: V1Plan, x: PlannedRequest, body: readonly Buffer[], md: ModelMetadata): void {
  const ledger = new Ledger();
  const { record, params } = x;
  record.ledger = ledger;
  record.version = params[1] ?? '';
  record.encoding = 'v1'; // v1_base64 once decoding finds base64 rows
  let d: PlannedV1;
  try {
    d = decode(p, x, body, ledger, md);
  } catch (err) {
    x.fail(err);
    return;
  }
  // A body of several reads was read from its head on.
  if (body.length > 1) ledger.startedAt('ingress_read', record.startNs);
  x.call = p.dataPlane.callWhole!(d.pieces, new PlannedV1Call(p, x, d, ledger, body));
}

/** The handler's reading (v1-body.ts decodeV1Body, frameV1), the body's pieces staged as they would have arrived. */
function decode(p: V1Plan, x: PlannedRequest, body: readonly Buffer[], ledger: Ledger, md: ModelMetadata): PlannedV1 {
  const bodyBytes = x.record.declaredBytes;
  const { maxInputSizeBytes } = p.limits;
  ledger.start('ingress_read');
  const s = bodyBytes >= STAGE_MIN_CHARS ? staging(bodyBytes, maxInputSizeBytes) : undefined;
  if (s !== undefined) for (let i = 0; i < body.length; i++) s.push(body[i]!);
  ledger.end('ingress_read');
  ledger.bytes('ingress_read', bodyBytes, bodyBytes);
  const whole = s === undefined ? { length: bodyBytes, chunks: body } : { length: bodyBytes, get chunks() { return s.original(); } };
  const decoded = decodeV1Body(x.record, ledger, whole, s, { name: x.params[0]!, version: x.params[1] ?? '', inputs: md.inputs }, maxInputSizeBytes);
  // Every staged tail cut out (1: any length), since the call is whole.
  const framed = frameV1(UNPOOLED, ledger, decoded, bodyBytes, 1);
  if (framed.cuts.length === 0) return { decoded, pieces: [framed.message], sent: { messageBytes: framed.message.length }, staged: [] };
  const message = gatherCuts(framed.message, framed.cuts, framed.payloads);
  const base64 = x.keeping ? keptBase64(decoded.text, framed.message, framed.cuts, framed.payloads, bodyBytes) : undefined;
  return { decoded, pieces: message.list, sent: message, staged: framed.payloads, base64 };
}

/**
 * V1's planned call (infer-planned.ts PlannedCallee): its answer encoded as V1's, and a NOT_FOUND
 * forgetting the model's metadata, as the handler does.
 */
class PlannedV1Call extends PlannedCallee {
  constructor(private readonly p: V1Plan, x: PlannedRequest, private readonly d: PlannedV1, ledger: Ledger, body: readonly Buffer[]) {
    super(p.upstream.timeoutMs, p.telemetry.serverTiming, x, d.decoded.request, ledger, d.sent, body, d.staged);
  }

  protected encode(answer: TimedResponseMessage): { readonly headers: OutgoingHttpHeaders; readonly parts: readonly Buffer[] } {
    const { base64 } = this.d;
    // A body of one base64 row: the compiled lane may keep it with its JSON answer.
    const json = base64 === undefined ? undefined : { head: undefined as JsonAnswerHead | undefined, headers: JSON_HEADERS };
    const encoded = encodeV1Answer(this.ledger, answer, this.d.decoded.row, json);
    this.x.record.encodingOut = 'json';
    if (json?.head !== undefined) this.x.kept(base64!, json.head);
    return { headers: JSON_HEADERS, parts: [encoded] };
  }

  failed(err: GatewayError): void {
    const { x } = this;
    callFailed(err, this.startNs, x.record);
    x.fail(evictOnNotFound(err, () => this.p.metadata.evict(x.params[0]!)));
  }
}
