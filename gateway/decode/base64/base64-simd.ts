// Base64 decoded from bytes to bytes, with no string in between. Node's only base64 decoder takes a
// string (`buf.write(str, 'base64')`), so every run of base64 text in a body had to become a
// Latin-1 string on the JS heap first: under base64 uploads those strings were nine tenths of the
// bytes the gateway allocated, a young-generation collection per request (bench/RESULTS.md
// "base64 at binary's cost"). Three decoders of one contract, the first present chosen at load:
// - native (gateway/native/base64.c, AVX-512 VBMI or AVX2), built by `npm run build` where there is
//   a C compiler: it decodes the text where it lies (the socket's read buffers) into its target, no copy;
// - a small WebAssembly SIMD decoder, assembled here from its instructions (no toolchain: the
//   module's bytes are built when this file loads), working in a fixed 128 KiB memory: text is
//   copied in, 16 characters become 12 bytes per step, the bytes are copied out to their target.
//   Two kernels: `standard`, for text of the standard alphabet alone (the usual case, with relaxed
//   SIMD's byte shuffle and multiply-add where the engine has them), and `decode`, for both
//   alphabets, which reruns a run the first one refused;
// - where WebAssembly SIMD is missing, Node's decoder, through a string.
// TENSORGATE_BASE64_DECODER=wasm or =string chooses one below the native one (to rule a decoder
// out, and for the tests, which run each); =avx2, the native decoder's AVX2 kernel where the CPU
// has a better one.
//
// It decodes clean text only — both alphabets (RFC 4648 §4 and §5, mixed, as Node accepts them), no
// padding, no blank — and reports whether every character was in the alphabet; the callers keep
// their own handling of padding, escapes and blanks, and name an invalid character on their slow
// paths.
import { join, resolve } from 'node:path';
import { assemble, I32, sleb, uleb, V128, type WasmFunction } from '../../wasm/assembler';

/** Bytes that `chars` base64 alphabet characters (no padding; chars % 4 !== 1) decode to. */
export const decodedSize = (chars: number): number => Math.floor(chars / 4) * 3 + Math.max(0, (chars % 4) - 1);

/** Characters the module takes per call: its input area; the output area follows. */
export const SIMD_RUN_CHARS = 64 * 1024;
const OUT = SIMD_RUN_CHARS;

// ---- the two functions below, in the instructions they use (wasm/assembler.ts writes the module)
const op = {
  block: 0x02, loop: 0x03, end: 0x0b, br: 0x0c, brIf: 0x0d, localGet: 0x20, localSet: 0x21, localTee: 0x22,
  i32Const: 0x41, i32GeU: 0x4f, i32Add: 0x6a, i32Or: 0x72, i32Shl: 0x74,
} as const;
/** SIMD instructions: 0xfd and the LEB128 of these (WebAssembly SIMD proposal, final opcodes). */
const simd = {
  load: 0x00, store: 0x0b, const: 0x0c, shuffle: 0x0d, swizzle: 0x0e, eq: 0x23, and: 0x4e, or: 0x50, anyTrue: 0x53,
  i8ShrU: 0x6d, add: 0x6e, sub: 0x71, i16Shl: 0x8b, i16ShrU: 0x8d, dot: 0xba,
  // Relaxed SIMD (its proposal's final opcodes): both are deterministic on the operands below —
  // every shuffle index is 0–15, and the multiply-add's second operand is 7-bit (0x40, 0x01).
  relaxedSwizzle: 0x100, relaxedDot: 0x112,
} as const;

const v = (code: number): number[] => [0xfd, ...uleb(code)];
const splat = (byte: number): number[] => [...v(simd.const), ...new Array<number>(16).fill(byte)];
const get = (l: number): number[] => [op.localGet, l];
const set = (l: number): number[] => [op.localSet, l];
const tee = (l: number): number[] => [op.localTee, l];
const i32 = (n: number): number[] => [op.i32Const, ...sleb(n)];

