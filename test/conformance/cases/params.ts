// Request `id` and `parameters` (docs/architecture.md#json-bodies): custom parameters of every accepted JSON type, the
// reserved keys with valid and invalid values, and `triton_*` keys.
import { type CaseGroup, type JsonLike, infer, input, jsonRequest, lit } from './types';

const body = (parameters: JsonLike, extra: { [k: string]: JsonLike } = {}) =>
  jsonRequest({ ...extra, parameters, inputs: [input('INPUT0', 'FP32', [1, 2], [1.5, -2])] });
const p = (name: string, parameters: JsonLike, extra: { [k: string]: JsonLike } = {}) => infer(name, 'identity_fp32', body(parameters, extra));

export const paramCases: CaseGroup = {
  group: 'params',
  cases: [
    p('empty parameters {}', {}),
    p('custom string', { note: 'hello' }),
    p('custom int and negative int', { n: 42, m: -7 }),
    p('custom bool', { flag: true }),
    p('custom double', { ratio: 0.25 }),
    p('custom uint above int64 (becomes double)', { big: lit('18446744073709551615') }),
    p('custom of every type at once, with id', { s: 'x', i: 1, b: false, d: 1.5 }, { id: 'params-1' }),
    p('custom key named "headers" (string)', { headers: 'not special' }),
    p('sequence_id int with start/end', { sequence_id: 7, sequence_start: true, sequence_end: true }),
    p('sequence_id string', { sequence_id: 'corr-1' }),
    p('sequence_id uint64 max', { sequence_id: lit('18446744073709551615') }),
    p('priority 0 and timeout 1000000', { priority: 0, timeout: 1000000 }),
    p('priority 1', { priority: 1 }),
    p('binary_data_output true', { binary_data_output: true }),
    // ---- errors
    p('triton_ prefixed key → 400', { triton_foo: 1 }),
    p('triton_enable_empty_final_response → reserved over HTTP', { triton_enable_empty_final_response: true }),
    p('parameter null → 400', { x: null }),
    p('parameter array → 400', { x: [1, 2] }),
    p('parameter object → 400', { x: { y: 1 } }),
    p('parameters is an array → 500', [1]),
    p('parameters is a string → 500', 'x'),
    p('priority string → 500', { priority: 'high' }),
    p('priority negative → 500', { priority: -1 }),
    p('timeout float → 500', { timeout: 1.5 }),
    p('sequence_start non-bool → 500', { sequence_start: 1 }),
    p('sequence_id float', { sequence_id: 1.5 }),
    p('sequence_id negative', { sequence_id: -1 }),
    p('binary_data_output non-bool', { binary_data_output: 1 }),
    infer('id number → 500', 'identity_fp32', jsonRequest({ id: 5, inputs: [input('INPUT0', 'FP32', [1, 1], [1])] })),
    infer('id null → 500', 'identity_fp32', jsonRequest({ id: null, inputs: [input('INPUT0', 'FP32', [1, 1], [1])] })),
    infer('id is echoed into core error prefixes', 'simple', jsonRequest({ id: 'err-id', inputs: [input('INPUT0', 'INT32', [1, 16], Array(16).fill(0))] })),
  ],
};
