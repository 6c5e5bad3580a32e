"""A client of SageMaker and Vertex AI endpoints written as their users write them: requests + numpy,
the binary media types built and read by hand.

Usage: cloud_dialects_client.py --gateway URL --sagemaker URL --predict PATH --health PATH
(--sagemaker: Triton's own SageMaker frontend, whose answers the gateway's must equal.)
Prints one JSON summary line; exits 1 on a failure.
"""
import argparse
import json
import re
import sys

import numpy as np
import requests

SM = "application/vnd.sagemaker-triton.binary+json;json-header-size="
VX = "application/vnd.vertex-ai-triton.binary+json;json-header-size="

A = np.arange(16, dtype=np.int32).reshape(1, 16)
B = (np.arange(16, dtype=np.int32) + 100).reshape(1, 16)


def binary_request(media_type):
    header = json.dumps({
        "inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "parameters": {"binary_data_size": A.nbytes}},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "parameters": {"binary_data_size": B.nbytes}},
        ],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}, {"name": "OUTPUT1", "parameters": {"binary_data": True}}],
    }).encode()
    return header + A.tobytes() + B.tobytes(), {"Content-Type": f"{media_type}{len(header)}"}


def read_binary(body, header_length):
    """The outputs of a binary answer whose JSON header is header_length bytes, by name."""
    header = json.loads(body[:header_length])
    out, at = {}, header_length
    for o in header["outputs"]:
        n = o["parameters"]["binary_data_size"]
        out[o["name"]] = np.frombuffer(body[at:at + n], dtype=np.int32).reshape(o["shape"])
        at += n
    assert at == len(body), (at, len(body))
    return out


def expect_sums(outputs):
    assert np.array_equal(outputs["OUTPUT0"], A + B), outputs
    assert np.array_equal(outputs["OUTPUT1"], A - B), outputs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--sagemaker", required=True)
    ap.add_argument("--predict", required=True)
    ap.add_argument("--health", required=True)
    args = ap.parse_args()
    gw = args.gateway
    checks = 0

    # SageMaker: the container's ping
    assert requests.get(f"{gw}/ping").status_code == 200
    checks += 1

    # /invocations with JSON tensors: the same answer as Triton's SageMaker frontend
    body = {"inputs": [{"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": A.flatten().tolist()},
                       {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": B.flatten().tolist()}]}
    mine, theirs = requests.post(f"{gw}/invocations", json=body), requests.post(f"{args.sagemaker}/invocations", json=body)
    assert (mine.status_code, mine.headers["Content-Type"], mine.content) == (theirs.status_code, theirs.headers["Content-Type"], theirs.content), (mine.text, theirs.text)
    checks += 1

    # /invocations with binary tensors both ways: the header length travels in the media type
    data, headers = binary_request(SM)
    for base in (gw, args.sagemaker):
        r = requests.post(f"{base}/invocations", data=data, headers=headers)
        r.raise_for_status()
        m = re.fullmatch(re.escape(SM) + r"(\d+)", r.headers["Content-Type"])
        assert m is not None and "Inference-Header-Content-Length" not in r.headers, r.headers
        expect_sums(read_binary(r.content, int(m.group(1))))
    checks += 1

    # a multi-model endpoint's invoke: the target model header names the model
    r = requests.post(f"{gw}/models/some-hash/invoke", data=data, headers={**headers, "X-Amzn-SageMaker-Target-Model": "simple"})
    r.raise_for_status()
    expect_sums(read_binary(r.content, int(r.headers["Content-Type"][len(SM):])))
    checks += 1

    # a json-header-size past the body: Triton's message, nothing inferred
    r = requests.post(f"{gw}/invocations", data=data, headers={"Content-Type": f"{SM}{len(data) + 1}"})
    assert r.status_code == 400 and r.json() == {"error": f"inference header size should be in range (0, {len(data)}), got: {len(data) + 1}"}, r.text
    checks += 1

    # Vertex AI: the health route, then the predict route with binary tensors (V2's answer headers)
    assert requests.get(f"{gw}{args.health}").status_code == 200
    checks += 1
    data, headers = binary_request(VX)
    r = requests.post(f"{gw}{args.predict}", data=data, headers=headers)
    r.raise_for_status()
    assert r.headers["Content-Type"] == "application/octet-stream", r.headers
    expect_sums(read_binary(r.content, int(r.headers["Inference-Header-Content-Length"])))
    checks += 1

    # a redirect to the model's metadata
    r = requests.post(f"{gw}{args.predict}", headers={"X-Vertex-Ai-Triton-Redirect": "v2/models/simple"})
    assert r.status_code == 200 and r.json()["name"] == "simple", r.text
    checks += 1

    # a redirect to what changes Triton: refused
    r = requests.post(f"{gw}{args.predict}", headers={"X-Vertex-Ai-Triton-Redirect": "v2/repository/models/simple/unload"})
    assert r.status_code == 403 and "error" in r.json(), r.text
    checks += 1

    print(json.dumps({"ok": True, "checks": checks}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
