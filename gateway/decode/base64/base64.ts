// Base64 text inside a JSON string token, decoded straight into a raw_input_contents slot
// (docs/architecture.md#base64-numbers). Lenient in what it accepts — the standard and URL-safe alphabets (mixed),
// padding optional, blanks and line breaks anywhere, a `data:<mime>;base64,` prefix, JSON escapes
// such as `\/` or `\n` — and strict about everything else: any other character, a lone final
// character, padding in the middle or a decoded size other than the one expected is an error.
//
// The text is decoded bytes to bytes by decode/base64/base64-simd.ts (no string in between), which takes
// clean text — both alphabets, no padding — and says whether every character was in the alphabet.
// So:
// - fast path: a token with no escape and no blank (five native memchr scans) is decoded in one
//   call; its size is known from its length, and a character outside the alphabet (an inner '='
//   too) sends it to the slow path, which names it;
// - slow path: a push state machine over the raw token bytes — it carries a split escape, the
//   data: prefix and 0–3 characters of an unfinished group across chunks, validates every
//   character, and decodes 64 KiB runs of clean characters.
import { GatewayError } from '../../errors';
import { decodeClean, decodedSize } from './base64-simd';

export { decodedSize };

const INVALID = -1;
const PAD = -2;
const BLANK = -3;
/** Character classes: 0 for alphabet characters (both alphabets), else one of the markers above. */
const CLASS = new Int8Array(256).fill(INVALID);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_') CLASS[c.charCodeAt(0)] = 0;
CLASS[0x3d] = PAD;
CLASS[0x20] = CLASS[0x09] = CLASS[0x0a] = CLASS[0x0d] = BLANK;

const DATA_PREFIX = 'data:';
/** Longest `data:<mime>[;params];base64,` prefix we look through for its comma. */
const MAX_PREFIX_CHARS = 256;
/** Clean characters gathered before one call into the decoder (base64-simd.ts; a multiple of 4). */
const RUN_CHARS = 64 * 1024;
const run = Buffer.allocUnsafe(RUN_CHARS);

/** What an error names: "input 'X'" or "input 'X' element 3". */
export type Base64Subject = string;

export function base64Invalid(subject: Base64Subject, problem: string): GatewayError {
  return new GatewayError('GW_ERR_DECODE_BASE64_INVALID', `Unable to parse 'data': invalid base64 for ${subject}: ${problem}`);
}

export function base64SizeMismatch(subject: Base64Subject, decoded: string, expected: number): GatewayError {
  return new GatewayError('GW_ERR_DECODE_BASE64_SIZE',
    `Unable to parse 'data': base64 for ${subject} decodes to ${decoded} bytes, expected ${expected} bytes from shape and datatype`);
}

/**
 * The error for base64 text whose size (from its length) is not `expected`: invalid text is named
 * as such first (a scan, only on this error path), else the size mismatch.
 */
export function base64Refusal(b: Uint8Array, start: number, end: number, subject: Base64Subject, expected: number): GatewayError {
  const d = new Base64Decoder(undefined, 0, Number.MAX_SAFE_INTEGER, subject);
  try {
    d.push(b, start, end);
    return base64SizeMismatch(subject, String(d.end()), expected);
  } catch (err) {
    return err as GatewayError;
  }
}

/**
 * The content range of a token after a plain `data:…;base64,` prefix, when the token is clean
 * (no escape, no blank) — the fast path's precondition; undefined otherwise.
 */
function cleanRange(b: Uint8Array, start: number, end: number): [number, number] | undefined {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  for (const c of [0x5c, 0x20, 0x0a, 0x0d, 0x09]) {
    const i = buf.indexOf(c, start);
    if (i !== -1 && i < end) return undefined;
  }
  let s = start;
  if (end - start >= 5 && buf[s] === 0x64 && buf.toString('latin1', s, s + 5) === DATA_PREFIX) {
    const comma = buf.indexOf(0x2c, s);
    if (comma === -1 || comma >= end || comma - s > MAX_PREFIX_CHARS) return undefined;
    if (!/;base64$/i.test(buf.toString('latin1', s, comma))) return undefined;
    s = comma + 1;
  }
  return [s, end];
}

