// A minimal WebAssembly assembler: the gateway's WebAssembly kernels (decode/base64/base64-simd.ts,
// json/number-print-wasm.ts) are written here, in TypeScript, as folded expressions that become the
// module's bytes when their file loads. No toolchain, no binary checked in: what runs is what the
// source says. Binary format and opcodes: the WebAssembly core specification §5 (2.0), SIMD's and
// relaxed SIMD's proposals for 0xfd instructions.
import { varintSize, writeVarint } from '../grpc/wire';

/** An instruction sequence: the bytes of zero or more instructions. */
export type Code = number[];

export const I32 = 0x7f;
export const I64 = 0x7e;
export const F64 = 0x7c;
export const V128 = 0x7b;

/** Unsigned LEB128 is protobuf's varint (grpc/wire.ts). */
export function uleb(n: number): number[] {
  const out = Buffer.alloc(varintSize(n));
  writeVarint(out, 0, n);
  return [...out];
}

/** Signed LEB128 of a number (i32 constants) or a bigint (i64 constants). */
export function sleb(n: number | bigint): number[] {
  let x = BigInt(n);
  const out: number[] = [];
  for (;;) {
    const b = Number(x & 0x7fn);
    x >>= 7n;
    if ((x === 0n && (b & 0x40) === 0) || (x === -1n && (b & 0x40) !== 0)) {
      out.push(b);
      return out;
    }
    out.push(b | 0x80);
  }
}

export const section = (id: number, body: number[]): number[] => [id, ...uleb(body.length), ...body];
export const vec = (items: number[][]): number[] => [...uleb(items.length), ...items.flat()];
export const name = (s: string): number[] => [...uleb(s.length), ...Buffer.from(s, 'latin1')];

// ---- instructions, as folded expressions: operands first, then the opcode
const bin = (code: number) => (a: Code, b: Code): Code => [...a, ...b, code];
const un = (code: number) => (a: Code): Code => [...a, code];
/** A memory access: `align` is log2 of the natural alignment, `offset` a constant byte offset. */
const load = (code: number, align: number) => (addr: Code, offset = 0): Code => [...addr, code, align, ...uleb(offset)];
const store = (code: number, align: number) => (addr: Code, value: Code, offset = 0): Code => [...addr, ...value, code, align, ...uleb(offset)];

export const local = {
  get: (l: number): Code => [0x20, ...uleb(l)],
  set: (l: number, value: Code): Code => [...value, 0x21, ...uleb(l)],
  tee: (l: number, value: Code): Code => [...value, 0x22, ...uleb(l)],
};

export const i32 = {
  const: (n: number): Code => [0x41, ...sleb(n | 0)],
  eqz: un(0x45), eq: bin(0x46), ne: bin(0x47), ltS: bin(0x48), ltU: bin(0x49), gtS: bin(0x4a), gtU: bin(0x4b),
  leS: bin(0x4c), leU: bin(0x4d), geS: bin(0x4e), geU: bin(0x4f),
  add: bin(0x6a), sub: bin(0x6b), mul: bin(0x6c), divU: bin(0x6e), remU: bin(0x70), and: bin(0x71), or: bin(0x72), shl: bin(0x74), shrU: bin(0x76),
  wrap: un(0xa7), // i32.wrap_i64
  load: load(0x28, 2), load8: load(0x2d, 0), store: store(0x36, 2), store8: store(0x3a, 0), store16: store(0x3b, 1),
};

export const i64 = {
  const: (n: bigint): Code => [0x42, ...sleb(BigInt.asIntN(64, n))],
  eqz: un(0x50), eq: bin(0x51), ne: bin(0x52), ltS: bin(0x53), ltU: bin(0x54), gtU: bin(0x56), leU: bin(0x58), geU: bin(0x5a),
  clz: un(0x79), add: bin(0x7c), sub: bin(0x7d), mul: bin(0x7e), and: bin(0x83), or: bin(0x84), shl: bin(0x86), shrU: bin(0x88),
  extendU: un(0xad), // i64.extend_i32_u
  reinterpret: un(0xbd), // i64.reinterpret_f64
  load: load(0x29, 3), store: store(0x37, 3),
};

export const f64 = {
  promote: un(0xbb), // f64.promote_f32
  load: load(0x2b, 3),
  loadF32: load(0x2a, 2), // f32.load
};

/** Structured control (§5.4.1): blocks without results; branch depths count outward from 0. */
export const ctl = {
  block: (...body: Code[]): Code => [0x02, 0x40, ...body.flat(), 0x0b],
  loop: (...body: Code[]): Code => [0x03, 0x40, ...body.flat(), 0x0b],
  if: (cond: Code, then: Code[], otherwise?: Code[]): Code =>
    [...cond, 0x04, 0x40, ...then.flat(), ...(otherwise === undefined ? [] : [0x05, ...otherwise.flat()]), 0x0b],
  br: (depth: number): Code => [0x0c, ...uleb(depth)],
  brIf: (depth: number, cond: Code): Code => [...cond, 0x0d, ...uleb(depth)],
  return: (value: Code): Code => [...value, 0x0f],
  call: (fn: number, ...args: Code[]): Code => [...args.flat(), 0x10, ...uleb(fn)],
};

/** A function's type, its local declarations (beyond its parameters) and its body. */
export interface WasmFunction {
  readonly params: readonly number[];
  readonly results: readonly number[];
  readonly locals: readonly number[];
  readonly body: Code;
  /** Exported under this name when set. */
  readonly export?: string;
}

/**
 * A module of these functions (each with a type of its own), one memory of `pages` 64 KiB pages
 * exported as "memory", no imports.
 */
export function assemble(functions: readonly WasmFunction[], pages: number): Uint8Array {
  const types = functions.map((f) => [0x60, ...vec(f.params.map((p) => [p])), ...vec(f.results.map((r) => [r]))]);
  const bodies = functions.map((f) => {
    // Locals in runs of one type, as the format declares them.
    const runs: number[][] = [];
    for (const t of f.locals) {
      const last = runs[runs.length - 1];
      if (last !== undefined && last[1] === t) last[0]! += 1;
      else runs.push([1, t]);
    }
    const b = [...vec(runs.map(([n, t]) => [...uleb(n!), t!])), ...f.body, 0x0b];
    return [...uleb(b.length), ...b];
  });
  const exported = functions.flatMap((f, i) => (f.export === undefined ? [] : [[...name(f.export), 0x00, ...uleb(i)]]));
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, vec(types)),
    ...section(3, vec(functions.map((_, i) => uleb(i)))),
    ...section(5, vec([[0x00, ...uleb(pages)]])),
    ...section(7, vec([...exported, [...name('memory'), 0x02, 0]])),
    ...section(10, vec(bodies)),
  ]);
}
