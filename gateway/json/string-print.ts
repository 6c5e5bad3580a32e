// JSON string tokens for BYTES elements, exactly as Triton's HTTP frontend writes them
// (docs/architecture.md#answers).
//
// Triton hands the element's raw bytes, with their length, to rapidjson's Writer::String (UTF-8 in,
// UTF-8 out, no kWriteValidateEncodingFlag). rapidjson escapes per byte, from a fixed table:
//   '"' -> \"   '\' -> \\   0x08 -> \b   0x09 -> \t   0x0A -> \n   0x0C -> \f   0x0D -> \r
//   every other byte < 0x20 -> \u00XX with UPPERCASE hex (\u000B, \u001F), NUL included (the
//   length is explicit, so NUL neither ends nor shortens the string);
// and copies every other byte unchanged: '/', 0x7F, and all bytes >= 0x80, even when they are not
// valid UTF-8 (lone continuation bytes, overlong forms, surrogates, 0xFF all pass through).
// Verified byte for byte against real Triton 2.51 (test/unit/encode/fixtures/bytes.txt).
//
// Because invalid UTF-8 must survive, the exact form is bytes: jsonStringBytesOfBytes /
// writeJsonStringOfBytes. jsonStringOfBytes returns a JS string and is exact only for valid UTF-8.

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const HEX_UPPER = [0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46];

/**
 * For each byte: 0 = copy as is, otherwise the character after the backslash ('u' means \u00XX).
 * The same table as rapidjson's Writer::WriteString.
 */
const ESCAPE = new Uint8Array(256);
for (let b = 0; b < 0x20; b++) ESCAPE[b] = 0x75; // 'u'
ESCAPE[0x08] = 0x62; // 'b'
ESCAPE[0x09] = 0x74; // 't'
ESCAPE[0x0a] = 0x6e; // 'n'
ESCAPE[0x0c] = 0x66; // 'f'
ESCAPE[0x0d] = 0x72; // 'r'
ESCAPE[QUOTE] = QUOTE;
ESCAPE[BACKSLASH] = BACKSLASH;

/** Bytes each input byte takes in the token: 1, 2 for a short escape, 6 for \u00XX. */
const WIDTH = new Uint8Array(256);
for (let b = 0; b < 256; b++) WIDTH[b] = ESCAPE[b] === 0 ? 1 : ESCAPE[b] === 0x75 ? 6 : 2;

/** Length in bytes of the JSON string token (quotes included) for bytes[start..end). */
export function jsonStringByteLength(bytes: Uint8Array, start = 0, end = bytes.length): number {
  let n = end - start + 2;
  for (let i = start; i < end; i++) n += WIDTH[bytes[i]!]! - 1;
  return n;
}

/**
 * Writes the JSON string token (quotes included) for bytes[start..end) into target at `at` and
 * returns the end offset. The caller ensures room (jsonStringByteLength).
 */
export function writeJsonStringOfBytes(bytes: Uint8Array, start: number, end: number, target: Uint8Array, at: number): number {
  target[at++] = QUOTE;
  let run = start; // start of the pending run of bytes copied unchanged
  for (let i = start; i < end; i++) {
    const b = bytes[i]!;
    const esc = ESCAPE[b]!;
    if (esc === 0) continue;
    if (i > run) { target.set(bytes.subarray(run, i), at); at += i - run; }
    run = i + 1;
    target[at++] = BACKSLASH;
    target[at++] = esc;
    if (esc === 0x75) {
      target[at++] = 0x30;
      target[at++] = 0x30;
      target[at++] = HEX_UPPER[b >> 4]!;
      target[at++] = HEX_UPPER[b & 15]!;
    }
  }
  if (end > run) { target.set(bytes.subarray(run, end), at); at += end - run; }
  target[at++] = QUOTE;
  return at;
}

/** The exact bytes of the JSON string token Triton writes for a BYTES element (quotes included). */
export function jsonStringBytesOfBytes(bytes: Uint8Array, start = 0, end = bytes.length): Buffer {
  const out = Buffer.allocUnsafe(jsonStringByteLength(bytes, start, end));
  writeJsonStringOfBytes(bytes, start, end, out, 0);
  return out;
}

/**
 * The JSON string token as a JS string, the bytes decoded as UTF-8. Exact (its UTF-8 encoding equals
 * jsonStringBytesOfBytes) when the element is valid UTF-8; invalid sequences come out as U+FFFD, so
 * callers that must reproduce Triton for arbitrary bytes use the byte forms instead.
 */
export function jsonStringOfBytes(bytes: Uint8Array, start = 0, end = bytes.length): string {
  const length = jsonStringByteLength(bytes, start, end);
  if (length === end - start + 2) { // nothing to escape: decode the element in place
    return '"' + Buffer.from(bytes.buffer, bytes.byteOffset + start, end - start).toString('utf8') + '"';
  }
  const out = Buffer.allocUnsafe(length);
  writeJsonStringOfBytes(bytes, start, end, out, 0);
  return out.toString('utf8');
}
