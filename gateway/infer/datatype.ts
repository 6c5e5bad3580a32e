// The tensor datatypes of the inference protocol and their model-config twins.
// BYTES is variable-sized: each element is a uint32 little-endian length followed by its bytes.

export const DATATYPES = [
  'BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64',
  'FP16', 'FP32', 'FP64', 'BYTES', 'BF16',
] as const;

export type Datatype = (typeof DATATYPES)[number];

/** Bytes per element; 0 for BYTES, whose elements carry their own length. */
const ELEMENT_SIZE: Record<Datatype, number> = {
  BOOL: 1, UINT8: 1, UINT16: 2, UINT32: 4, UINT64: 8, INT8: 1, INT16: 2, INT32: 4, INT64: 8,
  FP16: 2, FP32: 4, FP64: 8, BYTES: 0, BF16: 2,
};

/** Model-config enum names (inference.DataType) for each protocol datatype. */
const CONFIG_NAME: Record<Datatype, string> = {
  BOOL: 'TYPE_BOOL', UINT8: 'TYPE_UINT8', UINT16: 'TYPE_UINT16', UINT32: 'TYPE_UINT32', UINT64: 'TYPE_UINT64',
  INT8: 'TYPE_INT8', INT16: 'TYPE_INT16', INT32: 'TYPE_INT32', INT64: 'TYPE_INT64',
  FP16: 'TYPE_FP16', FP32: 'TYPE_FP32', FP64: 'TYPE_FP64', BYTES: 'TYPE_STRING', BF16: 'TYPE_BF16',
};

/** inference.DataType enum numbers, in the order of DATATYPES' config twins. */
const CONFIG_ENUM: Record<Datatype, number> = {
  BOOL: 1, UINT8: 2, UINT16: 3, UINT32: 4, UINT64: 5, INT8: 6, INT16: 7, INT32: 8, INT64: 9,
  FP16: 10, FP32: 11, FP64: 12, BYTES: 13, BF16: 14,
};

const BY_ENUM = new Map<number, Datatype>(DATATYPES.map((d) => [CONFIG_ENUM[d], d]));

export function isDatatype(s: string): s is Datatype {
  return Object.hasOwn(ELEMENT_SIZE, s);
}

export function elementSize(d: Datatype): number {
  return ELEMENT_SIZE[d];
}

export function configTypeName(d: Datatype): string {
  return CONFIG_NAME[d];
}

export function configTypeEnum(d: Datatype): number {
  return CONFIG_ENUM[d];
}

/** The protocol datatype of a model-config enum value, or undefined for TYPE_INVALID/unknown. */
export function datatypeOfConfigEnum(n: number): Datatype | undefined {
  return BY_ENUM.get(n);
}

/** Product of the dims (1 for []). */
export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (let i = 0; i < shape.length; i++) n *= shape[i]!;
  return n;
}

/**
 * Writes the number v as one element of datatype d at out[at], little-endian (an integer type
 * takes v as an integer and wraps it to its width, as a C cast would); false for the types a
 * number is not written as (FP16, BF16, BYTES).
 */
export function writeNumberElement(d: Datatype, v: number, out: Buffer, at: number): boolean {
  switch (d) {
    case 'BOOL': out[at] = v ? 1 : 0; return true;
    case 'FP32': out.writeFloatLE(v, at); return true;
    case 'FP64': out.writeDoubleLE(v, at); return true;
    case 'INT8': out.writeInt8((v << 24) >> 24, at); return true;
    case 'UINT8': out[at] = v & 0xff; return true;
    case 'INT16': out.writeInt16LE((v << 16) >> 16, at); return true;
    case 'UINT16': out.writeUInt16LE(v & 0xffff, at); return true;
    case 'INT32': out.writeInt32LE(v | 0, at); return true;
    case 'UINT32': out.writeUInt32LE(v >>> 0, at); return true;
    case 'INT64': out.writeBigInt64LE(BigInt.asIntN(64, BigInt(v)), at); return true;
    case 'UINT64': out.writeBigUInt64LE(BigInt.asUintN(64, BigInt(v)), at); return true;
    default: return false;
  }
}

/** The 64-bit integer bounds (BigInt), for exact checks of JSON integers and byte-size arithmetic. */
export const INT64_MAX = 2n ** 63n - 1n;
export const UINT64_MAX = 2n ** 64n - 1n;
