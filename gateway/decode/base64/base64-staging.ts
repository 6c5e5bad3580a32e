// Base64 decoded while a JSON body arrives. Fed each chunk of an uncompressed
// JSON body of declared length as node:http hands it over, it follows the JSON strings with native
// scans (indexOf for quotes and backslashes; numbers and structure are never walked byte by byte)
// and decodes every long member value string (after a ':', ≥ STAGE_MIN_CHARS) straight into a
// staging buffer, one chunk at a time — no whole-body string, no whole-text Latin-1 string, and the
// decoding overlaps the upload. When the body is complete, end() gives the document with those
// strings' contents cut out (each becomes an empty or placeholder string) and the decoded bytes;
// the decoders take them where a tensor's base64 `data` / `{"b64"}` is expected.
//
// It only ever stages text that is clean base64 — alphabet characters, padding at the very end,
// no escape, no blank, no data: prefix (or, for the OpenAI API's images, only what follows a base64
// data: URL's prefix: StagingOptions.dataUrls); anything else (and any string that ends early) is
// left in the document untouched. The text is decoded bytes to bytes (decode/base64/base64-simd.ts), which
// refuses any character outside the alphabet. So a staged document parses exactly as the original
// one; and the decoders fall back to the whole body whenever the staged reading fails or leaves a
// staged string unused, which keeps Triton's and rapidjson's error answers exactly as they were
// (they are produced by the unchanged whole-body path).
//
// The body is not held whole: a staged string's text is dropped as soon as it is decoded (the
// body's memory is then what is in flight: one chunk, the staging buffer, the JSON text around the
// strings). The whole-body path gets the body as sent from original(), which restores each such
// text from the bytes it decoded to: whole groups of the standard alphabet re-encode to exactly
// the text sent, and the final group is kept as sent. A string that held '-' or '_' (the URL-safe
// alphabet, perhaps mixed with the standard one) could not be restored so: its text is kept.
import { randomBytes } from 'node:crypto';
import type { Allocate } from '../../infer/framed-message';
import { decodedSize } from './base64';
import { Decoded, decodeRuns, decodeText } from './base64-simd';

/** Shorter member strings are never staged (names, ids, small payloads): the whole-body path is as fast for them. */
export const STAGE_MIN_CHARS = 16 * 1024;

const QUOTE = 0x22;
/** A group of either alphabet and the character after it, of the alphabet too (so the group is not the final one). */
const GROUP_AND_NEXT = /^[A-Za-z0-9+/_-]{5}$/;
/** A character only the URL-safe alphabet has. */
const URL_SAFE = /[-_]/;
const BACKSLASH = 0x5c;

const enum Mode {
  /** Between strings. */
  Out,
  /** In a string that is not staged (too short so far, or not a member value, or not clean). */
  Str,
  /** In a member value string being decoded into a staging buffer. */
  Stage,
}

interface Staged {
  /** Global offsets of the string's content (between the quotes). */
  readonly start: number;
  readonly end: number;
  readonly bytes: Buffer;
  /**
   * The content's text [start, cut) is no longer held: it begins the standard-alphabet encoding of
   * the bytes its whole groups decoded to, followed by `tail` (the final group as sent).
   */
  readonly cut: number;
  readonly tail: string;
}

/** Text held, from the global offset `at`. */
interface Piece {
  readonly at: number;
  readonly text: Buffer;
}

/** The staged reading of a body: the document with the staged contents cut out, and what they decoded to. */
export interface StagedBody {
  /** The JSON text, each staged string's content replaced by `placeholder(i)` (empty for V2). */
  readonly header: Buffer;
  /** By the offset of its opening quote in `header`, in document order. */
  readonly staged: ReadonlyMap<number, Buffer>;
  /** The placeholders, in document order (V1: JSON.parse loses offsets). */
  readonly placeholders: readonly string[];
  /** Bytes our code copied: the document's kept text into `header`, and the decoded bytes. */
  readonly copied: number;
  /** Buffers allocated: the staging buffers (abandoned ones too; not those reused) and the header. */
  readonly allocated: number;
}

