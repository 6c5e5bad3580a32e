// Fuzzing the answer reader against protobufjs: a ModelInferResponse, generated or mutated, cut
// anywhere, reads as the old path (nextOutput's split, protobufjs's decode of the header fields and
// their conversion) read it — the same response, or a refusal with the same code — and
// readResponseHeader (the streamed head) reads what it reads of a head it accepts.
import fc from 'fast-check';
import { readInferResponse, readResponseHeader } from '../../gateway/infer/answer-reader';
import { inferAnswer, outcomeOf, referenceRead } from '../support/infer-answers';
import { cutAt, cuts, fuzz, mutated } from './harness';

describe('the answer reader', () => {
  fuzz('any message in any chunking: what protobufjs made of it whole', 600, fc.tuple(inferAnswer, cuts), ([m, points]) => {
    const chunks = cutAt(m, points);
    expect(outcomeOf(() => readInferResponse(chunks))).toEqual(outcomeOf(() => referenceRead(chunks)));
  });

  fuzz('a mutated message in any chunking: the same accept or refuse', 1500, fc.tuple(inferAnswer.chain(mutated), cuts), ([m, points]) => {
    const chunks = cutAt(m, points);
    expect(outcomeOf(() => readInferResponse(chunks))).toEqual(outcomeOf(() => referenceRead(chunks)));
  });

  // Without raw_output_contents tags (0x32) the whole message is its head (when nextOutput let it through).
  fuzz('the streamed head: the header fields readInferResponse reads', 400, inferAnswer.map((m) => Buffer.from(m.filter((b) => b !== 0x32))), (m) => {
    const whole = outcomeOf(() => readInferResponse([m]));
    if ('ok' in whole) expect(outcomeOf(() => readResponseHeader([m]))).toEqual(whole);
  });
});
