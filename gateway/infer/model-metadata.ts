// What the stages know of a model from Triton's ModelMetadata (cached by upstream/control/model-metadata.ts):
// the names, datatypes and shapes the V1, generate and declarative shapes leave out.

export interface TensorMetadata {
  readonly name: string;
  readonly datatype: string;
  /** -1 for a variable dim; a batching model's first dim is -1. */
  readonly shape: readonly number[];
}

export interface ModelMetadata {
  readonly name: string;
  readonly inputs: readonly TensorMetadata[];
  readonly outputs: readonly TensorMetadata[];
}
