// upstream.sharedMemory on the push-decoded path: the framer remembers which payload bytes it left
// out of the head, and the sink writes them into a leased region when the request can use one
// (else the normal, cut-through sink). The write into the region is the payload's one copy
// (docs/dialects.md "Copies"); the gRPC message then carries no tensor bytes (the ledger's
// sharedMemoryBytes).
import { outputKind } from '../encode/infer-response';
import type { Frame, OpenSink } from '../infer/framed-message';
import type { Ledger } from '../infer/ledger';
import type { SharedMemoryPool } from '../upstream/shared-memory/region-pool';
import { SharedMemoryUpload } from '../upstream/shared-memory/upload';
import type { inference } from '../../proto/services';

/** The request's shared-memory sink, when it got a region: released however the request ends. */
export interface SharedMemoryHold {
  upload: SharedMemoryUpload | undefined;
}

/** The framer and sink pair that route the payload through a region, holding it in `shm`. */
export function sharedMemorySink(pool: SharedMemoryPool, config: inference.ModelConfig, frame: Frame, open: OpenSink, shm: SharedMemoryHold,
  ledger: Ledger): [Frame, OpenSink] {
  let external: readonly number[] = [];
  const remembering: Frame = (request, ext) => {
    external = ext;
    return frame(request, ext);
  };
  const opening: OpenSink = (request, framed, slots) => {
    const upload = SharedMemoryUpload.open(pool, request, framed, external, { config, binary: (name) => outputKind(request, name) === 'binary' });
    if (typeof upload === 'string') return open(request, framed, slots);
    shm.upload = upload;
    ledger.allocated('decode');
    ledger.copied('decode', upload.copiedHead);
    ledger.copied('decode', upload.sharedBytes);
    ledger.sharedMemoryBytes = upload.sharedBytes;
    return upload;
  };
  return [remembering, opening];
}
