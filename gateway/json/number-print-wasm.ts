// FP32 and FP64 tensors printed as Triton prints them, in WebAssembly: the same Grisu2 and layout
// as json/number-print.ts (that file explains both, and what of rapidjson they reproduce), with
// native 64-bit integers where the JavaScript holds each 64-bit quantity as two doubles. An answer
// of 1,000 FP32 values is printed by one call; JSON answers spent most of their own CPU on this
// (bench/RESULTS.md, "Performance IV, fifteenth pass"). Every value prints byte for byte what
// number-print.ts prints (test/unit/json/number-print-wasm.test.ts compares them on millions of
// values); where WebAssembly is missing, number-print.ts does the work alone.
//
// The C it follows (rapidjson internal/diyfp.h, internal/dtoa.h as Triton pins it) computes in
// uint64_t; WebAssembly's i64 wraps the same way, so every step is the C's own arithmetic.
import { cachedPowers, MAX_TRITON_DOUBLE_LENGTH } from './number-print';
import { assemble, type Code, ctl, F64, f64, I32, i32, I64, i64, local, type WasmFunction } from '../wasm/assembler';

// ---- memory: the table, the digits, the values in, the text out
/** Per boundary exponent (cachedPowers' row t, at 16 t): the power's significand (i64), K (i32), the shift (i32). */
const TABLE = 0;
/** 10^0 … 10^9 as i64. */
const P10 = TABLE + cachedPowers.rows * 16;
/** The digits of one value, as ASCII (32 bytes: copied 32 at a time). */
const DIG = P10 + 80;
/** Values per call. */
export const FLOATS_PER_CALL = 4096;
const IN = 0x8800;
const OUT = IN + FLOATS_PER_CALL * 8;
/** A value's text is copied 32 bytes at a time: its last may write that far past its end. */
const OUT_SIZE = FLOATS_PER_CALL * (MAX_TRITON_DOUBLE_LENGTH + 1) + 64;
const PAGES = Math.ceil((OUT + OUT_SIZE) / 65536);
if (DIG + 64 > IN) throw new Error('number-print-wasm: the table overlaps the input area');

// ---- one(x: f64, at: i32) -> i32: x's text at `at`, returns its end
const X = 0; const AT = 1; // parameters
let nextLocal = 2;
const oneLocals: number[] = [];
const declare = (type: number): number => { oneLocals.push(type); return nextLocal++; };
const B = declare(I64); const F = declare(I64); const V = declare(I64); const P = declare(I64); const M = declare(I64);
const CH = declare(I64); const CL = declare(I64); const AH = declare(I64); const AL = declare(I64);
const AD = declare(I64); const BC = declare(I64); const TMP = declare(I64);
const W = declare(I64); const WP = declare(I64); const WM = declare(I64); const DELTA = declare(I64); const WPW = declare(I64);
const SS = declare(I64); const MASK = declare(I64); const P2 = declare(I64); const REST = declare(I64); const TEN = declare(I64);
const BIASED = declare(I32); const E = declare(I32); const POW2 = declare(I32); const SH = declare(I32); const ROW = declare(I32);
const K = declare(I32); const P1 = declare(I32); const KAPPA = declare(I32); const N = declare(I32); const D = declare(I32);
const POW = declare(I32); const KK = declare(I32); const EXP = declare(I32);

const get = local.get;
const set = local.set;
const c32 = i32.const;
const c64 = (n: number | bigint): Code => i64.const(BigInt(n));
const M32 = c64(0xffffffffn);
/** ASCII bytes as a little-endian integer constant (i32 for up to 4 bytes, i64 for up to 8). */
const ascii32 = (s: string): Code => c32(Buffer.from(s.padEnd(4, '\0'), 'latin1').readInt32LE(0));
const ascii64 = (s: string): Code => i64.const(Buffer.from(s.padEnd(8, '\0'), 'latin1').readBigInt64LE(0));
const inc = (l: number, by: Code = c32(1)): Code => set(l, i32.add(get(l), by));
/** The 32 bytes at src to dst (four i64). */
const copy32 = (dst: Code, src: Code): Code => [0, 8, 16, 24].flatMap((o) => i64.store(dst, i64.load(src, o), o));
/** A digit's ASCII at `at`: '0' + d. */
const digitAt = (at: Code, d: Code, offset = 0): Code => i32.store8(at, i32.add(c32(0x30), d), offset);

