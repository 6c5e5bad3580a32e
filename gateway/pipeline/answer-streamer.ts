// A binary answer streamed from Triton's DATA frames (binary-streamer.ts) when the answer can
// be all binary, the data plane hands frames over (cut-through on) and nothing needs the whole
// answer (no response compression). Otherwise it makes no receiver and the answer is encoded
// whole (infer-answer.ts). It owns the hops of a streamed answer: encode (reading Triton's header
// and writing ours) ends with the head, egress_write runs until the last byte is handed over.
import type { OutgoingHttpHeaders } from 'node:http';
import { responseEncoding } from '../egress/compress';
import { BinaryStreamer, mayStreamBinary, type StreamStart } from './binary-streamer';
import { type Hop, HOPS, type Ledger } from '../infer/ledger';
import type { InferRequest } from '../infer/request';
import { holdsUpstream } from '../ingress/h2';
import type { RequestContext } from '../ingress/context';
import { binaryAnswerHeaders, type InferDialect } from './infer-dialect';
import { serverTiming } from '../telemetry/server-timing';
import type { Receiver, ResponseMessage } from '../upstream/infer/data-plane';
import { upstreamHops } from '../upstream/infer/answer-hops';

export class AnswerStreamer {
  #streamer: BinaryStreamer | undefined;
  #start: StreamStart | undefined;
  /** Server-Timing on: the hops the head named. */
  #inHead: Set<Hop> | undefined;
  readonly #enabled: boolean;

  /** `cutThrough`: the route's plan; `serverTiming`: telemetry.serverTiming; `dialect`: the plan's (not compressed). */
  constructor(private readonly ctx: RequestContext, cutThrough: boolean, private readonly serverTiming: boolean,
    private readonly ledger: Ledger, private readonly dialect?: InferDialect) {
    this.#enabled = cutThrough && (dialect !== undefined || responseEncoding(ctx.req) === undefined);
  }

  receiverFor(request: InferRequest): Receiver | undefined {
    if (!this.#enabled || !mayStreamBinary(request)) return undefined;
    const streamer = this.#streamer = new BinaryStreamer(this.ctx.res, request, (start) => this.#headers(start));
    holdsUpstream(this.ctx.res, () => streamer.held());
    return streamer;
  }

  get streaming(): boolean {
    return this.#streamer?.streaming === true;
  }

  /**
   * After the call succeeded: records encode and egress_write, then ends the answer (telemetry
   * reads the ledger when the response finishes, so it is complete before). The hops that ended
   * after the head — receiving, writing — go in a Server-Timing trailer: HTTP/2 sends it (a
   * trailing HEADERS frame); Node drops it on an HTTP/1.1 answer of known length (no chunked
   * encoding to carry it), where the access log alone has them.
   */
  finish(answer: ResponseMessage): Promise<void> {
    const { ledger } = this;
    const sent = this.#start!.headerBytes + this.#start!.binaryBytes;
    ledger.bytes('encode', answer.byteLength, sent);
    ledger.bytes('egress_write', sent, sent);
    ledger.end('egress_write');
    if (this.#inHead !== undefined) {
      this.ctx.res.addTrailers({ 'Server-Timing': serverTiming(ledger, this.ctx.record.startNs, process.hrtime.bigint(), this.#inHead) });
    }
    return this.#streamer!.finish();
  }

  /** The answer's headers, when its JSON header is ready: encode is done, egress_write starts. */
  #headers(start: StreamStart): OutgoingHttpHeaders {
    this.#start = start;
    const { ledger, ctx } = this;
    const encodeStartNs = this.#streamer!.encodeStartNs;
    upstreamHops(ledger, ledger.hops.upstream_send.startNs || encodeStartNs, encodeStartNs, start.timing);
    ledger.hops.encode.startNs = encodeStartNs;
    ledger.end('encode');
    ledger.start('egress_write');
    ctx.record.encodingOut = 'binary';
    const headers = binaryAnswerHeaders(this.dialect, start.headerBytes);
    if (this.serverTiming) {
      headers['Server-Timing'] = serverTiming(ledger, ctx.record.startNs, process.hrtime.bigint());
      this.#inHead = new Set(HOPS.filter((h) => ledger.hops[h].endNs !== 0n));
    }
    return headers;
  }
}
