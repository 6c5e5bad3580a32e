// Server and model metadata as Triton's HTTP frontend answers them (docs/architecture.md#endpoints): its key
// order, shapes as plain numbers.
import type { inference } from '../../proto/services';

export function encodeServerMetadata(m: inference.IServerMetadataResponse): string {
  return JSON.stringify({ name: m.name, version: m.version, extensions: m.extensions });
}

const tensors = (ts: readonly inference.ModelMetadataResponse.ITensorMetadata[] | null | undefined) =>
  (ts ?? []).map((t) => ({ name: t.name, datatype: t.datatype, shape: (t.shape ?? []).map((d) => Number(d)) }));

export function encodeModelMetadata(m: inference.IModelMetadataResponse): string {
  return JSON.stringify({ name: m.name, versions: m.versions, platform: m.platform, inputs: tensors(m.inputs), outputs: tensors(m.outputs) });
}
