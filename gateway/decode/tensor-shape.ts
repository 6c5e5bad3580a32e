// Shapes Triton cannot hold, refused before they reach it (docs/differences.md "Shapes past
// 32 bits"). Triton keeps dims as int64 on the wire but its core truncates some to 32 bits: a
// BYTES input of shape [2^62] with one element is forwarded and answered 200. No tensor
// that fits a gRPC message (INT32_MAX bytes, docs/architecture.md#limits) has more than INT32_MAX elements,
// since every element takes at least one byte (BYTES four), so refusing larger dims and counts
// turns away nothing Triton could serve. Every decoder that builds a shape calls this one check.
import { type ErrorCode, GatewayError } from '../errors';

export const INT32_MAX = 2 ** 31 - 1;

/**
 * Refuses `shape` when a dimension or the element count is above INT32_MAX. Negative dims are
 * left to the checks that have Triton's own message for them.
 */
export function refuseShapeBeyondInt32(name: string, shape: readonly number[], code: ErrorCode = 'GW_ERR_DECODE_INVALID'): void {
  let count = 1;
  let big = false;
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i]!;
    if (d < 0) return;
    if (d > INT32_MAX) big = true;
    count *= d;
  }
  if (!big && count <= INT32_MAX) return;
  // Dims past 2^53 are doubles here: written as integers, not in exponent or rounded-decimal form.
  const text = `[${shape.map((d) => (Number.isSafeInteger(d) ? String(d) : BigInt(d).toString())).join(',')}]`;
  if (big) {
    throw new GatewayError(code,
      `input '${name}': shape ${text} has a dimension above ${INT32_MAX}, which Triton cannot hold (it truncates dims to 32 bits)`);
  }
  if (count > INT32_MAX) {
    throw new GatewayError(code,
      `input '${name}': shape ${text} has ${count} elements, more than ${INT32_MAX}, which Triton cannot hold (it truncates counts to 32 bits)`);
  }
}

/**
 * The shape of `count` elements in a model's dims: fixed dims divide the count, the innermost -1
 * takes the rest, any other -1 is 1 (as Triton's generate extension deduces it); undefined when
 * the dims cannot hold them.
 */
export function deduceShape(dims: readonly number[], count: number): number[] | undefined {
  let fixed = 1;
  for (const d of dims) if (d >= 0) fixed *= d;
  const innermost = dims.lastIndexOf(-1);
  if (innermost === -1) return fixed === count ? [...dims] : undefined;
  if (fixed === 0 ? count !== 0 : count % fixed !== 0) return undefined;
  return dims.map((d, i) => (d >= 0 ? d : i === innermost ? (fixed === 0 ? 0 : count / fixed) : 1));
}