/**
 * out = the high 64 bits of a × (CH:CL), plus one when bit 63 of the low half is set (DiyFp's
 * operator* without __int128: the same result as with it).
 */
const mulRounded = (a: number, out: number): Code => [
  ...set(AH, i64.shrU(get(a), c64(32))), ...set(AL, i64.and(get(a), M32)),
  ...set(AD, i64.mul(get(AH), get(CL))), ...set(BC, i64.mul(get(AL), get(CH))),
  ...set(TMP, i64.add(i64.add(i64.add(i64.shrU(i64.mul(get(AL), get(CL)), c64(32)), i64.and(get(AD), M32)), i64.and(get(BC), M32)), c64(0x80000000))),
  ...set(out, i64.add(i64.add(i64.add(i64.mul(get(AH), get(CH)), i64.shrU(get(AD), c64(32))), i64.shrU(get(BC), c64(32))), i64.shrU(get(TMP), c64(32)))),
];

const oneBody: Code = [
  ...set(B, i64.reinterpret(get(X))),
  ...set(BIASED, i32.and(i32.wrap(i64.shrU(get(B), c64(52))), c32(0x7ff))),
  ...set(F, i64.and(get(B), c64(0xfffffffffffffn))),
  // rapidjson's Writer::Double with kWriteNanAndInfFlag: NaN without a sign, ±Infinity, ±0.0.
  ...ctl.if(i32.and(i32.eq(get(BIASED), c32(0x7ff)), i64.ne(get(F), c64(0))), [
    i32.store(get(AT), ascii32('NaN')), ctl.return(i32.add(get(AT), c32(3))),
  ]),
  ...ctl.if(i64.ltS(get(B), c64(0)), [i32.store8(get(AT), c32(0x2d)), inc(AT)]),
  ...ctl.if(i32.eq(get(BIASED), c32(0x7ff)), [i64.store(get(AT), ascii64('Infinity')), ctl.return(i32.add(get(AT), c32(8)))]),
  ...ctl.if(i64.eqz(i64.and(get(B), c64(0x7fffffffffffffffn))), [i32.store(get(AT), ascii32('0.0')), ctl.return(i32.add(get(AT), c32(3)))]),

  // v = f × 2^e, normalised so bit 63 is set; the boundaries m+ = v + ulp/2, m- = v - ulp/2 (ulp/4
  // when f is the hidden bit alone) at the same exponent; the cached power from their exponent.
  ...ctl.if(get(BIASED), [
    set(E, i32.sub(get(BIASED), c32(1075))), set(POW2, i64.eqz(get(F))), set(F, i64.or(get(F), c64(1n << 52n))),
  ], [
    set(E, c32(-1074)), set(POW2, c32(0)),
  ]),
  ...set(SH, i32.wrap(i64.clz(get(F)))),
  ...set(V, i64.shl(get(F), i64.extendU(get(SH)))),
  ...set(P, i64.add(get(V), i64.shl(c64(1), i64.extendU(i32.sub(get(SH), c32(1)))))),
  ...set(M, i64.sub(get(V), i64.shl(c64(1), i64.extendU(i32.sub(get(SH), i32.add(c32(1), get(POW2))))))),
  ...set(ROW, i32.shl(i32.sub(i32.sub(get(E), get(SH)), c32(cachedPowers.minE)), c32(4))),
  ...set(TMP, i64.load(get(ROW), TABLE)),
  ...set(CH, i64.shrU(get(TMP), c64(32))), ...set(CL, i64.and(get(TMP), M32)),
  ...set(K, i32.load(get(ROW), TABLE + 8)),
  ...set(SS, i64.extendU(i32.load(get(ROW), TABLE + 12))),
  ...mulRounded(V, W),
  ...mulRounded(P, WP), ...set(WP, i64.sub(get(WP), c64(1))),
  ...mulRounded(M, WM), ...set(WM, i64.add(get(WM), c64(1))),
  ...set(DELTA, i64.sub(get(WP), get(WM))),
  ...set(WPW, i64.sub(get(WP), get(W))),

  // DigitGen: p1 (the integral part of Wp) digit by digit, then the fraction p2 times ten at a time,
  // until the rest is within delta; each digit written unless it is a leading zero.
  ...set(P1, i32.wrap(i64.shrU(get(WP), get(SS)))),
  ...set(MASK, i64.sub(i64.shl(c64(1), get(SS)), c64(1))),
  ...set(P2, i64.and(get(WP), get(MASK))),
  // CountDecimalDigit32: 1 to 9.
  ...set(KAPPA, [1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8].reduce<Code>((acc, p) => i32.add(acc, i32.geU(get(P1), c32(p))), c32(1))),
  ...set(N, c32(0)),
  ...ctl.block( // after it: GrisuRound on REST, TEN, WPW, DELTA
    ctl.block( // after it: the fraction
      // The usual case: p2 > delta, so no integral digit can stop generation (its rest is at least
      // p2), and p1 < 10^9 (CountDecimalDigit32 counts 9 digits at most): p1's digits are all
      // written, from the last, by divisions by the constant 10 (no division by a power from the
      // table per digit). p1 >= 2^(62 - s) >= 3: its first digit is not 0.
      ctl.if(i32.and(i64.gtU(get(P2), get(DELTA)), i32.ltU(get(P1), c32(1e9))), [
        set(N, get(KAPPA)),
        ctl.loop(
          set(KAPPA, i32.sub(get(KAPPA), c32(1))),
          set(D, i32.divU(get(P1), c32(10))),
          digitAt(get(KAPPA), i32.sub(get(P1), i32.mul(get(D), c32(10))), DIG),
          set(P1, get(D)),
          ctl.brIf(0, get(KAPPA)),
        ),
        ctl.br(1),
      ]),
      ctl.loop(
        ctl.brIf(1, i32.eqz(get(KAPPA))),
        set(POW, i32.wrap(i64.load(i32.shl(i32.sub(get(KAPPA), c32(1)), c32(3)), P10))),
        set(D, i32.divU(get(P1), get(POW))),
        set(P1, i32.sub(get(P1), i32.mul(get(D), get(POW)))),
        ctl.if(i32.or(get(D), get(N)), [digitAt(get(N), get(D), DIG), inc(N)]),
        set(KAPPA, i32.sub(get(KAPPA), c32(1))),
        set(TMP, i64.add(i64.shl(i64.extendU(get(P1)), get(SS)), get(P2))),
        ctl.if(i64.leU(get(TMP), get(DELTA)), [
          inc(K, get(KAPPA)),
          set(REST, get(TMP)),
          set(TEN, i64.shl(i64.load(i32.shl(get(KAPPA), c32(3)), P10), get(SS))),
          ctl.br(3),
        ]),
        ctl.br(0),
      ),
    ),
    // The fraction. p1's first digit was written (it is not 0), so every digit of it is.
    ctl.loop(
      set(P2, i64.mul(get(P2), c64(10))),
      set(DELTA, i64.mul(get(DELTA), c64(10))),
      digitAt(get(N), i32.wrap(i64.shrU(get(P2), get(SS))), DIG), inc(N),
      set(P2, i64.and(get(P2), get(MASK))),
      set(KAPPA, i32.sub(get(KAPPA), c32(1))),
      ctl.brIf(0, i64.geU(get(P2), get(DELTA))),
    ),
    inc(K, get(KAPPA)),
    set(REST, get(P2)),
    set(TEN, i64.shl(c64(1), get(SS))),
    // Triton's rapidjson scales wp_w by kPow10[-kappa] only while -kappa < 9, by 0 beyond (which
    // makes GrisuRound a no-op): number-print.ts, the fractional digits.
    ctl.if(i32.ltU(i32.sub(c32(0), get(KAPPA)), c32(9)), [
      set(WPW, i64.mul(get(WPW), i64.load(i32.shl(i32.sub(c32(0), get(KAPPA)), c32(3)), P10))),
    ], [
      set(WPW, c64(0)),
    ]),
  ),
  // GrisuRound: the last digit down while that brings it closer to W and keeps it inside the interval.
  ...ctl.block(ctl.loop(
    ctl.brIf(1, i32.eqz(i64.ltU(get(REST), get(WPW)))),
    ctl.brIf(1, i64.ltU(i64.sub(get(DELTA), get(REST)), get(TEN))),
    ctl.brIf(1, i32.eqz(i32.or(
      i64.ltU(i64.add(get(REST), get(TEN)), get(WPW)),
      i64.gtU(i64.sub(get(WPW), get(REST)), i64.sub(i64.add(get(REST), get(TEN)), get(WPW)))))),
    i32.store8(get(N), i32.sub(i32.load8(get(N), DIG - 1), c32(1)), DIG - 1),
    set(REST, i64.add(get(REST), get(TEN))),
    ctl.br(0),
  )),

  // Prettify (maxDecimalPlaces 324): digits D (N of them), value D × 10^K, KK = N + K. Digits and
  // zeros are copied 32 and 24 bytes at a time; what lands past the end is written over next.
  ...set(KK, i32.add(get(N), get(K))),
  ...ctl.if(i32.and(i32.geS(get(K), c32(0)), i32.leS(get(KK), c32(21))), [ // 1234e7 -> 12340000000.0
    copy32(get(AT), c32(DIG)), inc(AT, get(N)),
    [0, 8, 16].flatMap((o) => i64.store(get(AT), ascii64('00000000'), o)), inc(AT, get(K)),
    i32.store16(get(AT), ascii32('.0')), ctl.return(i32.add(get(AT), c32(2))),
  ]),
  ...ctl.if(i32.and(i32.gtS(get(KK), c32(0)), i32.leS(get(KK), c32(21))), [ // 1234e-2 -> 12.34
    copy32(get(AT), c32(DIG)), inc(AT, get(KK)),
    i32.store8(get(AT), c32(0x2e)),
    copy32(i32.add(get(AT), c32(1)), i32.add(get(KK), c32(DIG))),
    ctl.return(i32.add(get(AT), i32.add(c32(1), i32.sub(get(N), get(KK))))),
  ]),
  ...ctl.if(i32.and(i32.gtS(get(KK), c32(-6)), i32.leS(get(KK), c32(0))), [ // 1234e-6 -> 0.001234
    i32.store16(get(AT), ascii32('0.')), i64.store(get(AT), ascii64('00000000'), 2),
    set(AT, i32.sub(i32.add(get(AT), c32(2)), get(KK))),
    copy32(get(AT), c32(DIG)), ctl.return(i32.add(get(AT), get(N))),
  ]),
  // 1e30, 1.234e33, 1.5e-7: the exponent without '+'.
  ...i32.store8(get(AT), i32.load8(c32(DIG))),
  ...ctl.if(i32.gtU(get(N), c32(1)), [
    i32.store8(get(AT), c32(0x2e), 1), copy32(i32.add(get(AT), c32(2)), c32(DIG + 1)), inc(AT, get(N)),
  ]),
  ...i32.store8(get(AT), c32(0x65), 1),
  ...inc(AT, c32(2)),
  ...set(EXP, i32.sub(get(KK), c32(1))),
  ...ctl.if(i32.ltS(get(EXP), c32(0)), [i32.store8(get(AT), c32(0x2d)), inc(AT), set(EXP, i32.sub(c32(0), get(EXP)))]),
  ...ctl.if(i32.geU(get(EXP), c32(100)), [
    digitAt(get(AT), i32.divU(get(EXP), c32(100))), inc(AT), set(EXP, i32.remU(get(EXP), c32(100))),
    digitAt(get(AT), i32.divU(get(EXP), c32(10))), digitAt(get(AT), i32.remU(get(EXP), c32(10)), 1),
    ctl.return(i32.add(get(AT), c32(2))),
  ]),
  ...ctl.if(i32.geU(get(EXP), c32(10)), [
    digitAt(get(AT), i32.divU(get(EXP), c32(10))), digitAt(get(AT), i32.remU(get(EXP), c32(10)), 1),
    ctl.return(i32.add(get(AT), c32(2))),
  ]),
  ...digitAt(get(AT), get(EXP)),
  ...i32.add(get(AT), c32(1)),
];

