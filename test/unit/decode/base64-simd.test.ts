// The bytes-to-bytes base64 decoders against Node's own, each of them (native, with each of its
// kernels the CPU has, WebAssembly, Node's through strings): every length (so the 64-character
// steps, the 64 KiB runs and the scalar tail all meet), both alphabets and a mix, every offset of
// an invalid character (each byte that is not in either alphabet, '=' among them), and nothing
// written outside the target range.
import fc from 'fast-check';
import type * as Simd from '../../../gateway/decode/base64/base64-simd';

/** The module loaded afresh with TENSORGATE_BASE64_DECODER set to `decoder`. */
function load(decoder: 'native' | 'avx2' | 'wasm' | 'string'): typeof Simd {
  const before = process.env.TENSORGATE_BASE64_DECODER;
  process.env.TENSORGATE_BASE64_DECODER = decoder;
  let m: typeof Simd | undefined;
  try {
    // A fresh copy of the module (it chooses its decoder when it loads): require, which isolateModules scopes.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    jest.isolateModules(() => { m = require('../../../gateway/decode/base64/base64-simd') as typeof Simd; });
  } finally {
    if (before === undefined) delete process.env.TENSORGATE_BASE64_DECODER;
    else process.env.TENSORGATE_BASE64_DECODER = before;
  }
  return m!;
}

const native = load('native');
// The native decoder needs the C compiler `npm run build` found (scripts/build-native.js): CI has one.
const nativeBuilt = native.base64Decoder === 'native';
if (!nativeBuilt) {
  if (process.env.CI === 'true') throw new Error('the native base64 decoder was not built (scripts/build-native.js says why)');
  console.warn('SKIPPED: the native base64 decoder\'s cases: it was not built (no C compiler or no AVX2; scripts/build-native.js says why)');
}
// The native decoder's AVX2 kernel too where the CPU has a better one (AVX-512 VBMI), which is the default then.
const nativeKernels = !nativeBuilt ? [] : native.nativeKernel === 'avx2' ? [['native avx2', native] as const]
  : [[`native ${native.nativeKernel}`, native] as const, ['native avx2', load('avx2')] as const];
const decoders = [...nativeKernels, ['wasm', load('wasm')] as const, ['string', load('string')] as const];

test('each native kernel is the one named', () => {
  if (nativeKernels.length === 2) expect(load('avx2').nativeKernel).toBe('avx2');
  for (const [name, m] of nativeKernels) expect(`native ${m.nativeKernel}`).toBe(name);
});

const { decodedSize, SIMD_RUN_CHARS } = native;
const bytesOf = (n: number, seed = 7): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 131 + seed * 17 + (i >> 7)) & 0xff));
const unpadded = (b: Buffer, url: boolean): Buffer => Buffer.from(b.toString(url ? 'base64url' : 'base64').replace(/=+$/, ''), 'latin1');

function decoded(decodeClean: typeof Simd.decodeClean, text: Buffer, at = 3): Buffer | undefined {
  const n = decodedSize(text.length);
  const out = Buffer.alloc(n + at + 5, 0xee);
  if (!decodeClean(text, 0, text.length, out, at)) return undefined;
  expect(out.subarray(0, at)).toEqual(Buffer.alloc(at, 0xee));
  expect(out.subarray(at + n)).toEqual(Buffer.alloc(5, 0xee));
  return out.subarray(at, at + n);
}