// decode(n: i32) -> i32: n characters (a multiple of 64) at [0, n) to n / 16 * 12 bytes at OUT
// (each step stores 16 bytes: OUT needs 4 spare); returns bit 0 when a character was not in
// either alphabet, bit 1 when a character was '-' or '_' (the alphabet of RFC 4648 §5).
// Per 16 characters (four such steps per turn of the loop), with nibble tables (16-lane swizzles):
// - '-' becomes '+' (both are 62), so that each high nibble names one range but for the '/'–'_' row;
// - a character is invalid when LO[its low nibble] & HI[its high nibble] is not zero: HI gives each
//   high nibble a bit (0x01 for the rows with no alphabet character), LO the rows its low nibble is
//   invalid in;
// - its value is the character plus ROLL[high nibble, + 8 when the low nibble is 0xF] ('/', '_',
//   'O', 'o' are the ones that need their own offset).
const N = 0; const I = 1; const O = 2; // i32 locals (n is the parameter)
const ERR = 3; const X = 4; const HI = 5; const LO = 6; const VAL = 7; // v128 locals
// Constants, set once before the loop (V8 rebuilds a v128.const in the loop at every use).
const DASH = 8; const TWO = 9; const NIBBLE = 10; const LO_BITS = 11; const HI_BITS = 12; const ROLL = 13; const EIGHT = 14;
const LOW_BYTE = 15; const DOT = 16; const UNDERSCORE = 17;
/** Lanes that held '-' in this step; lanes that held '-' or '_' so far. */
const URL_SEEN = 18; const URL = 19;
/** Each 32-bit lane's 3 bytes, big-endian, to the front: a swizzle by a local (V8 rebuilds a shuffle mask per use). */
const PACK = 20;
const PACK_BYTES = [2, 1, 0, 6, 5, 4, 10, 9, 8, 14, 13, 12, 3, 7, 11, 15];
const bytes16 = (f: (i: number) => number): number[] => [...v(simd.const), ...Array.from({ length: 16 }, (_, i) => f(i) & 0xff)];
const constants: [number, number[]][] = [
  [DASH, splat(0x2d)], [UNDERSCORE, splat(0x5f)], [TWO, splat(2)], [NIBBLE, splat(0x0f)], [EIGHT, splat(8)],
  [HI_BITS, bytes16((h) => (h >= 2 && h <= 7 ? 1 << (h - 1) : 0x01))],
  [LO_BITS, bytes16((l) => 0x01
    | (l !== 0xb && l !== 0xf ? 0x02 : 0) // row 2: '+' '/'
    | (l > 9 ? 0x04 : 0) // row 3: '0'–'9'
    | (l === 0 ? 0x08 | 0x20 : 0) // rows 4 and 6: 'A'–'O', 'a'–'o'
    | (l > 0xa && l !== 0xf ? 0x10 : 0) // row 5: 'P'–'Z', '_'
    | (l > 0xa ? 0x40 : 0))], // row 7: 'p'–'z'
  [ROLL, bytes16((i) => ({ 2: 19, 3: 4, 4: -65, 5: -65, 6: -71, 7: -71, 10: 16, 12: -65, 13: -32, 14: -71 } as Record<number, number>)[i] ?? 0)],
  [LOW_BYTE, bytes16((i) => (i % 2 === 0 ? 0xff : 0))],
  // i32x4.dot_i16x8_s: the 16-bit lanes (a<<6|b, c<<6|d) of each 32-bit lane → (a<<6|b) * 4096 + (c<<6|d).
  [DOT, bytes16((i) => [0x00, 0x10, 0x01, 0x00][i % 4]!)],
  [PACK, bytes16((i) => PACK_BYTES[i]!)],
];
/** One 16-character step, the k-th of the loop's four: 12 bytes out (16 stored). */
const step = (k: number): number[] => [
  ...get(I), ...v(simd.load), 0, ...uleb(16 * k), ...tee(X),
  ...get(X), ...get(DASH), ...v(simd.eq), ...tee(URL_SEEN), ...get(TWO), ...v(simd.and), ...v(simd.sub), ...tee(X),
  ...i32(4), ...v(simd.i16ShrU), ...get(NIBBLE), ...v(simd.and), ...set(HI),
  ...get(X), ...get(NIBBLE), ...v(simd.and), ...set(LO),
  ...get(LO_BITS), ...get(LO), ...v(simd.swizzle), ...get(HI_BITS), ...get(HI), ...v(simd.swizzle), ...v(simd.and), ...get(ERR), ...v(simd.or), ...set(ERR),
  ...get(URL), ...get(URL_SEEN), ...v(simd.or), ...get(X), ...get(UNDERSCORE), ...v(simd.eq), ...v(simd.or), ...set(URL),
  ...get(X), ...get(ROLL), ...get(HI), ...get(LO), ...get(NIBBLE), ...v(simd.eq), ...get(EIGHT), ...v(simd.and), ...v(simd.or),
  ...v(simd.swizzle), ...v(simd.add), ...tee(VAL),
  // 4 sextets a b c d (one per byte of a 32-bit lane) → a<<18 | b<<12 | c<<6 | d, then its 3 bytes big-endian.
  ...get(LOW_BYTE), ...v(simd.and), ...i32(6), ...v(simd.i16Shl), ...get(VAL), ...i32(8), ...v(simd.i16ShrU), ...v(simd.or),
  ...get(DOT), ...v(simd.dot), ...get(PACK), ...v(simd.swizzle),
  ...set(VAL), ...get(O), ...get(VAL), ...v(simd.store), 0, ...uleb(12 * k),
];
/**
 * A kernel's body: its v128 locals (the constants set once, before the loop), then a loop of four
 * 16-character `step`s per 64 characters, then `result` (the i32 it returns).
 */
