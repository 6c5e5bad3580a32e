#!/usr/bin/env python3
"""NVIDIA's tritonclient.grpc driving Triton's model repository over gRPC (RepositoryModelLoad,
RepositoryModelUnload, RepositoryIndex), a client tensorgate did not write.

Usage: python tritonclient_repository.py HOST:PORT ACTION [MODEL]

    index           the repository index
    load MODEL      RepositoryModelLoad; then ModelReady
    unload MODEL    RepositoryModelUnload (Triton finishes it in the background); then ModelReady
    infer-simple    ModelInfer of the zoo's `simple`: INPUT0 = 0..15, INPUT1 = 1 (16 x INT32)

Prints one JSON line on stdout. A Triton error is printed as {"error": status, "message": ...}
with exit status 0, so the caller asserts on it; anything else exits non-zero.
"""

import json
import sys

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException


def main():
    url, action = sys.argv[1], sys.argv[2]
    model = sys.argv[3] if len(sys.argv) > 3 else None
    client = grpcclient.InferenceServerClient(url)
    try:
        if action == "index":
            index = client.get_model_repository_index(as_json=True).get("models", [])
            out = {"models": index}
        elif action == "load":
            client.load_model(model)
            out = {"ready": client.is_model_ready(model)}
        elif action == "unload":
            client.unload_model(model)
            out = {"ready": client.is_model_ready(model)}
        elif action == "infer-simple":
            a = np.arange(16, dtype=np.int32).reshape(1, 16)
            b = np.ones((1, 16), dtype=np.int32)
            inputs = [grpcclient.InferInput("INPUT0", [1, 16], "INT32"), grpcclient.InferInput("INPUT1", [1, 16], "INT32")]
            inputs[0].set_data_from_numpy(a)
            inputs[1].set_data_from_numpy(b)
            result = client.infer("simple", inputs, client_timeout=60)
            out = {"OUTPUT0": result.as_numpy("OUTPUT0").tolist(), "OUTPUT1": result.as_numpy("OUTPUT1").tolist()}
        else:
            raise SystemExit(f"unknown action {action}")
    except InferenceServerException as e:
        out = {"error": e.status(), "message": e.message()}
    finally:
        client.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
