// Reloading a file when it changes. The directory is watched, not the file: Kubernetes updates a
// mounted Secret or ConfigMap by swapping the directory's `..data` symlink, which a watch on the
// old file never sees (its inode is gone). Events come in bursts (a write is open, write, close;
// a swap is several renames), so `changed` runs once things are quiet for `debounceMs`.
import { watch } from 'node:fs';
import { dirname, resolve } from 'node:path';

export interface FileWatch {
  close(): void;
}

export function watchFile(path: string, debounceMs: number, changed: () => void, failed: (err: Error) => void): FileWatch {
  let timer: NodeJS.Timeout | undefined;
  // persistent: false, unref'd timer: a watch never keeps the process alive by itself.
  const watcher = watch(dirname(resolve(path)), { persistent: false }, () => {
    clearTimeout(timer);
    timer = setTimeout(changed, debounceMs).unref();
  });
  watcher.on('error', failed);
  return {
    close() {
      clearTimeout(timer);
      watcher.close();
    },
  };
}
