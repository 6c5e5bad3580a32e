// The reference backend's system shared memory, as Triton's SharedMemoryManager keeps it
// (triton-inference-server/server src/shared_memory_manager.cc): a region is a POSIX shared
// memory object (shm_open of its key: /dev/shm/<key> on Linux), opened and checked once at
// SystemSharedMemoryRegister; requests then name the region, an offset and a byte size. Triton
// maps the object (mmap MAP_SHARED); Node has no mmap, so the region keeps the file open and
// reads and writes it with pread/pwrite. On tmpfs both go through the same pages a mapping
// would, so what a client wrote is what the model reads, and the other way round — and, as with
// a mapping, a region stays usable after its file is unlinked, until it is unregistered.
// Same checks, gRPC codes and messages as Triton's.
import { closeSync, fstatSync, openSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';

const INVALID_ARGUMENT = 3;
const NOT_FOUND = 5;
const ALREADY_EXISTS = 6;
const INTERNAL = 13;

/** A failed call: the gRPC status and Triton's message. */
export class ShmError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

export interface RegionStatus {
  readonly name: string;
  readonly key: string;
  readonly offset: number;
  readonly byte_size: number;
}

interface Region extends RegionStatus {
  readonly fd: number;
}

export class SystemSharedMemory {
  readonly #regions = new Map<string, Region>();
  /** Reads and writes served from regions (tests see that a request really went through one). */
  bytesRead = 0;
  bytesWritten = 0;

  /** `dir`: where shm_open finds its objects (/dev/shm on Linux). */
  constructor(private readonly dir = '/dev/shm') {}

  register(name: string, key: string, offset: number, byteSize: number): void {
    // Triton 2.51 has no check of its own on the key (later ones refuse its python backend's
    // prefix): whatever shm_open cannot open is "Unable to open".
    const bare = key.replace(/^\/+/, '');
    if (this.#regions.has(name)) throw new ShmError(ALREADY_EXISTS, `shared memory region '${name}' already in manager`);
    // shm_open takes one name: a key with a slash past the first would be no object of /dev/shm.
    if (bare === '' || bare.includes('/')) throw new ShmError(INTERNAL, `Unable to open shared memory region: '${key}'`);
    let fd: number;
    try {
      fd = openSync(join(this.dir, bare), 'r+');
    } catch {
      throw new ShmError(INTERNAL, `Unable to open shared memory region: '${key}'`);
    }
    // Triton 2.51 (the version this backend answers as) reports a region past the object's end so;
    // later versions say "failed to register shared memory region '<name>': invalid args".
    if (offset + byteSize > fstatSync(fd).size) {
      closeSync(fd);
      throw new ShmError(INTERNAL, `Invalid shared memory region: '${key}'`);
    }
    this.#regions.set(name, { name, key, offset, byte_size: byteSize, fd });
  }

  /** Every region (name ''), or the one named; Triton answers an unknown name NOT_FOUND. */
  status(name: string): RegionStatus[] {
    if (name === '') return [...this.#regions.values()].map(statusOf);
    const r = this.#regions.get(name);
    if (r === undefined) throw new ShmError(NOT_FOUND, `Unable to find system shared memory region: '${name}'`);
    return [statusOf(r)];
  }

  /** An unknown name is no error (Triton's UnregisterHelper); '' unregisters all. */
  unregister(name: string): void {
    for (const r of name === '' ? [...this.#regions.values()] : [this.#regions.get(name)].filter((x) => x !== undefined)) {
      this.#regions.delete(r.name);
      closeSync(r.fd);
    }
  }

  /** Triton's GetMemoryInfo checks: the region exists, the offset is inside it, offset + size too. */
  #place(name: string, offset: number, byteSize: number): { region: Region; at: number } {
    const region = this.#regions.get(name);
    if (region === undefined) throw new ShmError(NOT_FOUND, `Unable to find shared memory region: '${name}'`);
    if (offset < 0 || offset >= region.byte_size) throw new ShmError(INVALID_ARGUMENT, `Invalid offset for shared memory region: '${name}'`);
    if (offset + byteSize > region.byte_size) throw new ShmError(INVALID_ARGUMENT, `Invalid offset + byte size for shared memory region: '${name}'`);
    return { region, at: region.offset + offset };
  }

  /** An input's bytes: `byteSize` bytes at `offset` of the region. */
  read(name: string, offset: number, byteSize: number): Buffer {
    const { region, at } = this.#place(name, offset, byteSize);
    const out = Buffer.allocUnsafe(byteSize);
    let done = 0;
    while (done < byteSize) {
      const n = readSync(region.fd, out, done, byteSize - done, at + done);
      if (n === 0) throw new ShmError(INTERNAL, `shared memory region '${name}' is shorter than registered (its file was truncated)`);
      done += n;
    }
    this.bytesRead += byteSize;
    return out;
  }

  /** The room an output may take: the place's size, checked as Triton checks it before the model runs. */
  room(name: string, offset: number, byteSize: number): number {
    this.#place(name, offset, byteSize);
    return byteSize;
  }

  /** An output's bytes written at `offset` of the region (`room` checked the place). */
  write(name: string, offset: number, data: Buffer): void {
    const { region, at } = this.#place(name, offset, data.byteLength);
    let done = 0;
    while (done < data.byteLength) done += writeSync(region.fd, data, done, data.byteLength - done, at + done);
    this.bytesWritten += data.byteLength;
  }

  close(): void {
    this.unregister('');
  }
}

const statusOf = (r: Region): RegionStatus => ({ name: r.name, key: r.key, offset: r.offset, byte_size: r.byte_size });
