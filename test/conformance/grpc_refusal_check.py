#!/usr/bin/env python3
"""Calls the gateway refuses before anything goes upstream, made with grpcio (C-core), a client we
did not write: each must report the gateway's status and message, never INTERNAL "Stream removed"
(what grpcio reports when RST_STREAM reaches it before the trailers). Each call is made many times,
unary and with the request still being sent (a client stream that never ends), since the order of
the frames on the wire is what broke.

  - a method the gateway does not serve: UNIMPLEMENTED;
  - no credentials: UNAUTHENTICATED;
  - a disabled API group (api.disabled): PERMISSION_DENIED;
  - a key limited to `simple` asking for the log settings (the whole server's): PERMISSION_DENIED.

Usage:
    python grpc_refusal_check.py --gateway HOST:PORT --key TOKEN [--rounds N]

Prints exactly one JSON summary line on stdout; failures go to stderr. Exit status 0 when every
call reported the expected status.
"""

import argparse
import json
import sys
import threading

import grpc

P = "/inference.GRPCInferenceService/"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--rounds", type=int, default=50)
    a = ap.parse_args()
    channel = grpc.insecure_channel(a.gateway)
    grpc.channel_ready_future(channel).result(timeout=10)
    ident = lambda b: b
    auth = (("authorization", "Bearer " + a.key),)
    cases = [
        ("unimplemented", P + "NoSuchCall", auth, grpc.StatusCode.UNIMPLEMENTED, "Method not found: " + P + "NoSuchCall"),
        ("unauthenticated", P + "ModelConfig", (), grpc.StatusCode.UNAUTHENTICATED, None),
        ("disabled group", P + "ModelStatistics", auth, grpc.StatusCode.PERMISSION_DENIED,
         "This API is restricted, the 'statistics' API group is disabled on this gateway (api.disabled)"),
        ("whole server", P + "LogSettings", auth, grpc.StatusCode.PERMISSION_DENIED,
         "'simple-only' may not make a call that applies to every model"),
    ]
    failures = []
    calls = 0
    for name, path, md, code, message in cases:
        unary = channel.unary_unary(path, request_serializer=ident, response_deserializer=ident)
        stream = channel.stream_unary(path, request_serializer=ident, response_deserializer=ident)
        for i in range(a.rounds):
            for kind in ("unary", "uploading"):
                calls += 1
                try:
                    if kind == "unary":
                        unary(b"\x0a\x06simple", metadata=md, timeout=10)
                    else:
                        # A request that is still being sent when the answer comes (never ends).
                        stop = threading.Event()

                        def requests():
                            yield b"\x0a\x06simple"
                            stop.wait(5)

                        try:
                            stream(requests(), metadata=md, timeout=10)
                        finally:
                            stop.set()
                    failures.append(f"{name} {kind} #{i}: answered OK")
                except grpc.RpcError as e:
                    got = (e.code(), e.details())
                    if got[0] != code or (message is not None and got[1] != message):
                        failures.append(f"{name} {kind} #{i}: {got[0]} {got[1]!r}, expected {code} {message!r}")
    for f in failures[:40]:
        print(f, file=sys.stderr)
    print(json.dumps({"ok": not failures, "calls": calls, "failures": len(failures)}))
    sys.exit(0 if not failures else 1)


if __name__ == "__main__":
    main()
