// The protocol-neutral inference request: what every decoder produces and the upstream framer
// consumes. Tensor bytes are not here: decoders write them straight into the framed message.

/** A typed parameter; the type picks the gRPC InferParameter oneof member (docs/architecture.md#the-grpc-messages). */
export type ParamValue =
  | { readonly type: 'bool'; readonly value: boolean }
  | { readonly type: 'int64'; readonly value: bigint }
  | { readonly type: 'uint64'; readonly value: bigint }
  | { readonly type: 'double'; readonly value: number }
  | { readonly type: 'string'; readonly value: string };

/** The parameters of a request or tensor that has none: one map, never written (ReadonlyMap). */
export const NO_PARAMETERS: ReadonlyMap<string, ParamValue> = new Map();

export interface InputTensor {
  readonly name: string;
  /** As the client wrote it; Triton judges unknown names. */
  readonly datatype: string;
  readonly shape: readonly number[];
  /** Forwarded input parameters (shared-memory region, offset, byte size). */
  readonly parameters: ReadonlyMap<string, ParamValue>;
  /** Bytes of its raw_input_contents entry; undefined when the data is in shared memory (no entry). */
  readonly byteSize: number | undefined;
}

export interface RequestedOutput {
  readonly name: string;
  /** Forwarded output parameters (classification, shared memory). */
  readonly parameters: ReadonlyMap<string, ParamValue>;
  /** `binary_data` as given; undefined = JSON (an explicit output without it is JSON, docs/architecture.md#answers). */
  readonly binary: boolean | undefined;
  /** In shared memory: Triton writes it there, the response carries no data. */
  readonly sharedMemory: boolean;
  /** `content_type: "base64"`: rendered as base64 JSON (numeric: one string; BYTES: base64 elements). */
  readonly base64?: boolean | undefined;
}

export interface InferRequest {
  readonly modelName: string;
  /** "" = the server's choice. */
  readonly modelVersion: string;
  /** undefined = none given. */
  readonly id: string | undefined;
  readonly parameters: ReadonlyMap<string, ParamValue>;
  readonly inputs: readonly InputTensor[];
  /** undefined = all outputs of the model. */
  readonly outputs: readonly RequestedOutput[] | undefined;
  /** Kind of outputs the request did not list: `binary_data_output`, or binary for raw requests. */
  readonly binaryDataOutput: boolean;
  /** Request-level `output_content_type: "base64"`: the default for outputs not asked for as binary. */
  readonly base64Output?: boolean;
}