const kernel = (consts: [number, number[]][], step: (k: number) => number[], result: number[]): number[] => [
  ...consts.flatMap(([local, value]) => [...value, ...set(local)]),
  ...i32(OUT), ...set(O),
  op.block, 0x40, op.loop, 0x40,
  ...get(I), ...get(N), op.i32GeU, op.brIf, 1,
  ...[0, 1, 2, 3].flatMap(step),
  ...get(I), ...i32(64), op.i32Add, ...set(I),
  ...get(O), ...i32(48), op.i32Add, ...set(O),
  op.br, 0,
  op.end, op.end,
  ...result,
];
const body = kernel(constants, step, [...get(ERR), ...v(simd.anyTrue), ...get(URL), ...v(simd.anyTrue), ...i32(1), op.i32Shl, op.i32Or]);

// standard(n: i32) -> i32: decode's work for text of the standard alphabet alone (RFC 4648 §4);
// returns 1 when a character was not in it ('-' and '_' among them: decode then reruns the run).
// Per 16 characters, as decode but shorter:
// - no '-' to fold: the nibble tables refuse '-' and '_';
// - the offset is ROLL[high nibble - (character === '/')] ('/' alone shares its row with '+');
// - the packing is one multiply-add of byte pairs (i16x8.relaxed_dot_i8x16_i7x16_s: a<<6 | b in
//   each 16-bit lane), then decode's dot and shuffle.
const S_ERR = 3; const S_X = 4; const S_HI = 5; const S_LO = 6; const S_VAL = 7; // v128 locals, then the constants:
const S_NIBBLE = 8; const S_LO_BITS = 9; const S_HI_BITS = 10; const S_ROLL = 11; const S_SLASH = 12; const S_MERGE = 13; const S_DOT = 14;
const S_PACK = 15;
const standardConstants: [number, number[]][] = [
  [S_NIBBLE, splat(0x0f)], [S_SLASH, splat(0x2f)],
  [S_HI_BITS, bytes16((h) => (h >= 2 && h <= 7 ? 1 << (h - 1) : 0x01))],
  [S_LO_BITS, bytes16((l) => 0x01
    | (l !== 0xb && l !== 0xf ? 0x02 : 0) // row 2: '+' '/'
    | (l > 9 ? 0x04 : 0) // row 3: '0'–'9'
    | (l === 0 ? 0x08 | 0x20 : 0) // rows 4 and 6: 'A'–'O', 'a'–'o'
    | (l > 0xa ? 0x10 | 0x40 : 0))], // rows 5 and 7: 'P'–'Z', 'p'–'z'
  [S_ROLL, bytes16((i) => ({ 1: 16, 2: 19, 3: 4, 4: -65, 5: -65, 6: -71, 7: -71 } as Record<number, number>)[i] ?? 0)],
  [S_MERGE, bytes16((i) => (i % 2 === 0 ? 0x40 : 0x01))],
  [S_DOT, bytes16((i) => [0x00, 0x10, 0x01, 0x00][i % 4]!)],
  [S_PACK, bytes16((i) => PACK_BYTES[i]!)],
];
const standardStep = (k: number): number[] => [
  ...get(I), ...v(simd.load), 0, ...uleb(16 * k), ...tee(S_X),
  ...i32(4), ...v(simd.i16ShrU), ...get(S_NIBBLE), ...v(simd.and), ...set(S_HI),
  ...get(S_X), ...get(S_NIBBLE), ...v(simd.and), ...set(S_LO),
  ...get(S_LO_BITS), ...get(S_LO), ...v(simd.relaxedSwizzle), ...get(S_HI_BITS), ...get(S_HI), ...v(simd.relaxedSwizzle), ...v(simd.and),
  ...get(S_ERR), ...v(simd.or), ...set(S_ERR),
  ...get(S_X), ...get(S_ROLL), ...get(S_X), ...get(S_SLASH), ...v(simd.eq), ...get(S_HI), ...v(simd.add), ...v(simd.relaxedSwizzle), ...v(simd.add),
  ...get(S_MERGE), ...v(simd.relaxedDot), ...get(S_DOT), ...v(simd.dot), ...get(S_PACK), ...v(simd.relaxedSwizzle),
  ...set(S_VAL), ...get(O), ...get(S_VAL), ...v(simd.store), 0, ...uleb(12 * k),
];
const standardBody = kernel(standardConstants, standardStep, [...get(S_ERR), ...v(simd.anyTrue)]);