// ---- floats(n: i32, wide: i32) -> i32: n values at IN (f64 when wide, else f32), their text at
// OUT separated by commas; returns its length.
const FN = 0; const FWIDE = 1; const FI = 2; const FAT = 3; const FX = 4;
const floatsBody: Code = [
  ...set(FAT, c32(OUT)),
  ...ctl.block(ctl.loop(
    ctl.brIf(1, i32.geU(get(FI), get(FN))),
    ctl.if(get(FWIDE), [
      set(FX, f64.load(i32.shl(get(FI), c32(3)), IN)),
    ], [
      set(FX, f64.promote(f64.loadF32(i32.shl(get(FI), c32(2)), IN))),
    ]),
    ctl.if(get(FI), [i32.store8(get(FAT), c32(0x2c)), inc(FAT)]),
    set(FAT, ctl.call(0, get(FX), get(FAT))),
    inc(FI),
    ctl.br(0),
  )),
  ...i32.sub(get(FAT), c32(OUT)),
];

const functions: WasmFunction[] = [
  { params: [F64, I32], results: [I32], locals: oneLocals, body: oneBody, export: 'one' },
  { params: [I32, I32], results: [I32], locals: [I32, I32, F64], body: floatsBody, export: 'floats' },
];

/** The part of the WebAssembly JS API used here (the project's TypeScript lib has no DOM types). */
declare const WebAssembly: {
  validate(bytes: Uint8Array): boolean;
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => {
    readonly exports: { floats: (n: number, wide: number) => number; one: (x: number, at: number) => number; memory: { buffer: ArrayBuffer } };
  };
};