export interface StagingOptions {
  /** Content-Length: bounds a staging buffer (3/4 of what is left of the body). */
  readonly bodyBytes: number;
  /** limits.maxInputSizeBytes: no staged payload is larger (a larger one is left to the decoders' 4xx). */
  readonly maxInputSizeBytes: number;
  readonly allocate: Allocate;
  /** Whether a buffer `allocate` gave was reused rather than allocated (not counted then). */
  readonly reused?: (buf: Buffer) => boolean;
  /**
   * The chunks pushed are ours alone once pushed (nothing else reads them): those not held are
   * handed to it at once, to be freed (buffers/release.ts releaseWhole).
   */
  readonly freeChunk?: (chunk: Buffer) => void;
  /** A buffer `allocate` gave for a string that was not clean base64 after all: nothing reads it any more. */
  readonly unused?: (buf: Buffer) => void;
  /**
   * Stage only base64 `data:` URLs (RFC 2397: `data:[<media type>][;<parameter>]*;base64,<data>`,
   * the OpenAI API's images): the URL's prefix stays in the document and its data is staged.
   * Every other string is left as it is.
   */
  readonly dataUrls?: boolean;
}

/**
 * A placeholder's nonce: random for the process, counted per body. Unique is what it needs to be,
 * not unpredictable: a body whose own text holds it is read whole (end()'s count of it). Eight
 * random bytes a body (randomBytes: randomFillSync, a call into OpenSSL) were 3.4 % of a V1 base64
 * 600 KB request's CPU profile (--cpu-prof).
 */
const NONCE_PREFIX = randomBytes(4).toString('hex');
let nonces = 0;
/** 16 hex digits, as eight random bytes gave: the prefix, then the count. */
const nextNonce = (): string => NONCE_PREFIX + (nonces = (nonces + 1) >>> 0).toString(16).padStart(8, '0');

