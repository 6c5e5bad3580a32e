"""The reference for V2 infer as server-sent events (test/conformance/infer-events.test.ts): each case
goes to Triton's own gRPC stream with tritonclient.grpc (start_stream / async_stream_infer, as its
users call it), and its responses are written in the V2 JSON response shape; and the same case goes
to the gateway with Python `requests` over HTTP/1.1 (stream=True), each event read as it arrives.

    python infer_events_check.py CASES.json TRITON_GRPC GATEWAY_URL

A case (JSON): name, model, inputs [{name, datatype, shape, data}], optional id, parameters,
binary_outputs (names asked for as binary: base64 in an event), and path, headers, body (base64)
of the HTTP request. One JSON line per case: {name, reference: [event], requests: {status,
content_type, events: [event], ms: [arrival of each event since the request]}}; an event is the
response object, or {"error": message}.
"""
import base64
import json
import queue
import sys
import time

import numpy as np
import requests
import tritonclient.grpc as grpcclient

NP = {"INT32": np.int32, "FP32": np.float32, "BYTES": np.object_, "UINT8": np.uint8}


def param_value(p):
    which = p.WhichOneof("parameter_choice")
    return getattr(p, which) if which else None


def as_v2(result, binary_outputs):
    """A tritonclient InferResult as Triton's HTTP frontend would write it (the JSON answer of infer)."""
    r = result.get_response()
    out = {}
    if r.id:
        out["id"] = r.id
    out["model_name"] = r.model_name
    out["model_version"] = r.model_version
    params = {k: param_value(v) for k, v in r.parameters.items() if k != "triton_final_response"}
    if params:
        out["parameters"] = params
    outputs = []
    for o in r.outputs:
        arr = result.as_numpy(o.name)
        entry = {"name": o.name, "datatype": o.datatype, "shape": list(o.shape)}
        if o.name in binary_outputs:
            entry["parameters"] = {"content_type": "base64"}
            if o.datatype == "BYTES":
                entry["data"] = [base64.b64encode(bytes(v)).decode() for v in arr.reshape(-1)]
            else:
                entry["data"] = base64.b64encode(arr.tobytes()).decode()
        elif o.datatype == "BYTES":
            entry["data"] = [bytes(v).decode("utf-8") for v in arr.reshape(-1)]
        else:
            entry["data"] = arr.reshape(-1).tolist()
        outputs.append(entry)
    out["outputs"] = outputs
    return out


def reference(client, case):
    """The responses of Triton's gRPC stream for the case, up to its end or its first error."""
    got = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    inputs = []
    for spec in case["inputs"]:
        i = grpcclient.InferInput(spec["name"], spec["shape"], spec["datatype"])
        data = spec["data"]
        if spec["datatype"] == "BYTES":
            data = [d.encode("utf-8") for d in data]
        i.set_data_from_numpy(np.array(data, dtype=NP[spec["datatype"]]).reshape(spec["shape"]))
        inputs.append(i)
    client.async_stream_infer(case["model"], inputs, request_id=case.get("id", ""), parameters=case.get("parameters"))
    client.stop_stream()  # half-closes, and returns once Triton has ended the stream
    events = []
    while not got.empty():
        result, error = got.get()
        if error is not None:
            events.append({"error": error.message()})
            break
        events.append(as_v2(result, set(case.get("binary_outputs", []))))
    return events


def through_gateway(base, case):
    start = time.monotonic()
    r = requests.post(base + case["path"], data=base64.b64decode(case["body"]), headers=case["headers"], stream=True, timeout=60)
    events, ms = [], []
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        for line in r.iter_lines(chunk_size=1):
            if line.startswith(b"data: "):
                ms.append(round((time.monotonic() - start) * 1000))
                events.append(json.loads(line[6:]))
    else:
        events = [json.loads(r.content)]
    return {"status": r.status_code, "content_type": r.headers.get("content-type"), "events": events, "ms": ms}


def main():
    cases = json.load(open(sys.argv[1]))
    client = grpcclient.InferenceServerClient(sys.argv[2])
    for case in cases:
        print(json.dumps({"name": case["name"], "reference": reference(client, case), "requests": through_gateway(sys.argv[3], case)}), flush=True)
    client.close()


main()
