#!/usr/bin/env python3
"""Differential check with NVIDIA's own Python client: every check runs against Triton's HTTP
frontend and against tensorgate, with tritonclient.http (sync, geventhttpclient) and
tritonclient.http.aio (aiohttp), and the results must be equal (numpy arrays: dtype, shape and
values; metadata/config: equal dicts; errors: same status and message).

Usage:
    python tritonclient_check.py --gateway HOST:PORT --triton HOST:PORT

Prints exactly one JSON summary line on stdout; details of mismatches go to stderr.
Exit status 0 when everything matched, 1 on any mismatch (or when Triton itself failed a check).
"""

import argparse
import asyncio
import json
import sys
import traceback

import numpy as np
import tritonclient.http as httpclient
import tritonclient.http.aio as aioclient
from tritonclient.utils import InferenceServerException

# ------------------------------------------------------------------ request data

SIMPLE_A = np.arange(16, dtype=np.int32).reshape(1, 16)
SIMPLE_B = (np.arange(16, dtype=np.int32) * -3 + 7).reshape(1, 16)
STRING_A = np.array([str(i).encode() for i in range(16)], dtype=np.object_).reshape(1, 16)
STRING_B = np.array([str(40 - 5 * i).encode() for i in range(16)], dtype=np.object_).reshape(1, 16)