/** Characters of a clean range before its padding (at most two '='). */
function cleanChars(b: Uint8Array, s: number, e: number): number {
  let chars = e - s;
  let pads = 0;
  while (pads < 2 && chars > 0 && b[s + chars - 1] === 0x3d) { chars--; pads++; }
  return chars;
}

/** Decoded size of a clean range from its length, or undefined when the length cannot be base64. */
function cleanSize(b: Uint8Array, s: number, e: number): number | undefined {
  const chars = cleanChars(b, s, e);
  const pads = e - s - chars;
  if (chars % 4 === 1 || (pads > 0 && (chars + pads) % 4 !== 0)) return undefined;
  return decodedSize(chars);
}

/**
 * The decoded size of the base64 text in the string token content [start, end) (between the
 * quotes, escapes unresolved). O(1) beyond native scans for clean text; a validating scan otherwise.
 */
export function base64Size(b: Uint8Array, start: number, end: number, subject: Base64Subject): number {
  const clean = cleanRange(b, start, end);
  if (clean !== undefined) {
    const n = cleanSize(b, clean[0], clean[1]);
    if (n !== undefined) return n;
  }
  const d = new Base64Decoder(undefined, 0, Number.MAX_SAFE_INTEGER, subject);
  d.push(b, start, end);
  return d.end();
}

/**
 * Decodes the base64 text of the string token content [start, end) into target[offset, offset +
 * expected); throws unless it decodes to exactly `expected` bytes. Returns the bytes written.
 */
export function writeBase64(b: Uint8Array, start: number, end: number, target: Buffer, offset: number, expected: number, subject: Base64Subject): number {
  const clean = cleanRange(b, start, end);
  if (clean !== undefined) {
    const [s, e] = clean;
    const n = cleanSize(b, s, e);
    if (n !== undefined && n !== expected) throw base64Refusal(b, start, end, subject, expected);
    // Not all in the alphabet: the slow path finds and names the character.
    if (n !== undefined && decodeClean(b, s, s + cleanChars(b, s, e), target, offset)) return expected;
  }
  const d = new Base64Decoder(target, offset, expected, subject);
  d.push(b, start, end);
  return d.end();
}

const enum Stage { Start, Prefix, Body, Padding }

/**
 * The push state machine. Feed it the raw bytes of a JSON string token's content (escapes
 * unresolved) in any chunking; end() checks the total and returns the decoded size. With no
 * target it only validates and counts.
 */
export class Base64Decoder {
  #stage = Stage.Start;
  /** Raw bytes seen (for error offsets). */
  #pos = 0;
  /** A JSON escape split across chunks: its bytes so far (starting with the backslash). */
  #escape = '';
  /** Characters of a possible data: prefix. */
  #prefix = '';
  #chars = 0;
  #pads = 0;
  #runLength = 0;
  #written = 0;

  constructor(
    private readonly target: Buffer | undefined,
    private readonly offset: number,
    private readonly expected: number,
    private readonly subject: Base64Subject,
  ) {}

  push(b: Uint8Array, start: number, end: number): void {
    for (let p = start; p < end; p++, this.#pos++) {
      // The common case in a tight loop with state in locals (per-character calls
      // made this path 10× slower): alphabet characters in the body, straight into the run.
      if (this.#stage === Stage.Body && this.#escape.length === 0) {
        const target = this.target;
        let n = this.#runLength;
        const p0 = p;
        while (p < end && CLASS[b[p]!] === 0) {
          if (target !== undefined) {
            run[n++] = b[p]!;
            if (n === RUN_CHARS) {
              this.#runLength = n;
              this.#flush(RUN_CHARS);
              n = 0;
            }
          }
          p++;
        }
        this.#runLength = n;
        this.#chars += p - p0;
        this.#pos += p - p0;
        if (p === end) return;
      }
      const c = b[p]!;
      if (this.#escape.length > 0 || c === 0x5c) {
        this.#escape += String.fromCharCode(c);
        const resolved = this.#resolveEscape();
        if (resolved !== undefined) {
          this.#escape = '';
          this.#char(resolved);
        }
        continue;
      }
      this.#char(c);
    }
  }

