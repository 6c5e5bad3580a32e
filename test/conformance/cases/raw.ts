// Raw binary requests (Inference-Header-Content-Length: 0): the body is the single input's
// data; name, datatype and shape are deduced from the model config; all outputs come back binary.
import { type CaseGroup, compressed, failingError, infer, range, rawRequest, tensorBytes, text, zeroSizeError } from './types';

const f32 = tensorBytes('FP32', [1.5, -2, 0.1, 1e-40]);

export const rawCases: CaseGroup = {
  group: 'raw',
  cases: [
    infer('identity_fp32: 16 bytes → [1,4]', 'identity_fp32', rawRequest(f32)),
    infer('identity_fp32: 4 bytes → [1,1]', 'identity_fp32', rawRequest(tensorBytes('FP32', [7]))),
    infer('identity_fp32: 10 bytes (remainder → core byte-size 400)', 'identity_fp32', rawRequest(Buffer.alloc(10, 1))),
    infer('identity_fp32: 2 bytes (less than one element)', 'identity_fp32', rawRequest(Buffer.alloc(2, 1))),
    infer('identity_fp32: empty body with header 0 (zero-size input, PyTriton error)', 'identity_fp32', rawRequest(Buffer.alloc(0)), { compare: zeroSizeError() }),
    infer('identity_fp32: empty body without any header (H = L = 0 → raw)', 'identity_fp32', { body: Buffer.alloc(0), headers: {} }, { compare: zeroSizeError() }),
    infer('identity_fp32: empty chunked body, no Content-Length', 'identity_fp32', { body: Buffer.alloc(0), headers: {} }, { chunked: 1, compare: zeroSizeError() }),
    infer('identity_int8: raw bytes', 'identity_int8', rawRequest(Buffer.from([0x80, 0xff, 0, 1, 0x7f]))),
    infer('identity_uint8: 1000 bytes', 'identity_uint8', rawRequest(Buffer.from(range(1000).map((i) => i % 256)))),
    infer('identity_int64: raw', 'identity_int64', rawRequest(tensorBytes('INT64', [-9223372036854775808n, 42n]))),
    infer('identity_uint64: raw', 'identity_uint64', rawRequest(tensorBytes('UINT64', [18446744073709551615n]))),
    infer('identity_fp16: raw (FP16 is fine in binary)', 'identity_fp16', rawRequest(tensorBytes('FP16', [0x3c00, 0x7c00, 0xfc00]))),
    infer('identity_fp64: raw', 'identity_fp64', rawRequest(tensorBytes('FP64', [Math.PI, -0]))),
    infer('identity_bool: raw', 'identity_bool', rawRequest(Buffer.from([1, 0, 1]))),
    infer('identity_int16: odd byte count', 'identity_int16', rawRequest(Buffer.from([1, 2, 3]))),
    infer('identity_bytes: dims [-1] → 400 (BYTES needs shape [1])', 'identity_bytes', rawRequest(text('abc'))),
    infer('blob_len: raw BYTES (length prefix added)', 'blob_len', rawRequest(text('hello, world'))),
    infer('blob_len: raw BYTES with NULs and invalid UTF-8', 'blob_len', rawRequest(Buffer.from([0, 0xff, 0, 0xfe]))),
    infer('blob_len: raw empty body', 'blob_len', rawRequest(Buffer.alloc(0))),
    infer('simple: two inputs → 400', 'simple', rawRequest(Buffer.alloc(64))),
    infer('simple_string: two inputs → 400', 'simple_string', rawRequest(text('1'))),
    infer('identity_fp32_nobatch: two variable dims → 400', 'identity_fp32_nobatch', rawRequest(f32)),
    infer('classifier_fp32: raw [1,3,224,224]', 'classifier_fp32', rawRequest(tensorBytes('FP32', range(3 * 224 * 224).map((i) => (i % 1000) / 1000))), { timeoutMs: 30_000 }),
    infer('classifier_fp32: raw, wrong byte count', 'classifier_fp32', rawRequest(Buffer.alloc(1000))),
    infer('image_stats: raw image', 'image_stats', rawRequest(Buffer.from([10, 20, 30, 255]))),
    infer('big_output: raw N (no batch dim)', 'big_output', rawRequest(tensorBytes('INT64', [12]))),
    infer('big_output: raw N=5 MiB (response > 4 MiB)', 'big_output', rawRequest(tensorBytes('INT64', [5 * 1024 * 1024])), { timeoutMs: 60_000 }),
    infer('big_output: raw N=0 (empty binary output → application/json)', 'big_output', rawRequest(tensorBytes('INT64', [0]))),
    infer('failing: raw → 500', 'failing', rawRequest(tensorBytes('FP32', [1])), { compare: failingError() }),
    infer('unknown model: raw', 'nonexistent', rawRequest(f32)),
    infer('identity_fp32: raw via /versions/1', 'identity_fp32', rawRequest(f32), { version: '1' }),
    infer('identity_fp32: raw via /versions/3 (unknown version)', 'identity_fp32', rawRequest(f32), { version: '3' }),
    infer('identity_fp32: raw, chunked transfer', 'identity_fp32', rawRequest(tensorBytes('FP32', range(64))), { chunked: 7 }),
    infer('identity_fp32: raw, gzip body', 'identity_fp32', compressed(rawRequest(f32), 'gzip')),
    infer('identity_fp32: raw, header " 0" (leading space)', 'identity_fp32', { body: f32, headers: { 'Inference-Header-Content-Length': ' 0' } }),
    infer('identity_fp32: raw, header "0x10" (stoi reads 0)', 'identity_fp32', { body: f32, headers: { 'Inference-Header-Content-Length': '0x10' } }),
    infer('identity_fp32: raw, Accept-Encoding gzip', 'identity_fp32', rawRequest(f32), { headers: { 'Accept-Encoding': 'gzip' } }),
  ],
};