def simple_request(mod, binary):
    """Inputs and requested outputs for `simple` using module `mod` (http or http.aio)."""
    inputs = [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_data_from_numpy(SIMPLE_A, binary_data=binary)
    inputs[1].set_data_from_numpy(SIMPLE_B, binary_data=binary)
    outputs = [mod.InferRequestedOutput("OUTPUT0", binary_data=binary), mod.InferRequestedOutput("OUTPUT1", binary_data=binary)]
    return inputs, outputs


def string_request(mod, binary):
    inputs = [mod.InferInput("INPUT0", [1, 16], "BYTES"), mod.InferInput("INPUT1", [1, 16], "BYTES")]
    inputs[0].set_data_from_numpy(STRING_A, binary_data=binary)
    inputs[1].set_data_from_numpy(STRING_B, binary_data=binary)
    outputs = [mod.InferRequestedOutput("OUTPUT0", binary_data=binary), mod.InferRequestedOutput("OUTPUT1", binary_data=binary)]
    return inputs, outputs


def infer_result(res, names):
    return {"arrays": {n: res.as_numpy(n) for n in names}, "response": response_json(res.get_response())}


def response_json(resp):
    """The JSON part of an infer response (binary_data_size values included; they must match too)."""
    return json.loads(json.dumps(resp, default=str))


# (check name, kind, extra kwargs). kind picks the request builder and the model.
INFER_CHECKS = [
    ("simple binary in/out", "simple", True, {}),
    ("simple JSON in/out", "simple", False, {}),
    ("simple request gzip", "simple", True, {"request_compression_algorithm": "gzip"}),
    ("simple request deflate", "simple", True, {"request_compression_algorithm": "deflate"}),
    ("simple response gzip", "simple", True, {"response_compression_algorithm": "gzip"}),
    ("simple response deflate", "simple", True, {"response_compression_algorithm": "deflate"}),
    ("simple JSON, request gzip + response deflate", "simple", False, {"request_compression_algorithm": "gzip", "response_compression_algorithm": "deflate"}),
    ("simple with request id", "simple", True, {"request_id": "tc-1"}),
    ("simple_string binary in/out", "string", True, {}),
    ("simple_string JSON in/out", "string", False, {}),
]


def build(mod, kind, binary):
    if kind == "simple":
        return ("simple",) + simple_request(mod, binary)
    return ("simple_string",) + string_request(mod, binary)


# ------------------------------------------------------------------ sync client


def sync_checks(url):
    client = httpclient.InferenceServerClient(url=url, connection_timeout=60.0, network_timeout=60.0)
    out = {}
    try:
        for name, kind, binary, kwargs in INFER_CHECKS:
            model, inputs, outputs = build(httpclient, kind, binary)
            out[name] = capture(lambda: infer_result(client.infer(model, inputs, outputs=outputs, **kwargs), ["OUTPUT0", "OUTPUT1"]))
        model, inputs, _ = build(httpclient, "simple", True)
        out["simple, no outputs requested (all binary)"] = capture(lambda: infer_result(client.infer(model, inputs), ["OUTPUT0", "OUTPUT1"]))
        out["unknown model infer (error)"] = capture(lambda: client.infer("nonexistent", inputs))
        out["is_server_live"] = capture(client.is_server_live)
        out["is_server_ready"] = capture(client.is_server_ready)
        out["is_model_ready simple"] = capture(lambda: client.is_model_ready("simple"))
        out["is_model_ready nonexistent"] = capture(lambda: client.is_model_ready("nonexistent"))
        out["get_server_metadata"] = capture(client.get_server_metadata)
        for m in ("simple", "simple_string"):
            out[f"get_model_metadata {m}"] = capture(lambda m=m: client.get_model_metadata(m))
            out[f"get_model_config {m}"] = capture(lambda m=m: client.get_model_config(m))
        out["get_model_metadata nonexistent (error)"] = capture(lambda: client.get_model_metadata("nonexistent"))
        for name, call in ADMIN_CHECKS:
            out[name] = capture(lambda call=call: shape_of(call(client)))
    finally:
        client.close()
    return out


def shape_of(v):
    """Statistics move with every request: compare them with every number (not bool) zeroed."""
    if isinstance(v, dict) and "model_stats" in v:
        return _zero(v)
    return v


def _zero(v):
    if isinstance(v, dict):
        return {k: _zero(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_zero(x) for x in v]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return 0
    return v


# Model control, statistics, shared memory, trace and log settings (the same calls on both clients;
# settings are put back by the following call). Never unload a PyTriton model: it stops the server.
ADMIN_CHECKS = [
    ("get_inference_statistics (all)", lambda c: c.get_inference_statistics()),
    ("get_inference_statistics simple", lambda c: c.get_inference_statistics("simple")),
    ("get_inference_statistics simple v1", lambda c: c.get_inference_statistics("simple", "1")),
    ("get_inference_statistics nonexistent (error)", lambda c: c.get_inference_statistics("nonexistent")),
    ("get_model_repository_index", lambda c: c.get_model_repository_index()),
    ("load_model nonexistent (error)", lambda c: c.load_model("nonexistent")),
    ("load_model nonexistent with config (error)", lambda c: c.load_model("nonexistent", config='{"backend":"python"}')),
    # Not with `files`: a failed load of uploaded files leaves Triton 2.51 not ready for good.
    ("unload_model nonexistent", lambda c: c.unload_model("nonexistent")),
    ("unload_model nonexistent with dependents", lambda c: c.unload_model("nonexistent", unload_dependents=True)),
    ("get_system_shared_memory_status", lambda c: c.get_system_shared_memory_status()),
    ("get_system_shared_memory_status nope (error)", lambda c: c.get_system_shared_memory_status("nope")),
    ("register_system_shared_memory missing key (error)", lambda c: c.register_system_shared_memory("r", "/tg-no-such-key", 16)),
    ("unregister_system_shared_memory all", lambda c: c.unregister_system_shared_memory()),
    ("unregister_system_shared_memory nope", lambda c: c.unregister_system_shared_memory("nope")),
    ("get_cuda_shared_memory_status", lambda c: c.get_cuda_shared_memory_status()),
    ("get_cuda_shared_memory_status nope (error)", lambda c: c.get_cuda_shared_memory_status("nope")),
    ("unregister_cuda_shared_memory all", lambda c: c.unregister_cuda_shared_memory()),
    ("get_trace_settings", lambda c: c.get_trace_settings()),
    ("get_trace_settings simple", lambda c: c.get_trace_settings("simple")),
    ("update_trace_settings rate", lambda c: c.update_trace_settings(settings={"trace_rate": "9"})),
    ("update_trace_settings clear rate", lambda c: c.update_trace_settings(settings={"trace_rate": None})),
    ("update_trace_settings simple count", lambda c: c.update_trace_settings("simple", settings={"trace_count": "4"})),
    ("update_trace_settings simple clear", lambda c: c.update_trace_settings("simple", settings={"trace_count": None})),
    ("update_trace_settings trace_file (error)", lambda c: c.update_trace_settings(settings={"trace_file": "/tmp/x"})),
    ("get_log_settings", lambda c: c.get_log_settings()),
    ("update_log_settings verbose 1", lambda c: c.update_log_settings({"log_verbose_level": 1})),
    ("update_log_settings verbose 0", lambda c: c.update_log_settings({"log_verbose_level": 0})),
    ("update_log_settings bad format (error)", lambda c: c.update_log_settings({"log_format": "nope"})),
]


# ------------------------------------------------------------------ aio client


async def aio_checks(url):
    client = aioclient.InferenceServerClient(url=url, conn_timeout=60.0)
    out = {}
    try:
        for name, kind, binary, kwargs in INFER_CHECKS:
            model, inputs, outputs = build(aioclient, kind, binary)
            out[name] = await acapture(lambda: client.infer(model, inputs, outputs=outputs, **kwargs), lambda r: infer_result(r, ["OUTPUT0", "OUTPUT1"]))
        model, inputs, _ = build(aioclient, "simple", True)
        out["simple, no outputs requested (all binary)"] = await acapture(lambda: client.infer(model, inputs), lambda r: infer_result(r, ["OUTPUT0", "OUTPUT1"]))
        out["unknown model infer (error)"] = await acapture(lambda: client.infer("nonexistent", inputs))
        out["is_server_live"] = await acapture(client.is_server_live)
        out["is_server_ready"] = await acapture(client.is_server_ready)
        out["is_model_ready simple"] = await acapture(lambda: client.is_model_ready("simple"))
        out["is_model_ready nonexistent"] = await acapture(lambda: client.is_model_ready("nonexistent"))
        out["get_server_metadata"] = await acapture(client.get_server_metadata)
        for m in ("simple", "simple_string"):
            out[f"get_model_metadata {m}"] = await acapture(lambda m=m: client.get_model_metadata(m))
            out[f"get_model_config {m}"] = await acapture(lambda m=m: client.get_model_config(m))
        out["get_model_metadata nonexistent (error)"] = await acapture(lambda: client.get_model_metadata("nonexistent"))
        for name, call in ADMIN_CHECKS:
            out[name] = await acapture(lambda call=call: call(client), shape_of)
    finally:
        await client.close()
    return out


# ------------------------------------------------------------------ capture and compare


def capture(fn):
    try:
        return {"value": fn()}
    except InferenceServerException as e:
        return {"error": {"status": e.status(), "message": e.message()}}
    except Exception as e:  # transport problems, protocol errors inside the client, ...
        return {"exception": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=3)}


async def acapture(fn, post=None):
    try:
        v = await fn()
        return {"value": post(v) if post else v}
    except InferenceServerException as e:
        return {"error": {"status": e.status(), "message": e.message()}}
    except Exception as e:
        return {"exception": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=3)}