/** A kernel of (n: i32) -> i32 with two i32 locals (after n), then `v128Locals` v128 ones. */
const fn = (body: number[], v128Locals: number, name: string): WasmFunction =>
  ({ params: [I32], results: [I32], locals: [I32, I32, ...new Array<number>(v128Locals).fill(V128)], body, export: name });

/**
 * The module: decode, and standard when `relaxed` (an engine without relaxed SIMD refuses it).
 * 2 pages: 64 KiB in, 48 KiB (+ 16) out.
 */
const moduleBytes = (relaxed: boolean): Uint8Array =>
  assemble([fn(body, 18, 'decode'), ...(relaxed ? [fn(standardBody, 13, 'standard')] : [])], 2);

/** The part of the WebAssembly JS API used here (the project's TypeScript lib has no DOM types). */
declare const WebAssembly: {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => {
    readonly exports: { decode: (n: number) => number; standard?: (n: number) => number; memory: { buffer: ArrayBuffer } };
  };
};

interface Simd {
  readonly decode: (n: number) => number;
  /** decode for the standard alphabet alone: nonzero when decode must rerun the run. */
  readonly standard: (n: number) => number;
  readonly memory: Buffer;
}

/** Refuses every run: decode does them all (an engine without relaxed SIMD). */
const refuse = (): number => 1;

function instantiate(): Simd | undefined {
  const bytes = [moduleBytes(true), moduleBytes(false)].find((m) => WebAssembly.validate(m));
  if (bytes === undefined) return undefined;
  const { exports } = new WebAssembly.Instance(new WebAssembly.Module(bytes));
  return { decode: exports.decode, standard: exports.standard ?? refuse, memory: Buffer.from(exports.memory.buffer) };
}

