// The generate routes' steps (Triton's generate extension over the bidi ModelStreamInfer; Triton
// 2.51 is the judge, test/conformance/generate-differential.test.ts): lookupModel, the body read
// and decoded, the streaming call, and the answer — one JSON object, or server-sent events. Each step records
// the hops it spends time in, so the routes read as their list of steps.
import type { Config } from '../config/schema';
import { decodeGenerate } from '../decode/generate';
import { EventStream } from '../egress/sse';
import { encodeGenerateError, encodeGenerateResponse } from '../encode/infer-response';
import { GatewayError, isGatewayError } from '../errors';
import { gather } from '../infer/gather';
import type { Ledger } from '../infer/ledger';
import type { ModelMetadata } from '../infer/model-metadata';
import type { RequestContext } from '../ingress/context';
import type { BodyLimits } from '../ingress/body';
import { SplitServerTiming, trailerReaches } from '../telemetry/server-timing';
import { streamError } from '../upstream/status';
import type { ModelMetadatas } from '../upstream/control/model-metadata';
import type { StreamInferPlane, StreamMessage } from '../upstream/infer/stream-plane';
import { callOptions, evictOnNotFound, framer, readWholeBody, startLedger, writeAnswer } from './steps';
import { nowNs } from '../infer/clock';

/** What the generate endpoints run on: the stream plane, and the configuration the steps read. */
export interface GenerateDeps extends Readonly<Pick<Config, 'upstream' | 'limits' | 'telemetry'>> {
  readonly streams: StreamInferPlane;
  readonly metadata: ModelMetadatas;
}

/**
 * Reads the body (Triton's generate reads only identity bodies) and decodes it into a framed
 * ModelInfer message; records ingress_read and decode.
 */
export async function decodeGenerateBody(ctx: RequestContext, ledger: Ledger, metadata: ModelMetadata,
  limits: BodyLimits): Promise<Buffer> {
  const ce = ctx.req.headers['content-encoding'];
  if (ce !== undefined && ce !== 'identity') {
    throw new GatewayError('GW_ERR_DECODE_INVALID', "Unsupported content-encoding, only 'identity' is supported.");
  }
  const body = await readWholeBody(ctx, ledger, limits, undefined);
  ledger.start('decode');
  const gathered = body.chunks.length === 1 ? 0 : 1;
  const bytes = gather(body.chunks, body.length);
  if (gathered) ledger.copied('decode', body.length);
  const { message } = decodeGenerate(bytes, metadata, ctx.params[0]!, ctx.params[1] ?? '', limits.maxInputSizeBytes, framer(ctx, ledger, true, gathered));
  ledger.end('decode');
  ledger.bytes('decode', body.length, message.length);
  return message;
}

/**
 * The ModelStreamInfer call: every response but the empty final one (asked for with
 * triton_enable_empty_final_response, it only marks the end) goes to `onMessage`. Records the
 * upstream hops from what grpc-js shows (upstream/infer/stream-plane.ts StreamTiming): sending until it
 * took the message, Triton until the first whole response, receiving until the last. `onMessage`
 * turns each response into what the client gets (an event), so encode runs from the first one's
 * start to the last one's end, overlapping receiving; an answer made once the call is over
 * (generate's one JSON object) records encode anew. A NOT_FOUND forgets the model cached in
 * `cache`. `affinity`: the request's sequence (steps.ts sequenceKey).
 */
export async function streamCall(ctx: RequestContext, streams: StreamInferPlane, cache: Pick<ModelMetadatas, 'evict'>, timeoutMs: number, message: Buffer,
  ledger: Ledger, onMessage: (m: StreamMessage) => Promise<void> | undefined | void, affinity?: string): Promise<void> {
  const startNs = nowNs();
  let timing;
  try {
    timing = await streams.streamInfer(message, callOptions(ctx, timeoutMs, undefined, affinity), {
      onMessage: (m) => (m.kind === 'response' && m.final && m.response.outputs.length === 0 ? undefined : encodeTimed(ledger, onMessage, m)),
    });
  } catch (err) {
    ctx.record.upstreamDurationNs = nowNs() - startNs;
    ctx.record.upstreamStatus = isGatewayError(err) ? err.grpcCode : undefined;
    throw evictOnNotFound(err, () => cache.evict(ctx.params[0]!));
  }
  // Receiving lasts until the exchange is over (its status in), not only its last message.
  const endNs = nowNs();
  const written = timing.writtenNs || startNs;
  ledger.startedAt('upstream_send', startNs);
  ledger.endedAt('upstream_send', written);
  ledger.startedAt('triton', written);
  ledger.endedAt('triton', timing.firstMessageNs);
  ledger.startedAt('upstream_receive', timing.firstMessageNs);
  ledger.endedAt('upstream_receive', endNs);
  ledger.bytes('upstream_send', message.length, message.length);
  ctx.record.upstreamDurationNs = endNs - startNs;
  ctx.record.upstreamStatus = 0;
  // The generation's tokens not charged yet to the credentials' quotas are, before the answer ends (auth/usage.ts).
  await ctx.record.meter?.charged();
}

