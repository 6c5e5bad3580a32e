// Model configurations, cached per model and version. Infer needs them before reading the body,
// as Triton does (an unknown model is 404 whatever the body; a decoupled model is 501), and raw
// binary requests deduce their input from them. Only answers are cached; a NOT_FOUND from an
// inference evicts the model (it was unloaded), and repository load/unload through the gateway
// will clear it.
import type { inference } from '../../../proto/services';
import type { ControlPlane } from './control-plane';

export class ModelConfigs {
  readonly #cache = new Map<string, inference.ModelConfig>();
  constructor(private readonly upstream: ControlPlane) {}

  async get(name: string, version: string, signal: AbortSignal): Promise<inference.ModelConfig> {
    const key = `${name}\u0000${version}`;
    const hit = this.#cache.get(key);
    if (hit !== undefined) return hit;
    const { config } = await this.upstream.call('ModelConfig', { name, version }, signal);
    const c = config as inference.ModelConfig;
    this.#cache.set(key, c);
    return c;
  }

  /** The cached configuration, without asking Triton: undefined when none is cached. */
  peek(name: string, version: string): inference.ModelConfig | undefined {
    return this.#cache.get(`${name}\u0000${version}`);
  }

  /** Whether Triton has confirmed a model of this name (any version). */
  has(name: string): boolean {
    for (const key of this.#cache.keys()) if (key.startsWith(`${name}\u0000`)) return true;
    return false;
  }

  evict(name: string): void {
    for (const key of this.#cache.keys()) if (key.startsWith(`${name}\u0000`)) this.#cache.delete(key);
    for (const f of this.#evicted) f(name);
  }

  readonly #evicted: ((name: string) => void)[] = [];

  /** `f` is told of every eviction (the compiled lane forgets what it kept: ingress/http1/lane.ts). */
  onEvict(f: (name: string) => void): void {
    this.#evicted.push(f);
  }
}
