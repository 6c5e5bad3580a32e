#!/usr/bin/env python3
"""A key limited to the model `simple`, attacking the gRPC pass-through with grpcio (raw request
bytes) and tritonclient.grpc: each request is first sent to Triton itself, to show which model
Triton serves for it, then through the gateway, which must refuse it with PERMISSION_DENIED:
  - a ModelInferRequest whose model_name field comes last (after the tensors);
  - the bytes 0a 06 "simple" (a first model_name) before a request for identity_fp32: protobuf
    keeps the last copy, so Triton serves identity_fp32;
  - a ModelStreamInfer whose second message names identity_fp32 (the first, for simple, is served);
  - a gzip-compressed request (tritonclient's compression_algorithm), whose model cannot be read;
  - RepositoryModelLoad of another model.
A key for every model gets what Triton gives.

Usage:
    python grpc_model_scope_check.py --gateway HOST:PORT --triton HOST:PORT --key TOKEN --all TOKEN

Prints exactly one JSON summary line on stdout; failures go to stderr. Exit status 0 when every
check held.
"""

import argparse
import json
import sys
import threading

import grpc
import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

P = "/inference.GRPCInferenceService/"


def identity_request(name="identity_fp32"):
    r = service_pb2.ModelInferRequest(model_name=name)
    t = r.inputs.add(name="INPUT0", datatype="FP32")
    t.shape.extend([1, 4])
    r.raw_input_contents.append(np.arange(4, dtype=np.float32).tobytes())
    return r


def simple_request():
    r = service_pb2.ModelInferRequest(model_name="simple")
    for n in ("INPUT0", "INPUT1"):
        t = r.inputs.add(name=n, datatype="INT32")
        t.shape.extend([1, 16])
        r.raw_input_contents.append(np.arange(16, dtype=np.int32).tobytes())
    return r


def field1(name):
    b = name.encode()
    return bytes([0x0A, len(b)]) + b


def moved_to_end():
    r = identity_request()
    r.model_name = ""
    return r.SerializeToString() + field1("identity_fp32")


def prefixed():
    return field1("simple") + identity_request().SerializeToString()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--triton", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--all", required=True)
    a = ap.parse_args()
    failures = []
    checks = 0

    def check(what, ok, detail=""):
        nonlocal checks
        checks += 1
        if not ok:
            failures.append(what)
            print(f"FAIL {what}: {detail}", file=sys.stderr)

    def unary(target, method, body, token=None):
        with grpc.insecure_channel(target) as ch:
            call = ch.unary_unary(P + method, request_serializer=None, response_deserializer=None)
            md = [] if token is None else [("authorization", f"Bearer {token}")]
            try:
                return grpc.StatusCode.OK, call(body, metadata=md, timeout=30)
            except grpc.RpcError as e:
                return e.code(), e.details()

    def served_model(raw):
        return service_pb2.ModelInferResponse.FromString(raw).model_name

    for label, body in (("model_name moved to the end", moved_to_end()), ("0a 06 simple before identity_fp32", prefixed())):
        code, out = unary(a.triton, "ModelInfer", body)
        check(f"Triton serves identity_fp32 for: {label}", code == grpc.StatusCode.OK and served_model(out) == "identity_fp32", f"{code} {out!r:.200}")
        code, out = unary(a.gateway, "ModelInfer", body, a.key)
        check(f"the gateway refuses the scoped key: {label}", code == grpc.StatusCode.PERMISSION_DENIED
              and out == "'simple-only' may not call model 'identity_fp32'", f"{code} {out!r:.200}")
        code, out = unary(a.gateway, "ModelInfer", body, a.all)
        check(f"a key for every model gets what Triton gives: {label}", code == grpc.StatusCode.OK and served_model(out) == "identity_fp32", f"{code}")

    # A stream: the first message for simple is served, the second for identity_fp32 ends the call.
    for target, token, want in ((a.triton, None, grpc.StatusCode.OK), (a.gateway, a.key, grpc.StatusCode.PERMISSION_DENIED)):
        with grpc.insecure_channel(target) as ch:
            stream = ch.stream_stream(P + "ModelStreamInfer", request_serializer=None, response_deserializer=service_pb2.ModelStreamInferResponse.FromString)
            md = [] if token is None else [("authorization", f"Bearer {token}")]
            served = []
            first_back = threading.Event()

            def messages():
                yield simple_request().SerializeToString()
                first_back.wait(30)  # the second message only once the first has been answered
                yield prefixed()

            code = grpc.StatusCode.OK
            try:
                for resp in stream(messages(), metadata=md, timeout=30):
                    served.append(resp.infer_response.model_name)
                    first_back.set()
            except grpc.RpcError as e:
                code = e.code()
                served.append(e.details())
            want_served = ["simple", "identity_fp32"] if token is None else ["simple", "'simple-only' may not call model 'identity_fp32'"]
            check(f"ModelStreamInfer at {'Triton' if token is None else 'the gateway'}: second message", code == want and served == want_served, f"{code} {served}")

    # tritonclient with gzip: the message cannot be read, the scoped key is refused; the other is not.
    for token, want in ((a.key, "PERMISSION_DENIED"), (a.all, None)):
        client = grpcclient.InferenceServerClient(a.gateway)
        inp = grpcclient.InferInput("INPUT0", [1, 16], "INT32")
        inp.set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
        inp1 = grpcclient.InferInput("INPUT1", [1, 16], "INT32")
        inp1.set_data_from_numpy(np.arange(16, dtype=np.int32).reshape(1, 16))
        try:
            client.infer("simple", [inp, inp1], headers={"authorization": f"Bearer {token}"}, compression_algorithm="gzip")
            got = None
        except InferenceServerException as e:
            got = e.status()
        check(f"gzip-compressed ModelInfer, {'scoped' if token == a.key else 'every model'} key", (got or "").endswith(want) if want else got is None, f"{got}")
        client.close()

    load = service_pb2.RepositoryModelLoadRequest(model_name="identity_fp32").SerializeToString()
    code, out = unary(a.gateway, "RepositoryModelLoad", load, a.key)
    check("RepositoryModelLoad of another model", code == grpc.StatusCode.PERMISSION_DENIED, f"{code} {out!r:.200}")

    print(json.dumps({"ok": not failures, "checks": checks, "failures": failures}))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
