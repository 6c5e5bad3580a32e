// The seeded generator of the property tests: a 32-bit LCG (Numerical Recipes' constants), so a
// failing case is the same on every run and every machine.
export function seeded(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const f32 = new Float32Array(1);
const f32Bits = new Uint32Array(f32.buffer);
const f64 = new Float64Array(1);
const f64Bits = new Uint32Array(f64.buffer);

/** An FP32 value of random bits (every exponent, subnormals, ±0, ±Infinity and NaNs included). */
export function float32Bits(rnd: () => number): number {
  f32Bits[0] = Math.floor(rnd() * 2 ** 32);
  return f32[0]!;
}

/** A double of random bits (every exponent, subnormals, ±0, ±Infinity and NaNs included). */
export function float64Bits(rnd: () => number): number {
  f64Bits[0] = Math.floor(rnd() * 2 ** 32);
  f64Bits[1] = Math.floor(rnd() * 2 ** 32);
  return f64[0]!;
}
