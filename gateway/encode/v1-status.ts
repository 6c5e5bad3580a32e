// GET /v1/models/{m}[/versions/{v}]: a model's status as TF-Serving writes it
// (`model_version_status`), or KServe V1's `{"name", "ready"}` (`v1.statusFormat`).

/** `versions`: the model's versions from its metadata (TF-Serving's form lists them). */
export function encodeV1Status(format: 'tfserving' | 'kserve', name: string, version: string, ready: boolean,
  versions: readonly string[] | undefined): string {
  if (format === 'kserve') return JSON.stringify({ name, ready });
  const listed = version !== '' ? [version] : versions !== undefined && versions.length > 0 ? versions : ['1'];
  return JSON.stringify({
    model_version_status: listed.map((v) => ({
      version: v, state: ready ? 'AVAILABLE' : 'UNAVAILABLE', status: { error_code: 'OK', error_message: '' },
    })),
  });
}