def same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
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


# Client mistakes Triton answers with a 5xx and tensorgate with a 4xx, the message unchanged
# (docs/differences.md "Client mistakes are 4xx"; test/conformance/cases/exchange.ts CLIENT_MISTAKES):
# Triton's status, the gateway's, and how Triton's message starts.
CLIENT_MISTAKES = [
    ("500", "400", ("failed to parse the request JSON buffer", "Unable to parse", "attempt to access")),
    ("501", "415", ("Unsupported compression type",)),
    ("503", "400", ("invalid argument for --log_format",)),
]


def as_gateway_answers(r, g):
    """Triton's result `r` with its status replaced by the gateway's twin where the pair above applies."""
    err, gerr = r.get("error"), (g or {}).get("error")
    if not isinstance(err, dict) or not isinstance(gerr, dict):
        return r
    for triton, gateway, starts in CLIENT_MISTAKES:
        if str(err.get("status")) == triton and str(gerr.get("status")) == gateway and str(err.get("message", "")).startswith(starts):
            return {**r, "error": {**err, "status": gerr.get("status")}}
    return r


def compare(client_name, ref, got, mismatches):
    for check, r in ref.items():
        g = got.get(check)
        r = as_gateway_answers(r, g)
        if "exception" in r:
            mismatches.append({"client": client_name, "check": check, "why": "Triton itself failed", "triton": r["exception"]})
        elif g is None or not same({k: v for k, v in r.items() if k != "trace"}, {k: v for k, v in g.items() if k != "trace"}):
            mismatches.append({"client": client_name, "check": check, "triton": show(r), "gateway": show(g)})
    return len(ref)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gateway", required=True, help="HOST:PORT of tensorgate")
    ap.add_argument("--triton", required=True, help="HOST:PORT of Triton's HTTP frontend")
    args = ap.parse_args()

    mismatches = []
    checks = 0
    ref = sync_checks(args.triton)
    got = sync_checks(args.gateway)
    checks += compare("tritonclient.http", ref, got, mismatches)
    aref = asyncio.run(aio_checks(args.triton))
    agot = asyncio.run(aio_checks(args.gateway))
    checks += compare("tritonclient.http.aio", aref, agot, mismatches)

    for m in mismatches:
        print(f"MISMATCH [{m['client']}] {m['check']}:\n  triton:  {m.get('triton')}\n  gateway: {m.get('gateway', '-')}" + (f"\n  ({m['why']})" if "why" in m else ""), file=sys.stderr)
    summary = {
        "ok": not mismatches,
        "checks": checks,
        "mismatches": len(mismatches),
        "failed": [f"{m['client']}: {m['check']}" for m in mismatches],
    }
    print(json.dumps(summary), flush=True)
    return 0 if not mismatches else 1


if __name__ == "__main__":
    sys.exit(main())
