#!/usr/bin/env python3
"""Probe a running zoo (see zoo.py) and dump the exact HTTP/gRPC behaviour as JSON.

Usage: python gather_facts.py --http-port N --grpc-port N [--out facts.json]

Uses only the venv's grpcio + tritonclient generated protobuf stubs (raw gRPC, no client
library validation in between) and urllib for HTTP.
"""

import argparse
import json
import struct
import sys
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
from google.protobuf import json_format
from tritonclient.grpc import service_pb2, service_pb2_grpc

MODELS = [
    "simple",
    "simple_string",
    *[
        f"identity_{t}"
        for t in "fp16 fp32 fp64 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool bytes".split()
    ],
    "identity_fp32_nobatch",
    "classifier_fp32",
    "image_stats",
    "blob_len",
    "big_output",
    "slow",
    "failing",
]


def http(base, method, path, body=None, headers=None):
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, raw, h = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        status, raw, h = e.code, e.read(), e.headers
    out = {"request": f"{method} {path}", "status": status, "headers": {k: v for k, v in h.items()}}
    try:
        out["body"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        out["body_len"] = len(raw)
        out["body_prefix_hex"] = raw[:64].hex()
    return out


def grpc_call(fn, request, timeout=30, metadata=None):
    try:
        resp, call = fn.with_call(request, timeout=timeout, metadata=metadata)
        raws = list(getattr(resp, "raw_output_contents", []))
        if raws:
            del resp.raw_output_contents[:]
        return {
            "ok": True,
            "response": json_format.MessageToDict(resp, preserving_proto_field_name=True),
            "raw_output_lengths": [len(b) for b in raws],
            "raw_output_hex": [b[:100].hex() for b in raws],
            "trailing_metadata": [list(kv) for kv in (call.trailing_metadata() or [])],
            "initial_metadata": [list(kv) for kv in (call.initial_metadata() or [])],
        }
    except grpc.RpcError as e:
        return {
            "ok": False,
            "code": e.code().name,
            "code_value": e.code().value[0],
            "details": e.details(),
            "trailing_metadata": [list(kv) for kv in (e.trailing_metadata() or [])],
        }


def tensor(name, datatype, shape):
    t = service_pb2.ModelInferRequest().InferInputTensor()
    t.name = name
    t.datatype = datatype
    t.shape.extend(shape)
    return t


def infer_req(model, inputs, raws, version="", rid="", outputs=None, params=None):
    r = service_pb2.ModelInferRequest(model_name=model, model_version=version, id=rid)
    r.inputs.extend(inputs)
    r.raw_input_contents.extend(raws)
    for o in outputs or []:
        ro = r.outputs.add()
        ro.name = o
    for k, v in (params or {}).items():
        if isinstance(v, bool):
            r.parameters[k].bool_param = v
        elif isinstance(v, int):
            r.parameters[k].int64_param = v
        else:
            r.parameters[k].string_param = str(v)
    return r


def bytes_raw(elems):
    return b"".join(struct.pack("<I", len(e)) + e for e in elems)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--http-port", type=int, required=True)
    ap.add_argument("--grpc-port", type=int, required=True)
    ap.add_argument("--out", default="-")
    a = ap.parse_args()
    base = f"http://127.0.0.1:{a.http_port}"
    ch = grpc.insecure_channel(
        f"127.0.0.1:{a.grpc_port}",
        options=[("grpc.max_receive_message_length", 256 << 20), ("grpc.max_send_message_length", 256 << 20)],
    )
    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
    F = {}

    # ---------------- HTTP metadata
    F["http_server_metadata"] = http(base, "GET", "/v2")
    F["http_model_metadata"] = {m: http(base, "GET", f"/v2/models/{m}") for m in MODELS}
    F["http_model_config"] = {m: http(base, "GET", f"/v2/models/{m}/config") for m in MODELS}
    F["http_repository_index"] = http(base, "POST", "/v2/repository/index", body={})
    F["http_repository_index_ready"] = http(base, "POST", "/v2/repository/index", body={"ready": True})

    valid_simple_json = {
        "inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16},
        ]
    }
    F["http_errors"] = [
        http(base, "GET", "/v2/models/nonexistent"),
        http(base, "GET", "/v2/models/nonexistent/config"),
        http(base, "GET", "/v2/models/nonexistent/ready"),
        http(base, "GET", "/v2/models/simple/versions/2"),
        http(base, "GET", "/v2/models/simple/versions/2/ready"),
        http(base, "GET", "/v2/models/simple/versions/1"),
        http(base, "GET", "/v2/models/simple/ready"),
        http(base, "POST", "/v2/models/nonexistent/infer", body=valid_simple_json),
        http(base, "POST", "/v2/models/simple/versions/2/infer", body=valid_simple_json),
        http(base, "POST", "/v2/models/simple/infer", body={"inputs": valid_simple_json["inputs"][:1]}),
        http(base, "POST", "/v2/models/simple/infer", body=b"{not json"),
        http(base, "POST", "/v2/models/simple/infer", body={"inputs": [
            dict(valid_simple_json["inputs"][0], datatype="FP32"), valid_simple_json["inputs"][1]]}),
        http(base, "POST", "/v2/models/simple/infer", body={"inputs": [
            dict(valid_simple_json["inputs"][0], shape=[1, 15], data=list(range(15))), valid_simple_json["inputs"][1]]}),
        http(base, "POST", "/v2/models/simple/infer", body={"inputs": [
            dict(valid_simple_json["inputs"][0], data=list(range(15))), valid_simple_json["inputs"][1]]}),
        http(base, "POST", "/v2/models/simple/infer", body=dict(valid_simple_json, outputs=[{"name": "NOPE"}])),
        http(base, "GET", "/v2/nonexistent_path"),
    ]
    F["http_infer_simple"] = http(base, "POST", "/v2/models/simple/infer", body=dict(valid_simple_json, id="req-1"))
    F["http_infer_simple_params"] = http(
        base, "POST", "/v2/models/simple/infer",
        body=dict(valid_simple_json, id="req-2", parameters={"foo": "bar"}),
    )
    F["http_infer_failing"] = http(
        base, "POST", "/v2/models/failing/infer",
        body={"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "FP32", "data": [1.0, 2.0]}]},
    )
    F["http_infer_identity_bytes"] = http(
        base, "POST", "/v2/models/identity_bytes/infer",
        body={"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "BYTES", "data": ["a", "", "xyz"]}]},
    )
    F["http_infer_simple_string"] = http(
        base, "POST", "/v2/models/simple_string/infer",
        body={"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "BYTES", "data": [str(i) for i in range(16)]},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "BYTES", "data": ["1"] * 16},
        ]},
    )

    # ---------------- gRPC
    F["grpc_server_metadata"] = grpc_call(stub.ServerMetadata, service_pb2.ServerMetadataRequest())
    F["grpc_model_metadata_simple"] = grpc_call(stub.ModelMetadata, service_pb2.ModelMetadataRequest(name="simple"))
    F["grpc_model_config_simple"] = grpc_call(stub.ModelConfig, service_pb2.ModelConfigRequest(name="simple"))
    F["grpc_repository_index"] = grpc_call(stub.RepositoryIndex, service_pb2.RepositoryIndexRequest())

    i0 = np.arange(16, dtype=np.int32).reshape(1, 16)
    i1 = np.ones((1, 16), dtype=np.int32)
    ok_inputs = [tensor("INPUT0", "INT32", [1, 16]), tensor("INPUT1", "INT32", [1, 16])]
    ok_raws = [i0.tobytes(), i1.tobytes()]

    cases = {}
    cases["infer_simple_ok"] = infer_req("simple", ok_inputs, ok_raws, rid="my-id-42")
    cases["infer_simple_ok_version1"] = infer_req("simple", ok_inputs, ok_raws, version="1")
    cases["infer_simple_ok_with_params"] = infer_req(
        "simple", ok_inputs, ok_raws, rid="p", params={"foo": "bar", "n": 3, "flag": True}
    )
    cases["infer_simple_requested_output1"] = infer_req("simple", ok_inputs, ok_raws, outputs=["OUTPUT1"])
    cases["infer_unknown_model"] = infer_req("nonexistent", ok_inputs, ok_raws)
    cases["infer_simple_only_input0"] = infer_req("simple", ok_inputs[:1], ok_raws[:1])
    cases["infer_simple_input0_fp32"] = infer_req(
        "simple", [tensor("INPUT0", "FP32", [1, 16]), ok_inputs[1]], [np.zeros((1, 16), np.float32).tobytes(), ok_raws[1]]
    )
    cases["infer_simple_wrong_raw_size_60"] = infer_req("simple", ok_inputs, [ok_raws[0][:60], ok_raws[1]])
    cases["infer_simple_shape_1x15_60bytes"] = infer_req(
        "simple", [tensor("INPUT0", "INT32", [1, 15]), ok_inputs[1]], [ok_raws[0][:60], ok_raws[1]]
    )
    cases["infer_simple_both_1x15_60bytes"] = infer_req(
        "simple", [tensor("INPUT0", "INT32", [1, 15]), tensor("INPUT1", "INT32", [1, 15])],
        [ok_raws[0][:60], ok_raws[1][:60]],
    )
    cases["infer_simple_output_NOPE"] = infer_req("simple", ok_inputs, ok_raws, outputs=["NOPE"])
    cases["infer_simple_version_2"] = infer_req("simple", ok_inputs, ok_raws, version="2")
    cases["infer_simple_version_abc"] = infer_req("simple", ok_inputs, ok_raws, version="abc")
    cases["infer_simple_3_raw_for_2_inputs"] = infer_req("simple", ok_inputs, ok_raws + [b"\x00" * 64])
    cases["infer_simple_1_raw_for_2_inputs"] = infer_req("simple", ok_inputs, ok_raws[:1])
    cases["infer_simple_unknown_input_name"] = infer_req(
        "simple", [ok_inputs[0], tensor("INPUTX", "INT32", [1, 16])], ok_raws
    )
    cases["infer_simple_no_batch_dim_shape16"] = infer_req(
        "simple", [tensor("INPUT0", "INT32", [16]), tensor("INPUT1", "INT32", [16])], ok_raws
    )
    cases["infer_simple_batch_9"] = infer_req(
        "simple", [tensor("INPUT0", "INT32", [9, 16]), tensor("INPUT1", "INT32", [9, 16])],
        [np.zeros((9, 16), np.int32).tobytes()] * 2,
    )
    cases["infer_simple_batch_8"] = infer_req(
        "simple", [tensor("INPUT0", "INT32", [8, 16]), tensor("INPUT1", "INT32", [8, 16])],
        [np.zeros((8, 16), np.int32).tobytes()] * 2,
    )
    # typed contents instead of raw
    t0 = tensor("INPUT0", "INT32", [1, 16])
    t0.contents.int_contents.extend(range(16))
    t1 = tensor("INPUT1", "INT32", [1, 16])
    t1.contents.int_contents.extend([1] * 16)
    cases["infer_simple_typed_contents"] = infer_req("simple", [t0, t1], [])
    t0b = tensor("INPUT0", "INT32", [1, 16])
    t0b.contents.int_contents.extend(range(16))
    cases["infer_simple_mixed_contents_and_raw"] = infer_req("simple", [t0b, ok_inputs[1]], [ok_raws[1]])
    cases["infer_identity_bytes_truncated"] = infer_req(
        "identity_bytes", [tensor("INPUT0", "BYTES", [1, 1])], [struct.pack("<I", 10) + b"abc"]
    )
    cases["infer_identity_bytes_count_mismatch"] = infer_req(
        "identity_bytes", [tensor("INPUT0", "BYTES", [1, 3])], [bytes_raw([b"a", b"b"])]
    )
    cases["infer_identity_bytes_extra_trailing"] = infer_req(
        "identity_bytes", [tensor("INPUT0", "BYTES", [1, 1])], [bytes_raw([b"a", b"b"])]
    )
    cases["infer_identity_bytes_a_empty_xyz"] = infer_req(
        "identity_bytes", [tensor("INPUT0", "BYTES", [1, 3])], [bytes_raw([b"a", b"", b"xyz"])], rid="bytes-1"
    )
    cases["infer_identity_bytes_nul_bytes"] = infer_req(
        "identity_bytes", [tensor("INPUT0", "BYTES", [1, 3])], [bytes_raw([b"a\x00", b"\x00", b"\x00x\x00"])]
    )
    cases["infer_blob_len_nul_bytes"] = infer_req(
        "blob_len", [tensor("BLOB", "BYTES", [3, 1])], [bytes_raw([b"ab\x00", b"\x00\x00", b""])]
    )
    cases["infer_identity_bool"] = infer_req(
        "identity_bool", [tensor("INPUT0", "BOOL", [1, 3])], [bytes([1, 0, 1])]
    )
    cases["infer_identity_bool_value_2"] = infer_req(
        "identity_bool", [tensor("INPUT0", "BOOL", [1, 3])], [bytes([2, 0, 255])]
    )
    cases["infer_identity_fp16"] = infer_req(
        "identity_fp16", [tensor("INPUT0", "FP16", [1, 2])], [np.array([[1.5, -2]], np.float16).tobytes()]
    )
    cases["infer_identity_fp32_empty"] = infer_req("identity_fp32", [tensor("INPUT0", "FP32", [1, 0])], [b""])
    cases["infer_identity_fp32_nobatch_2x3"] = infer_req(
        "identity_fp32_nobatch", [tensor("INPUT0", "FP32", [2, 3])], [np.arange(6, dtype=np.float32).tobytes()]
    )
    cases["infer_identity_fp32_nobatch_rank1"] = infer_req(
        "identity_fp32_nobatch", [tensor("INPUT0", "FP32", [6])], [np.arange(6, dtype=np.float32).tobytes()]
    )
    cases["infer_image_stats"] = infer_req(
        "image_stats", [tensor("IMAGE", "UINT8", [2, 4])], [bytes([1, 2, 3, 255, 0, 0, 0, 1])]
    )
    cases["infer_big_output_10"] = infer_req("big_output", [tensor("N", "INT64", [1])], [np.array([10], np.int64).tobytes()])
    cases["infer_big_output_0"] = infer_req("big_output", [tensor("N", "INT64", [1])], [np.array([0], np.int64).tobytes()])
    cases["infer_failing"] = infer_req("failing", [tensor("INPUT0", "FP32", [1, 2])], [np.zeros((1, 2), np.float32).tobytes()])
    cases["infer_slow_delay_50"] = infer_req(
        "slow", [tensor("INPUT0", "FP32", [2])], [np.zeros(2, np.float32).tobytes()], params={"delay_ms": 50}
    )
    cases["infer_slow_delay_str_50"] = infer_req(
        "slow", [tensor("INPUT0", "FP32", [2])], [np.zeros(2, np.float32).tobytes()], params={"delay_ms": "50"}
    )
    cases["infer_classifier_ones"] = infer_req(
        "classifier_fp32", [tensor("INPUT", "FP32", [1, 3, 224, 224])], [np.ones((1, 3, 224, 224), np.float32).tobytes()]
    )

    G = {}
    for name, req in cases.items():
        res = grpc_call(stub.ModelInfer, req)
        if res.get("ok"):
            # do not dump megabytes
            res["raw_output_hex"] = [h[:200] for h in res["raw_output_hex"]]
        G[name] = res
    G["model_metadata_unknown"] = grpc_call(stub.ModelMetadata, service_pb2.ModelMetadataRequest(name="nonexistent"))
    G["model_metadata_simple_v2"] = grpc_call(stub.ModelMetadata, service_pb2.ModelMetadataRequest(name="simple", version="2"))
    G["model_config_unknown"] = grpc_call(stub.ModelConfig, service_pb2.ModelConfigRequest(name="nonexistent"))
    G["model_ready_unknown"] = grpc_call(stub.ModelReady, service_pb2.ModelReadyRequest(name="nonexistent"))
    G["model_ready_simple_v2"] = grpc_call(stub.ModelReady, service_pb2.ModelReadyRequest(name="simple", version="2"))
    G["model_ready_simple"] = grpc_call(stub.ModelReady, service_pb2.ModelReadyRequest(name="simple"))
    G["server_ready"] = grpc_call(stub.ServerReady, service_pb2.ServerReadyRequest())
    G["server_live"] = grpc_call(stub.ServerLive, service_pb2.ServerLiveRequest())

    # slow + 100 ms deadline
    slow_req = infer_req(
        "slow", [tensor("INPUT0", "FP32", [2])], [np.zeros(2, np.float32).tobytes()], params={"delay_ms": 1000}
    )
    t = time.monotonic()
    r = grpc_call(stub.ModelInfer, slow_req, timeout=0.1)
    r["elapsed_ms"] = round((time.monotonic() - t) * 1000, 1)
    G["infer_slow_1000_deadline_100ms"] = r
    time.sleep(1.2)  # let the slow request drain
    t = time.monotonic()
    r = grpc_call(stub.ModelInfer, infer_req("slow", [tensor("INPUT0", "FP32", [2])], [np.zeros(2, np.float32).tobytes()]))
    r["elapsed_ms"] = round((time.monotonic() - t) * 1000, 1)
    G["infer_slow_default_delay"] = r
    # the grpc-timeout header is turned into a Triton request timeout too? also try explicit 'timeout' param
    F["grpc"] = G

    # big output (4 MiB) over gRPC and HTTP binary
    big = grpc_call(stub.ModelInfer, infer_req("big_output", [tensor("N", "INT64", [1])], [np.array([4 << 20], np.int64).tobytes()]))
    if big.get("ok"):
        big["raw_output_hex"] = [h[:64] for h in big["raw_output_hex"]]
    F["grpc_big_output_4MiB"] = big

    out = json.dumps(F, indent=1, sort_keys=False)
    if a.out == "-":
        sys.stdout.write(out + "\n")
    else:
        with open(a.out, "w") as f:
            f.write(out + "\n")


if __name__ == "__main__":
    main()
