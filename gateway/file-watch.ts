// Reloading files when they change, for every file the gateway reloads (server.tls.*,
// upstream.tls.*, auth.keysFile, auth.jwt.jwksFile). Each file's directory is watched, not the
// file: Kubernetes updates a mounted Secret or ConfigMap by swapping the directory's `..data`
// symlink, which a watch on the old file never sees (its inode is gone). Events come in bursts (a
// write is open, write, close; a swap is several renames), so `changed` runs once things have been
// quiet for `debounceMs`. Nothing here keeps the process alive (persistent: false, unref'd timer).
import { watch } from 'node:fs';
import { dirname, resolve } from 'node:path';

export interface FileWatch {
  close(): void;
}

/**
 * Calls `changed` after changes in the directories of `paths` settle; `failed` when a directory
 * can no longer be watched (a volume unmounted): its reloads stop, what was loaded stays.
 */
export function watchFiles(paths: readonly string[], debounceMs: number, changed: () => void, failed: (dir: string, err: Error) => void): FileWatch {
  let timer: NodeJS.Timeout | undefined;
  const onChange = (): void => {
    clearTimeout(timer);
    timer = setTimeout(changed, debounceMs).unref();
  };
  const watchers = [...new Set(paths.map((p) => dirname(resolve(p))))].map((dir) => {
    const w = watch(dir, { persistent: false }, onChange);
    w.on('error', (err) => failed(dir, err));
    return w;
  });
  return {
    close() {
      clearTimeout(timer);
      for (const w of watchers) w.close();
    },
  };
}
