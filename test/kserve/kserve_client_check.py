"""Drives tensorgate with KServe's own Python SDK (kserve.InferenceRESTClient), V2 and V1.

V2: the same requests (JSON, and the SDK's binary form) through tensorgate and straight to Triton
must give the same outputs. V1: the SDK's V1 predict through tensorgate must give what Triton's V2
answer says, reshaped the TF-Serving way. Prints one JSON summary line; exit 1 on any mismatch.

Usage: python kserve_client_check.py --gateway http://127.0.0.1:8000 --triton http://127.0.0.1:8001
"""
import argparse
import asyncio
import base64
import json
import sys

import numpy as np
from kserve import InferenceRESTClient, InferInput, InferRequest, RESTConfig

checks = []


def check(name, ok, detail=""):
    checks.append({"name": name, "ok": bool(ok), "detail": detail})


def outputs_of(resp):
    """Output name -> numpy array, from an InferResponse or a V2 dict."""
    if isinstance(resp, dict):
        return {o["name"]: np.array(o["data"]).reshape(o["shape"]) for o in resp["outputs"]}
    return {o.name: o.as_numpy() for o in resp.outputs}


async def v2(gateway, triton):
    client = InferenceRESTClient(RESTConfig(protocol="v2", retries=0, timeout=30))
    x = list(range(16))
    body = {"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": x},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16},
    ]}
    a = outputs_of(await client.infer(gateway, body, model_name="simple"))
    b = outputs_of(await client.infer(triton, body, model_name="simple"))
    check("v2 json simple", all(np.array_equal(a[k], b[k]) for k in b) and a.keys() == b.keys(), str(a.get("OUTPUT0")))

    arr = np.arange(12, dtype=np.float32).reshape(1, 12) / 7
    inp = InferInput("INPUT0", [1, 12], "FP32")
    inp.set_data_from_numpy(arr, binary_data=True)
    for target, label in ((gateway, "gateway"), (triton, "triton")):
        req = InferRequest(model_name="identity_fp32", infer_inputs=[inp], request_id="ks-1")
        out = outputs_of(await client.infer(target, req, model_name="identity_fp32"))
        check(f"v2 binary identity_fp32 via {label}", np.array_equal(out["OUTPUT0"], arr), str(out["OUTPUT0"].dtype))
    await client.close()


async def v1(gateway):
    client = InferenceRESTClient(RESTConfig(protocol="v1", retries=0, timeout=30))
    rows = [[0.5, 1.5, 2.5], [3.0, 4.0, 5.0]]
    r = await client.infer(gateway, {"instances": rows}, model_name="identity_fp32")
    check("v1 instances identity_fp32", r == {"predictions": rows}, json.dumps(r)[:200])

    image = bytes(range(200))
    r = await client.infer(gateway, {"instances": [{"b64": base64.b64encode(image).decode()}]}, model_name="image_stats")
    want = {"predictions": [{"LEN": [len(image)], "SUM": [sum(image)]}]}
    check("v1 b64 image_stats", r == want, json.dumps(r)[:200])
    await client.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gateway", required=True)
    ap.add_argument("--triton", required=True)
    a = ap.parse_args()
    for part in (v2(a.gateway, a.triton), v1(a.gateway)):
        try:
            await part
        except Exception as err:  # a failed call is a failed check, reported with the rest
            check(f"exception in {part.__qualname__ if hasattr(part, '__qualname__') else 'part'}", False, repr(err)[:300])
    failed = [c for c in checks if not c["ok"]]
    print(json.dumps({"checks": len(checks), "failed": len(failed), "details": failed or checks}))
    sys.exit(1 if failed or not checks else 0)


asyncio.run(main())