/** The decoder chosen below the native one (the file's top says why). */
const CHOSEN = process.env.TENSORGATE_BASE64_DECODER;

const wasm = CHOSEN === 'string' ? undefined : instantiate();

/**
 * The compiled native decoder: next to this file's directory in dist/ and, when this file runs from
 * its TypeScript source (the test runner), the one `npm run build` wrote (tests build first).
 */
export const NATIVE_BASE64_FILE = __filename.endsWith('.ts')
  ? resolve(__dirname, '../../../dist/gateway/native/base64.node')
  : join(__dirname, '../../native/base64.node');

type RunsDecoder = (src: Uint8Array, s: number, e: number, target: Uint8Array, at: number) => number;

/** gateway/native/base64.c's exports: the CPU's best kernel, its name, and the AVX2 kernel where it is not the best. */
interface NativeDecoder {
  readonly decodeRuns?: RunsDecoder;
  readonly kernel?: 'avx512vbmi' | 'avx2';
  readonly decodeRunsAvx2?: RunsDecoder;
}

/** gateway/native/base64.c's kernel, or undefined: not built, refused by the CPU (no AVX2), or not chosen. */
function loadNative(): { readonly decodeRuns: RunsDecoder; readonly kernel: 'avx512vbmi' | 'avx2' } | undefined {
  if (CHOSEN !== undefined && CHOSEN !== 'native' && CHOSEN !== 'avx2') return undefined;
  const module = { exports: {} as NativeDecoder };
  try {
    process.dlopen(module, NATIVE_BASE64_FILE);
  } catch {
    return undefined; // not built here (build-native.js said why)
  }
  const { decodeRuns, kernel, decodeRunsAvx2 } = module.exports;
  if (decodeRuns === undefined || kernel === undefined) return undefined;
  if (CHOSEN === 'avx2' && decodeRunsAvx2 !== undefined) return { decodeRuns: decodeRunsAvx2, kernel: 'avx2' };
  return { decodeRuns, kernel };
}

const loaded = wasm === undefined ? undefined : loadNative();
const native = loaded?.decodeRuns;

/** The native decoder's kernel, when it is in use. */
export const nativeKernel = loaded?.kernel;

/** Which decoder is in use: the native one, WebAssembly's, or Node's through strings. */
export const base64Decoder: 'native' | 'wasm' | 'string' = native !== undefined ? 'native' : wasm !== undefined ? 'wasm' : 'string';

/** A SIMD decoder (native or WebAssembly) is in use (false: Node's, through strings). */
export const simdBase64 = wasm !== undefined;

/** The WebAssembly decoder's standard-alphabet kernel is there (the engine has relaxed SIMD). */
export const relaxedBase64 = wasm !== undefined && wasm.standard !== refuse;

/** Sextet of each alphabet character (both alphabets), -1 for any other byte: the last < 64 characters. */
const SEXTET = new Int8Array(256).fill(-1);
'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.split('').forEach((c, i) => { SEXTET[c.charCodeAt(0)] = i; });
SEXTET[0x2d] = 62; // '-'
SEXTET[0x5f] = 63; // '_'

/** decodeText's answers: the text was all standard alphabet, held '-' or '_', or held a character of neither. */
export const enum Decoded { Standard = 0, UrlSafe = 1, Invalid = -1 }

/**
 * Decodes src[s, e) — alphabet characters only, no padding, a length other than 4k + 1 — into
 * target at `at` (decodedSize(e - s) bytes; target must have room), as Node would: the bits of a
 * final partial group past its last whole byte are dropped. Invalid (with some of target written)
 * when a character is not in either alphabet; UrlSafe when '-' or '_' were among them.
 */
