// Model metadata (input and output names, datatypes, shapes), cached per model and version like
// model-configs.ts: the TF-Serving / KServe-V1 shapes carry no names or types, so every predict
// needs them. A NOT_FOUND from an inference evicts the model.
import type { inference } from '../../../proto/services';
import type { ModelMetadata, TensorMetadata } from '../../infer/model-metadata';
import type { ControlPlane } from './control-plane';

const tensors = (ts: readonly inference.ModelMetadataResponse.ITensorMetadata[]): TensorMetadata[] =>
  ts.map((t) => ({ name: t.name ?? '', datatype: t.datatype ?? '', shape: (t.shape ?? []).map((d) => Number(d)) }));

export class ModelMetadatas {
  readonly #cache = new Map<string, ModelMetadata>();
  constructor(private readonly upstream: ControlPlane) {}

  async get(name: string, version: string, signal: AbortSignal): Promise<ModelMetadata> {
    const key = `${name}\u0000${version}`;
    const hit = this.#cache.get(key);
    if (hit !== undefined) return hit;
    const m = await this.upstream.call('ModelMetadata', { name, version }, signal);
    const md: ModelMetadata = { name: m.name, inputs: tensors(m.inputs), outputs: tensors(m.outputs) };
    this.#cache.set(key, md);
    return md;
  }

  /** The cached metadata, without asking Triton: undefined until get() has read it (pipeline/v1-planned.ts). */
  peek(name: string, version: string): ModelMetadata | undefined {
    return this.#cache.get(`${name}\u0000${version}`);
  }

  /** Whether Triton has confirmed a model of this name (any version), as ModelConfigs.has. */
  has(name: string): boolean {
    for (const key of this.#cache.keys()) if (key.startsWith(`${name}\u0000`)) return true;
    return false;
  }

  evict(name: string): void {
    for (const key of this.#cache.keys()) if (key.startsWith(`${name}\u0000`)) this.#cache.delete(key);
  }
}