interface Printer {
  readonly floats: (n: number, wide: number) => number;
  readonly one: (x: number, at: number) => number;
  readonly memory: Buffer;
}

function instantiate(): Printer | undefined {
  if (typeof WebAssembly !== 'object') return undefined; // node --jitless
  const bytes = assemble(functions, PAGES);
  if (!WebAssembly.validate(bytes)) return undefined;
  const { exports } = new WebAssembly.Instance(new WebAssembly.Module(bytes));
  const memory = Buffer.from(exports.memory.buffer);
  for (let t = 0; t < cachedPowers.rows; t++) {
    memory.writeBigUInt64LE(cachedPowers.significand(t), TABLE + t * 16);
    memory.writeInt32LE(cachedPowers.k(t), TABLE + t * 16 + 8);
    memory.writeInt32LE(cachedPowers.shift(t), TABLE + t * 16 + 12);
  }
  for (let k = 0; k < 10; k++) memory.writeBigUInt64LE(10n ** BigInt(k), P10 + k * 8);
  return { floats: exports.floats, one: exports.one, memory };
}

const printer = instantiate();

/** The WebAssembly printer is in use (false: number-print.ts alone). */
export const wasmFloats = printer !== undefined;

/**
 * `count` FP32 (or FP64 when !fp32) little-endian values of `data`, printed as Triton prints them and
 * separated by commas; undefined where WebAssembly is missing.
 */
