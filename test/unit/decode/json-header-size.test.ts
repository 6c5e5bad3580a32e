// The json-header-size of Triton's SageMaker and Vertex AI binary media types, read as
// GetInferenceHeaderLength reads it (src/sagemaker_server.cc, src/vertex_ai_server.cc: std::stoi,
// then the range check against Content-Length), with Triton's messages.
import { jsonHeaderSize, SAGEMAKER_BINARY, VERTEX_AI_BINARY } from '../../../gateway/decode/dialects/json-header-size';

const fails = (prefix: string, ct: string | undefined, body: number | undefined): { code: string; message: string; status: number } => {
  try {
    jsonHeaderSize(prefix, ct, body);
  } catch (err) {
    const e = err as { code: string; message: string; status: number };
    return { code: e.code, message: e.message, status: e.status };
  }
  throw new Error('expected an error');
};

test.each([SAGEMAKER_BINARY, VERTEX_AI_BINARY])('%s: the header length Inference-Header-Content-Length would carry', (prefix) => {
  expect(jsonHeaderSize(prefix, undefined, 10)).toBeUndefined();
  expect(jsonHeaderSize(prefix, 'application/json', 10)).toBeUndefined();
  // the search is case-sensitive: another spelling is not the media type (the body is all JSON)
  expect(jsonHeaderSize(prefix, prefix.toUpperCase() + '5', 10)).toBeUndefined();
  expect(jsonHeaderSize(prefix, `${prefix}5`, 10)).toBe('5');
  expect(jsonHeaderSize(prefix, `${prefix}0`, 10)).toBe('0');
  expect(jsonHeaderSize(prefix, `${prefix}10`, 10)).toBe('10');
  // std::stoi: leading blanks and a sign, trailing junk (another parameter) ignored
  expect(jsonHeaderSize(prefix, `${prefix} +7;charset=utf-8`, 10)).toBe('7');
  expect(jsonHeaderSize(prefix, `${prefix}007`, 10)).toBe('7');
  // chunked: the range is checked once the body is in (decode/framing.ts)
  expect(jsonHeaderSize(prefix, `${prefix}99`, undefined)).toBe('99');
});

test.each([SAGEMAKER_BINARY, VERTEX_AI_BINARY])('%s: Triton\'s errors, 400 GW_ERR_REQUEST_HEADER_INVALID', (prefix) => {
  const err = (message: string) => ({ code: 'GW_ERR_REQUEST_HEADER_INVALID', status: 400, message });
  expect(fails(prefix, `text/plain, ${prefix}5`, 10)).toEqual(err(`expect MIME type for binary data starts with '${prefix}', got: text/plain, ${prefix}5`));
  expect(fails(prefix, `${prefix}abc`, 10)).toEqual(err('Unable to parse inference header size, got: abc'));
  expect(fails(prefix, prefix, 10)).toEqual(err('Unable to parse inference header size, got: '));
  expect(fails(prefix, `${prefix}2147483648`, 10)).toEqual(err('Unable to parse inference header size, value is out of range, got: 2147483648'));
  expect(fails(prefix, `${prefix}11`, 10)).toEqual(err('inference header size should be in range (0, 10), got: 11'));
  expect(fails(prefix, `${prefix}-1`, 10)).toEqual(err('inference header size should be in range (0, 10), got: -1'));
  expect(fails(prefix, `${prefix}2147483647`, 10)).toEqual(err('inference header size should be in range (0, 10), got: 2147483647'));
});

test('one brand is not the other', () => {
  expect(jsonHeaderSize(SAGEMAKER_BINARY, `${VERTEX_AI_BINARY}5`, 10)).toBeUndefined();
  expect(jsonHeaderSize(VERTEX_AI_BINARY, `${SAGEMAKER_BINARY}5`, 10)).toBeUndefined();
});
