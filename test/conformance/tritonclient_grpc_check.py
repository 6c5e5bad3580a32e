#!/usr/bin/env python3
"""Differential check of the gRPC pass-through with NVIDIA's own gRPC client: every check runs
against Triton's gRPC endpoint and against tensorgate's, with tritonclient.grpc (sync, its
callback async_infer and its bidi stream) and tritonclient.grpc.aio, and the results must be equal
(numpy arrays: dtype, shape and values; responses, metadata, config and statistics: equal JSON;
errors: same gRPC status and message). The calls are those of the example programs tritonclient
ships: simple infer, string infer, async infer, streaming infer (decoupled and not), health,
server and model metadata, model config and statistics.

Usage:
    python tritonclient_grpc_check.py --gateway HOST:PORT --triton HOST:PORT

Prints exactly one JSON summary line on stdout; details of mismatches go to stderr.
Exit status 0 when everything matched, 1 on any mismatch (or when Triton itself failed a check).
"""

import argparse
import asyncio
import json
import queue
import sys
import traceback

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aioclient
from tritonclient.utils import InferenceServerException

SIMPLE_A = np.arange(16, dtype=np.int32).reshape(1, 16)
SIMPLE_B = (np.arange(16, dtype=np.int32) * -3 + 7).reshape(1, 16)
STRING_A = np.array([str(i).encode() for i in range(16)], dtype=np.object_).reshape(1, 16)
STRING_B = np.array([str(40 - 5 * i).encode() for i in range(16)], dtype=np.object_).reshape(1, 16)


def tensors(mod, model):
    """Inputs and requested outputs for `model` with module `mod` (grpc or grpc.aio)."""
    if model == "simple":
        a, b, dt = SIMPLE_A, SIMPLE_B, "INT32"
    else:
        a, b, dt = STRING_A, STRING_B, "BYTES"
    inputs = [mod.InferInput("INPUT0", [1, 16], dt), mod.InferInput("INPUT1", [1, 16], dt)]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return inputs, [mod.InferRequestedOutput("OUTPUT0"), mod.InferRequestedOutput("OUTPUT1")]


def result(res, names):
    return {"arrays": {n: res.as_numpy(n) for n in names}, "response": res.get_response(as_json=True)}


def error(e):
    return {"status": e.status(), "message": e.message()}


def capture(fn):
    try:
        return {"value": fn()}
    except InferenceServerException as e:
        return {"error": error(e)}
    except Exception:  # noqa: BLE001 - reported as a mismatch
        return {"exception": traceback.format_exc(limit=3)}


def stream_results(client, model, requests):
    """ModelStreamInfer: sends `requests` (kwargs of async_stream_infer) on one stream, returns what came back in order."""
    got = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    expected = 0
    for r in requests:
        r = dict(r)
        expected += r.pop("_responses", 1)
        client.async_stream_infer(model, **r)
    out = []
    try:
        while True:
            res, err = got.get(timeout=30)
            if err is not None:
                out.append({"error": error(err)})
            else:
                names = [o.name for o in res.get_response().outputs]
                final = res.get_response().parameters.get("triton_final_response")
                out.append({"arrays": {n: res.as_numpy(n) for n in names}, "final": None if final is None else final.bool_param})
            if len(out) >= expected:
                break
    finally:
        client.stop_stream()
    return out


def repeat_request(mod, n):
    x = mod.InferInput("INPUT0", [1], "INT32")
    x.set_data_from_numpy(np.array([n], dtype=np.int32))
    return x