export function printFloats(data: Uint8Array, count: number, fp32: boolean): Buffer | undefined {
  if (printer === undefined) return undefined;
  const size = fp32 ? 4 : 8;
  const mem = printer.memory;
  if (count <= FLOATS_PER_CALL) {
    mem.set(data.subarray(0, count * size), IN);
    return Buffer.from(mem.subarray(OUT, OUT + printer.floats(count, fp32 ? 0 : 1)));
  }
  const out = Buffer.allocUnsafe(count * (MAX_TRITON_DOUBLE_LENGTH + 1));
  let at = 0;
  for (let e = 0; e < count; e += FLOATS_PER_CALL) {
    const n = Math.min(FLOATS_PER_CALL, count - e);
    mem.set(data.subarray(e * size, (e + n) * size), IN);
    if (e > 0) out[at++] = 0x2c; // ,
    const len = printer.floats(n, fp32 ? 0 : 1);
    mem.copy(out, at, OUT, OUT + len);
    at += len;
  }
  return out.subarray(0, at);
}

/** What Triton prints for the double x, through the WebAssembly printer (tests compare it with number-print.ts). */
export function printOne(x: number): string | undefined {
  if (printer === undefined) return undefined;
  return printer.memory.toString('latin1', OUT, printer.one(x, OUT));
}