/** `onMessage(m)` inside the encode hop (started by the first response, ended by each). */
function encodeTimed(ledger: Ledger, onMessage: (m: StreamMessage) => Promise<void> | undefined | void, m: StreamMessage): Promise<void> | undefined {
  if (ledger.startNs('encode') === 0) ledger.start('encode');
  try {
    return onMessage(m) ?? undefined;
  } finally {
    ledger.end('encode');
  }
}

const ONE_RESPONSE = 'generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses';

/**
 * The one JSON answer of generate, from the responses `got`: exactly one response is answered,
 * another count with a 200 error, as Triton does; written uncompressed, as Triton's are.
 */
export function writeGenerateAnswer(ctx: RequestContext, ledger: Ledger, serverTimingOn: boolean, got: readonly StreamMessage[]): Promise<void> {
  const only = got.length === 1 ? got[0]! : undefined;
  if (only?.kind === 'error') throw streamError(only.message);
  ledger.start('encode');
  const out = only?.kind === 'response' ? encodeGenerateResponse(only.response) : encodeGenerateError(ONE_RESPONSE);
  ledger.end('encode');
  return writeAnswer(ctx, ledger, { 'Content-Type': 'application/json', 'Content-Length': out.length }, [out], serverTimingOn, false);
}

/**
 * The events of generate_stream and of V2 infer as events (egress/sse.ts, pipeline/infer-events.ts)
 * and their egress_write hop, from the head to the end of the stream. The head goes with the first
 * event, so its Server-Timing has the hops that ended before the call; the rest — the upstream ones,
 * recorded once the stream is over, encode and egress_write — follow in a trailer where it reaches
 * the client (telemetry/server-timing.ts; an event stream is chunked on HTTP/1.1 anyway).
 */
export class GenerateEvents extends EventStream {
  readonly #timing: SplitServerTiming | undefined;

  constructor(private readonly ctx: RequestContext, private readonly ledger: Ledger, serverTimingOn: boolean) {
    super(ctx.res);
    this.#timing = serverTimingOn ? new SplitServerTiming(ledger, ctx.record.startNs) : undefined;
  }

  /** Sends the head with `status` (once). */
  open(status: number): void {
    if (this.started) return;
    const timing = this.#timing?.head(trailerReaches(this.ctx.req));
    this.ledger.start('egress_write');
    this.start(status, timing);
  }

  /** Ends the stream, after a last event when given; the write hop ends, and the trailer goes, with it. */
  override end(event?: Buffer, name?: string): void {
    this.open(200);
    this.ledger.end('egress_write');
    this.#timing?.trail(this.ctx.res);
    super.end(event, name);
  }

  /** Ends the stream after its last event. */
  close(): void {
    this.end();
  }
}

/** Exactly one response, answered as one JSON object (Triton answers another count with a 200 error). */
export async function generate(ctx: RequestContext, deps: GenerateDeps): Promise<void> {
  const { ledger, message } = await decodeCall(ctx, deps, 'json');
  const got: StreamMessage[] = [];
  await call(ctx, deps, message, ledger, (m) => {
    got.push(m);
  });
  await writeGenerateAnswer(ctx, ledger, deps.telemetry.serverTiming, got);
}

/** Every response as a server-sent event; an error before the first is a JSON error, after it an event. */
export async function generateStream(ctx: RequestContext, deps: GenerateDeps): Promise<void> {
  const { ledger, message } = await decodeCall(ctx, deps, 'sse');
  const events = new GenerateEvents(ctx, ledger, deps.telemetry.serverTiming);
  try {
    await call(ctx, deps, message, ledger, (m) => {
      // Triton's core refused the request before running it: a normal JSON error.
      if (!events.started && m.kind === 'error' && isRequestError(m.message)) throw streamError(m.message);
      events.open(m.kind === 'error' ? 400 : 200);
      return events.write(m.kind === 'error' ? encodeGenerateError(m.message) : encodeGenerateResponse(m.response));
    });
  } catch (err) {
    if (!events.started) throw err;
    // Mid-stream: the status is sent; the error becomes an event.
    events.end(encodeGenerateError(isGatewayError(err) ? err.message : String(err)));
    return;
  }
  events.close();
}

/** Triton looks the model up first (an unknown model is 404 whatever the body), then the body is read and decoded. */
async function decodeCall(ctx: RequestContext, deps: GenerateDeps, out: 'json' | 'sse'): Promise<{ ledger: Ledger; message: Buffer }> {
  const modelVersion = ctx.params[1] ?? '';
  const ledger = startLedger(ctx, modelVersion);
  ctx.record.encoding = 'generate';
  ctx.record.encodingOut = out;
  const metadata = await deps.metadata.get(ctx.params[0]!, modelVersion, ctx.signal);
  return { ledger, message: await decodeGenerateBody(ctx, ledger, metadata, deps.limits) };
}

/** The streaming call (streamCall). */
function call(ctx: RequestContext, deps: GenerateDeps, message: Buffer, ledger: Ledger,
  onMessage: (m: StreamMessage) => Promise<void> | undefined | void): Promise<void> {
  return streamCall(ctx, deps.streams, deps.metadata, deps.upstream.timeoutMs, message, ledger, onMessage);
}

/** Triton core's checks of a request carry its "[request id: …]" prefix; a model's errors do not. */
function isRequestError(message: string): boolean {
  return message.startsWith('[request id: ');
}