export function decodeText(src: Uint8Array, s: number, e: number, target: Uint8Array, at: number): Decoded {
  if (wasm === undefined) {
    if ((e - s) % 4 === 1) return Decoded.Invalid; // a lone final character, which Node would drop
    const n = decodedSize(e - s);
    const text = Buffer.from(src.buffer, src.byteOffset, src.byteLength).toString('latin1', s, e);
    if (Buffer.from(target.buffer, target.byteOffset, target.byteLength).write(text, at, n, 'base64') !== n) return Decoded.Invalid;
    return /[-_]/.test(text) ? Decoded.UrlSafe : Decoded.Standard;
  }
  const whole = (e - s) & ~63;
  const r = decodeRuns(src, s, s + whole, target, at);
  if (Math.floor(r / 2) !== whole) return Decoded.Invalid;
  let url = r % 2;
  s += whole;
  at += whole / 4 * 3;
  for (; s < e; s += 4, at += 3) {
    const left = e - s;
    const a = SEXTET[src[s]!]!; const b = SEXTET[src[s + 1]!]!;
    const c = left > 2 ? SEXTET[src[s + 2]!]! : 0; const d = left > 3 ? SEXTET[src[s + 3]!]! : 0;
    if ((a | b | c | d) < 0 || left === 1) return Decoded.Invalid;
    for (let i = s; i < s + 4 && i < e; i++) if (src[i] === 0x2d || src[i] === 0x5f) url = 1;
    const w = (a << 18) | (b << 12) | (c << 6) | d;
    target[at] = w >>> 16;
    if (left > 2) target[at + 1] = (w >>> 8) & 0xff;
    if (left > 3) target[at + 2] = w & 0xff;
  }
  return url !== 0 ? Decoded.UrlSafe : Decoded.Standard;
}

/**
 * src[s, e) (a multiple of 64 characters) decoded into target at `at`, up to the first run of 64
 * characters that holds a character in neither alphabet: the characters decoded (a multiple of 64)
 * times two, plus one when '-' or '_' were among them. The decoder is the scan: a caller that does
 * not know where its text ends (a JSON string's closing quote, a backslash) decodes ahead. The
 * native decoder stops exactly there. WebAssembly's works 64 KiB at a time: a refused call's text,
 * already in the module's memory, is decoded again up to the 64 characters that hold the first
 * quote or backslash, and a call whose text holds another character of neither alphabet (before
 * any quote) decodes none of it. Nothing is decoded through strings.
 */
export function decodeRuns(src: Uint8Array, s: number, e: number, target: Uint8Array, at: number): number {
  if (native !== undefined) return native(src, s, e, target, at);
  if (wasm === undefined) return 0;
  const mem = wasm.memory;
  let url = 0;
  let done = 0;
  while (s < e) {
    let n = Math.min(e - s, SIMD_RUN_CHARS);
    mem.set(src.subarray(s, s + n), 0);
    let r = wasm.standard(n);
    let last = false;
    if (r !== 0) {
      // Refused: the URL-safe alphabet (the two-alphabet kernel then), a character of neither, or
      // a string's end or escape (its 64-character runs before that decoded, and no more).
      const stop = stringStop(mem, n);
      if (stop === -1) r = wasm.decode(n);
      else {
        last = true;
        n = stop & ~63;
        r = n === 0 || wasm.standard(n) === 0 ? 0 : wasm.decode(n);
      }
    }
    if ((r & 1) !== 0) break;
    url |= r;
    const bytes = n / 4 * 3;
    target.set(mem.subarray(OUT, OUT + bytes), at);
    s += n;
    at += bytes;
    done += n;
    if (last) break;
  }
  return done * 2 + (url === 0 ? 0 : 1);
}

/** The first quote or backslash in the module's first n characters (a JSON string's end or escape), or -1. */
function stringStop(mem: Buffer, n: number): number {
  const run = mem.subarray(0, n);
  const q = run.indexOf(0x22);
  const b = (q === -1 ? run : run.subarray(0, q)).indexOf(0x5c);
  return b !== -1 ? b : q;
}

/** decodeText, true unless a character was in neither alphabet. */
export const decodeClean = (src: Uint8Array, s: number, e: number, target: Uint8Array, at: number): boolean =>
  decodeText(src, s, e, target, at) !== Decoded.Invalid;
