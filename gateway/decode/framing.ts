// Which framing an infer body has, decided from its headers before any of it is read
// (docs/architecture.md#binary-extension): Inference-Header-Content-Length 0 is raw, a header shorter than the body is
// the binary extension, anything else is JSON. Bodies of known length without Content-Encoding
// are decoded as they arrive (push decoders); the rest are read whole, then decoded.
import { GatewayError } from '../errors';

export type Framing =
  | { readonly kind: 'raw'; readonly bodyBytes: number }
  | { readonly kind: 'binary'; readonly bodyBytes: number; readonly headerBytes: number }
  /** JSON, compressed or chunked bodies: read whole (within the limits), then decoded. */
  | { readonly kind: 'whole' };

const WHOLE: Framing = { kind: 'whole' };

/**
 * Inference-Header-Content-Length as Triton 2.51 reads it (observed, test/conformance/cases):
 * the leading integer (blanks and a sign allowed, trailing junk ignored); no digits at all reads
 * as 0 — a raw request; negative or past the body is the range error.
 */
export function headerLength(raw: string | string[] | undefined, bodyLength: number): number | undefined {
  if (raw === undefined) return undefined;
  const v = Array.isArray(raw) ? raw[0]! : raw;
  let n = digits(v);
  if (n === undefined) {
    const m = /^\s*([+-]?\d+)/.exec(v);
    n = m === null ? 0 : Number(m[1]);
  }
  if (n < 0 || n > bodyLength) {
    throw new GatewayError('GW_ERR_REQUEST_HEADER_INVALID', `inference header size should be in range (0, ${bodyLength}), got: ${v}`);
  }
  return n;
}

/** `v`'s value when it is only decimal digits (at most 15: exact in a double), as clients send it; else undefined. */
function digits(v: string): number | undefined {
  if (v.length === 0 || v.length > 15) return undefined;
  let n = 0;
  for (let i = 0; i < v.length; i++) {
    const d = v.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    n = n * 10 + d;
  }
  return n;
}

export function jsonTooLarge(n: number, max: number): GatewayError {
  return new GatewayError('GW_ERR_DECODE_TOO_LARGE',
    `request JSON size of ${n} bytes exceeds the maximum allowed input size of ${max} bytes. Use --http-max-input-size to increase the limit.`);
}

/**
 * `declared`: the Content-Length (undefined: chunked); `encoded`: a Content-Encoding to inflate.
 * With an uncompressed body of known length, the size errors Triton gives after reading are given
 * before reading (same status and message, nothing buffered).
 */
export function chooseFraming(ihcl: string | string[] | undefined, declared: number | undefined, encoded: boolean, maxInputSizeBytes: number): Framing {
  if (encoded || declared === undefined) return WHOLE;
  const h = headerLength(ihcl, declared);
  if (h === undefined && declared > maxInputSizeBytes) throw jsonTooLarge(declared, maxInputSizeBytes);
  if (h !== undefined && h > maxInputSizeBytes) throw jsonTooLarge(h, maxInputSizeBytes);
  if (h === 0) return { kind: 'raw', bodyBytes: declared };
  if (h !== undefined && h < declared) return { kind: 'binary', bodyBytes: declared, headerBytes: h };
  return WHOLE;
}

/**
 * The media type of a Content-Type (RFC 9110 §8.3.1): its type/subtype, lower-cased, parameters
 * dropped; undefined when there is none.
 */
export function mediaType(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  const semi = contentType.indexOf(';');
  const essence = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase();
  return essence === '' ? undefined : essence;
}

/**
 * Which bodies without Inference-Header-Content-Length are files, not V2 requests
 * (docs/dialects.md "Uploads"): `image/*`, `audio/*` and `video/*` always (`file`: a model that
 * cannot take one is refused); `application/octet-stream` only for a model that takes encoded
 * bytes (`bytes`: otherwise Triton's reading — clients do send V2 JSON under that type, and Triton,
 * which ignores Content-Type, accepts it). Everything else — absent, `application/json`, the
 * `application/x-www-form-urlencoded` that `curl -d` sends with JSON — keeps Triton's reading.
 */
export function uploadKind(type: string | undefined): 'file' | 'bytes' | undefined {
  if (type === undefined) return undefined;
  if (type === 'application/octet-stream') return 'bytes';
  return type.startsWith('image/') || type.startsWith('audio/') || type.startsWith('video/') ? 'file' : undefined;
}
