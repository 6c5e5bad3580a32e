"""A client that uploads slowly (32 KiB pieces over UPLOAD_SECONDS) over HTTP/1.1 on a raw socket,
then reads the answer one of three ways:
  - READ_BYTES_PER_S > 0: at that rate, through a small receive buffer (SO_RCVBUF), so that the
    server must hold much of a large answer in its own buffers while it is written: what a drain
    has to wait for;
  - READ_BYTES_PER_S 0 (or absent): as fast as it comes, recv() of 1 MiB, the kernel's own buffer;
  - STALL_SECONDS > 0: reads nothing for that long (small receive buffer), then all there is.
The answer is parsed only as far as a Content-Length answer needs. (Its HTTP/2 twin is the Go
client's `slow` mode: Python's `h2` refuses to send DATA once a GOAWAY has arrived, so it cannot
finish an upload across a drain.)

    python slow_client.py http1 HOST PORT PATH BODY_FILE UPLOAD_SECONDS [READ_BYTES_PER_S [STALL_SECONDS]]

Prints "started" once the request's head is sent, then one JSON line: status, the body's length
and sha256, `complete` (Content-Length bytes read before the connection ended), or `error`.
"""
import hashlib
import json
import socket
import sys
import time

RCVBUF = 64 * 1024
PIECE = 32 * 1024
FAST_RECV = 1024 * 1024


def connect(host: str, port: int, small_buffer: bool) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if small_buffer:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    s.connect((host, port))
    return s


def http1(host, port, path, body, upload_s, read_rate, stall_s):
    s = connect(host, port, read_rate > 0 or stall_s > 0)
    chunk = RCVBUF if read_rate > 0 else FAST_RECV
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    s.sendall(head)
    print("started", flush=True)
    pieces = max(1, len(body) // PIECE)
    step = upload_s / pieces
    for i in range(pieces):
        end = len(body) if i == pieces - 1 else (i + 1) * PIECE
        s.sendall(body[i * PIECE:end])
        time.sleep(step)
    time.sleep(stall_s)
    buf = b""
    while b"\r\n\r\n" not in buf:
        got = s.recv(chunk)
        if not got:
            return {"error": f"the connection ended in the answer's head ({len(buf)} bytes)"}
        buf += got
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    length = next(int(line.split(":", 1)[1]) for line in lines[1:] if line.lower().startswith("content-length:"))
    data = bytearray(rest)
    t0 = time.monotonic()
    try:
        while len(data) < length:
            got = s.recv(chunk)
            if not got:
                break
            data += got
            if read_rate:
                ahead = len(data) / read_rate - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
    except ConnectionError as e:
        return {"status": status, "length": len(data), "declared": length, "complete": False, "error": repr(e)}
    s.close()
    return {"status": status, "length": len(data), "declared": length, "complete": len(data) == length,
            "sha256": hashlib.sha256(data).hexdigest()}


def main():
    proto, host, port, path, body_file, upload_s = sys.argv[1:7]
    read_rate = float(sys.argv[7]) if len(sys.argv) > 7 else 0
    stall_s = float(sys.argv[8]) if len(sys.argv) > 8 else 0
    body = open(body_file, "rb").read()
    try:
        if proto != "http1":
            raise ValueError(f"only http1 is spoken here, not {proto}")
        out = http1(host, int(port), path, body, float(upload_s), read_rate, stall_s)
    except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
        out = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out), flush=True)


main()
