// BYTES tensor framing: every element is a uint32 little-endian byte length followed by the
// element's bytes, back to back (docs/architecture.md#the-grpc-messages). This is the layout of raw_input_contents,
// raw_output_contents and the binary extension alike.

export function frameBytesElements(elements: readonly Uint8Array[]): Buffer {
  let size = 0;
  for (const e of elements) size += 4 + e.byteLength;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const e of elements) {
    out.writeUInt32LE(e.byteLength, at);
    out.set(e, at + 4);
    at += 4 + e.byteLength;
  }
  return out;
}

export type Unframed =
  | { ok: true; elements: Buffer[] }
  | { ok: false; problem: 'length' | 'data'; index: number; expected: number; available: number };

/** Splits framed BYTES data into element views (no copies). */
export function unframeBytesElements(data: Buffer): Unframed {
  const elements: Buffer[] = [];
  let at = 0;
  while (at < data.byteLength) {
    if (data.byteLength - at < 4) {
      return { ok: false, problem: 'length', index: elements.length, expected: 4, available: data.byteLength - at };
    }
    const len = data.readUInt32LE(at);
    at += 4;
    if (data.byteLength - at < len) {
      return { ok: false, problem: 'data', index: elements.length, expected: len, available: data.byteLength - at };
    }
    elements.push(data.subarray(at, at + len));
    at += len;
  }
  return { ok: true, elements };
}
