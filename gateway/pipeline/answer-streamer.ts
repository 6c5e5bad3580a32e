// A binary answer streamed from Triton's DATA frames (binary-streamer.ts) when the answer can
// be all binary, the data plane hands frames over (cut-through on) and nothing needs the whole
// answer (no response compression). Otherwise it makes no receiver and the answer is encoded
// whole (infer-answer.ts). It owns the hops of a streamed answer: encode (reading Triton's header
// and writing ours) ends with the head, egress_write runs until the last byte is handed over.
// upstream_receive and egress_write end after the head, so its Server-Timing has them in a
// trailer (telemetry/server-timing.ts): over HTTP/2 always; over HTTP/1.1 when the client accepts
// trailers (TE: trailers), and then the answer is chunked instead of of known length.
import type { OutgoingHttpHeaders } from 'node:http';
import { responseEncoding } from '../egress/compress';
import { BinaryStreamer, mayStreamBinary, type StreamHead, type StreamStart } from './binary-streamer';
import type { Ledger } from '../infer/ledger';
import type { InferRequest } from '../infer/request';
import { holdsUpstream } from '../ingress/h2';
import type { RequestContext } from '../ingress/context';
import { binaryAnswerHeaders, type InferDialect } from './infer-dialect';
import { SplitServerTiming, trailerReaches } from '../telemetry/server-timing';
import type { Receiver, ResponseMessage } from '../upstream/infer/data-plane';
import { upstreamHops } from '../upstream/infer/answer-hops';

export class AnswerStreamer implements StreamHead {
  #streamer: BinaryStreamer | undefined;
  #start: StreamStart | undefined;
  /** Server-Timing on: the head's and the trailer's. */
  readonly #timing: SplitServerTiming | undefined;
  readonly #enabled: boolean;

  /** `cutThrough`: the route's plan; `serverTiming`: telemetry.serverTiming; `dialect`: the plan's (not compressed). */
  constructor(private readonly ctx: RequestContext, cutThrough: boolean, serverTiming: boolean,
    private readonly ledger: Ledger, private readonly dialect?: InferDialect) {
    this.#enabled = cutThrough && (dialect !== undefined || responseEncoding(ctx.req) === undefined);
    this.#timing = serverTiming ? new SplitServerTiming(ledger, ctx.record.startNs) : undefined;
  }

  receiverFor(request: InferRequest): Receiver | undefined {
    if (!this.#enabled || !mayStreamBinary(request)) return undefined;
    const streamer = this.#streamer = new BinaryStreamer(this.ctx.res, request, this);
    holdsUpstream(this.ctx.res, streamer);
    return streamer;
  }

  get streaming(): boolean {
    return this.#streamer?.streaming === true;
  }

  /**
   * After the call succeeded: records encode and egress_write, then ends the answer (telemetry
   * reads the ledger when the response finishes, so it is complete before), with the trailer of
   * the hops that ended after the head when one was announced.
   */
  finish(answer: ResponseMessage): Promise<void> {
    const { ledger } = this;
    const sent = this.#start!.headerBytes + this.#start!.binaryBytes;
    ledger.bytes('encode', answer.byteLength, sent);
    ledger.bytes('egress_write', sent, sent);
    ledger.end('egress_write');
    this.#timing?.trail(this.ctx.res);
    return this.#streamer!.finish();
  }

  /** The answer's headers, when its JSON header is ready: encode is done, egress_write starts (StreamHead). */
  headers(start: StreamStart): OutgoingHttpHeaders {
    this.#start = start;
    const { ledger, ctx } = this;
    const encodeStartNs = this.#streamer!.encodeStartNs;
    upstreamHops(ledger, ledger.startNs('upstream_send') || encodeStartNs, encodeStartNs, start.timing);
    ledger.startedAt('encode', encodeStartNs);
    ledger.end('encode');
    ledger.start('egress_write');
    ctx.record.encodingOut = 'binary';
    const headers = binaryAnswerHeaders(this.dialect, start.headerBytes);
    const trailer = this.#timing !== undefined && trailerReaches(ctx.req);
    if (this.#timing !== undefined) Object.assign(headers, this.#timing.head(trailer));
    // HTTP/1.1 carries a trailer only in the chunked encoding, which a Content-Length rules out.
    if (!trailer || ctx.req.httpVersionMajor === 2) headers['Content-Length'] = start.headerBytes + start.binaryBytes;
    return headers;
  }
}
