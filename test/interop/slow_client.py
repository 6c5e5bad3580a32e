"""A client that uploads slowly and reads slowly, over HTTP/1.1 or h2c (prior knowledge), on a raw
socket with a small receive buffer (SO_RCVBUF), so that the server must hold most of a large answer
in its own buffers while it is written: what a drain has to wait for. The HTTP/2 side is the
`h2` library's state machine (no client logic of ours beyond pacing); HTTP/1.1 is parsed here, only
as far as a Content-Length answer needs.

    python slow_client.py http1|h2 HOST PORT PATH BODY_FILE UPLOAD_SECONDS [READ_BYTES_PER_S]

Prints "started" once the request's head is sent, then one JSON line: status, the body's length and sha256, `complete` (HTTP/1.1: Content-Length
bytes read before the connection ended; HTTP/2: END_STREAM received, no reset), or `error`.
"""
import hashlib
import json
import select
import socket
import sys
import time

RCVBUF = 64 * 1024
CHUNK = 64 * 1024


def connect(host: str, port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
    s.connect((host, port))
    return s


def http1(host, port, path, body, upload_s, read_rate):
    s = connect(host, port)
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    s.sendall(head)
    print("started", flush=True)
    pieces = max(1, len(body) // CHUNK)
    step = upload_s / pieces
    for i in range(pieces):
        end = len(body) if i == pieces - 1 else (i + 1) * CHUNK
        s.sendall(body[i * CHUNK:end])
        time.sleep(step)
    buf = b""
    while b"\r\n\r\n" not in buf:
        got = s.recv(CHUNK)
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
            got = s.recv(CHUNK)
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


def h2c(host, port, path, body, upload_s, read_rate):
    import h2.config
    import h2.connection
    import h2.events

    s = connect(host, port)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(":method", "POST"), (":path", path), (":scheme", "http"), (":authority", f"{host}:{port}"),
                            ("content-type", "application/json"), ("content-length", str(len(body)))])
    s.sendall(conn.data_to_send())
    print("started", flush=True)
    state = {"status": None, "data": bytearray(), "ended": False, "reset": None}

    def pump(timeout):
        r, _, _ = select.select([s], [], [], timeout)
        if not r:
            return True
        got = s.recv(CHUNK)
        if not got:
            return False
        for ev in conn.receive_data(got):
            if isinstance(ev, h2.events.ResponseReceived):
                state["status"] = int(dict(ev.headers)[":status"])
            elif isinstance(ev, h2.events.DataReceived):
                state["data"] += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded):
                state["ended"] = True
            elif isinstance(ev, h2.events.StreamReset):
                state["reset"] = ev.error_code
        out = conn.data_to_send()
        if out:
            s.sendall(out)
        return True

    sent = 0
    pieces = max(1, len(body) // CHUNK)
    step = upload_s / pieces
    alive = True
    while sent < len(body) and alive and state["reset"] is None:
        n = min(CHUNK, len(body) - sent, conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
        if n <= 0:
            alive = pump(0.05)
            continue
        conn.send_data(sid, body[sent:sent + n], end_stream=sent + n == len(body))
        sent += n
        s.sendall(conn.data_to_send())
        deadline = time.monotonic() + step * n / CHUNK
        while alive and time.monotonic() < deadline:
            alive = pump(max(0.0, deadline - time.monotonic()))
    t0 = time.monotonic()
    while alive and not state["ended"] and state["reset"] is None:
        alive = pump(1.0)
        if read_rate:
            ahead = len(state["data"]) / read_rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    s.close()
    data = bytes(state["data"])
    out = {"status": state["status"], "length": len(data), "complete": state["ended"] and state["reset"] is None,
           "sha256": hashlib.sha256(data).hexdigest()}
    if state["reset"] is not None:
        out["error"] = f"RST_STREAM {state['reset']}"
    elif not alive and not state["ended"]:
        out["error"] = "the connection ended before END_STREAM"
    return out


def main():
    proto, host, port, path, body_file, upload_s = sys.argv[1:7]
    read_rate = float(sys.argv[7]) if len(sys.argv) > 7 else 0
    body = open(body_file, "rb").read()
    try:
        out = (http1 if proto == "http1" else h2c)(host, int(port), path, body, float(upload_s), read_rate)
    except Exception as e:  # noqa: BLE001 - reported to the test, which fails on it
        out = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out), flush=True)


main()