def sync_checks(url):
    c = grpcclient.InferenceServerClient(url)
    checks = {}
    checks["live"] = capture(c.is_server_live)
    checks["ready"] = capture(c.is_server_ready)
    checks["model_ready"] = capture(lambda: c.is_model_ready("simple"))
    checks["model_ready_unknown"] = capture(lambda: c.is_model_ready("no_such_model"))
    checks["server_metadata"] = capture(lambda: c.get_server_metadata(as_json=True))
    checks["model_metadata"] = capture(lambda: c.get_model_metadata("simple", as_json=True))
    checks["model_metadata_string"] = capture(lambda: c.get_model_metadata("simple_string", as_json=True))
    checks["model_metadata_unknown"] = capture(lambda: c.get_model_metadata("no_such_model", as_json=True))
    checks["model_config"] = capture(lambda: c.get_model_config("simple", as_json=True))
    # Counts move between the two runs (and other suites use the same Triton): which model it is, is compared.
    checks["statistics"] = capture(lambda: [(s["name"], s["version"]) for s in c.get_inference_statistics("simple", as_json=True)["model_stats"]])
    checks["statistics_unknown"] = capture(lambda: c.get_inference_statistics("no_such_model", as_json=True))
    for model in ("simple", "simple_string"):
        inputs, outputs = tensors(grpcclient, model)
        checks[f"infer_{model}"] = capture(lambda: result(c.infer(model, inputs, outputs=outputs, request_id="7"), ["OUTPUT0", "OUTPUT1"]))
    inputs, outputs = tensors(grpcclient, "simple")
    checks["infer_unknown_model"] = capture(lambda: c.infer("no_such_model", inputs, outputs=outputs))
    checks["infer_wrong_shape"] = capture(lambda: c.infer("simple", [inputs[0]], outputs=outputs))

    def async_infer():
        done = queue.Queue()
        c.async_infer("simple", inputs, callback=lambda result, error: done.put((result, error)), outputs=outputs)
        res, err = done.get(timeout=30)
        if err is not None:
            raise err
        return result(res, ["OUTPUT0", "OUTPUT1"])

    checks["async_infer"] = capture(async_infer)
    checks["stream_simple"] = capture(lambda: stream_results(c, "simple", [{"inputs": inputs, "outputs": outputs, "request_id": str(i)} for i in range(3)]))
    checks["stream_decoupled"] = capture(lambda: stream_results(c, "repeat_int32", [{"inputs": [repeat_request(grpcclient, 4)], "_responses": 4}]))
    checks["stream_unknown_model"] = capture(lambda: stream_results(c, "no_such_model", [{"inputs": inputs}]))
    c.close()
    return checks


async def acapture(coro):
    try:
        return {"value": await coro}
    except InferenceServerException as e:
        return {"error": error(e)}
    except Exception:  # noqa: BLE001
        return {"exception": traceback.format_exc(limit=3)}


async def aio_checks(url):
    c = aioclient.InferenceServerClient(url)
    checks = {}
    checks["live"] = await acapture(c.is_server_live())
    checks["model_metadata"] = await acapture(c.get_model_metadata("simple", as_json=True))
    checks["model_config"] = await acapture(c.get_model_config("simple_string", as_json=True))
    for model in ("simple", "simple_string"):
        inputs, outputs = tensors(aioclient, model)

        async def infer(model=model, inputs=inputs, outputs=outputs):
            return result(await c.infer(model, inputs, outputs=outputs), ["OUTPUT0", "OUTPUT1"])

        checks[f"infer_{model}"] = await acapture(infer())
    inputs, outputs = tensors(aioclient, "simple")
    checks["infer_unknown_model"] = await acapture(c.infer("no_such_model", inputs, outputs=outputs))

    async def stream():
        async def requests():
            yield {"model_name": "repeat_int32", "inputs": [repeat_request(aioclient, 3)]}
        out = []
        async for res, err in c.stream_infer(requests()):
            out.append({"error": error(err)} if err is not None else {"arrays": {"OUTPUT0": res.as_numpy("OUTPUT0")}})
            if len(out) == 3:
                break
        return out

    checks["stream_decoupled"] = await acapture(stream())
    await c.close()
    return checks


def same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def show(v, limit=600):
    def enc(x):
        if isinstance(x, np.ndarray):
            return {"dtype": str(x.dtype), "shape": list(x.shape), "values": x.tolist()}
        if isinstance(x, bytes):
            return x.decode("utf-8", "backslashreplace")
        return str(x)

    s = json.dumps(v, default=enc)
    return s if len(s) <= limit else s[:limit] + f"... (+{len(s) - limit} chars)"


def compare(client_name, ref, got, mismatches):
    for check, r in ref.items():
        g = got.get(check)
        if "exception" in r:
            mismatches.append({"client": client_name, "check": check, "why": "Triton itself failed", "triton": r["exception"]})
        elif g is None or not same(r, g):
            mismatches.append({"client": client_name, "check": check, "triton": show(r), "gateway": show(g)})
    return len(ref)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gateway", required=True, help="HOST:PORT of tensorgate's gRPC pass-through")
    ap.add_argument("--triton", required=True, help="HOST:PORT of Triton's gRPC endpoint")
    args = ap.parse_args()

    mismatches = []
    checks = 0
    checks += compare("tritonclient.grpc", sync_checks(args.triton), sync_checks(args.gateway), mismatches)
    checks += compare("tritonclient.grpc.aio", asyncio.run(aio_checks(args.triton)), asyncio.run(aio_checks(args.gateway)), mismatches)
    for m in mismatches:
        print(json.dumps(m), file=sys.stderr)
    print(json.dumps({"ok": not mismatches, "checks": checks, "mismatches": len(mismatches)}))
    return 0 if not mismatches else 1


if __name__ == "__main__":
    sys.exit(main())
