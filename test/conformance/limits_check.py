#!/usr/bin/env python3
"""Per-key limits on the gRPC pass-through, seen by clients we did not write (tritonclient.grpc and
grpcio), in front of a real Triton:
  - a key over its rate (one request per 10 s, burst 1): its first ModelInfer is served, the next
    gets RESOURCE_EXHAUSTED with the gateway's message, and grpcio sees gRFC A6's
    grpc-retry-pushback-ms in the trailers;
  - a key with a concurrency of 2: with two `slow` calls in flight a third gets RESOURCE_EXHAUSTED;
    once they are answered a call is served again;
  - the same key after its two calls in flight were cancelled by the client (grpcio's
    future.cancel(), RST_STREAM CANCEL), three times over: both places come back, and a third call
    beside two in flight is still refused (released once, not twice).
Every call the gateway admits is one call to Triton; the test around this script counts them.

Usage:
    python limits_check.py --gateway HOST:PORT --rated TOKEN --capped TOKEN

Prints exactly one JSON summary line on stdout ({"ok", "checks", "admitted", "failures"}); failures go
to stderr. Exit status 0 when every check held.
"""

import argparse
import json
import sys
import time

import grpc
import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

P = "/inference.GRPCInferenceService/"


def simple_inputs():
    out = []
    for n in ("INPUT0", "INPUT1"):
        t = grpcclient.InferInput(n, [1, 16], "INT32")
        t.set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
        out.append(t)
    return out


def slow_request(delay_ms):
    r = service_pb2.ModelInferRequest(model_name="slow")
    r.parameters["delay_ms"].int64_param = delay_ms
    t = r.inputs.add(name="INPUT0", datatype="FP32")
    t.shape.extend([4])
    r.raw_input_contents.append(np.arange(4, dtype=np.float32).tobytes())
    return r.SerializeToString()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--rated", required=True)
    ap.add_argument("--capped", required=True)
    a = ap.parse_args()
    failures = []
    checks = 0
    admitted = 0

    def check(what, ok, detail=""):
        nonlocal checks
        checks += 1
        if not ok:
            failures.append(what)
            print(f"FAIL {what}: {detail}", file=sys.stderr)

    def tc_infer(token):
        """tritonclient's infer of `simple`: None when served, else (status, message)."""
        client = grpcclient.InferenceServerClient(a.gateway)
        try:
            client.infer("simple", simple_inputs(), headers={"authorization": f"Bearer {token}"})
            return None
        except InferenceServerException as e:
            return (e.status(), e.message())
        finally:
            client.close()

    # Over the rate.
    got = tc_infer(a.rated)
    check("rated key: the first call is served", got is None, f"{got}")
    admitted += got is None
    got = tc_infer(a.rated)
    check("rated key: the second call within 10 s is RESOURCE_EXHAUSTED", got is not None and got[0] == "StatusCode.RESOURCE_EXHAUSTED"
          and "'rated' is over its rate of 0.1 requests per second (burst 1, the key's limits in auth.keysFile); retry after" in got[1], f"{got}")
    # grpcio: the same status, and gRFC A6's pushback (gRPC's Retry-After) in the trailers.
    with grpc.insecure_channel(a.gateway) as ch:
        call = ch.unary_unary(P + "ModelInfer", request_serializer=None, response_deserializer=None)
        try:
            call.with_call(slow_request(0), metadata=[("authorization", f"Bearer {a.rated}")], timeout=30)
            got = None
        except grpc.RpcError as e:
            got = (e.code(), dict(e.trailing_metadata() or ()))
    check("rated key, grpcio: RESOURCE_EXHAUSTED with grpc-retry-pushback-ms", got is not None and got[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
          and got[1].get("x-tensorgate-error") == "GW_ERR_AUTH_RATE_LIMITED" and 5000 <= int(got[1].get("grpc-retry-pushback-ms", "0")) <= 10000, f"{got}")

    md = [("authorization", f"Bearer {a.capped}")]
    with grpc.insecure_channel(a.gateway) as ch:
        infer = ch.unary_unary(P + "ModelInfer", request_serializer=None, response_deserializer=None)

        def third_refused(label):
            got = tc_infer(a.capped)
            check(f"capped key, {label}: a third call is RESOURCE_EXHAUSTED", got is not None and got[0] == "StatusCode.RESOURCE_EXHAUSTED"
                  and got[1].startswith("'capped' already has 2 requests in flight"), f"{got}")

        # Two in flight, a third refused, then served again once they are answered.
        calls = [infer.future(slow_request(1500), metadata=md, timeout=60) for _ in range(2)]
        time.sleep(0.5)
        third_refused("two answered calls in flight")
        for c in calls:
            try:
                c.result()
                admitted += 1
                ok = True
            except grpc.RpcError as e:
                ok = False
                print(f"slow call failed: {e.code()} {e.details()}", file=sys.stderr)
            check("capped key: the two calls in flight are served", ok)
        got = tc_infer(a.capped)
        check("capped key: served again once its calls were answered", got is None, f"{got}")
        admitted += got is None

        # Cancelled by the client: the places come back.
        for round_ in range(3):
            calls = [infer.future(slow_request(2000), metadata=md, timeout=60) for _ in range(2)]
            time.sleep(0.5)
            third_refused(f"round {round_}, two calls in flight before the cancel")
            for c in calls:
                c.cancel()
            admitted += 2
            # The gateway gives the places back once each call's stream has closed: soon, not at once.
            deadline = time.monotonic() + 5
            while True:
                got = tc_infer(a.capped)
                if got is None or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            check(f"capped key, round {round_}: served after its calls were cancelled", got is None, f"{got}")
            admitted += got is None

        # Still two places, not more: two in flight and a third refused.
        calls = [infer.future(slow_request(1500), metadata=md, timeout=60) for _ in range(2)]
        time.sleep(0.5)
        third_refused("after the cancelled rounds")
        for c in calls:
            try:
                c.result()
                admitted += 1
            except grpc.RpcError as e:
                check("capped key: the last two calls are served", False, f"{e.code()} {e.details()}")

    print(json.dumps({"ok": not failures, "checks": checks, "admitted": admitted, "failures": failures}))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
