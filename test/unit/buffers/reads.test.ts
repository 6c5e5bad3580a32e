import { once } from 'node:events';
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { MAX_LENT_PAGES, PAGE_BYTES, ReadMemory, readInto, readsToNode, SMALL_BYTES } from '../../../gateway/buffers/reads';
import { releaseWhole } from '../../../gateway/buffers/release';

/** A server whose one connection is handed to `take` paused, as the sniffer hands it to the fast path. */
async function serverTaking(take: (socket: Socket) => void): Promise<Server> {
  const server = createServer({ pauseOnConnect: true }, take);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

function pattern(n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 7 + (i >> 10)) & 0xff;
  return b;
}

describe('ReadMemory: a page after a full read, SMALL_BYTES otherwise', () => {
  test('a socket with nothing more waiting reads SMALL_BYTES next; one that filled its buffer, a page', () => {
    const m = new ReadMemory();
    expect(m.next(false).length).toBe(SMALL_BYTES);
    const page = m.next(true);
    expect(page.length).toBe(PAGE_BYTES);
    expect(m.stats().lentPages).toBe(1);
    const chunk = m.read(page, 300_000);
    expect([chunk.length, m.stats().lentPages, m.stats().pageReads]).toEqual([300_000, 0, 1]);
  });

  test('a page read whose chunk is freed whole goes back, moved: views left behind read as empty', () => {
    const m = new ReadMemory();
    const chunk = m.read(m.next(true), 300_000);
    const view = chunk.subarray(10, 20);
    expect(releaseWhole(chunk)).toBe(300_000);
    expect([chunk.length, view.length]).toEqual([0, 0]);
    expect(m.stats()).toMatchObject({ recycled: 1, idlePages: 1, made: 1 });
    const again = m.read(m.next(true), 300_000);
    expect(again.length).toBe(300_000);
    expect(m.stats()).toMatchObject({ made: 1, idlePages: 0 }); // the kept page, not a new one
  });

  test('idle pages are freed (detached) once none was taken for the idle time, not left to a collection', async () => {
    const m = new ReadMemory(20);
    const page = m.next(true);
    m.read(page, 100); // copied out: the page waits idle
    expect([m.stats().idlePages, m.idleBytes, m.keptBytes]).toEqual([1, PAGE_BYTES, PAGE_BYTES]);
    const lent = m.next(true); // the idle page, lent to a socket: still kept
    expect([m.idleBytes, m.keptBytes]).toEqual([0, PAGE_BYTES]);
    m.unused(lent);
    await new Promise((r) => setTimeout(r, 80));
    expect([m.stats().idlePages, m.idleBytes, page.buffer.byteLength]).toEqual([0, 0, 0]);
  });

  test('a slice of a page read is never given back (something else may read the rest)', () => {
    const m = new ReadMemory();
    const chunk = m.read(m.next(true), 300_000);
    expect(releaseWhole(chunk.subarray(0, 100))).toBe(0);
    expect(chunk.length).toBe(300_000);
    expect(m.stats().recycled).toBe(0);
  });

  test('a read of less than a quarter of its buffer is a copy, and the buffer is read into again', () => {
    const m = new ReadMemory();
    const page = m.next(true);
    page.fill(7, 0, 100_000);
    const chunk = m.read(page, 100_000);
    expect(chunk.buffer.byteLength).toBe(100_000); // its own memory, not the page's
    expect(chunk.every((b) => b === 7)).toBe(true);
    expect(m.stats()).toMatchObject({ copied: 1, idlePages: 1, lentPages: 0 });
    const small = m.next(false);
    const tiny = m.read(small, 300);
    expect(tiny.buffer).not.toBe(small.buffer);
    expect(m.next(false)).toBe(small); // the spare small buffer, not a new one
  });

  test(`at most ${MAX_LENT_PAGES} pages wait to be read into; beyond, sockets read SMALL_BYTES`, () => {
    const m = new ReadMemory();
    const lent = Array.from({ length: MAX_LENT_PAGES + 5 }, () => m.next(true));
    expect(lent.filter((b) => b.length === PAGE_BYTES)).toHaveLength(MAX_LENT_PAGES);
    expect(lent.filter((b) => b.length === SMALL_BYTES)).toHaveLength(5);
    for (const b of lent) m.unused(b);
    expect(m.stats().lentPages).toBe(0);
  });
});

describe('readInto: a socket\'s reads sized by what it has waiting', () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.close();
    server = undefined;
  });

  test('4 MiB arrive whole and in order, pages read into after a full read; its page goes back at close', async () => {
    const m = new ReadMemory();
    const got: Buffer[] = [];
    let closed!: () => void;
    const done = new Promise<void>((resolve) => { closed = resolve; });
    server = await serverTaking((socket) => {
      expect(readInto(socket, (chunk) => got.push(Buffer.from(chunk)), m)).toBe(true);
      socket.on('close', () => setImmediate(closed));
      // Reads start after the body was sent: the first fills its 16 KiB, so the next is a page.
      setTimeout(() => socket.resume(), 100);
    });
    const sent = pattern(4 * 1024 * 1024);
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    client.end(sent);
    await done;
    expect(Buffer.concat(got).equals(sent)).toBe(true);
    const s = m.stats();
    // How many reads it takes depends on the kernel's receive buffer and the machine's load (the
    // bench counts them: bench/cpu-per-request.js --syscalls); that pages are read into does not.
    expect(s.pageReads).toBeGreaterThan(0);
    expect(s.lentPages).toBe(0);
  });

  test('pause() stops the reads and resume() starts them again', async () => {
    const m = new ReadMemory();
    let bytes = 0;
    let socket!: Socket;
    // Each read resolves the promise waited for, once: the waits are for reads, not for time.
    let read: (() => void) | undefined;
    const nextRead = (): Promise<void> => new Promise((resolve) => { read = resolve; });
    const firstRead = nextRead();
    server = await serverTaking((s) => {
      socket = s;
      readInto(s, (chunk) => {
        bytes += chunk.length;
        s.pause();
        read?.();
        read = undefined;
      }, m);
      s.resume();
    });
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    client.write(pattern(3 * 1024 * 1024));
    await firstRead;
    const first = bytes;
    expect(first).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(bytes).toBe(first); // paused: no read since, though most of 3 MiB is still to come
    const again = nextRead();
    socket.resume();
    await again;
    expect(bytes).toBeGreaterThan(first);
    client.destroy();
    socket.destroy();
  });

  test('readsToNode: later reads are the socket\'s own \'data\' again, as copies', async () => {
    const m = new ReadMemory();
    const mine: Buffer[] = [];
    const node: Buffer[] = [];
    let socket!: Socket;
    let gotData!: () => void;
    const sawData = new Promise<void>((resolve) => { gotData = resolve; });
    let gotMine!: () => void;
    const sawMine = new Promise<void>((resolve) => { gotMine = resolve; });
    server = await serverTaking((s) => {
      socket = s;
      readInto(s, (chunk) => {
        mine.push(Buffer.from(chunk));
        gotMine();
        readsToNode(s, m);
        s.on('data', (d: Buffer) => {
          node.push(d);
          gotData();
        });
      }, m);
      s.resume();
    });
    const client = connect((server.address() as AddressInfo).port, '127.0.0.1');
    client.write('first');
    await sawMine; // 'second' is sent once 'first' was read
    client.write('second');
    await sawData;
    expect(Buffer.concat(mine).toString()).toBe('first');
    expect(Buffer.concat(node).toString()).toBe('second');
    client.destroy();
    socket.destroy();
  });
});