/** A base64 data: URL's prefix, up to its comma (read from the first bytes of a long string). */
const DATA_URL_PREFIX = /^data:[^,"\\]{0,256};base64,/;

export class Base64Staging {
  /**
   * The body's text as it arrived, in order, less what staging has cut out: the text of a staged
   * string is dropped once decoded (the body is never held whole), and restored from the decoded
   * bytes when the body must be read as sent (original()).
   */
  #pieces: Piece[] = [];
  /** original(), once made. */
  #original: Buffer[] | undefined;
  /** Global offset of the next chunk. */
  #at = 0;
  #mode = Mode.Out;
  /** The last character outside blanks before the current position, outside strings. */
  #lastSig = -1;
  // The current string.
  #strStart = 0;
  #valuePos = false;
  #escaped = false;
  #clean = true;
  /** Staging was tried for this string and left: it is not tried again. */
  #tried = false;
  // Staging.
  #buffer: Buffer | undefined;
  #written = 0;
  /** 0–3 characters of an unfinished group. */
  #left = '';
  /** The staged string's text before this global offset is cut out of #pieces. */
  #cut = 0;
  /** The staged string's final group, as sent. */
  #tail = '';
  /** The staged string held '-' or '_': its text is kept (it could not be restored from its bytes). */
  #urlSafe = false;
  /** The strings staged so far. */
  readonly #staged: Staged[] = [];
  #allocated = 0;
  #decoded = 0;
  /** Set when something made staging pointless (the body is longer than declared). */
  #off = false;

  constructor(private readonly options: StagingOptions) {}

  /** Bytes of the body's text held now (what arrived, less the staged strings' text cut out). */
  get heldBytes(): number {
    return this.#pieces.reduce((n, p) => n + p.text.length, 0);
  }

  /** The body's declared length. */
  get bodyBytes(): number {
    return this.options.bodyBytes;
  }

  push(chunk: Buffer): void {
    const base = this.#at;
    this.#pieces.push({ at: base, text: chunk });
    this.#at += chunk.length;
    if (this.#off) return;
    if (this.#at > this.options.bodyBytes) {
      this.#off = true;
      return;
    }
    this.#scan(chunk, base);
    // What the staged string decoded so far (whole groups) is dropped from the text held.
    // The staged string's text so far is dropped: its whole groups are in the buffer, the rest in #left.
    if (this.#mode === Mode.Stage && !this.#urlSafe && !URL_SAFE.test(this.#left)) this.#cutTo(this.#at);
    // A chunk all of whose text was cut out is freed now rather than at the next collection:
    // no piece is a view of it (one before the staged string may be, one after it a copy).
    if (this.options.freeChunk !== undefined && !this.#holds(chunk, base)) this.options.freeChunk(chunk);
  }

  /**
   * Whether a piece of the text held is a view of `chunk`'s memory. Only the pieces made of this
   * chunk (from its offset `base` on) are looked at: an earlier chunk shares no memory with one
   * that can be freed (the whole of its memory, or a read's own chunk).
   */
  #holds(chunk: Buffer, base: number): boolean {
    const memory = chunk.buffer;
    const pieces = this.#pieces;
    for (let i = pieces.length - 1; i >= 0 && pieces[i]!.at >= base; i--) if (pieces[i]!.text.buffer === memory) return true;
    return false;
  }

  #scan(chunk: Buffer, base: number): void {
    let p = 0;
    const n = chunk.length;
    while (p < n) {
      switch (this.#mode) {
        case Mode.Out: {
          const q = chunk.indexOf(QUOTE, p);
          const end = q === -1 ? n : q;
          const sig = lastSignificant(chunk, p, end);
          if (sig !== -1) this.#lastSig = sig;
          if (q === -1) return;
          this.#mode = Mode.Str;
          this.#strStart = base + q + 1;
          this.#valuePos = this.#lastSig === 0x3a; // ':'
          this.#escaped = false;
          this.#clean = true;
          this.#tried = false;
          p = q + 1;
          break;
        }
        case Mode.Str:
          p = this.#string(chunk, base, p);
          break;
        case Mode.Stage:
          p = this.#stage(chunk, base, p);
          break;
      }
    }
  }

  /** In a string not (yet) staged: finds its end; starts staging once a clean member value is long enough. */
  #string(chunk: Buffer, base: number, p: number): number {
    const n = chunk.length;
    if (this.#clean) {
      // A member value is staged once STAGE_MIN_CHARS of it are clean: only that much is scanned
      // here, the rest is left to the decoder (#stage), which refuses a quote or a backslash.
      const enough = this.#strStart + STAGE_MIN_CHARS - base;
      if (this.#valuePos && !this.#tried && enough <= n) {
        const probe = enough > p ? chunk.subarray(p, enough) : undefined;
        if (probe === undefined || (probe.indexOf(QUOTE) === -1 && probe.indexOf(BACKSLASH) === -1)) {
          const to = Math.max(enough, p);
          this.#startStaging(base + to);
          return to;
        }
      }
      const q = chunk.indexOf(QUOTE, p);
      const bs = chunk.indexOf(BACKSLASH, p);
      if (bs !== -1 && (q === -1 || bs < q)) {
        this.#clean = false;
        return bs;
      }
      if (q !== -1) {
        // The whole string in what has come so far: decoded at once when long enough.
        if (this.#valuePos && !this.#tried && base + q - this.#strStart >= STAGE_MIN_CHARS) {
          this.#startStaging(base + q);
          if (this.#mode === Mode.Stage) this.#feed(chunk, q, q, true);
          this.#finish(base + q);
        }
        return this.#closeString(q + 1);
      }
      if (this.#valuePos && !this.#tried && base + n - this.#strStart >= STAGE_MIN_CHARS) this.#startStaging(base + n);
      return n;
    }
    // Escapes seen: a byte loop to the closing quote (only strings that are not tensors' base64 come here).
    for (; p < n; p++) {
      if (this.#escaped) {
        this.#escaped = false;
        continue;
      }
      const c = chunk[p]!;
      if (c === BACKSLASH) this.#escaped = true;
      else if (c === QUOTE) return this.#closeString(p + 1);
    }
    return n;
  }

  #closeString(next: number): number {
    this.#mode = Mode.Out;
    this.#lastSig = QUOTE;
    return next;
  }

  /** The string's content so far [strStart, to) is clean: a buffer for it, and what came so far decoded. */
  #startStaging(to: number): void {
    if (this.options.dataUrls === true) {
      // Only a data: URL's data is staged: its prefix (all of it in what has come, as the string
      // is long already) stays in the document.
      const prefix = DATA_URL_PREFIX.exec(this.#heldText(this.#strStart, Math.min(this.#strStart + 300, to)));
      if (prefix === null) {
        this.#tried = true;
        return;
      }
      this.#strStart += prefix[0].length;
    }
    // 3/4 of what is left of the body (the rest of it cannot decode to more), never more than one input may hold.
    const capacity = Math.min(Math.ceil((this.options.bodyBytes - this.#strStart) * 3 / 4), this.options.maxInputSizeBytes);
    this.#tried = true;
    if (capacity <= 0) return;
    this.#buffer = this.options.allocate(capacity);
    if (this.options.reused?.(this.#buffer) !== true) this.#allocated++;
    this.#written = 0;
    this.#left = '';
    this.#cut = this.#strStart;
    this.#urlSafe = false;
    this.#mode = Mode.Stage;
    // The content already seen, from the text held (all of it: nothing of this string is cut yet).
    for (const { at, text } of this.#pieces) {
      const s = Math.max(this.#strStart - at, 0);
      const e = Math.min(to - at, text.length);
      if (e > s) this.#feed(text, s, e, false);
      if (this.#mode !== Mode.Stage) return;
    }
  }

  /** The text held of [from, to) (nothing of it cut out), as Latin-1. */
  #heldText(from: number, to: number): string {
    let out = '';
    for (const { at, text } of this.#pieces) {
      const s = Math.max(from - at, 0);
      const e = Math.min(to - at, text.length);
      if (e > s) out += text.toString('latin1', s, e);
    }
    return out;
  }

  /** Drops the staged string's text [#cut, to) from the text held (the last pieces). */
  #cutTo(to: number): void {
    const from = this.#cut;
    if (to <= from) return;
    const pieces = this.#pieces;
    let i = pieces.length;
    while (i > 0 && pieces[i - 1]!.at + pieces[i - 1]!.text.length > from) i--;
    const kept: Piece[] = [];
    for (const p of pieces.slice(i)) {
      const end = p.at + p.text.length;
      if (p.at < from) kept.push({ at: p.at, text: ownIfSmall(p.text.subarray(0, from - p.at)) });
      if (end > to) kept.push(p.at >= to ? p : { at: to, text: ownIfSmall(p.text.subarray(to - p.at)) });
    }
    pieces.splice(i, pieces.length - i, ...kept);
    this.#cut = to;
  }

  /** Staging: decodes up to the closing quote; leaves staging for the byte loop at a backslash. */
  #stage(chunk: Buffer, base: number, p: number): number {
    const n = chunk.length;
    p = this.#decodeAhead(chunk, p);
    if (this.#mode !== Mode.Stage) return p;
    const q = chunk.indexOf(QUOTE, p);
    const bs = chunk.indexOf(BACKSLASH, p);
    if (bs !== -1 && (q === -1 || bs < q)) {
      this.#abandon(false);
      return bs;
    }
    const end = q === -1 ? n : q;
    this.#feed(chunk, p, end, q !== -1);
    if (q === -1) return n;
    this.#finish(base + q);
    return this.#closeString(q + 1);
  }

  /**
   * Decodes the staged string's text from chunk[p] on, whole runs of 64 characters, up to the run
   * that holds its end (the decoder refuses a quote or a backslash): where the scans for them begin.
   * The last 4 characters of the chunk at least are left to #feed (its held-back final group).
   */
  #decodeAhead(chunk: Buffer, p: number): number {
    const n = chunk.length;
    if (this.#left.length > 0) {
      // The group begun in the last chunk, completed, when the character after it is in the
      // alphabet too (so it is not the final group).
      const k = 4 - this.#left.length;
      if (n - p < k + 69) return p;
      const next = this.#left + chunk.toString('latin1', p, p + k + 1);
      if (!GROUP_AND_NEXT.test(next)) return p;
      if (!this.#write(this.#buffer!, next.slice(0, 4), 3)) return p;
      this.#left = '';
      p += k;
    }
    const room = Math.floor((this.#buffer!.length - this.#written) / 3) * 4;
    const chars = Math.min(n - p - 4, room) & ~63;
    if (chars < 64) return p;
    const r = decodeRuns(chunk, p, p + chars, this.#buffer!, this.#written);
    const done = Math.floor(r / 2);
    if (r % 2 !== 0) this.#urlSafe = true;
    this.#written += done / 4 * 3;
    return p + done;
  }

  /** The staged string ended at `end` (its closing quote), fully decoded: it is kept. */
  #finish(end: number): void {
    if (this.#mode !== Mode.Stage) return;
    if (!this.#urlSafe) this.#cutTo(end);
    this.#staged.push({ start: this.#strStart, end, bytes: this.#buffer!.subarray(0, this.#written), cut: this.#cut, tail: this.#tail });
    this.#decoded += this.#written;
    this.#buffer = undefined;
  }

  /** Not clean base64 after all: the string stays in the document as a plain string (its text cut so far restored). */
  #abandon(clean: boolean): void {
    if (this.#cut > this.#strStart) {
      // The string's text so far is its whole groups, re-encoded, then the characters of the unfinished one.
      const sofar = this.#buffer!.toString('base64', 0, this.#written) + this.#left;
      const text = Buffer.from(sofar.slice(0, this.#cut - this.#strStart), 'latin1');
      const i = this.#pieces.findIndex((p) => p.at >= this.#cut);
      this.#pieces.splice(i === -1 ? this.#pieces.length : i, 0, { at: this.#strStart, text });
    }
    this.#cut = this.#strStart;
    const buf = this.#buffer;
    this.#buffer = undefined;
    if (buf !== undefined) this.options.unused?.(buf);
    this.#mode = Mode.Str;
    this.#clean = clean;
  }

  /**
   * Decodes chunk[s, e) of the staged string; `last`: the string ends at e. The final group (1–4
   * characters) is always held back, as it may be short or padded; a held group that turns out
   * not to be the last is decoded like the others (an '=' in it then leaves staging).
   */
  #feed(chunk: Buffer, s: number, e: number, last: boolean): void {
    const buf = this.#buffer!;
    if (this.#left.length > 0 && s < e) {
      const k = Math.min(4 - this.#left.length, e - s);
      this.#left += chunk.toString('latin1', s, s + k);
      s += k;
      if (this.#left.length === 4 && s < e) {
        if (!this.#write(buf, this.#left, 3)) return;
        this.#left = '';
      }
    }
    if (this.#left.length === 0) {
      let whole = Math.floor((e - s) / 4) * 4;
      if (whole === e - s) whole -= 4;
      if (whole > 0) {
        if (!this.#decode(buf, chunk, s, s + whole)) return;
        s += whole;
      }
      this.#left = chunk.toString('latin1', s, e);
    }
    if (!last) return;
    // The final group: 2–4 characters, '=' only at its end.
    const tail = this.#left;
    let chars = tail.length;
    let pads = 0;
    while (pads < 2 && chars > 0 && tail.charCodeAt(chars - 1) === 0x3d) { chars--; pads++; }
    if (chars % 4 === 1 || (pads > 0 && (chars + pads) % 4 !== 0)) {
      this.#abandon(true);
      return;
    }
    const size = decodedSize(chars);
    if (size > 0 && !this.#write(buf, tail, size)) return;
    this.#tail = tail;
    this.#left = '';
  }

  /** Whole groups of text into the buffer (no string made); false (staging left) at a character not in the alphabet. */
  #decode(buf: Buffer, chunk: Buffer, s: number, e: number): boolean {
    const expected = (e - s) / 4 * 3;
    const decoded = this.#written + expected > buf.length ? Decoded.Invalid : decodeText(chunk, s, e, buf, this.#written);
    if (decoded === Decoded.Invalid) {
      this.#abandon(true);
      return false;
    }
    if (decoded === Decoded.UrlSafe) this.#urlSafe = true;
    this.#written += expected;
    return true;
  }

  /** Node's decoder into the buffer; false (staging left) when it wrote less than the text promises. */
  #write(buf: Buffer, text: string, expected: number): boolean {
    if (this.#written + expected > buf.length || buf.write(text, this.#written, expected, 'base64') !== expected) {
      this.#abandon(true);
      return false;
    }
    if (URL_SAFE.test(text)) this.#urlSafe = true;
    this.#written += expected;
    return true;
  }

  /**
   * The staged reading, once the body is complete; undefined when nothing was staged (the body is
   * read as before). `placeholder` gives the text a staged string's content becomes (V2: none).
   */
  end(placeholder?: (nonce: string, i: number) => string): StagedBody | undefined {
    if (this.#off || this.#staged.length === 0 || this.#at !== this.options.bodyBytes) return undefined;
    const nonce = placeholder === undefined ? '' : nextNonce();
    const placeholders = this.#staged.map((_, i) => (placeholder === undefined ? '' : placeholder(nonce, i)));
    let length = this.#at;
    this.#staged.forEach((s, i) => { length += placeholders[i]!.length - (s.end - s.start); });
    const header = Buffer.allocUnsafe(length);
    const staged = new Map<number, Buffer>();
    let o = 0;
    let from = 0; // global offset of the next kept byte
    const copyTo = (to: number): void => {
      for (const { at, text } of this.#pieces) {
        if (at >= to) break;
        const s = Math.max(from - at, 0);
        const e = Math.min(to - at, text.length);
        if (e > s) o += text.copy(header, o, s, e);
      }
      from = to;
    };
    this.#staged.forEach((s, i) => {
      copyTo(s.start);
      staged.set(o - 1, s.bytes);
      o += header.write(placeholders[i]!, o, 'latin1');
      from = s.end;
    });
    copyTo(this.#at);
    // A client's own text that looks like a placeholder would be taken for one: not staged then.
    if (nonce !== '' && countOf(header, nonce) !== placeholders.length) return undefined;
    return { header, staged, placeholders, copied: length + this.#decoded, allocated: this.#allocated + 1 };
  }

  /**
   * The body as it was sent, for the whole-body reading: the text held, with each staged string's
   * text restored from the bytes it decoded to (made once; first called before those bytes are
   * released).
   */
  original(): Buffer[] {
    return (this.#original ??= this.#restore());
  }

  #restore(): Buffer[] {
    if (this.#mode === Mode.Stage) this.#abandon(true);
    const out: Buffer[] = [];
    let p = 0;
    const pieces = this.#pieces;
    const holdTo = (to: number): void => {
      for (; p < pieces.length && pieces[p]!.at < to; p++) out.push(pieces[p]!.text);
    };
    for (const s of this.#staged) {
      if (s.cut === s.start) continue;
      holdTo(s.start);
      const whole = (s.end - s.start - s.tail.length) / 4 * 3;
      out.push(Buffer.from((s.bytes.toString('base64', 0, whole) + s.tail).slice(0, s.cut - s.start), 'latin1'));
    }
    holdTo(Infinity);
    return out;
  }
}

/** The last non-blank byte of b[s, e), or -1. */
function lastSignificant(b: Buffer, s: number, e: number): number {
  for (let i = e - 1; i >= s; i--) {
    const c = b[i]!;
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return c;
  }
  return -1;
}

function countOf(b: Buffer, s: string): number {
  let n = 0;
  for (let i = b.indexOf(s); i !== -1; i = b.indexOf(s, i + 1)) n++;
  return n;
}

/**
 * The document's text around a staged string, kept: copied when it is a small part of its read
 * (under an eighth), so the read it came from is freed with the string's text (push's freeChunk)
 * instead of kept whole for a few bytes of JSON — a fast-path read is up to 1 MiB (buffers/reads.ts).
 */
function ownIfSmall(text: Buffer): Buffer {
  return text.length * 8 < text.buffer.byteLength ? Buffer.from(text) : text;
}