  /** The character a complete escape stands for; undefined while incomplete. */
  #resolveEscape(): number | undefined {
    const e = this.#escape;
    if (e.length < 2) return undefined;
    switch (e.charCodeAt(1)) {
      case 0x6e: return 0x0a; // \n
      case 0x72: return 0x0d; // \r
      case 0x74: return 0x09; // \t
      case 0x75: // \uXXXX (the JSON reader validated the hex digits)
        if (e.length < 6) return undefined;
        return Math.min(parseInt(e.slice(2), 16), 0xff); // anything past Latin-1 is invalid anyway (0xff is)
      case 0x62: return 0x08; // \b (invalid below)
      case 0x66: return 0x0c; // \f (invalid below)
      default: return e.charCodeAt(1); // \/ \\ \" → the character itself
    }
  }

  #char(c: number): void {
    switch (this.#stage) {
      case Stage.Start:
        if (CLASS[c] === BLANK && this.#prefix.length === 0) return;
        this.#prefix += String.fromCharCode(c);
        if (DATA_PREFIX.startsWith(this.#prefix)) {
          if (this.#prefix.length === DATA_PREFIX.length) this.#stage = Stage.Prefix;
          return;
        }
        // Not a data: URI: the gathered characters are base64 text.
        this.#stage = Stage.Body;
        for (const ch of this.#prefix) this.#body(ch.charCodeAt(0));
        this.#prefix = '';
        return;
      case Stage.Prefix:
        if (c !== 0x2c) {
          this.#prefix += String.fromCharCode(c);
          if (this.#prefix.length > MAX_PREFIX_CHARS) throw base64Invalid(this.subject, `data: URI prefix without a comma in its first ${MAX_PREFIX_CHARS} characters`);
          return;
        }
        if (!/;base64$/i.test(this.#prefix)) throw base64Invalid(this.subject, `data: URI is not base64 (${JSON.stringify(this.#prefix)})`);
        this.#prefix = '';
        this.#stage = Stage.Body;
        return;
      default:
        this.#body(c);
    }
  }

  #body(c: number): void {
    const k = CLASS[c]!;
    if (k === BLANK) return;
    if (k === PAD) {
      this.#stage = Stage.Padding;
      this.#pads++;
      if (this.#pads > 2) throw base64Invalid(this.subject, `too much padding at offset ${this.#pos}`);
      return;
    }
    if (k === INVALID) {
      const what = c > 0x20 && c < 0x7f ? JSON.stringify(String.fromCharCode(c)) : `byte 0x${c.toString(16).padStart(2, '0')}`;
      throw base64Invalid(this.subject, `character ${what} at offset ${this.#pos}`);
    }
    if (this.#stage === Stage.Padding) throw base64Invalid(this.subject, `padding '=' before the end (offset ${this.#pos})`);
    this.#chars++;
    if (this.target === undefined) return;
    run[this.#runLength++] = c;
    if (this.#runLength === RUN_CHARS) this.#flush(RUN_CHARS);
  }

  /** Decodes the first `chars` gathered characters (a multiple of 4 unless final) into the target. */
  #flush(chars: number): void {
    const n = decodedSize(chars);
    if (this.#written + n > this.expected) throw base64SizeMismatch(this.subject, `more than ${this.expected}`, this.expected);
    decodeClean(run, 0, chars, this.target!, this.offset + this.#written); // alphabet characters only (#body checked them)
    this.#written += n;
    this.#runLength = 0;
  }

  end(): number {
    if (this.#escape.length > 0) throw base64Invalid(this.subject, 'unfinished escape at the end');
    if (this.#stage === Stage.Prefix) throw base64Invalid(this.subject, 'data: URI prefix without a comma');
    if (this.#stage === Stage.Start) {
      for (const ch of this.#prefix) this.#body(ch.charCodeAt(0));
      this.#prefix = '';
    }
    const chars = this.#chars;
    if (chars % 4 === 1) throw base64Invalid(this.subject, `${chars} characters (a length of 4k+1 cannot be base64)`);
    if (this.#pads > 0 && (chars + this.#pads) % 4 !== 0) throw base64Invalid(this.subject, `${this.#pads} padding characters after ${chars} characters`);
    const size = decodedSize(chars);
    if (this.target === undefined) return size;
    if (size !== this.expected) throw base64SizeMismatch(this.subject, String(size), this.expected);
    if (this.#runLength > 0) this.#flush(this.#runLength);
    return this.#written;
  }
}