describe.each(decoders)('%s decoder', (name, m) => {
  const { base64Decoder, Decoded, decodeClean, decodeRuns, decodeText, relaxedBase64, simdBase64 } = m;

  describe('decodeClean', () => {
    it('is the decoder asked for; WebAssembly SIMD on this Node, with the standard-alphabet kernel (relaxed SIMD)', () => {
      expect(base64Decoder).toBe(name.split(' ')[0]);
      expect(simdBase64).toBe(name !== 'string');
      expect(relaxedBase64).toBe(name !== 'string');
    });

    it('says which alphabet the text was in, a URL-safe character in any one run of several', () => {
      const raw = bytesOf(3 * SIMD_RUN_CHARS / 4 * 3 + 300, 3); // three whole runs and a partial one
      const text = unpadded(raw, false);
      const out = Buffer.alloc(raw.length);
      expect(decodeText(text, 0, text.length, out, 0)).toBe(Decoded.Standard);
      expect(out.equals(raw)).toBe(true);
      for (const at of [0, 17, SIMD_RUN_CHARS + 5, 2 * SIMD_RUN_CHARS + 63, 3 * SIMD_RUN_CHARS + 100, text.length - 2]) {
        for (const [std, url] of [[0x2b, 0x2d], [0x2f, 0x5f]] as const) {
          const mixed = Buffer.from(text);
          // The nearest '+' or '/' at or after `at` becomes its URL-safe twin: the same sextet.
          let i = at;
          while (i < mixed.length && mixed[i] !== std) i++;
          if (i === mixed.length) continue;
          mixed[i] = url;
          out.fill(0);
          expect(decodeText(mixed, 0, mixed.length, out, 0)).toBe(Decoded.UrlSafe);
          expect(out.equals(raw)).toBe(true);
          mixed[i] = 0x2e; // '.': in neither alphabet
          expect(decodeText(mixed, 0, mixed.length, out, 0)).toBe(Decoded.Invalid);
        }
      }
    });

    it('decodes every length from 0 to 300 bytes and around the run size, in both alphabets', () => {
      const lengths = [...Array.from({ length: 301 }, (_, i) => i), SIMD_RUN_CHARS / 4 * 3 - 1, SIMD_RUN_CHARS / 4 * 3, SIMD_RUN_CHARS / 4 * 3 + 1, 200_001];
      for (const n of lengths) {
        const raw = bytesOf(n);
        // Buffer.equals: jest's toEqual walks a Buffer byte by byte, seconds for the 200 KB one.
        expect(decoded(decodeClean, unpadded(raw, false))?.equals(raw)).toBe(true);
        expect(decoded(decodeClean, unpadded(raw, true))?.equals(raw)).toBe(true);
      }
    });

    it('takes the two alphabets mixed, as Node does', () => {
      const raw = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i % 2 === 0 ? 0xfb : 0xff)));
      const text = unpadded(raw, false);
      for (let i = 0; i < text.length; i += 3) {
        if (text[i] === 0x2b) text[i] = 0x2d; // '+' → '-'
        if (text[i] === 0x2f) text[i] = 0x5f; // '/' → '_'
      }
      expect(decoded(decodeClean, text)).toEqual(raw);
      expect(decoded(decodeClean, text)).toEqual(Buffer.from(text.toString('latin1'), 'base64'));
    });

    it('drops the spare bits of a final partial group as Node does', () => {
      for (const t of ['QR', 'QRS', 'AAAAQR', 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAQRS']) {
        expect(decoded(decodeClean, Buffer.from(t, 'latin1'))).toEqual(Buffer.from(t, 'base64'));
      }
    });

    it('refuses any byte outside both alphabets, wherever it is', () => {
      const alphabet = new Set(Buffer.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_', 'latin1'));
      const invalid = Array.from({ length: 256 }, (_, c) => c).filter((c) => !alphabet.has(c));
      const text = unpadded(bytesOf(600), false); // 800 characters: 12 steps of 64 and a tail
      for (const c of invalid) {
        for (const at of [0, 1, 15, 16, 63, 64, 200, 767, 768, 790, 799]) {
          const bad = Buffer.from(text);
          bad[at] = c;
          expect(decoded(decodeClean, bad)).toBeUndefined();
        }
      }
    });

    it('refuses a lone final character (4k + 1 characters)', () => {
      expect(decoded(decodeClean, Buffer.from('AAAAB', 'latin1'))).toBeUndefined();
    });
  });

  describe('decodeRuns', () => {
    if (name === 'string') {
      it('decodes nothing through strings (its callers decode there)', () => {
        expect(decodeRuns(Buffer.alloc(64, 0x41), 0, 64, Buffer.alloc(48), 0)).toBe(0);
      });
      return;
    }
    const text = unpadded(bytesOf(150_000), false); // 200,000 characters: four calls of 64 KiB and a part
    const whole = text.length & ~63;
    const run = (t: Buffer): { chars: number; url: boolean; out: Buffer } => {
      const out = Buffer.alloc(decodedSize(whole), 0xee);
      const r = decodeRuns(t, 0, whole, out, 0);
      return { chars: Math.floor(r / 2), url: r % 2 === 1, out };
    };

    it('decodes every whole run of clean text', () => {
      const { chars, url, out } = run(text);
      expect([chars, url]).toEqual([whole, false]);
      expect(out.equals(Buffer.from(text.toString('latin1', 0, whole), 'base64'))).toBe(true);
    });

    it('stops at the 64 characters that hold the first quote or backslash, having decoded those before', () => {
      for (const at of [0, 63, 64, 100, SIMD_RUN_CHARS - 1, SIMD_RUN_CHARS, SIMD_RUN_CHARS + 70, whole - 1]) {
        for (const [stop, after] of [['"', '\\'], ['\\', '"'], ['"', '!']]) {
          const t = Buffer.from(text);
          t[at] = stop!.charCodeAt(0);
          if (at + 5 < whole) t[at + 5] = after!.charCodeAt(0);
          const { chars, out } = run(t);
          const ok = at & ~63;
          expect([at, stop, chars]).toEqual([at, stop, ok]);
          expect(out.subarray(0, ok / 4 * 3).equals(Buffer.from(text.toString('latin1', 0, ok), 'base64'))).toBe(true);
        }
      }
    });

    it('goes on through the URL-safe alphabet, and stops before a run with a character of neither alphabet', () => {
      const t = Buffer.from(text);
      t[70_001] = 0x2d; // '-'
      expect(run(t).chars).toBe(whole);
      expect(run(t).url).toBe(true);
      // A blank, in the third 64 KiB: the native decoder stops at its 64 characters, WebAssembly's
      // at the 64 KiB that holds it.
      t[150_000] = 0x20;
      const beforeBlank = name.startsWith('native') ? 150_000 & ~63 : 2 * SIMD_RUN_CHARS;
      expect(run(t).chars).toBe(beforeBlank);
      t[150_100] = 0x22; // a quote after it: the blank still refuses the text before the quote
      expect(run(t).chars).toBe(beforeBlank);
      t[149_000] = 0x22; // a quote before it: what precedes the quote's 64 characters is decoded
      expect(run(t).chars).toBe(149_000 & ~63);
    });

    // Random texts on each kernel (the cases above are fixed): a length, the alphabet of each
    // character, and perhaps one byte replaced by any other at any offset. Node's decoder is the
    // reference for what decodes; the stop is at the 64 characters that hold a refused byte
    // (native; WebAssembly for a quote or backslash), or its 64 KiB (WebAssembly's other refused
    // bytes: one run here, so nothing of the text).
    it('decodes random texts of either alphabet as Node does, and stops before the run of a refused byte', () => {
      const ALPHABET = /^[A-Za-z0-9+/_-]$/;
      fc.assert(fc.property(
        fc.uint8Array({ minLength: 48, maxLength: 4800 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
        fc.option(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 }))),
        (bytes, urlPattern, replaced) => {
          const std = unpadded(Buffer.from(bytes), false);
          const url = unpadded(Buffer.from(bytes), true);
          const n = Math.floor(std.length / 64) * 64;
          const chars = Buffer.alloc(n);
          for (let i = 0; i < n; i++) chars[i] = (urlPattern[i % urlPattern.length] ? url : std)[i]!;
          let stop = n;
          if (replaced !== null) {
            const at = replaced[0] % n;
            chars[at] = replaced[1];
            if (!ALPHABET.test(String.fromCharCode(replaced[1]))) stop = name.startsWith('native') || replaced[1] === 0x22 || replaced[1] === 0x5c ? at & ~63 : 0;
          }
          const out = Buffer.alloc(2 + n / 4 * 3 + 64, 0xee); // 64 guard bytes: a vector store's reach
          const r = decodeRuns(chars, 0, n, out, 2);
          expect(Math.floor(r / 2)).toBe(stop);
          expect(r % 2 === 1).toBe(/[-_]/.test(chars.toString('latin1', 0, stop)));
          expect(out.subarray(2, 2 + stop / 4 * 3).equals(Buffer.from(chars.toString('latin1', 0, stop), 'base64'))).toBe(true);
          expect(out.subarray(0, 2).equals(Buffer.alloc(2, 0xee))).toBe(true);
          // Nothing past the target range, wherever the decoder stopped (a refused run may write within it).
          expect(out.subarray(2 + n / 4 * 3).equals(Buffer.alloc(64, 0xee))).toBe(true);
        }), { numRuns: 400 });
    });
  });
});
