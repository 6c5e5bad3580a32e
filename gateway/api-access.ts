// Restricted API groups (docs/architecture.md#restricted-apis): Triton's categories, which of them a request may use,
// and which gRPC calls belong to each (for Triton's own --grpc-restricted-protocol, whose header
// the gateway forwards as `triton-grpc-protocol-<key>` metadata). One table for the router, the
// configuration and the control plane.

/** Triton's category names, as `--http-restricted-api` spells them. */
export const API_CATEGORIES = [
  'health', 'metadata', 'inference', 'shared-memory', 'model-config', 'model-repository', 'statistics', 'trace', 'logging',
] as const;
export type ApiCategory = (typeof API_CATEGORIES)[number];

export function isApiCategory(s: string): s is ApiCategory {
  return (API_CATEGORIES as readonly string[]).includes(s);
}

/** A category guarded by a request header that must carry exactly `value`. */
export interface Restriction {
  readonly categories: readonly ApiCategory[];
  readonly key: string;
  readonly value: string;
}

/** What the gateway lets through, per category. */
export type Access = { readonly kind: 'open' } | { readonly kind: 'disabled' } | { readonly kind: 'header'; readonly key: string; readonly value: string };

/**
 * Parses Triton's `<category>[,<category>...]:<key>=<value>` syntax (--http-restricted-api,
 * --grpc-restricted-protocol). Returns a problem text for the configuration report.
 */
export function parseRestriction(text: string): Restriction | string {
  const colon = text.indexOf(':');
  const eq = text.indexOf('=', colon + 1);
  if (colon <= 0 || eq === -1 || eq === colon + 1) return `${JSON.stringify(text)} is not <category>[,<category>...]:<key>=<value>`;
  const categories: ApiCategory[] = [];
  for (const c of text.slice(0, colon).split(',')) {
    const name = c.trim();
    if (!isApiCategory(name)) return `unknown API category ${JSON.stringify(name)} (known: ${API_CATEGORIES.join(', ')})`;
    categories.push(name);
  }
  return { categories, key: text.slice(colon + 1, eq).trim(), value: text.slice(eq + 1) };
}

/** Every category's access: restricted ones need their header, disabled ones are refused, the rest open. */
export function accessTable(restricted: readonly Restriction[], disabled: readonly ApiCategory[]): Readonly<Record<ApiCategory, Access>> {
  const table = Object.fromEntries(API_CATEGORIES.map((c) => [c, { kind: 'open' }])) as Record<ApiCategory, Access>;
  for (const c of disabled) table[c] = { kind: 'disabled' };
  // Naming a category in api.restricted enables it behind its header, whatever api.disabled says.
  for (const r of restricted) for (const c of r.categories) table[c] = { kind: 'header', key: r.key, value: r.value };
  return table;
}

/**
 * The gRPC calls of each category, as Triton's gRPC server groups them. A Map: the key is the
 * client's method name, and a plain object would answer `constructor` with Object.prototype's.
 */
export const RPC_CATEGORY: ReadonlyMap<string, ApiCategory> = new Map(Object.entries({
  ServerLive: 'health', ServerReady: 'health', ModelReady: 'health',
  ServerMetadata: 'metadata', ModelMetadata: 'metadata',
  ModelInfer: 'inference', ModelStreamInfer: 'inference',
  ModelConfig: 'model-config',
  ModelStatistics: 'statistics',
  RepositoryIndex: 'model-repository', RepositoryModelLoad: 'model-repository', RepositoryModelUnload: 'model-repository',
  SystemSharedMemoryStatus: 'shared-memory', SystemSharedMemoryRegister: 'shared-memory', SystemSharedMemoryUnregister: 'shared-memory',
  CudaSharedMemoryStatus: 'shared-memory', CudaSharedMemoryRegister: 'shared-memory', CudaSharedMemoryUnregister: 'shared-memory',
  TraceSetting: 'trace',
  LogSettings: 'logging',
} satisfies Record<string, ApiCategory>));

/**
 * gRPC metadata Triton expects for a call when its own gRPC endpoint is restricted:
 * `triton-grpc-protocol-<key>: <value>` (docs/architecture.md#restricted-apis).
 */
export function grpcRestrictionMetadata(restricted: readonly Restriction[], rpc: string): [string, string] | undefined {
  const category = RPC_CATEGORY.get(rpc);
  const r = restricted.find((x) => category !== undefined && x.categories.includes(category));
  return r === undefined ? undefined : [`triton-grpc-protocol-${r.key.toLowerCase()}`, r.value];
}
