// The protocol-neutral inference response: what the upstream reader makes of Triton's
// ModelInferResponse and every encoder renders. Output bytes stay views of the received chunks
// (docs/architecture.md#answers-as-views), so a binary answer reaches the client without a user-space copy.
import { gather } from './gather';
import type { ParamValue } from './request';

/** A response parameter; undefined when Triton set none of InferParameter's members. */
export type ResponseParams = Readonly<Record<string, ParamValue | undefined>>;

export interface OutputTensor {
  readonly name: string;
  readonly datatype: string;
  readonly shape: readonly number[];
  readonly parameters: ResponseParams;
  /** The output's bytes as views of the received chunks (possibly several), in order. */
  readonly data: readonly Buffer[];
  readonly byteLength: number;
}

export interface InferResponse {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly id: string;
  /** In Triton's order (protobufjs keeps the wire order of map entries). */
  readonly parameters: ResponseParams;
  readonly outputs: readonly OutputTensor[];
}

/** An output's bytes as one buffer: its only chunk as it is, several gathered (a copy). */
export function outputBytes(o: OutputTensor): Buffer {
  return gather(o.data, o.byteLength);
}
